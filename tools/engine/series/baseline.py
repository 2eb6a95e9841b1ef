"""Robust statistics and series selection shared by the series detectors.

``sigma`` is the median absolute deviation scaled by 1.4826, the consistent estimator of the standard deviation
for normal data (Rousseeuw & Croux 1993, "Alternatives to the Median Absolute Deviation", JASA 88:1273); it is
floored at ``rel_floor`` x |median| so that a perfectly constant baseline (a logged lr, a value printed with 2
digits) does not make every later wiggle infinitely significant.
"""
from __future__ import annotations

import math
import re
import statistics

from grpo_debug.tools.run.model import Point, Run, Series

MAD_SCALE = 1.4826


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def sigma(xs: list[float], med: float | None = None, rel_floor: float = 0.05, abs_floor: float = 1e-12) -> float:
    """Robust spread of ``xs``: 1.4826 x MAD, at least ``rel_floor`` x |median| and ``abs_floor``."""
    m = median(xs) if med is None else med
    mad = median([abs(x - m) for x in xs]) * MAD_SCALE
    return max(mad, rel_floor * abs(m), abs_floor)


def finite_prefix(s: Series) -> list[Point]:
    """The points before the first non-finite one (a climb is judged while the series is still finite)."""
    out = []
    for p in s.points:
        if not math.isfinite(p.value):
            break
        out.append(p)
    return out


def _by_regex(run: Run, rx: str) -> list[Series]:
    pat = re.compile(rx, re.I)
    return [s for s in run.series.values() if pat.search(s.name) or any(pat.search(k) for k in s.raw_keys)]


def select(run: Run, metric: str | None = None, keys: str | None = None, default_metric: str | None = None,
           default_keys: str | None = None) -> list[Series]:
    """Series a detector reads, in this order: the canonical ``metric``; the series whose name or a raw key matches
    the ``keys`` regex (case-insensitive); when neither was asked for, or ``metric`` is the detector's own default,
    ``default_metric`` and after it every other series ``default_keys`` matches (a critic's grad norm beside the
    actor's; raw spellings the alias table does not map yet). Empty when none."""
    if metric and (s := run.series_of(metric)) is not None:
        return [s]
    if keys:
        return _by_regex(run, keys)
    if metric and metric != default_metric:
        return []
    first = [s] if default_metric and (s := run.series_of(default_metric)) is not None else []
    rest = [s for s in _by_regex(run, default_keys) if s not in first] if default_keys else []
    return first + rest


def fmt(v: float) -> str:
    return str(v) if not math.isfinite(v) else f"{v:.4g}"


def at(p: Point, axis: str = "step") -> str:
    """'step 301 (line 302)', 'step 301 (events.out...:17)', with ``axis='row'`` 'row 2 (line 4)', with
    ``axis='mention'`` 'line 24'."""
    loc = f"line {p.line}" if p.line is not None else (p.where or "")
    if axis == "mention":  # a value stated in prose: its line is all there is
        return loc or "a mention"
    return f"{'row' if axis == 'row' else 'step'} {p.step:g}" + (f" ({loc})" if loc else "")


def lines_of(points: list[Point], limit: int = 8) -> list[int]:
    return [p.line for p in points if p.line is not None][:limit]
