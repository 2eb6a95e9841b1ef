"""first_nonfinite: the first NaN/inf point of each series, earliest first.

Evidence: the first non-finite point of each affected series (up to 8 lines, the earliest step first) and the
last finite point before the earliest one. The message names the earliest series, its step and line, and how
many series are affected; a series that returns to finite values afterwards is said to recover. The onset is the
first non-finite point, or the start of the climb that led to it (engine/onset.py ``locate``), which the
message then names too.
"""
from __future__ import annotations

import math

from grpo_debug.tools.engine.hit import ALREADY_NONFINITE, Hit
from grpo_debug.tools.engine.onset import attach, locate
from grpo_debug.tools.engine.series.baseline import at, fmt, select
from grpo_debug.tools.run.model import Run


def first_nonfinite(run: Run, metric: str | None = None, keys: str | None = None) -> Hit | None:
    """The earliest non-finite point over the selected series (``metric``, ``keys``, else every series)."""
    chosen = select(run, metric, keys) if (metric or keys) else list(run.series.values())
    firsts = []
    for s in chosen:
        for i, p in enumerate(s.points):
            if not math.isfinite(p.value):
                firsts.append((p.step, p.line or 0, s, i))
                break
    if not firsts:
        return None
    firsts.sort(key=lambda t: (t[0], t[1]))
    step, _, s, i = firsts[0]
    p = s.points[i]
    prev = next((q for q in reversed(s.points[:i]) if math.isfinite(q.value)), None)
    lines = ([prev.line] if prev is not None and prev.line is not None else []) + [t[2].points[t[3]].line for t in firsts
                                                                                   if t[2].points[t[3]].line is not None]
    recovers = any(math.isfinite(q.value) for q in s.points[i + 1:])
    msg = f"{s.name} is {fmt(p.value)} at {at(p)} (first non-finite" + (ALREADY_NONFINITE if i == 0 else "")
    msg += f"; last finite {fmt(prev.value)} at {at(prev)}" if prev is not None else ""
    msg += f"; {len(firsts)} series affected: {', '.join(t[2].name for t in firsts[:5])})"
    if recovers:
        msg += "; it returns to finite values later (skipped steps)"
    o = locate(s.points, i)  # the first non-finite point, or the start of the climb that led to it
    if o.kind != "nonfinite":
        q = s.points[o.index]
        msg += f"; it climbs from {at(q)} ({fmt(q.value)}) before it"
    return attach(Hit(list(dict.fromkeys(lines))[:8], msg, [t[2].name for t in firsts]), s.points, o.index, o.kind,
                  s.name, detected=p)
