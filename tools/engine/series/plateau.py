"""plateau: a series that stops moving after it moved (loss stuck, reward frozen), reported where it stops.

The trailing flat segment is the longest run of last points whose spread (max - min) stays within ``rel`` x
|their mean| (or ``abs_tol`` when the mean is near zero). It is a plateau when it holds at least ``min_run``
points and the points before it moved: their spread exceeded ``moved`` x the plateau's tolerance. Defaults:
``rel=0.01`` (1 %: printed losses carry 4 significant digits, a live loss moves more than that step to step),
``min_run=6``, ``moved=5``.
"""
from __future__ import annotations

from grpo_debug.tools.engine.hit import Hit
from grpo_debug.tools.engine.onset import attach
from grpo_debug.tools.engine.series.baseline import at, fmt, lines_of, select
from grpo_debug.tools.run.names import FALLBACK_KEYS  # the one table of fallback spellings
from grpo_debug.tools.run.model import Run

LOSS_KEYS = FALLBACK_KEYS["loss"]


def plateau(run: Run, metric: str | None = None, keys: str | None = None, rel: float = 0.01, abs_tol: float = 1e-6,
            min_run: int = 6, moved: float = 5.0) -> Hit | None:
    """The first series (``metric``, else ``keys``, else loss) with a trailing plateau after movement."""
    for s in select(run, metric, keys, "loss", LOSS_KEYS):
        vals = [p.value for p in s.finite()]
        fin = s.finite()
        if len(vals) < min_run + 2:
            continue
        i = len(vals) - 1
        lo = hi = vals[i]
        while i > 0:
            a, b = min(lo, vals[i - 1]), max(hi, vals[i - 1])
            tol = max(rel * abs((a + b) / 2), abs_tol)
            if b - a > tol:
                break
            lo, hi, i = a, b, i - 1
        run_len = len(vals) - i
        tol = max(rel * abs((lo + hi) / 2), abs_tol)
        before = vals[:i]
        if run_len < min_run or len(before) < 2 or max(before) - min(before) <= moved * tol:
            continue
        return attach(Hit(lines_of(fin[i:i + 6]), f"{s.name} stops moving at {at(fin[i])}: {run_len} points within "
                          f"{fmt(lo)}..{fmt(hi)} after moving over {fmt(min(before))}..{fmt(max(before))}", [s.name]),
                      fin, i, "exact", s.name)
    return None
