"""Space-separated metric summaries users type or paste: ``key: value   key: value`` (two or more pairs, at least
two spaces apart, nothing else on the line), e.g.
``completions/mean_length: 256   completions/clipped_ratio: 1   mean_terminated_length: 0``.

Consecutive summary lines describe the same moment and share one step (an ordinal that grows at each new group of
lines); a line with a step keyword is read by the built-in generic shape first (engine/metrics.py).
"""
from __future__ import annotations

import re

from grpo_debug.tools.engine.values import to_float

_PAIR = re.compile(r"(?<![\w./-])([A-Za-z_][\w./-]{0,120}):\s?(\S+)")  # keys start only at a key's start: linear
_GAP = re.compile(r"\s{2,}|\t")


def kv_summary(ln, table, state: dict) -> bool:
    t = ln.text.strip()
    if t.count(":") < 2 or "  " not in t and "\t" not in t:
        return False
    vals = {}
    for part in _GAP.split(t):
        m = _PAIR.fullmatch(part)
        v = to_float(m.group(2)) if m else None
        if v is None:
            return False
        vals[m.group(1)] = v
    if len(vals) < 2:
        return False
    if state.get("kv_last") != ln.no - 1:
        state["kv_step"] = state.get("kv_step", 0) + 1
    state["kv_last"] = ln.no
    table.add("kv_summary", float(state["kv_step"]), ln.no, vals)
    return True
