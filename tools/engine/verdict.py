"""The verdict of a triage: healthy, not healthy, or cannot tell, and the one sentence that says why.

- ``not_healthy``: a diagnosed (not a risk) finding at medium or high confidence, or a validation series that
  peaked and then fell by a clear margin (:func:`val_decline`) while training went on;
- ``healthy``: the input holds a training run's metrics (at least :data:`MIN_STEPS` steps of a training series:
  reward, score, loss, grad norm, entropy, KL), no medium/high finding and no crash signal at any confidence;
- ``cannot_tell``: anything else: a configuration alone (its risks are low-confidence findings, not a diagnosis), a
  short paste without metrics, too few steps, or only a low-confidence crash signal.

A validation series is one of verl's ``val-core/...``, ``val-aux/...``, ``val/...``, TRL/HF ``eval_...`` and
``eval/...`` keys (``test/...`` too). Its direction comes from its name: a loss or perplexity is better low, every
other validation metric (reward, score, accuracy, pass@k) better high.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass

MIN_STEPS = 20
TRAINING = re.compile(r"reward|score|loss|grad.?norm|entropy|\bkl\b|_kl\b|kl_|advantage", re.I)
VALIDATION = re.compile(r"^(?:val(?:-core|-aux|idation)?|eval|test)(?:[/_-]|$)|[/_-](?:val|eval)[/_-]", re.I)
LOWER_BETTER = re.compile(r"loss|perplexity|ppl|error", re.I)
DECLINE_REL = 0.10  # a fall of at least 10% of the peak ...
DECLINE_NOISE = 3.0  # ... and of 3x the series' noise
CRASHES = frozenset({"cuda_oom", "illegal_memory_access", "host_oom", "process_crash", "collective_hang",
                     "ray_actor_died", "nan_inf"})


@dataclass
class Decline:
    key: str
    peak_step: float
    peak: float
    last_step: float
    last: float


def _finite(pts) -> list:
    return [p for p in pts if isinstance(p.value, (int, float)) and math.isfinite(p.value)]


def _steps(table, key: str) -> int:
    """Distinct steps of series ``key`` (a streamed log's downsampled series: its true point count)."""
    if key in table.counts:
        return table.counts[key]
    return len({p.step for p in table.series.get(key, ())})


def training_steps(table) -> tuple[int, list[str]]:
    """(the most steps any training series has, up to three such series, longest first)."""
    keys = [k for k in table.series if TRAINING.search(k) and not VALIDATION.search(k)]
    keys.sort(key=lambda k: -_steps(table, k))
    return (_steps(table, keys[0]) if keys else 0), keys[:3]


def val_decline(table) -> Decline | None:
    """The validation series (higher-is-better first, then losses; the one with most points) whose best point is
    followed by at least two points and whose last half of them (at least two, the last one included) all lie
    below the best by a clear margin: ``DECLINE_REL`` of the best and ``DECLINE_NOISE`` times the series' noise
    (the median distance of a point from the midpoint of its neighbours); None when no validation series does so."""
    keys = [k for k in table.series if VALIDATION.search(k) and len(_finite(table.series[k])) >= 4]
    keys.sort(key=lambda k: (bool(LOWER_BETTER.search(k)), -len(table.series[k]), k))
    for k in keys:
        pts = _finite(table.series[k])
        sign = -1.0 if LOWER_BETTER.search(k) else 1.0
        ys = [sign * p.value for p in pts]
        i = max(range(len(ys)), key=lambda j: (ys[j], -j))
        after = ys[i + 1:]
        if len(after) < 2:
            continue
        # noise: how far a point sits from the midpoint of its neighbours (a steady trend is not noise)
        noise = statistics.median(abs(ys[j] - (ys[j - 1] + ys[j + 1]) / 2) for j in range(1, len(ys) - 1))
        margin = max(DECLINE_REL * abs(ys[i]), DECLINE_NOISE * noise, 1e-12)
        if all(y <= ys[i] - margin for y in after[-max(2, len(after) // 2):]):
            return Decline(k, pts[i].step, pts[i].value, pts[-1].step, pts[-1].value)
    return None


def _rises(table) -> tuple[float, float] | None:
    """(first-quarter mean, last-quarter mean) of the training reward when it rises, else None."""
    keys = [k for k in table.series if re.search(r"reward|score", k, re.I) and not VALIDATION.search(k)]
    keys.sort(key=lambda k: -len(table.series[k]))
    for k in keys[:1]:
        ys = [p.value for p in _finite(table.series[k])]
        q = len(ys) // 4
        if q >= 2:
            a, b = statistics.fmean(ys[:q]), statistics.fmean(ys[-q:])
            return (a, b) if b > a else None
    return None


def _num(x: float) -> str:
    return f"{x:.4g}"


def _step(x: float) -> str:
    return f"{x:g}"


def _decline_words(d: Decline, table) -> str:
    rise = _rises(table)
    head = f"training reward rises ({_num(rise[0])} -> {_num(rise[1])}) but " if rise else ""
    return (f"{head}validation {d.key} peaked at step {_step(d.peak_step)} ({_num(d.peak)}) and is "
            f"{_num(d.last)} at step {_step(d.last_step)}")


def _where(f) -> str:
    """' from step S (line N)' when the finding has an onset (where its change starts), else ''."""
    onset = getattr(f, "onset", None)
    step = getattr(onset, "step", None) if onset is not None else None
    line = getattr(onset, "line", None) if onset is not None else None
    parts = ([f"from step {_step(step)}"] if isinstance(step, (int, float)) else []) + \
            ([f"line {line}"] if isinstance(line, int) else [])
    return f" ({', '.join(parts)})" if parts else ""


def verdict(findings: list, table, config_facts: int = 0) -> tuple[str, str]:
    """(verdict, its reason as one sentence) for ``findings`` (the answer's order: root first, risks flagged
    ``risk``) over the metric series ``table`` (engine/metrics.MetricTable). ``config_facts``: settings read (to
    say that an input is a configuration alone)."""
    diagnosed = [f for f in findings if not getattr(f, "risk", False)]
    loud = [f for f in diagnosed if f.confidence in ("medium", "high")]
    risks = len(findings) - len(diagnosed)
    decline = val_decline(table)
    steps, names = training_steps(table)
    if loud:
        f = loud[0]
        s = f"Not healthy: {f.symptom} at {f.confidence} confidence{_where(f)}"
        return "not_healthy", s + (f"; also {_decline_words(decline, table)}." if decline else ".")
    if decline is not None and steps >= MIN_STEPS:
        return "not_healthy", f"Not healthy: {_decline_words(decline, table)}."
    crash = next((f for f in diagnosed if f.symptom in CRASHES), None)
    if crash is not None:
        return "cannot_tell", (f"Cannot tell: only a low-confidence {crash.symptom} signal{_where(crash)}; paste the "
                               "lines around it and the run's last metric lines.")
    if steps >= MIN_STEPS:
        tail = f"; {risks} risk(s) of the configuration listed at low confidence" if risks else ""
        return "healthy", (f"Healthy as far as this input shows: {steps} steps of {', '.join(names)}, no medium- or "
                           f"high-confidence finding and no crash{tail}.")
    if not table.series:
        what = (f"a configuration only ({config_facts} settings) and no metrics" if config_facts
                else "no per-step metrics")
        why = f"Cannot tell: the input holds {what}"
        tail = f"; its {risks} finding(s) are risks of the configuration (low confidence), not a diagnosis" if risks else ""
        return "cannot_tell", why + tail + "."
    return "cannot_tell", (f"Cannot tell: only {steps} step(s) of training metrics ({MIN_STEPS} needed to judge a "
                           "run) and no medium- or high-confidence finding.")
