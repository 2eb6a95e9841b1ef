"""Detectors over metric series. Each takes the :class:`MetricTable` and params, and returns a
:class:`Hit` (evidence line numbers + a sentence) or None. Rules name them in ``detector`` signals.

Metric names differ per framework: a rule's ``metric: <canonical id>`` becomes a ``keys`` regex of exactly that
series' raw keys (engine/match.run_detector); without either, a detector reads its default series through the
fallback spellings of ``tools/run/names.FALLBACK_KEYS`` (the one table of them, shared with engine/series).
"""
from __future__ import annotations

import math
import re
import statistics
from typing import Callable

from grpo_debug.tools.engine.hit import ALREADY_NONFINITE, Hit
from grpo_debug.tools.engine.metrics import MetricTable, Point, is_finite
from grpo_debug.tools.run.names import FALLBACK_KEYS
from grpo_debug.tools.engine.series.step1 import step1_table as step1_mismatch  # noqa: F401  (moved; the name stays)

GRAD_NORM = FALLBACK_KEYS["grad_norm"]
ENTROPY = FALLBACK_KEYS["entropy"]
KL = FALLBACK_KEYS["kl"]
REWARD = FALLBACK_KEYS["reward_mean"]
REWARD_SPREAD = FALLBACK_KEYS["zero_std_frac"]
LENGTH_CLIP = FALLBACK_KEYS["response_length_clip_ratio"]
LOSS = FALLBACK_KEYS["loss"]




def _select(t: MetricTable, keys: str | None, default: str) -> list[tuple[str, list[Point]]]:
    rx = re.compile(keys or default, re.I)
    return [(k, v) for k, v in t.series.items() if rx.search(k)]


def _fmt(v: float) -> str:
    if math.isnan(v) or math.isinf(v):
        return str(v)
    return f"{v:.4g}"


def nonfinite(t: MetricTable, keys: str | None = None) -> Hit | None:
    """Any NaN/Inf value; evidence: the first non-finite point of each series (up to 8 lines)."""
    lines, names, first = [], [], None
    for k, pts in _select(t, keys, r"."):
        bad = [p for p in pts if not is_finite(p.value)]
        if bad:
            names.append(k)
            lines += [p.line for p in bad[:3]]
            if first is None or bad[0].line < first[1].line:
                first = (k, bad[0], bad[0] is pts[0])
    if not names:
        return None
    k, p, at_start = first
    names.insert(0, names.pop(names.index(k)))  # the first to go non-finite leads (the evidence excerpt shows it)
    where = ALREADY_NONFINITE if at_start else ""
    return Hit(sorted(set(lines))[:8], f"{k} is {_fmt(p.value)} at step {p.step:g} (first non-finite{where}; "
               f"{len(names)} series affected: {', '.join(names[:5])})", names)



def vanished(t: MetricTable, keys: str | None = None, fmt: str | None = "megatron") -> Hit | None:
    """A loss field that was printed on earlier lines of a format disappears from later ones.

    Megatron's training_log prints a loss only when it is a number it can average; on a NaN step in
    Megatron-DeepSpeed the field is simply missing (see the rule megatron-deepspeed-hidden-nan).
    """
    rx = re.compile(keys or r"loss$", re.I)
    recs = [r for r in t.records if fmt is None or r.fmt == fmt]
    seen: set[str] = set()
    for i, r in enumerate(recs):
        missing = [k for k in seen if k not in r.keys]
        if missing and i > 0:
            gone = [x for x in recs[i:] if not (set(missing) & x.keys)]
            return Hit([x.line for x in gone[:6]] + [recs[i - 1].line],
                       f"'{missing[0]}' is printed up to step {recs[i - 1].step:g} and missing from step {r.step:g} on "
                       f"({len(gone)} lines): a non-finite value is not printed", missing)
        seen |= {k for k in r.keys if rx.search(k)}
    return None


