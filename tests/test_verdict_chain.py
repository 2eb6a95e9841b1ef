"""Issue 23 items 2, 3 and 7: every triage has a verdict, findings that follow from another carry consequence_of
(the root first, the chain said in the summary), and a config-only match is a risk (low, listed apart) whose
safeguard-removing edit is never applied by ``check --fix``.

Real inputs: the shared cases and healthy runs (../shared), the corpus of public reports (tests/data/corpus), the
packaged example log; logs built here use the line formats of those reports (verl's LocalLogger step lines under
Ray prefixes, torch's ``[rankN]:`` prefix, ProcessGroupNCCL's watchdog line, Ray's ActorDiedError)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo_debug.tools.triage import triage

REPO = Path(__file__).resolve().parents[1]
SHARED = next((p for p in (REPO.parent / "shared", Path("/work/shared")) if (p / "cases").is_dir()), None)
CORPUS = REPO / "tests" / "data" / "corpus"
needs_shared = pytest.mark.skipif(SHARED is None, reason="../shared (cases, healthy) not present")


def _inputs(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(next(p for p in d.iterdir() if p.name.startswith("input."))
                  for d in root.iterdir() if (d / "expected.yaml").exists())


def _healthy_inputs() -> list[Path]:
    return (_inputs(SHARED / "healthy") if SHARED else []) + _inputs(CORPUS / "healthy")


def _case_inputs() -> list[Path]:
    return (_inputs(SHARED / "cases") if SHARED else []) + _inputs(CORPUS / "cases") + \
        sorted((REPO / "tools" / "examples").glob("*.log"))


LEAD = {"healthy": "Healthy", "not_healthy": "Not healthy", "cannot_tell": "Cannot tell"}


def _contract(r) -> None:
    """What every result keeps: the verdict's words first, not_healthy exactly when a diagnosed medium/high finding
    (or a validation fall) says so, risks low and after every diagnosis, consequence_of an earlier non-risk index."""
    assert r.summary.startswith(LEAD[r.verdict]), r.summary[:80]
    loud = [f for f in r.findings if not f.risk and f.confidence in ("medium", "high")]
    assert (r.verdict == "not_healthy") == (bool(loud) or "validation" in r.summary.split(". ")[0]), r.summary[:160]
    risky = [i for i, f in enumerate(r.findings) if f.risk]
    assert all(r.findings[i].confidence == "low" for i in risky)
    assert risky == list(range(len(r.findings) - len(risky), len(r.findings)))  # risks listed apart, last
    for i, f in enumerate(r.findings):
        if f.consequence_of is not None:
            assert 0 <= f.consequence_of < i and not r.findings[f.consequence_of].risk and not f.risk


# ---- verdict -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("inp", _healthy_inputs(), ids=lambda p: p.parent.name)
def test_healthy_inputs_are_healthy_or_cannot_tell_never_a_loud_finding(inp):
    r = triage(path=str(inp))
    assert r.verdict in ("healthy", "cannot_tell"), r.summary[:200]
    assert not [f for f in r.findings if f.confidence in ("medium", "high")]
    _contract(r)


@pytest.mark.slow  # every prefix (a quarter, half, three quarters) of every healthy log, through the engine
@pytest.mark.parametrize("inp", [p for p in _healthy_inputs() if p.suffix == ".log"], ids=lambda p: p.parent.name)
def test_every_prefix_of_a_healthy_log_is_never_not_healthy(inp):
    lines = inp.read_text(encoding="utf-8", errors="replace").splitlines()
    for q in (4, 2, 4 / 3):
        r = triage(text="\n".join(lines[:max(1, int(len(lines) / q))]) + "\n")
        assert r.verdict in ("healthy", "cannot_tell"), (q, r.summary[:200])


@needs_shared
def test_a_training_run_with_20_steps_is_healthy_and_10_steps_cannot_tell():
    log = SHARED / "healthy" / "verl-multi-minibatch-kl-loss" / "input.log"
    r = triage(path=str(log))
    assert r.verdict == "healthy" and r.summary.startswith("Healthy as far as this input shows: 20 steps of ")
    assert "No known failure pattern matched" in r.summary and "not a verdict" not in r.summary
    short = triage(text="\n".join(log.read_text().splitlines()[:11]) + "\n")  # the launch line and 10 steps
    assert short.verdict == "cannot_tell" and short.summary.startswith("Cannot tell: only 10 step(s) of training")


@needs_shared
def test_a_crash_log_is_not_healthy_and_says_the_headline_first():
    r = triage(path=str(SHARED / "cases" / "openrlhf-vllm-wakeup-oom" / "input.log"))
    assert r.verdict == "not_healthy" and r.summary.startswith("Not healthy: cuda_oom at high confidence")
    _contract(r)


def _verl_run(n: int, val_at, score=lambda s: 0.30 + 0.004 * s) -> str:
    """A verl run of ``n`` steps: the step lines of the shared healthy run's format with its own noise (grad norm,
    pg loss cycling through that run's values), a rising training score, and a validation key every 5 steps
    (``val_at(step)``), as verl's trainer logs them into the step's line."""
    gn = [0.282, 0.291, 0.210, 0.326, 0.301, 0.257, 0.270, 0.315, 0.244, 0.298]
    pg = [-0.005, -0.003, 0.003, -0.010, 0.006, -0.002, 0.004, -0.007, 0.001, 0.002]
    out = ["python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=1024 "
           "actor_rollout_ref.actor.ppo_mini_batch_size=256 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 "
           "actor_rollout_ref.rollout.n=5 actor_rollout_ref.actor.use_kl_loss=True "
           "actor_rollout_ref.actor.kl_loss_coef=0.001 trainer.n_gpus_per_node=8 trainer.test_freq=5"]
    for s in range(1, n + 1):
        val = f" - val-core/openai/gsm8k/reward/mean@1:{val_at(s):.3f}" if s % 5 == 0 else ""
        out.append(f"(TaskRunner pid=77) step:{s} - actor/entropy:0.51 - actor/kl_loss:0.0017 - actor/pg_loss:"
                   f"{pg[s % 10]} - actor/grad_norm:{gn[s % 10]} - actor/lr:1e-06 - critic/score/mean:"
                   f"{score(s):.3f} - response_length/mean:403.0 - response_length/clip_ratio:0.004{val}")
    return "\n".join(out) + "\n"


def test_validation_that_peaks_then_falls_is_said_in_the_verdict():
    peak = lambda s: 0.40 + 0.01 * s if s <= 30 else 0.70 - 0.012 * (s - 30)  # noqa: E731  (best at step 30)
    r = triage(text=_verl_run(60, peak))
    assert r.verdict == "not_healthy", r.summary[:200]
    first = r.summary.split(". ")[0]
    assert "training reward rises" in first and "validation val-core/openai/gsm8k/reward/mean@1 peaked at step 30" in first
    assert not [f for f in r.findings if f.confidence in ("medium", "high")]  # no symptom code fits: no finding
    _contract(r)


def test_validation_that_wobbles_and_rises_stays_healthy():
    wobble = [0.0, 0.012, -0.008, 0.006, -0.011, 0.009]
    r = triage(text=_verl_run(60, lambda s: 0.40 + 0.002 * s + wobble[(s // 5) % 6]))
    assert r.verdict == "healthy", r.summary[:200]


# ---- risk is not diagnosis ---------------------------------------------------------------------------------------

DS_CLIP_OFF = """{
  "train_micro_batch_size_per_gpu": 2,
  "gradient_accumulation_steps": 4,
  "gradient_clipping": 0.0,
  "bf16": {"enabled": true},
  "zero_optimization": {"stage": 2, "overlap_comm": true}
}
"""


def test_a_config_alone_cannot_tell_and_its_runtime_rules_are_low_risks_with_their_edits(tmp_path):
    from grpo_debug.tools.check_config import check_config

    p = tmp_path / "ds_config.json"
    p.write_text(DS_CLIP_OFF)
    for r in (triage(path=str(p)), check_config(path=str(p))):
        assert r.verdict == "cannot_tell" and r.summary.startswith("Cannot tell: the input holds a configuration only")
        f = next(f for f in r.findings if f.symptom == "grad_norm_spike")
        assert f.risk and f.confidence == "low"
        assert [(e.key, e.new.strip()) for e in f.edits] == [("gradient_clipping", '"gradient_clipping": 1.0,')]
        _contract(r)


@needs_shared
def test_a_config_error_seen_in_the_config_stays_loud_beside_a_risk():
    from grpo_debug.tools.check_config import check_config

    r = check_config(path=str(SHARED / "cases" / "deepspeed-zero3-single-gpu-clipping-off" / "input.json"))
    by = {f.symptom: f for f in r.findings}
    assert not by["config_error"].risk and by["config_error"].confidence == "medium" and by["config_error"].edits
    assert by["grad_norm_spike"].risk and by["grad_norm_spike"].confidence == "low" and by["grad_norm_spike"].edits
    assert r.verdict == "not_healthy"
    gas = check_config(path=str(SHARED / "cases" / "deepspeed-batch-identity-gas" / "input.json"))
    f = gas.findings[0]
    assert (f.symptom, f.confidence, f.risk) == ("config_error", "high", False) and f.edits and gas.diff
    _contract(gas)


@needs_shared
def test_a_config_only_match_on_a_log_is_a_risk_listed_after_the_diagnosis():
    """verl-free-cache-engine-no-weight-sync: the group-size check (n=1) fires on the launch line, but the log's
    metrics show no zero reward: reward_zero is a low risk, after the observed log-prob mismatch."""
    r = triage(path=str(SHARED / "cases" / "verl-free-cache-engine-no-weight-sync" / "input.log"))
    assert r.findings[0].symptom == "logprob_mismatch" and not r.findings[0].risk
    rz = next(f for f in r.findings if f.symptom == "reward_zero")
    assert rz.risk and rz.confidence == "low"
    assert "risk: " in r.summary  # the summary's "Also:" says so
    _contract(r)


CLIP_OFF_RULE = """\
id: test-config-only-clip-off
title: Test rule that turns clipping off on a setting alone
symptom: loss_plateau
confidence: high
match:
  all:
    - {kind: config, key: optimizer, keys: ['--optimizer'], op: regex, value: '(?i)muon'}
