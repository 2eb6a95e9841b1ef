"""robust_spike: isolated values far above the trailing robust baseline, reported at the first one.

A point is a spike when it exceeds both median + ``z`` x sigma and ``factor`` x median of the ``window`` finite
points before it (at least ``min_base`` of them; sigma: 1.4826 x MAD floored at 5 % of the median, baseline.py),
and the series comes back: one of the ``settle`` points after it is under the threshold again (otherwise it is a
climb, see late_climb; the last finite point is never a spike: nothing follows to tell). The two tests together keep a noisy but healthy series quiet: a z-score alone fires on a
very steady baseline, a ratio alone on a series near zero. Defaults: ``z=6``, ``factor=5`` (a gradient-norm
spike a user notices is several times the usual level), ``window=50``, ``min_base=5``.
"""
from __future__ import annotations

from grpo_debug.tools.engine.hit import Hit
from grpo_debug.tools.engine.onset import attach
from grpo_debug.tools.engine.series.baseline import at, fmt, lines_of, median, select, sigma
from grpo_debug.tools.run.names import FALLBACK_KEYS  # the one table of fallback spellings
from grpo_debug.tools.run.model import Run


def robust_spike(run: Run, metric: str | None = None, keys: str | None = None, z: float = 6.0, factor: float = 5.0,
                 window: int = 50, min_base: int = 5, settle: int = 3) -> Hit | None:
    """The first spike of the first series (``metric``, else ``keys``, else grad_norm) that has one; evidence: the
    point before it, the spike and the points after it (up to 8 lines), with the count of spikes in the series."""
    for s in select(run, metric, keys, "grad_norm", FALLBACK_KEYS["grad_norm"]):
        fin = s.finite()
        first, count = None, 0
        for i in range(min_base, len(fin)):
            base = [p.value for p in fin[max(0, i - window):i]]
            med = median(base)
            thr = max(med + z * sigma(base, med), factor * med if med > 0 else med)
            if fin[i].value <= thr:
                continue
            after = fin[i + 1:i + 1 + settle]
            if not after or all(p.value > thr for p in after):
                continue  # it stays up (a climb, see late_climb) or nothing follows to tell
            count += 1
            if first is None:
                first = (i, med)
        if first is None:
            continue
        i, med = first
        p = fin[i]
        ev = lines_of(fin[i - 1:i + 3])
        said = f"an isolated spike at {at(p)} that recovered" if count == 1 else f"{count} isolated spikes that recovered"
        return attach(Hit(ev, f"{s.name} spikes to {fmt(p.value)} at {at(p)}, {p.value / med:.0f}x its trailing median "
                          f"{fmt(med)} ({said}; {len(fin)} points)", [s.name]), fin, i, "spike", s.name, True)
    return None
