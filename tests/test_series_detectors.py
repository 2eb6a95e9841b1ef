"""Run-model detectors (tools/engine/series) on synthesized series and on the shared late-climb log."""
from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from grpo_debug.tools.engine.normalize import normalize
from grpo_debug.tools.engine.series import (collapse, first_nonfinite, flat_zero, late_climb, mismatch_jump, plateau,
                                            robust_spike)
from grpo_debug.tools.run import Point, Run, build_run

LATE_CLIMB = Path("/work/shared/cases/verl-late-gradnorm-climb/input.log")


def _run(**series: list[float]) -> Run:
    """A Run whose series ``name`` has one point per value at steps 1..n on lines 10+step."""
    run = Run()
    for name, vals in series.items():
        for i, v in enumerate(vals, 1):
            run.add_point(name, Point(float(i), float(v), name, line=10 + i), canonical=True)
    return run


def _noisy(n: int, level: float, rel: float, seed: int) -> list[float]:
    rnd = random.Random(seed)
    return [level * (1 + rnd.gauss(0, rel)) for _ in range(n)]


# late_climb ------------------------------------------------------------------------------------------------------

def test_late_climb_reports_the_first_step_of_the_climb():
    vals = _noisy(200, 0.3, 0.15, 1) + [0.3 * 1.12 ** k for k in range(1, 40)]
    hit = late_climb(_run(grad_norm=vals))
    assert hit is not None
    first = int(hit.message.split("climbs from step ")[1].split(" ")[0])
    assert 201 <= first <= 206, hit.message
    assert hit.lines[0] == 10 + first


def test_late_climb_ending_in_nan_is_reported_before_the_nan():
    vals = _noisy(100, 1.0, 0.1, 2) + [1.15 ** k for k in range(1, 30)] + [math.nan]
    hit = late_climb(_run(grad_norm=vals))
    assert hit is not None and "turns nan" in hit.message and "climbs from step 10" in hit.message


@pytest.mark.parametrize("rate", [1.03, 1.12, 1.3])
@pytest.mark.parametrize("noise", [0.05, 0.15, 0.3])
def test_late_climb_never_starts_before_the_true_start(rate, noise):
    for seed in range(4):
        rnd = random.Random(seed)
        base = [0.3 * (1 + rnd.gauss(0, noise)) for _ in range(120)]
        climb = [0.3 * rate ** k * (1 + rnd.gauss(0, noise)) for k in range(1, int(3.5 / (rate - 1)))]
        hit = late_climb(_run(grad_norm=base + climb))
        first = int(hit.message.split("climbs from step ")[1].split(" ")[0])
        slack = 40 if (rate < 1.1 and noise > 0.2) else 20  # a slow climb in heavy noise is told apart later
        assert 121 <= first <= 121 + slack, (seed, hit.message)


@pytest.mark.parametrize("vals", [
    _noisy(400, 0.3, 0.3, 3),                                                # noisy
    [v * (1 + 0.6 * i / 400) for i, v in enumerate(_noisy(400, 0.3, 0.1, 4))],  # mild drift (1.6x over the run)
    [v * (8 if i % 37 == 0 and i else 1) for i, v in enumerate(_noisy(400, 0.3, 0.1, 5))],  # isolated spikes
    [0.3 * 1.2 ** k for k in range(12)],                                     # too short to have a baseline
])
def test_late_climb_stays_quiet_on_healthy_series(vals):
    assert late_climb(_run(grad_norm=vals)) is None


@pytest.mark.skipif(not LATE_CLIMB.exists(), reason="shared case not mounted")
def test_late_climb_on_shared_verl_log_starts_at_line_302():
    hit = late_climb(build_run(normalize(LATE_CLIMB.read_text())))
    assert hit is not None and hit.lines[0] == 302 and set(hit.lines) & set(range(302, 317))


def test_late_climb_uses_keys_regex_for_raw_names():
    vals = _noisy(50, 1.0, 0.05, 6) + [1.3 ** k for k in range(1, 15)]
    run = _run(**{"train/some_norm": vals})
    assert late_climb(run) is None
    assert late_climb(run, keys="some_norm") is not None
    assert late_climb(run, metric="kl") is None  # asked for a series the run lacks


