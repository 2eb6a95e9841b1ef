"""Onset (issue 23, item 1): every finding over a series says where its change STARTS (tools/engine/onset.py),
within max(3 steps, 5 % of the change's length) of the true start on planted series.

The noise is taken from a real healthy series: the 20 ``actor/grad_norm`` values of the healthy verl run in
/work/shared/healthy/verl-multi-minibatch-kl-loss (0.205-0.34 around 0.27, i.e. about +-25 %), resampled as
multiplicative log-ratios with AR(1) correlation 0.3 and a rare (0.5 %) 2-4x outlier, so the baselines are as
noisy as a real run's, not clean hinges."""
from __future__ import annotations

import math
import random
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from grpo_debug.tools.engine.onset import change_start, excursion, line_time, locate, startup_end
from grpo_debug.tools.triage import triage

REAL_GRAD_NORM = [0.282, 0.291, 0.21, 0.326, 0.235, 0.271, 0.271, 0.223, 0.33, 0.311, 0.21, 0.289, 0.205, 0.271,
                  0.332, 0.338, 0.32, 0.34, 0.215, 0.233]
_MED = sorted(REAL_GRAD_NORM)[10]
_LOG_RATIOS = [math.log(v / _MED) for v in REAL_GRAD_NORM]


def noise(seed: int, n: int, rho: float = 0.3, tail: float = 0.005) -> list[float]:
    """``n`` multiplicative noise factors around 1 from the real healthy series (module docstring)."""
    rng = random.Random(seed)
    e, out = 0.0, []
    for _ in range(n):
        e = rho * e + math.sqrt(1 - rho * rho) * rng.choice(_LOG_RATIOS)
        out.append(math.exp(e) * (rng.uniform(2, 4) if rng.random() < tail else 1.0))
    return out


def tol(start: int, end: int) -> float:
    return max(3.0, 0.05 * (end - start))


def verl_log(grad_norm: list[float], entropy: list[float] | None = None, reward: list[float] | None = None,
             stamp: bool = False) -> str:
    """A verl console log (``step:N - key:value``), one line per step from step 1 (line N = step N)."""
    out = []
    for i, g in enumerate(grad_norm):
        ts = f"2026-11-30 12:{i // 60 % 60:02d}:{i % 60:02d},000 " if stamp else ""
        parts = [f"step:{i + 1}", f"actor/grad_norm:{g:.4g}" if math.isfinite(g) else f"actor/grad_norm:{g}"]
        if entropy is not None:
            parts.append(f"actor/entropy:{entropy[i]:.4g}")
        if reward is not None:
            parts.append(f"critic/score/mean:{reward[i]:.4g}")
        out.append(ts + "(TaskRunner pid=77) " + " - ".join(parts))
    return "\n".join(out) + "\n"


def finding(r, symptom: str):
    return next((f for f in r.findings if f.symptom == symptom), None)


def _series(vals: list[float]) -> list[SimpleNamespace]:
    return [SimpleNamespace(step=i + 1, value=v) for i, v in enumerate(vals)]


@pytest.mark.parametrize("seed", range(6))
def test_slow_exponential_grad_norm_climb_is_dated_where_it_starts(seed):
    n, start = 700, 420  # the climb starts at step 421 (index 420): 1 % a step, 16x at the end
    vals = [0.27 * z * (math.exp((i - start) / 100) if i >= start else 1.0) for i, z in enumerate(noise(seed, n))]
    r = triage(text=verl_log(vals))
    f = finding(r, "grad_norm_spike")
    assert f is not None and f.onset is not None and f.onset.kind in ("climb", "shift"), r.summary
    assert abs(f.onset.step - (start + 1)) <= tol(start, n), f.onset
    assert f.onset.line == f.onset.step  # line N holds step N
    assert f.onset.detected_step is not None and f.onset.detected_step >= f.onset.step
    assert any(e.line == f.onset.line for e in f.evidence)  # late_climb's evidence starts at the onset


