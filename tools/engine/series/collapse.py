"""collapse: a series that falls toward zero and stays there (entropy collapse), reported where the fall starts.

The baseline is the median of the first ``base_frac`` of the finite points (at least ``min_base``). The series
has collapsed when its last ``min_run`` points are all under ``frac`` x that median; the reported start is the
first point after which the series never again returns above ``start_frac`` x the baseline median (the fall's
first step; the hinge fit of engine/onset.py may move it earlier, never later; leading start-up zeros or
warm-up points are skipped first). Defaults: ``frac=0.1`` (entropy at a tenth of its early level: the policy is near-deterministic;
the entropy-mechanism study of Cui et al. 2025, arXiv:2505.22617, shows entropy dropping by an order of
magnitude in the first steps of runs whose performance then saturates), ``start_frac=0.8``, ``min_run=3``.
A series with a baseline <= 0 is not read (nothing to collapse from).
"""
from __future__ import annotations

from grpo_debug.tools.engine.hit import Hit
from grpo_debug.tools.engine.onset import attach, locate, startup_end
from grpo_debug.tools.engine.series.baseline import at, fmt, lines_of, median, select
from grpo_debug.tools.run.names import FALLBACK_KEYS  # the one table of fallback spellings
from grpo_debug.tools.run.model import Run

ENTROPY_KEYS = FALLBACK_KEYS["entropy"]


def collapse(run: Run, metric: str | None = None, keys: str | None = None, frac: float = 0.1,
             start_frac: float = 0.8, min_run: int = 3, min_base: int = 3, base_frac: float = 0.2) -> Hit | None:
    """The first series (``metric``, else ``keys``, else entropy) that collapses; evidence: the fall's first
    points and the last point."""
    for s in select(run, metric, keys, "entropy", ENTROPY_KEYS):
        fin = s.finite()
        fin = fin[startup_end([p.value for p in fin], len(fin) // 2):]  # start-up (zeros, warm-up) is no baseline
        nb = max(min_base, int(len(fin) * base_frac))
        if len(fin) < nb + min_run:
            continue
        med = median([p.value for p in fin[:nb]])
        if med <= 0 or any(p.value >= frac * med for p in fin[-min_run:]):
            continue
        start = len(fin) - 1
        while start > 0 and fin[start - 1].value < start_frac * med:
            start -= 1
        o = locate(fin, start)  # the fall's first step, fitted back from where it left 0.8 x the baseline
        start = min(start, o.index) if o.kind in ("climb", "shift") else start
        ev = lines_of(fin[start:start + 4]) + lines_of(fin[-1:])
        return attach(Hit(ev, f"{s.name} falls from its early median {fmt(med)} starting at {at(fin[start])} to "
                   f"{fmt(fin[-1].value)} at {at(fin[-1])} ({fin[-1].value / med:.1%} of it)", [s.name]),
                      fin, start, "exact", s.name)
    return None
