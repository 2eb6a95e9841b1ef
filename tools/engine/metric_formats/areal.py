"""AReaL console metrics: ``Train step N/M done.`` then ``Stats (1/1):`` and a tabulate ``fancy_grid`` table whose
rows hold up to four ``key | value`` pairs.

Source: inclusionAI/AReaL areal/utils/stats_logger.py ``StatsLogger.commit`` logs
``f"Epoch {e}/{E} Step {s}/{S} Train step {global_step + 1}/{T} done."`` then ``print_stats`` ->
``logger.info("\\n" + tabulate_stats(stats))``; areal/utils/printing.py ``tabulate_stats`` lays the items out
column-major, 4 pairs a row, ``tabulate(..., floatfmt=".4e", tablefmt="fancy_grid")``. Rows are ``│``-separated
(``|`` for the plain ``grid`` style is read too); border lines (``╒═╤``, ``├─┼``, ``+--+``) are skipped.
The step is the last ``Train step N`` seen (else the table's ordinal).
"""
from __future__ import annotations

import re

from grpo_debug.tools.engine.values import to_float

_DONE = re.compile(r"\bTrain step (\d+)/\d+ done")
_BORDER = "╒╘├╞┌└+"
MAX_ROWS = 2000


def _pairs(row: str) -> dict[str, float]:
    cells = [c.strip() for c in re.split(r"[│|]", row.strip().strip("│|"))]
    out = {}
    for k, v in zip(cells[0::2], cells[1::2]):
        f = to_float(v)
        if k and f is not None and to_float(k) is None:
            out[k] = f
    return out


def areal_grid(lines, i: int, table, state: dict) -> int:
    """Read one grid table starting at ``lines[i]`` (its top border); lines read, or 0. Also notes ``Train step``."""
    t = lines[i].text
    if "Train step" in t and (m := _DONE.search(t)):
        state["areal_step"] = float(m.group(1))
        return 0
    s = t.lstrip()
    if not s or s[0] not in "╒┌+" or "═" not in s and "─" not in s and "-" not in s[:3]:
        return 0
    j, got = i + 1, 0
    state["areal_tables"] = state.get("areal_tables", 0) + 1
    step = state.get("areal_step", float(state["areal_tables"]))
    while j < len(lines) and j - i < MAX_ROWS:
        r = lines[j].text.lstrip()
        if not r or (r[0] not in "│|" and r[0] not in _BORDER):
            break
        if r[0] in "│|":
            vals = _pairs(r)
            if vals:
                table.add("areal", step, lines[j].no, vals)
                got += 1
        j += 1
    if not got:
        state["areal_tables"] -= 1
        return 0
    table.lines.update(ln.no for ln in lines[i:j])
    return j - i