@pytest.mark.parametrize("seed", range(6))
def test_linear_climb_is_dated_where_it_starts(seed):
    n, start = 800, 500
    vals = [0.27 * z * (1 + 0.02 * (i - start) if i >= start else 1.0) for i, z in enumerate(noise(seed, n))]
    o = locate(_series(vals), next(i for i in range(start, n) if all(v > 0.45 for v in vals[i:i + 5])))
    assert o.kind in ("climb", "shift") and abs(o.index - start) <= tol(start, n), o


@pytest.mark.parametrize("seed", range(4))
def test_step_change_is_dated_at_its_first_step(seed):
    n, start = 600, 350
    vals = [0.27 * z * (3.0 if i >= start else 1.0) for i, z in enumerate(noise(seed, n))]
    det = start + 6  # a detector confirms a few points late
    o = locate(_series(vals), det)
    assert o.kind in ("shift", "climb") and abs(o.index - start) <= 3, o


@pytest.mark.parametrize("seed", range(4))
def test_a_ramp_that_starts_small_and_accelerates_is_dated_at_its_first_departure(seed):
    """A clip ratio that leaves its baseline with a small jump, then rises along a logistic (slow, then fast): the
    hinge alone puts the break where the curve steepens; the onset is where the points first leave the noise."""
    n, start, width = 900, 600, 120
    rng = random.Random(seed)
    vals = []
    for i in range(n):
        ramp = 0.0 if i < start else 1.0 / (1.0 + math.exp(-(i - start - width / 2) / (width / 8)))
        vals.append(0.02 * (1 + 0.03 * rng.gauss(0, 1)) + 0.88 * ramp)
    det = next(i for i in range(start, n) if vals[i] > 0.3)
    o = locate(_series(vals), det)
    assert o.kind in ("climb", "shift") and abs(o.index - start) <= tol(start, start + width), o


def test_entropy_collapse_to_zero_is_dated_where_the_fall_starts():
    n, start = 400, 250  # entropy 0.5 with real noise, then falls 4 % a step toward 0
    ent = [0.5 * z * (0.96 ** (i - start) if i >= start else 1.0) for i, z in enumerate(noise(3, n))]
    r = triage(text=verl_log([0.27] * n, entropy=ent))
    f = finding(r, "entropy_anomaly")
    assert f is not None and f.onset is not None, [x.symptom for x in r.findings]
    assert abs(f.onset.step - (start + 1)) <= tol(start, n), f.onset


def test_nan_without_a_climb_is_dated_at_the_first_nonfinite_step():
    n, bad = 300, 211
    vals = [0.27 * z for z in noise(1, n)]
    vals[bad - 1:] = [math.nan] * (n - bad + 1)
    f = finding(triage(text=verl_log(vals)), "nan_inf")
    assert f is not None and f.onset is not None and f.onset.kind == "nonfinite"
    assert f.onset.step == bad and f.onset.line == bad


def test_nan_after_a_climb_is_dated_at_the_start_of_the_climb():
    n, start, bad = 450, 300, 421  # climbs 4 % a step from step 301 (110x), NaN from step 421
    vals = [0.27 * z * (1.04 ** (i - start) if i >= start else 1.0) for i, z in enumerate(noise(2, n))]
    vals[bad - 1:] = [math.nan] * (n - bad + 1)
    f = finding(triage(text=verl_log(vals)), "nan_inf")
    assert f is not None and f.onset is not None and f.onset.kind in ("climb", "shift"), f
    assert abs(f.onset.step - (start + 1)) <= tol(start, bad), f.onset
    assert f.onset.detected_step == bad


def test_isolated_spike_that_recovers_is_said_so_and_never_medium():
    n = 300
    vals = [0.27 * z for z in noise(4, n, tail=0.0)]
    vals[150] = 9.0  # step 151: 33x, then back to normal at once
    r = triage(text=verl_log(vals))
    assert not any(f.confidence in ("medium", "high") and f.symptom == "grad_norm_spike" for f in r.findings), \
        [(f.symptom, f.confidence) for f in r.findings]
    f = finding(r, "grad_norm_spike")
    if f is not None:  # said as what it is
        assert "isolated spike at step 151 that recovered" in f.title and f.onset.step == 151
    assert excursion(vals, 150) == 1


