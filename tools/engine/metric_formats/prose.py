"""Metric values stated in the prose of a report: a metric key the alias table knows, followed in the same sentence
by a number or a range (``train/train_rollout_logprob_abs_diff ... 在0.2~0.4之间``, ``grad_norm stays around 1.414``).

Bug reports often give the evidence in words instead of a log (INDEX.md of the corpus, "issue prose"). A mention
is read only when: the line is prose (at least 4 words, or CJK text) and no other shape read it; the key is a
metric of ``skills/aliases.yaml`` (``tools/run/names.metric_name``) written as a path or snake_case name; the
number follows within ``WINDOW`` characters, before any other key. A range ``a~b`` / ``a-b`` / ``a to b`` gives
both ends. Values are filed on the ``mention`` axis (independent observations, not a time series), each at the
line that states it.
"""
from __future__ import annotations

import re

from grpo_debug.tools.engine.values import to_float

WINDOW = 60
_KEY = re.compile(r"(?<![\w/])([A-Za-z][\w.]{0,60}(?:/[\w.]{1,60}){1,4}|[a-z][a-z0-9]{1,20}(?:_[a-z0-9]{1,20}){1,6})(?![\w/])", re.A)
# a number keeps its sign (``-0.9131``; a '-' after a word or number is a range's or a word's), its exponent in
# either case; a range ``a~b`` / ``a-b`` / ``a to b`` gives both ends
_NUM = re.compile(r"(?<![\w.-])(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
                  r"(?:\s{0,2}(?:~|-|–|to|and)\s{0,2}(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?))?", re.A)
_CJK = re.compile(r"[\u4e00-\u9fff\u3040-\u30ff]")


def _is_prose(t: str) -> bool:
    return len(t.split()) >= 4 or bool(_CJK.search(t))


# a printed metric record no other unit could read (a dict that does not parse, a verl line with a value it cannot
# read): not prose; left not understood rather than read as mentions
_RECORD = re.compile(r"""\{\s*['"]|\bstep:\s*\d+\s+-\s""")


def prose_mentions(ln, table, state: dict) -> bool:
    t = ln.text
    if len(t) < 12 or ("/" not in t and "_" not in t) or not any(c.isdigit() for c in t) or not _is_prose(t):
        return False
    if _RECORD.search(t):
        return False
    from grpo_debug.tools.run.names import metric_name

    keys = [m for m in _KEY.finditer(t)]
    got = False
    for i, m in enumerate(keys):
        if metric_name(m.group(1)) is None:
            continue
        stop = min(m.end() + WINDOW, keys[i + 1].start() if i + 1 < len(keys) else len(t))
        n = _NUM.search(t, m.end(), stop)
        if not n:
            continue
        for g in (n.group(1), n.group(2)):
            v = to_float(g) if g else None
            if v is not None:
                state["mention"] = state.get("mention", 0) + 1
                table.add("prose", float(state["mention"]), ln.no, {m.group(1): v})
                table.axes[m.group(1)] = "mention"
                got = True
    return got
