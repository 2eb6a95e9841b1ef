"""End-to-end triage: the output contract, bad input, and the shared case scores."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_debug.tools.models import TriageResult
from grpo_debug.tools.triage import InputError, triage

CASES = Path(__file__).resolve().parents[2] / "shared" / "cases"
SCORER = Path(__file__).resolve().parents[2] / "shared" / "tools" / "score_cases.py"
HELDOUT = Path(__file__).resolve().parent / "data" / "cases_heldout"


def _not_healthy(r: TriageResult) -> None:
    assert r.summary and "not a verdict that the run is healthy" in r.summary


def test_empty_input_says_so():
    r = triage(text="")
    assert r.findings == [] and "the input is empty" in r.coverage.skipped
    _not_healthy(r)


def test_unknown_format_is_not_reported_healthy():
    r = triage(text="The quick brown fox jumps over the lazy dog.\nNothing to see here.\n")
    assert r.findings == [] and r.coverage.lines_not_understood == 2
    _not_healthy(r)


def test_binary_and_invalid_utf8(tmp_path):
    """Binary data (control bytes and mostly not UTF-8: random, encrypted, an unknown compressed format) is
    refused naming the input, not diagnosed (a newcomer's 1 MB of /dev/urandom got a medium-confidence
    garbled_rollout finding printed as mojibake); text in a legacy encoding, and a log with a few control bytes,
    are read."""
    import random

    p = tmp_path / "core.bin"
    for blob in (bytes(range(256)) * 64, random.Random(5).randbytes(1 << 20)):
        p.write_bytes(blob)
        with pytest.raises(InputError, match=r"core\.bin is binary data .* not a text log"):
            triage(path=p)
    gbk = "step:1 - actor/grad_norm:nan 训练损失 梯度\n".encode("gbk") * 2000
    p.write_bytes(gbk)
    r = triage(path=p)
    assert r.findings and r.findings[0].symptom == "nan_inf"
    p.write_bytes(b"\x08\x07 step:1 - actor/grad_norm:nan\n" * 500)  # bells and backspaces: text with control bytes
    r = triage(path=p)
    assert any("looks binary" in s for s in r.coverage.skipped) and r.findings[0].symptom == "nan_inf"
    p.write_bytes(b"step:1 - actor/grad_norm:nan \xff\xfe\n")
    r = triage(path=p)
    assert any("not valid UTF-8" in s for s in r.coverage.skipped)
    assert r.findings and r.findings[0].symptom == "nan_inf"


def test_huge_line_without_newline(tmp_path):
    p = tmp_path / "one.log"
    p.write_bytes(b"A" * (50 * 2**20))
    r = triage(path=p)
    assert r.coverage.lines_read == 1
    assert any("cut" in s for s in r.coverage.skipped)
    _not_healthy(r)


def test_path_errors_name_the_input(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        triage(path=tmp_path / "missing.log")
    with pytest.raises(InputError, match="is a directory"):
        triage(path=tmp_path)
    with pytest.raises(InputError, match="exactly one"):
        triage()
    with pytest.raises(InputError, match="exactly one"):
        triage(text="x", path=tmp_path)


def test_contract_fields_and_line_numbers():
    text = ("# run 1\n"
            "(TaskRunner pid=1) step:1 - actor/grad_norm:0.41 - actor/pg_loss:0.01\n"
            "(TaskRunner pid=1) step:2 - actor/grad_norm:nan - actor/pg_loss:0.01\n")
    d = json.loads(triage(text=text).model_dump_json())
    assert set(d) >= {"summary", "findings", "metrics", "coverage"}
    f = d["findings"][0]
    assert set(f) >= {"symptom", "title", "confidence", "evidence", "causes", "fix", "next_checks"}
    assert f["symptom"] == "nan_inf" and {"line": 3} .items() <= f["evidence"][0].items()
    assert f["evidence"][0]["source"] == "TaskRunner pid=1"
    assert d["metrics"]["actor/grad_norm"]["first_nonfinite_step"] == 2
    assert d["metrics"]["actor/grad_norm"]["first_nonfinite_line"] == 3
    assert "verl" in d["coverage"]["formats"]


def test_config_only_file_is_triaged_through_facts(tmp_path):
    p = tmp_path / "ds.json"
    p.write_text('{\n  "fp16": {"enabled": true},\n  "bf16": {"enabled": true}\n}\n')
    r = triage(path=p)
    assert r.findings[0].symptom == "config_error"
    assert {e.line for e in r.findings[0].evidence} == {2, 3}


def _score(cases: Path) -> str:
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    out = subprocess.run([sys.executable, str(SCORER), str(cases)], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def _totals(line: str) -> dict[str, int]:
    import re
    return {k: int(v) for k, v in re.findall(r"(symptom|cause|evidence) (\d+)/\d+", line)}


@pytest.mark.slow  # scores every case with the shared scorer, one process per case
@pytest.mark.skipif(not (CASES.is_dir() and SCORER.exists()), reason="../shared/cases not present")
def test_shared_cases_score():
    """The shared cases keep their floor: symptom >= 18, cause >= 17, evidence >= 16."""
    t = _totals(_score(CASES))
    assert t["symptom"] >= 18 and t["cause"] >= 17 and t["evidence"] >= 16, t


@pytest.mark.slow  # scores every case with the shared scorer, one process per case
@pytest.mark.skipif(not (HELDOUT.is_dir() and SCORER.exists()), reason="held-out style cases not present")
def test_heldout_style_cases_score():
    """Cases a helper derived from other real reports (tests/data/cases_heldout, each with its source URL)."""
    t = _totals(_score(HELDOUT))
    n = len([p for p in HELDOUT.iterdir() if (p / "expected.yaml").exists()])
    assert t["symptom"] >= n - 1 and t["cause"] >= n - 2 and t["evidence"] >= n - 2, t


# --- ranking: what ended or broke the run comes first (tools/engine/ranking.py) -------------------------------------
# verl console lines: LocalLogger "step:N - key:value" under the driver's Ray prefix, dp_actor's
# "WARN: rank 0 grad_norm is not finite: nan" (shared/reference/log_formats.md 1.1, 1.3)

def _verl_steps(n: int, line) -> str:
    return "\n".join(f"(TaskRunner pid=2291) step:{s} - " + line(s) for s in range(1, n + 1))


def test_run_that_ended_in_nan_ranks_the_nan_above_a_medium_mismatch():
    """A log-prob gap that grows (medium) and the NaN that ended the run (high, non-finite detector + verl's warning):
    the NaN comes first, the gap stays in the answer."""
    def step(s):
        bad = s >= 19
        return (f"actor/entropy:0.412 - actor/kl_loss:0.002 - actor/pg_loss:{'nan' if bad else '0.011'} - "
                f"actor/pg_clipfrac:0.002 - actor/ppo_kl:0.000 - actor/grad_norm:{'nan' if bad else f'{0.2 + 0.01 * s:.3f}'} - "
                f"training/rollout_probs_diff_max:{(0.004 + 0.002 * s) * 20:.3f} - "
                f"training/rollout_probs_diff_mean:{0.004 + 0.002 * s:.3f} - critic/score/mean:0.41 - timing_s/gen:29.6")
    text = _verl_steps(20, step) + "\n(WorkerDict pid=2455) WARN: rank 0 grad_norm is not finite: nan\n"
    r = triage(text=text)
    got = [f.symptom for f in r.findings]
    assert got[0] == "nan_inf" and r.findings[0].confidence == "high" and "logprob_mismatch" in got
    assert r.verdict == "not_healthy" and r.summary.startswith("Not healthy: nan_inf")  # the verdict's reason first
    assert "Most likely: nan_inf" in r.summary
    assert [f.score for f in r.findings] == sorted((f.score for f in r.findings), reverse=True)


def test_run_that_ended_in_an_oom_ranks_the_oom_above_medium_series_findings():
    """The same kind with another terminal symptom: entropy collapse and responses at the cap (medium), then the
    actor's CUDA OOM that stopped the run."""
    def step(s):
        late = s >= 8
        return (f"actor/entropy:{0.012 if late else 0.41} - actor/pg_loss:0.012 - actor/grad_norm:0.2{s % 10} - "
                f"critic/score/mean:0.3 - response_length/mean:{900 + 8 * s}.0 - response_length/max:1024.000 - "
                f"response_length/clip_ratio:{0.93 if late else 0.02:.3f} - timing_s/gen:31.2")
    tb = """(TaskRunner pid=2291) Traceback (most recent call last):
(TaskRunner pid=2291)   File "/usr/local/lib/python3.10/dist-packages/verl/trainer/ppo/ray_trainer.py", line 1130, in fit
(TaskRunner pid=2291)     actor_output = self.actor_rollout_wg.update_actor(batch)
(TaskRunner pid=2291) ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_update_actor() (pid=2455, ip=10.0.0.1, actor_id=0123456789abcdef01000000, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f0000000000>)
(TaskRunner pid=2291)   File "/usr/local/lib/python3.10/dist-packages/verl/workers/actor/dp_actor.py", line 173, in _forward_micro_batch
(TaskRunner pid=2291)     logits_rmpad = output.logits.squeeze(0)
(TaskRunner pid=2291) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.28 GiB. GPU 0 has a total capacity of 79.10 GiB of which 3.91 GiB is free.
"""
    r = triage(text=_verl_steps(15, step) + "\n" + tb)
    got = [f.symptom for f in r.findings]
    # the responses at the cap from step 8 come before the OOM that ended the run: the chain's root (engine/chain.py)
    assert got[:2] == ["length_blowup", "cuda_oom"] and "entropy_anomaly" in got
    assert r.findings[1].consequence_of == 0 and r.findings[1].confidence == "high"


def test_ranking_lifts_only_stated_terminal_findings_above_weaker_ones():
    from grpo_debug.tools.engine.ranking import rank
    from grpo_debug.tools.models import Finding

    def f(symptom, conf, score):
        return Finding(symptom=symptom, title=symptom, confidence=conf, fix="x", score=score)
    oom, cfg, drift, spike = f("cuda_oom", "high", 3.0), f("config_error", "high", 5.0), f("logprob_mismatch", "medium", 4.6), \
        f("grad_norm_spike", "high", 2.5)
    out = [x for x, _ in rank([(drift, 1), (oom, 2), (cfg, 3), (spike, 4)], {id(oom)})]
    # the stated OOM passes the medium drift, not the higher-scored config finding; a high finding without direct
    # evidence (spike) keeps its place
    assert out == [cfg, oom, drift, spike] and oom.score > drift.score


# --- a rollout-engine OOM gets the engine's memory settings first ----------------------------------------------------

def test_vllm_oom_inside_a_verl_rollout_names_the_engine_memory_settings():
    """verl issue #1196's path (WorkerDict.actor_rollout_generate_sequences -> vllm_rollout_spmd -> vllm), ended by a
    CUDA OOM in vLLM's sampler: the fix is the engine's memory share / concurrency, not the training micro-batch."""
    p = "(TaskRunner pid=1748945) "
    site = "/usr/local/lib/python3.10/dist-packages"
    text = "\n".join(p + x for x in [
        "Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): ray::WorkerDict.actor_rollout_generate_sequences() (pid=1751030, ip=10.0.0.1, actor_id=0123456789abcdef01000000, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f0000000000>)",
        f'  File "{site}/verl/workers/fsdp_workers.py", line 574, in generate_sequences',
        "    output = self.rollout.generate_sequences(prompts=prompts)",
        f'  File "{site}/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py", line 262, in generate_sequences',
        "    outputs = self.inference_engine.generate(",
        f'  File "{site}/vllm/engine/llm_engine.py", line 1386, in step',
        "    outputs = self.model_executor.execute_model(",
        f'  File "{site}/vllm/model_executor/layers/sampler.py", line 287, in forward',
        "    probs = torch.softmax(logits, dim=-1, dtype=torch.float)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.42 GiB. GPU 0 has a total capacity of 79.10 GiB of which 3.02 GiB is free."])
    f = triage(text=text).findings[0]
    assert f.symptom == "cuda_oom" and f.causes[0].rule_id == "rollout-engine-runtime-oom"
    assert "gpu_memory_utilization" in f.fix.split(";")[0] and "ppo_micro_batch_size_per_gpu" not in f.fix


def test_sglang_scheduler_oom_in_its_own_process_names_the_engine_memory_settings():
    """The same kind from SGLang: the scheduler's traceback printed by verl's SGLangHttpServer actor."""
    p = "(SGLangHttpServer pid=30211) "
    site = "/usr/local/lib/python3.10/dist-packages"
    text = "\n".join(p + x for x in [
        "[2025-11-28 16:00:44 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        f'  File "{site}/sglang/srt/managers/scheduler.py", line 2571, in run_scheduler_process',
        "    scheduler.event_loop_overlap()",
        f'  File "{site}/sglang/srt/model_executor/model_runner.py", line 1690, in forward_decode',
        "    return self.model.forward(",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.16 GiB. GPU 0 has a total capacity of 79.19 GiB of which 612.00 MiB is free."])
    f = triage(text=text).findings[0]
    assert f.causes[0].rule_id == "rollout-engine-runtime-oom" and "--mem-fraction-static" in f.fix


# --- coverage: formatting and progress lines are understood --------------------------------------------------------

def test_brackets_rules_and_progress_bars_are_not_lines_not_understood():
    text = "\n".join([
        "(TaskRunner pid=2291) Training Progress:   0%|          | 0/200 [00:00<?, ?it/s]",
        "(WorkerDict pid=2455) Loading checkpoint shards: 100%|██████████| 4/4 [00:10<00:00,  2.69s/it]",
        "Processed prompts: 100%|██████████| 512/512 [00:12<00:00, 41.2it/s, est. speed input: 2310.45 toks/s]",
        "1234it [00:05, 246.81it/s]",
        "{", "  \"zero_optimization\": {\"stage\": 2}", "}", "},", "----------------------------------------",
        "(TaskRunner pid=2291) step:1 - actor/pg_loss:0.011 - actor/grad_norm:0.21",
        "  0%|          | 9/63645 [00:19<37:53:00,  2.14s/it][2021-06-08 12:02:45,001] [INFO] [stage3.py:2323:_overflow_clean_up] [deepscale] fp16 dynamic loss scale overflow!",
        "some line no reader knows"])
    cov = triage(text=text).coverage
    assert cov.lines_not_understood == 2, cov.not_understood_sample  # the glued log line and the unknown one
    assert [e.line for e in cov.not_understood_sample] == [11, 12]


def test_nan_evidence_excerpt_shows_the_series_that_went_nan():
    """A long verl line names pg_loss before grad_norm; grad_norm goes NaN first and pg_loss later: the evidence
    excerpt and the summary show `actor/grad_norm:nan` (a newcomer's summary showed a window that started at
    pg_loss, a finite value, and cut before grad_norm)."""
    from grpo_debug.tools.triage import triage_text

    pad = " - ".join(f"perf/extra_{j}:{j}.125" for j in range(12))

    def row(i):
        gn = "nan" if i >= 6 else "0.31"
        pl = "nan" if i >= 8 else "0.012"
        return (f"step:{i} - global_seqlen/mean:288500.040 - actor/entropy:1.089 - actor/kl_loss:0.027 - {pad} - "
                f"actor/pg_loss:{pl} - actor/pg_clipfrac:0.001 - {pad} - actor/grad_norm:{gn} - perf/mfu/actor:0.44\n")
    res = triage_text("".join(row(i) for i in range(1, 11)))
    f = res.findings[0]
    ev = next(e for e in f.evidence if e.line == 6)
    assert f.symptom == "nan_inf" and len(ev.text) < 400 and "actor/grad_norm:nan" in ev.text
    assert "actor/grad_norm:nan" in res.summary.split("Evidence:")[1].split("Fix:")[0]


def test_a_crash_before_a_collective_timeout_ranks_above_it_and_is_named_by_it():
    """A rank that crashed (here a CUDA OOM) never reaches the collective the others then time out in: the crash
    comes first and the timeout's next check names it; a timeout before the OOM gets no such note (a newcomer's
    log had the NCCL timeout ranked above the OOM 2,001 lines earlier that caused it)."""
    from grpo_debug.tools.triage import triage_text

    oom = ("(WorkerDict pid=5) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a "
           "total capacity of 79.11 GiB of which 1.02 GiB is free.")
    nccl = ("(WorkerDict pid=6) [rank0]:[E1201 00:00:30.408271257 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=48211, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600020 milliseconds before timing out.")
    filler = [f"(WorkerDict pid=6) step {i} ok" for i in range(5)]
    fs = triage_text("\n".join(["start", oom, *filler, nccl]) + "\n").findings
    order = [f.symptom for f in fs]
    assert order.index("cuda_oom") < order.index("collective_hang")
    hang = fs[order.index("collective_hang")]
    assert hang.next_checks[0].startswith("cuda_oom (line 2) comes 6 lines before the timeout")
    fs = triage_text("\n".join(["start", nccl, *filler, oom]) + "\n").findings
    hang = next(f for f in fs if f.symptom == "collective_hang")
    assert not any("before the timeout" in c for c in hang.next_checks)


def test_a_nan_run_names_the_nan_risk_in_its_own_settings_first():
    """A NaN and, in the same input, gradient clipping set to 0: the nan_inf finding's first next check names that
    setting (not only the generic 'check clipping' list); with clipping on there is no such check."""
    from grpo_debug.tools.triage import triage_text

    log = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo actor_rollout_ref.actor.optim.clip_grad={c}\n"
           "(TaskRunner pid=1) step:1 - actor/grad_norm:0.5 - actor/pg_loss:0.1\n"
           "(TaskRunner pid=1) step:2 - actor/grad_norm:nan - actor/pg_loss:nan\n")
    nan = next(f for f in triage_text(log.format(c=0)).findings if f.symptom == "nan_inf")
    assert nan.next_checks[0].startswith("This run's own settings carry a NaN risk: actor_rollout_ref.actor.optim.clip_grad = 0")
    nan = next(f for f in triage_text(log.format(c=1.0)).findings if f.symptom == "nan_inf")
    assert not any(c.startswith("This run's own settings") for c in nan.next_checks)


def test_a_checklist_fix_says_what_the_input_already_sets():
    """metric-nonfinite's fix is a checklist (clipping on, lr, ...): when the input sets those keys, the fix says
    their values, so 'check that clipping is on' is answered (clip_grad = 1.0) instead of asked again."""
    from grpo_debug.tools.triage import triage_text

    log = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo actor_rollout_ref.actor.optim.clip_grad=1.0\n"
           "(TaskRunner pid=1) step:1 - actor/grad_norm:0.5 - actor/pg_loss:0.1\n"
           "(TaskRunner pid=1) step:2 - actor/grad_norm:nan - actor/pg_loss:nan\n")
    nan = next(f for f in triage_text(log).findings if f.symptom == "nan_inf")
    assert "This input sets: actor_rollout_ref.actor.optim.clip_grad = 1.0 (line 1)." in nan.fix
    plain = next(f for f in triage_text(log.split("\n", 1)[1]).findings if f.symptom == "nan_inf")
    assert "This input sets" not in plain.fix