# robust_spike ----------------------------------------------------------------------------------------------------

def test_robust_spike_finds_an_isolated_spike_that_returns():
    vals = _noisy(60, 0.5, 0.1, 7)
    vals[40] = 20.0
    hit = robust_spike(_run(grad_norm=vals))
    assert hit is not None and "step 41" in hit.message and 51 in hit.lines


def test_robust_spike_quiet_on_noise_and_on_a_last_point():
    assert robust_spike(_run(grad_norm=_noisy(300, 0.5, 0.2, 8))) is None
    assert robust_spike(_run(grad_norm=_noisy(30, 0.5, 0.1, 9) + [50.0])) is None


# collapse --------------------------------------------------------------------------------------------------------

def test_collapse_of_entropy_names_the_start_of_the_fall():
    vals = [0.6] * 20 + [0.6 * 0.7 ** k for k in range(1, 15)]
    hit = collapse(_run(entropy=vals))
    assert hit is not None and "starting at step 21" in hit.message


def test_collapse_quiet_on_slow_healthy_decline():
    assert collapse(_run(entropy=[0.6 - 0.001 * i for i in range(200)])) is None


# flat_zero -------------------------------------------------------------------------------------------------------

def test_flat_zero_whole_series_and_tail():
    assert "0 at all 5 points" in flat_zero(_run(reward_mean=[0, 0, 0, 0, 0])).message
    hit = flat_zero(_run(reward_mean=[0.2, 0.3, 0.25] + [0.0] * 6))
    assert hit is not None and "drops to 0 at step 4" in hit.message
    assert flat_zero(_run(reward_mean=[0.2, 0.0, 0.3, 0.0])) is None
    assert flat_zero(_run(reward_mean=[0.0])) is None


# plateau ---------------------------------------------------------------------------------------------------------

def test_plateau_after_movement():
    hit = plateau(_run(loss=[2.0, 1.6, 1.3, 1.1, 0.9] + [0.693] * 8))
    assert hit is not None and "stops moving at step 6" in hit.message
    assert plateau(_run(loss=[0.693] * 13)) is None  # never moved: nothing to stop
    assert plateau(_run(loss=_noisy(40, 1.0, 0.05, 10))) is None


# first_nonfinite -------------------------------------------------------------------------------------------------

def test_first_nonfinite_is_the_earliest_over_series():
    run = _run(loss=[1.0, 1.0, math.nan, 1.0], grad_norm=[0.5, math.inf, math.nan, 0.5])
    hit = first_nonfinite(run)
    assert hit.message.startswith("grad_norm is inf at step 2") and "2 series affected" in hit.message
    assert "returns to finite" in hit.message and hit.lines[:2] == [11, 12]
    assert first_nonfinite(_run(loss=[1.0, 2.0])) is None


# mismatch_jump ---------------------------------------------------------------------------------------------------

def test_mismatch_jump_per_framework_bounds():
    run = Run()
    for i, v in enumerate([0.003, 0.004, 0.02, 0.03], 1):
        run.add_point("logprob_mismatch", Point(i, v, "training/rollout_probs_diff_mean", line=i))
    hit = mismatch_jump(run)
    assert hit is not None and "step 3" in hit.message and "0.01" in hit.message
    quiet = Run()
    for i, v in enumerate([0.003, 0.004, 0.02, 0.004], 1):  # one spike that returns
        quiet.add_point("logprob_mismatch", Point(i, v, "training/rollout_probs_diff_mean", line=i))
    assert mismatch_jump(quiet) is None
    slime = Run()
    for i, v in enumerate([0.01, 0.012, 0.011], 1):  # within slime's 0.1
        slime.add_point("logprob_mismatch", Point(i, v, "train/train_rollout_logprob_abs_diff", line=i))
    assert mismatch_jump(slime) is None


# step1_mismatch --------------------------------------------------------------------------------------------------

MULTI_MINIBATCH = Path("/work/shared/healthy/verl-multi-minibatch-kl-loss/input.log")


