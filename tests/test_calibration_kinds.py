"""The kinds of wrong medium/high findings scripts/calibrate.py found, each fixed as a kind (issue 23)."""
from __future__ import annotations

from grpo_debug.tools.rundir.analyze import triage_any


def _found(text: str) -> list[tuple[str, str, list[str]]]:
    return [(f.symptom, f.confidence, [c.rule_id for c in f.causes]) for f in triage_any(text=text).findings]


def test_a_bare_sigkill_after_sglangs_self_cleanup_is_not_a_medium_host_oom():
    """SGLang's launcher logs 'Received sigquit from a child process' and SIGKILLs its own process tree
    (sglang entrypoints/engine.py sigquit_handler -> kill_process_tree), so the shell prints 'Killed': the GPU
    error above it is the diagnosis, the kill a low lead at most."""
    text = ("[2025-03-29 18:18:34 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
            '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 1999, in run_scheduler_process\n'
            "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)\n"
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n\n"
            "[2025-03-29 18:18:34] Received sigquit from a child process. It usually means the child failed.\n"
            "Killed\n")
    found = _found(text)
    assert ("cuda_oom", "high") in [(s, c) for s, c, _ in found]
    assert all(c == "low" for s, c, _ in found if s == "host_oom"), found


def test_a_bare_killed_line_alone_is_a_low_lead():
    found = _found("python train.py --config a.yaml\nKilled\n")
    assert [(s, c) for s, c, _ in found if s == "host_oom"] == [("host_oom", "low")]


def test_the_oom_killers_own_line_is_still_a_host_oom_finding():
    found = _found("[Mon Jan 1 00:00:00 2025] Out of memory: Killed process 12345 (python) total-vm:1000kB\n")
    host = [(c, rules) for s, c, rules in found if s == "host_oom"]
    assert host and host[0][0] in ("medium", "high")
    assert any("error-class:process_killed_oom" in rules for _, rules in host)


def test_a_flags_absence_in_a_partial_paste_is_not_a_high_config_error():
    """An exported MAX_TOKENS_PER_GPU feeding another script: --use-dynamic-batch-size is not in the text, which
    does not prove the launch lacks it (the script's flags are not shown)."""
    text = ("export MAX_TOKENS_PER_GPU=16384\ncd OpenClaw-RL/slime/\n"
            "bash ../openclaw-combine/run_qwen3_4b_openclaw_combine.sh\n")
    found = _found(text)
    cfg = [c for s, c, rules in found if "slime-max-tokens-per-gpu-without-dynamic-batch" in rules]
    assert cfg and all(c != "high" for c in cfg), found