what: A test rule whose patch removes a safeguard with no observed symptom.
why: Exists only to test that such a patch is never written by --fix.
fix:
  summary: Set --clip-grad 0 (test text only).
  steps: ["first step"]
  patch: {clip_grad: 0}
  patch_by_framework: {megatron: {clip_grad: 0}}
  safety: review
  safety_note: test only
applies_to:
  frameworks: [megatron]
sources:
  - ref: https://example.invalid/test-clip-off
    status: unverified
    note: a fixture, not a claim
examples:
  - name: fires
    format: sh
    input: "torchrun pretrain_gpt.py --optimizer muon --clip-grad 1.0"
    expect: match
  - name: quiet
    format: sh
    input: "torchrun pretrain_gpt.py --optimizer adam --clip-grad 1.0"
    expect: no_match
"""

MUON_SCRIPT = """#!/bin/bash
torchrun --nproc-per-node 8 pretrain_gpt.py \\
  --optimizer dist_muon \\
  --clip-grad 1.0 \\
  --lr 2e-4 --bf16
"""


def test_check_fix_never_turns_clipping_off_without_the_symptom(tmp_path, monkeypatch):
    from grpo_debug.server.cli import main
    from grpo_debug.skills.loader import default_rules

    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "clip_off.yaml").write_text(CLIP_OFF_RULE)
    monkeypatch.setenv("GRPO_DEBUG_RULES", str(pack))
    default_rules.cache_clear()
    try:
        script = tmp_path / "train.sh"
        script.write_text(MUON_SCRIPT)
        r = triage(path=str(script))
        f = next(f for f in r.findings if f.causes[0].rule_id == "test-config-only-clip-off")
        assert f.risk and f.confidence == "low" and not f.edits and not f.patch
        assert main(["check", str(script), "--fix"]) == 0
        assert script.read_text() == MUON_SCRIPT and not list(tmp_path.glob("train.sh.orig*"))
    finally:
        monkeypatch.undo()
        default_rules.cache_clear()


def test_the_clipping_off_edit_stays_when_the_log_shows_the_stall():
    """megatron-muon-global-clip-stall's own matching example (grad norm 5e7 -> 2e11, flat lm loss): the symptom is
    observed, so its --clip-grad 0 stopgap edit is offered."""
    import yaml

    rule = yaml.safe_load((REPO / "skills" / "rules" / "megatron" / "megatron-muon-global-clip-stall.yaml").read_text())
    log = next(e["input"] for e in rule["examples"] if e["expect"] == "match")
    r = triage(text=log)
    f = next(f for f in r.findings if f.symptom == "loss_plateau")
    assert not f.risk and f.confidence != "low"
    assert any(e.key.lstrip("-").replace("-", "_") == "clip_grad" and " 0" in e.new for e in f.edits), f.edits


# ---- causal chain ------------------------------------------------------------------------------------------------

OOM_THEN_NCCL = """\
(TaskRunner pid=2291) step:11 - actor/entropy:0.41 - actor/pg_loss:0.012 - actor/grad_norm:0.231 - critic/score/mean:0.30
(TaskRunner pid=2291) step:12 - actor/entropy:0.40 - actor/pg_loss:0.011 - actor/grad_norm:0.228 - critic/score/mean:0.31
(WorkerDict pid=2457, ip=10.0.0.1) [rank2]: Traceback (most recent call last):
(WorkerDict pid=2457, ip=10.0.0.1) [rank2]:   File "/usr/local/lib/python3.10/dist-packages/verl/workers/actor/dp_actor.py", line 173, in _forward_micro_batch
(WorkerDict pid=2457, ip=10.0.0.1) [rank2]:     logits_rmpad = output.logits.squeeze(0)
(WorkerDict pid=2457, ip=10.0.0.1) [rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.28 GiB. GPU 2 has a total capacity of 79.10 GiB of which 3.91 GiB is free.
""" + "".join(
    f"(WorkerDict pid={2455 + r}, ip=10.0.0.1) [rank{r}]:[E1225 12:58:32.71292220{r} ProcessGroupNCCL.cpp:616] [Rank {r}] "
    f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum=17284, OpType=_ALLGATHER_BASE, NumelIn=1, "
    f"NumelOut=4, Timeout(ms)=600000) ran for 60001{r} milliseconds before timing out.\n" for r in (0, 1, 3)) + """\
(TaskRunner pid=2291) ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.
(TaskRunner pid=2291) \tclass_name: create_colocated_worker_cls.<locals>.WorkerDict
"""


def test_oom_on_one_rank_then_nccl_timeouts_then_dead_actor_is_one_chain():
    r = triage(text=OOM_THEN_NCCL)
    got = [(f.symptom, f.consequence_of) for f in r.findings]
    assert got[:3] == [("cuda_oom", None), ("collective_hang", 0), ("ray_actor_died", 1)], got
    assert "Chain: cuda_oom (line 6, rank 2) -> collective_hang (line 7, ranks 0-1, 3 timed out; rank(s) 2 did " \
           "not report) -> ray_actor_died (line 10)." in r.summary
    hang = r.findings[1]
    assert hang.next_checks[0].startswith("Rank(s) 2 did not report the timeout the others (0-1, 3) did")
    assert "(lines 5, 6)" in hang.next_checks[0] and {5, 6} <= {e.line for e in hang.evidence}
    assert r.verdict == "not_healthy"
    _contract(r)


def test_a_paste_of_two_ranks_names_no_culprit():
    """openrlhf-long-context-multimodal-host-oom-killer: the reporter pasted the timeouts of ranks 4 and 12 of a
    48-GPU job; the other ranks' lines are not in the paste, so no rank is named as the one that did not report."""
    r = triage(path=str(CORPUS / "cases" / "openrlhf-long-context-multimodal-host-oom-killer" / "input.log"))
    hang = next(f for f in r.findings if f.symptom == "collective_hang")
    assert not any("did not report" in c for c in hang.next_checks) and "did not report" not in r.summary


@needs_shared
def test_a_grad_norm_climb_is_the_root_of_the_nan_it_ends_in():
    r = triage(path=str(SHARED / "cases" / "verl-late-gradnorm-climb" / "input.log"))
    assert [(f.symptom, f.consequence_of) for f in r.findings[:2]] == [("grad_norm_spike", None), ("nan_inf", 0)]
    assert "Chain: grad_norm_spike (" in r.summary and "-> nan_inf (line 351" in r.summary
    _contract(r)


def test_cli_text_shows_verdict_chain_and_risk():
    from grpo_debug.tools.render.triage import render_triage_text

    text = render_triage_text(triage(text=OOM_THEN_NCCL), width=200)
    assert "Verdict: not healthy" in text and "Chain:" in text and text.count("Chain:") == 1 and "cuda_oom (" in text
    assert "follows from 1" in text and "follows from 2" in text
    from grpo_debug.tools.triage import triage_text

    risk = render_triage_text(triage_text(DS_CLIP_OFF, hint="json"), width=200)
    assert "Verdict: cannot tell" in risk and "1. risk [grad_norm_spike]" in risk


def test_cli_json_carries_verdict_consequence_of_and_risk(tmp_path, capsys):
    from grpo_debug.server.cli import main

    p = tmp_path / "train.log"
    p.write_text(OOM_THEN_NCCL)
    assert main(["triage", str(p), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["verdict"] == "not_healthy"
    assert [(f["symptom"], f["consequence_of"], f["risk"]) for f in d["findings"][:3]] == [
        ("cuda_oom", None, False), ("collective_hang", 0, False), ("ray_actor_died", 1, False)]


# ---- every real case keeps the contract -------------------------------------------------------------------------

@pytest.mark.slow  # ~60 real inputs through the engine
@pytest.mark.parametrize("inp", _case_inputs(), ids=lambda p: p.parent.name if p.name.startswith("input.") else p.name)
def test_every_case_keeps_the_verdict_risk_and_chain_contract(inp):
    _contract(triage(path=str(inp)))


def test_some_cases_keep_the_verdict_risk_and_chain_contract():
    picked = [p for p in _case_inputs() if p.parent.name in (
        "openrlhf-vllm-wakeup-oom", "verl-ray-leftover-job-no-gpus", "trl-truncation-zero-reward",
        "trl-async-grpo-fsdp2-weight-sync-watchdog", "vllm-sleep-wakeup-oom-72b-a800")] + \
        sorted((REPO / "tools" / "examples").glob("*.log"))
    assert len(picked) >= 3
    for p in picked:
        _contract(triage(path=str(p)))


def test_a_run_folder_says_the_verdict_and_the_chain_in_its_files_lines(tmp_path):
    from grpo_debug.tools.rundir.analyze import triage_folder

    (tmp_path / "train.log").write_text(OOM_THEN_NCCL)
    r = triage_folder(str(tmp_path))
    assert r.verdict == "not_healthy" and r.summary.startswith("Not healthy: cuda_oom at high confidence")
    assert "Chain: cuda_oom (line 6) -> collective_hang (line 7) -> ray_actor_died (line 10)." in r.summary
    _contract(r)