def spike(t: MetricTable, keys: str | None = None, factor: float = 10.0, min_points: int = 3,
          floor: float = 1.0, window: int = 20) -> Hit | None:
    """A value above ``factor`` x the median of the ``window`` values before it (at least
    ``min_points``-1 of them). O(n * window log window)."""
    for k, pts in _select(t, keys, GRAD_NORM):
        fin = [p for p in pts if is_finite(p.value)]
        for i in range(max(1, min_points - 1), len(fin)):
            base = statistics.median(p.value for p in fin[max(0, i - window):i])
            if fin[i].value > max(factor * abs(base), floor):
                after = [p.line for p in fin[i:i + 3]]
                return Hit([fin[i - 1].line] + after, f"{k} jumps to {_fmt(fin[i].value)} at step {fin[i].step:g}, "
                           f"{fin[i].value / max(abs(base), 1e-12):.0f}x its trailing median {_fmt(base)}", [k])
    return None


def _trend(pts: list[Point]) -> tuple[float, float]:
    """(ratio last/first, fraction of increasing steps)."""
    ups = sum(1 for a, b in zip(pts, pts[1:]) if b.value > a.value)
    first = pts[0].value
    return (pts[-1].value / first if first else math.inf), ups / max(1, len(pts) - 1)


def growth(t: MetricTable, keys: str | None = None, factor: float = 3.0, min_points: int = 3,
           monotone: float = 0.6) -> Hit | None:
    """Sustained growth: last/first >= factor and most steps increase."""
    for k, pts in _select(t, keys, GRAD_NORM):
        fin = [p for p in pts if is_finite(p.value) and p.value > 0]
        if len(fin) < min_points:
            continue
        ratio, up = _trend(fin)
        if ratio >= factor and up >= monotone:
            return Hit([p.line for p in fin][-6:], f"{k} grows {ratio:.1f}x from {_fmt(fin[0].value)} (step "
                       f"{fin[0].step:g}) to {_fmt(fin[-1].value)} (step {fin[-1].step:g})", [k])
    return None