def test_a_spike_that_stays_up_is_not_a_recovered_spike():
    vals = [0.27 * z for z in noise(5, 200, tail=0.0)]
    vals[120:] = [3.0 * v for v in vals[120:]]
    assert excursion(vals, 120) is None


def test_startup_zeros_are_not_the_baseline():
    n, start = 500, 330
    g = [0.27 * z * (math.exp((i - start) / 40) if i >= start else 1.0) for i, z in enumerate(noise(6, n))]
    g[:6] = [0.0] * 6  # grad norm 0 for the first 6 steps (nothing trained yet)
    assert startup_end(g) == 6
    f = finding(triage(text=verl_log(g)), "grad_norm_spike")
    assert f is not None and f.onset is not None and abs(f.onset.step - (start + 1)) <= tol(start, n), f


def test_reward_zero_at_startup_then_a_collapse_dates_the_collapse():
    n, start = 300, 200
    reward = [0.0] * 6 + [0.5 * z * (0.95 ** (i - start) if i >= start else 1.0) for i, z in enumerate(noise(7, n))][6:]
    vals = _series(reward)
    fit = change_start([p.step for p in vals], reward, start + 30)
    assert fit is not None and abs(fit.index - start) <= tol(start, n), fit


def test_warmup_transient_is_skipped():
    vals = [5.0, 3.0, 1.5] + [0.27 * z for z in noise(8, 100)]
    assert startup_end(vals) == 3


def test_onset_carries_the_wall_clock_time_of_a_timestamped_log():
    n, start = 500, 300
    vals = [0.27 * z * (math.exp((i - start) / 50) if i >= start else 1.0) for i, z in enumerate(noise(9, n))]
    f = finding(triage(text=verl_log(vals, stamp=True)), "grad_norm_spike")
    assert f is not None and f.onset is not None and f.onset.time is not None
    i = int(f.onset.step) - 1
    assert f.onset.time == f"2026-11-30 12:{i // 60 % 60:02d}:{i % 60:02d},000"
    assert line_time("no time here") is None and line_time("INFO 11-30 12:00:01 [loggers.py:10] x") == "11-30 12:00:01"


def test_onset_file_is_the_input_path(tmp_path):
    p = tmp_path / "train.log"
    n, start = 400, 250
    p.write_text(verl_log([0.27 * z * (1.05 ** (i - start) if i >= start else 1.0) for i, z in enumerate(noise(10, n))]))
    f = finding(triage(path=str(p)), "grad_norm_spike")
    assert f is not None and f.onset.file == str(p) and abs(f.onset.step - (start + 1)) <= tol(start, n)


def test_tensorboard_folder_climb_from_3093_is_dated_near_3093(tmp_path):
    """The issue's example: a slow grad-norm climb from step 3093 was dated 3417 (and 3111 before this work)."""
    sys.path.insert(0, str(Path(__file__).parent / "hostile"))
    from tfwrite import write_run

    from grpo_debug.tools.rundir.analyze import triage_folder

    write_run(str(tmp_path / "events.out.tfevents.1.host"), steps=6000, tags=["actor/grad_norm"], climb_from=3093)
    r = triage_folder(str(tmp_path))
    f = finding(r, "grad_norm_spike")
    assert f is not None and f.onset is not None, r.summary
    assert abs(f.onset.step - 3093) <= 10, f.onset  # the contract: max(3, 5 % of 2907) = 145; measured 3095
    assert f.onset.file and f.onset.file.endswith("events.out.tfevents.1.host") and f.onset.line is not None


def test_change_start_needs_a_baseline():
    with pytest.raises(ValueError):
        change_start([1.0, 2.0], [1.0, 2.0], 5)
    assert change_start([1.0, 2.0, 3.0], [1.0, 1.0, 9.0], 2) is None  # two points before: nothing to fit against