def test_step1_kl_with_one_update_per_rollout_fires():
    text = ("python3 -m verl.trainer.main_ppo data.train_batch_size=256 actor_rollout_ref.actor.ppo_mini_batch_size=256\n"
            "step:1 - actor/kl_loss:0.0017 - actor/ppo_kl:0.0001 - actor/grad_norm:0.28\n")
    from grpo_debug.tools.engine.series import step1_mismatch

    hit = step1_mismatch(build_run(normalize(text)))
    assert hit is not None and "actor/kl_loss=0.0017" in hit.message and hit.lines == [2]


@pytest.mark.skipif(not MULTI_MINIBATCH.exists(), reason="shared healthy input not mounted")
def test_step1_kl_with_four_minibatches_is_expected():
    from grpo_debug.tools.engine.series import step1_mismatch
    from grpo_debug.tools.run.derived import updates_per_rollout

    run = build_run(normalize(MULTI_MINIBATCH.read_text()))
    n, facts = updates_per_rollout(run)
    assert n == 4 and {f.line for f in facts} == {1}
    assert step1_mismatch(run) is None


def test_step1_logprob_equality_still_checked_with_several_updates():
    from grpo_debug.tools.engine.series import step1_mismatch

    text = ("python3 -m verl.trainer.main_ppo data.train_batch_size=1024 actor_rollout_ref.actor.ppo_mini_batch_size=256\n"
            "step:1 - actor/log_probs:-0.51 - actor/ref_log_probs:-0.47 - actor/kl_loss:0.002\n")
    hit = step1_mismatch(build_run(normalize(text)))
    assert hit is not None and "expected equal" in hit.message and "kl_loss" not in hit.message


# garbled_samples -------------------------------------------------------------------------------------------------

GIBBERISH = Path(__file__).resolve().parent / "data" / "corpus" / "cases" / \
    "slime-style-qwen35-moe-gibberish-after-first-weight-sync" / "input.log"


def test_garbled_quoted_salad_in_report_corpus():
    from grpo_debug.tools.engine.series import garbled_samples

    run = build_run(normalize(GIBBERISH.read_text()))
    assert [s.lines for s in run.samples if s.role == "quoted"] == [[7], [9]]  # each quote once
    hit = garbled_samples(run)
    assert hit is not None and hit.lines == [9]  # the coherent rollout #0 quote (line 7) is not garbled


def test_garbled_repeat_tail_and_coherent_text():
    from grpo_debug.tools.engine.series.garbled import garbled_samples, salad
    from grpo_debug.tools.run.model import Sample

    run = Run(samples=[Sample("The answer is 4 " + "!" * 40, "response", lines=[3])])
    assert garbled_samples(run).lines == [3]
    ok = Run(samples=[Sample("我们先计算 7 乘以 8，结果是 56，用到了 multiplication table 的知识。", "response", lines=[1]),
                      Sample("Let me think step by step. 7 * 8 = 56, so the answer is 56.", "response", lines=[2])])
    assert garbled_samples(ok) is None
    assert salad("abc觉得def")[0] == 2


def test_trl_rich_sample_table_rendered_by_rich():
    """The table as TRL's print_prompt_completions_sample builds it, rendered by rich itself."""
    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    from grpo_debug.tools.engine.series import garbled_samples

    console = Console(width=100, record=True, file=open("/dev/null", "w"))
    table = Table(show_header=True, header_style="bold white", expand=True)
    for name in ("Prompt", "Completion", "accuracy_reward", "Advantage"):
        table.add_column(name)
    table.add_row(Text("What is 7 times 8? Answer briefly."),
                  Text("Let compiled觉得觉得ikان>ä拒绝何为iel concerak 觉得ت tempr ForeignKey开始 privilegi"), "0.00", "-0.50")
    table.add_section()
    table.add_row(Text("What is 2+2?"), Text("4"), "1.00", "0.50")
    console.print(Panel(table, expand=False, title="Step 42"))
    run = build_run(normalize(console.export_text()))
    responses = [s for s in run.samples if s.role == "response"]
    assert [s.step for s in responses] == [42.0, 42.0] and responses[1].text == "4"
    assert garbled_samples(run).lines[0] == responses[0].lines[0]


