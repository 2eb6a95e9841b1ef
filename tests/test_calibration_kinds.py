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


def _logprob(text: str) -> list[str]:
    return [c for s, c, _ in _found(text) if s == "logprob_mismatch"]


def test_a_step_1_check_needs_a_logged_step_1():
    """TRL / HF Trainer console dicts print no step (their x is the record's ordinal): the first record of a paste,
    such as a log's tail, is not step 1, so a KL > 0 there is no step-1 mismatch; a dict that logs step 1 is."""
    rec = "{'loss': 0.0, 'grad_norm': 0.977, 'learning_rate': 2.1e-06, 'reward': 1.26, 'kl': 0.0101, 'epoch': 0.04}\n"
    assert _logprob(rec) == []
    assert _logprob(rec.replace("'epoch': 0.04", "'step': 1")) == ["medium"]


def test_a_step_1_kl_is_expected_under_verls_default_mini_batching():
    """A verl paste that states neither batch size runs verl's defaults (data.train_batch_size 1024,
    actor.ppo_mini_batch_size 256 in every release read, skills/defaults/verl.json): 4 updates per rollout, so
    KL > 0 at step 1 is expected; stating one update per rollout (either key) makes it a mismatch again."""
    step1 = "(TaskRunner pid=77) step:1 - actor/kl_loss:0.0017 - actor/ppo_kl:0.0001 - actor/grad_norm:0.282\n"
    assert _logprob(step1) == []
    launch = "python3 -m verl.trainer.main_ppo data.train_batch_size=256 {}\n"
    assert _logprob(launch.format("actor_rollout_ref.actor.ppo_mini_batch_size=256") + step1) == ["medium"]
    assert _logprob(launch.format("") + step1) == ["medium"]  # 256 / the default mini-batch 256
