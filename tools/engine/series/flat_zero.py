"""flat_zero: a series that is exactly zero at every point, or becomes zero and stays (reward mean, reward
spread, grad norm of a frozen policy), reported at its first zero step.

``|v| <= eps`` counts as zero (printed values are rounded: ``0.0000``). Whole series: at least ``min_points``
points, all zero. A zero tail: at least ``min_tail`` trailing zero points after a non-zero start. Defaults:
``eps=1e-9``, ``min_points=2`` (one printed value is not a run), ``min_tail=5``.
"""
from __future__ import annotations

from grpo_debug.tools.engine.hit import Hit
from grpo_debug.tools.engine.onset import attach
from grpo_debug.tools.engine.series.baseline import at, lines_of, select
from grpo_debug.tools.run.names import FALLBACK_KEYS  # the one table of fallback spellings
from grpo_debug.tools.run.model import Run

REWARD_KEYS = FALLBACK_KEYS["reward_mean"]


def flat_zero(run: Run, metric: str | None = None, keys: str | None = None, eps: float = 1e-9,
              min_points: int = 2, min_tail: int = 5) -> Hit | None:
    """The first series (``metric``, else ``keys``, else reward mean) that is or becomes flat at zero."""
    for s in select(run, metric, keys, "reward_mean", REWARD_KEYS):
        fin = s.finite()
        if len(fin) < min_points:
            continue
        tail = 0
        for p in reversed(fin):
            if abs(p.value) > eps:
                break
            tail += 1
        if tail == len(fin):
            return attach(Hit(lines_of(fin[:6]), f"{s.name} is 0 at all {len(fin)} points (from {at(fin[0])})",
                              [s.name]), fin, 0, "exact", s.name)
        if tail >= min_tail:
            first = fin[len(fin) - tail]
            return attach(Hit(lines_of(fin[len(fin) - tail - 1:len(fin) - tail + 5]),
                              f"{s.name} drops to 0 at {at(first)} and stays 0 for the last {tail} points", [s.name]),
                          fin, len(fin) - tail, "exact", s.name)
    return None