def test_every_rule_detector_signal_fits_its_detector():
    """A detector signal's params are parameters of its detector; ``metric:`` only where the detector reads a
    series by name (a run detector's ``metric`` or a table detector's ``keys``, match.run_detector)."""
    import inspect

    from grpo_debug.skills.loader import default_rules
    from grpo_debug.skills.schema import DetectorSignal
    from grpo_debug.tools.engine.detectors import DETECTORS

    for rule in default_rules():
        for sig in rule.match.signals():
            if not isinstance(sig, DetectorSignal):
                continue
            accepted = set(inspect.signature(DETECTORS[sig.detector]).parameters)
            wanted = set(sig.params) - {"metric"} | ({"keys"} if "metric" in sig.params else set())
            if getattr(DETECTORS[sig.detector], "reads_run", False):
                wanted = set(sig.params)
            assert wanted <= accepted, (rule.id, sig.detector, wanted - accepted)


def test_rule_about_another_trainer_does_not_fire_on_a_clear_run():
    """A slime-only config rule stays quiet on a script that launches OpenRLHF (corpus healthy input), and still
    fires on a slime launch."""
    from grpo_debug.tools.triage import triage

    healthy = Path(__file__).resolve().parent / "data" / "corpus" / "healthy" / \
        "openrlhf-reinforce-baseline-hybrid-engine-script" / "input.sh"
    ids = [c.rule_id for f in triage(path=str(healthy)).findings for c in f.causes]
    assert "slime-max-tokens-per-gpu-without-dynamic-batch" not in ids
    slime = "python3 train.py --max-tokens-per-gpu 9216 --rollout-num-gpus 4 --rollout-max-response-len 8192\n"
    ids = [c.rule_id for f in triage(text=slime).findings for c in f.causes]
    assert "slime-max-tokens-per-gpu-without-dynamic-batch" in ids


def test_nonfinite_at_the_first_point_seen_is_not_called_the_run_s_first():
    """A log's tail pasted after the run went NaN starts with NaN: both non-finite detectors say the first NaN is
    only the first in this input (a newcomer's `tail -n 5000 run.log | grpo-debug triage -` read "first
    non-finite" at the tail's first step, 27 steps after the real one)."""
    from grpo_debug.tools.triage import triage_text  # (its metric-nonfinite rule runs engine/detectors.nonfinite)

    tail = "".join(f"step:{i} - actor/grad_norm:nan - actor/pg_loss:0.1\n" for i in range(399, 402))
    whole = "".join(f"step:{i} - actor/grad_norm:{'nan' if i >= 5 else 0.3} - actor/pg_loss:0.1\n" for i in range(1, 9))
    assert "run may have gone non-finite earlier" in first_nonfinite(_run(g=[math.nan, math.nan, 1.0])).message
    assert "earlier" not in first_nonfinite(_run(g=[0.3, math.nan, math.nan])).message
    for text, said in ((tail, True), (whole, False)):
        res = triage_text(text)
        sig = res.findings[0].causes[0].matched[0]
        assert res.findings[0].symptom == "nan_inf" and ("may have gone non-finite earlier" in sig) is said, sig


def test_decline_floor_needs_a_fall_not_a_jitter_around_the_floor():
    """An entropy series that jitters around the 0.05 floor (uniform 0..0.1) crosses it by its first and last
    points alone; the floor criterion reads the medians of its first and last few points and needs a fall by half."""
    import random

    from grpo_debug.tools.engine.detectors import decline
    from grpo_debug.tools.engine.metrics import MetricTable

    rng = random.Random(4)
    jitter = MetricTable()
    for s in range(1, 200):
        jitter.add("verl", s, s, {"actor/entropy": 0.09 if s == 1 else (0.01 if s == 199 else rng.uniform(0, 0.1))})
    assert decline(jitter, factor=5, floor=0.05) is None
    fall = MetricTable()
    for s in range(1, 200):
        fall.add("verl", s, s, {"actor/entropy": 0.3 * (1 - s / 220) + 0.005 * rng.random()})
    assert decline(fall, factor=50, floor=0.05) is not None