def decline(t: MetricTable, keys: str | None = None, factor: float = 3.0, min_points: int = 3,
            floor: float | None = None) -> Hit | None:
    """Sustained fall: first/last >= factor (entropy collapse), or a fall (by half at least) to under ``floor``.
    The levels are medians of the first and last few points (up to 5, a quarter of the series at most): a series
    that only jitters around ``floor`` never crosses it by its first and last points alone."""
    for k, pts in _select(t, keys, ENTROPY):
        fin = [p for p in pts if is_finite(p.value)]
        if len(fin) < min_points or fin[0].value <= 0:
            continue
        downs = sum(1 for a, b in zip(fin, fin[1:]) if b.value < a.value) / (len(fin) - 1)
        last = max(fin[-1].value, 1e-12)
        w = max(1, min(5, len(fin) // 4))
        head = statistics.median(p.value for p in fin[:w])
        tail = max(statistics.median(p.value for p in fin[-w:]), 1e-12)
        fell_under = floor is not None and tail < floor < head and head / tail >= 2
        if (fin[0].value / last >= factor and downs >= 0.6) or fell_under:
            return Hit([p.line for p in fin][-6:], f"{k} falls from {_fmt(fin[0].value)} to {_fmt(fin[-1].value)}", [k])
    return None


def threshold(t: MetricTable, keys: str | None = None, op: str = "gt", value: float = 0.0,
              all_points: bool = False, min_points: int = 1) -> Hit | None:
    """Points where ``series op value`` holds (any point, or all points with ``all_points``)."""
    cmp: dict[str, Callable[[float, float], bool]] = {
        "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b, "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}
    f = cmp[op]
    for k, pts in _select(t, keys, r"$^"):
        fin = [p for p in pts if is_finite(p.value)]
        ok = [p for p in fin if f(p.value, value)]
        if len(fin) < min_points or not ok or (all_points and len(ok) != len(fin)):
            continue
        return Hit([p.line for p in ok][:6], f"{k} {op} {value:g} at {len(ok)}/{len(fin)} points "
                   f"(e.g. {_fmt(ok[0].value)} at step {ok[0].step:g})", [k])
    return None


def zero_reward(t: MetricTable, min_points: int = 2) -> Hit | None:
    """Rewards identically zero, or zero spread in (nearly) every group."""
    spread = _select(t, None, REWARD_SPREAD)
    for k, pts in spread:
        if "count" in k:
            continue
        fin = [p for p in pts if is_finite(p.value)]
        if len(fin) >= min_points and all(p.value >= 0.95 for p in fin):
            span = _fmt(fin[0].value) if fin[0].value == fin[-1].value else f"{_fmt(fin[0].value)} to {_fmt(fin[-1].value)}"
            return Hit([p.line for p in fin][:6], f"{k} is {span} at all {len(fin)} steps: every group has identical "
                       "rewards, so every advantage is 0", [k])
    for k, pts in _select(t, None, REWARD):
        fin = [p for p in pts if is_finite(p.value)]
        if len(fin) >= min_points and all(p.value == 0 for p in fin):
            return Hit([p.line for p in fin][:6], f"{k} is 0 at all {len(fin)} steps", [k])
    return None


def length_cap(t: MetricTable, value: float = 0.9, min_points: int = 1) -> Hit | None:
    """Responses at the length cap: clip/truncation ratio >= ``value`` on the latest points, or
    min length == max length (every response has the same, capped, length)."""
    for k, pts in _select(t, None, LENGTH_CLIP):
        if re.search(r"clip_ratio/(?:low|high|region)|pg_clip|ppo_clip", k):
            continue
        fin = [p for p in pts if is_finite(p.value)]
        hot = [p for p in fin if p.value >= value]
        if len(fin) >= min_points and hot and fin[-1].value >= value:
            return Hit([p.line for p in hot][:6], f"{k} reaches {_fmt(fin[-1].value)} at step {fin[-1].step:g}: "
                       "responses are cut at the length cap", [k])
    mins = _select(t, None, r"(?:completions|response_length|response_len)/min(?:_length)?$")
    maxs = _select(t, None, r"(?:completions|response_length|response_len)/max(?:_length)?$")
    if mins and maxs:
        (kmin, pmin), (kmax, pmax) = mins[0], maxs[0]
        same = [a for a, b in zip(pmin, pmax) if a.value == b.value and a.value > 0]
        if len(same) >= max(2, min_points) and len(same) == len(pmin):
            return Hit([p.line for p in same][:6], f"{kmin} == {kmax} == {_fmt(same[0].value)} at every step", [kmin])
    return None


def flat(t: MetricTable, keys: str | None = None, window: int = 5, rel: float = 0.01) -> Hit | None:
    """A series that stops moving: over the last ``window`` points, (max-min) <= rel * |mean|."""
    for k, pts in _select(t, keys, LOSS):
        fin = [p for p in pts if is_finite(p.value)]
        if len(fin) < window:
            continue
        last = [p.value for p in fin[-window:]]
        mean = statistics.fmean(last)
        if mean != 0 and (max(last) - min(last)) <= rel * abs(mean):
            return Hit([p.line for p in fin[-window:]], f"{k} stays at {_fmt(mean)} (+-{rel:.0%}) for the last {window} points", [k])
    return None


DETECTORS: dict[str, Callable[..., Hit | None]] = {
    "nonfinite": nonfinite, "vanished": vanished, "spike": spike, "growth": growth, "decline": decline,
    "threshold": threshold, "step1_mismatch": step1_mismatch, "zero_reward": zero_reward,
    "length_cap": length_cap, "flat": flat,
}
# the run-model detectors (engine/series: late_climb, robust_spike, collapse, flat_zero, plateau, first_nonfinite,
# mismatch_jump) share the registry; match.run_detector passes them the Run instead of the MetricTable
from grpo_debug.tools.engine.series import RUN_DETECTORS  # noqa: E402

DETECTORS.update(RUN_DETECTORS)
