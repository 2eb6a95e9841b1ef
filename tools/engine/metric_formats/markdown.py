"""Markdown tables of metrics pasted in issues (``| a | b |`` rows under a ``|---|---|`` separator).

Three shapes, told apart by the header and the first column:

- a step column (header ``step``/``iteration``/``iter``/``global_step``/``epoch``): each row is one step, each
  other column a series named by its header (``| Step | grad_norm |``, ``| 39 | NaN |``);
- metric per row (first cells read as metric keys: ``completions/mean_length``, ``reward_std``): the first number of
  the row is the value, at the table's ordinal step;
- a row per variant (first cell a label such as a backend name, other cells numbers): each column is a series,
  each row one point on the ``row`` axis (``table.axes``: the run model files these series on that axis).

Cells are cleaned of markdown emphasis and code marks (``**0.21**``, ``` `1` ```), approximation signs
(``~``, ``≈``) and a leading ``up to``; a cell whose first word is not a number is not a value. GitHub-flavoured
markdown tables: https://github.github.com/gfm/#tables-extension-
"""
from __future__ import annotations

import re

from grpo_debug.tools.engine.values import to_float

_SEP_CELL = re.compile(r":?-{3,}:?")
_STEP_HEADER = re.compile(r"^(?:step|steps|iteration|iter|global[ _]step|epoch)$", re.I)
_METRIC_KEY = re.compile(r"^[A-Za-z][\w.\-]*(?:/[\w.\-]+)+$|^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")
_CLEAN = re.compile(r"[*`~≈]|^\s*up to\s+", re.I)
MAX_ROWS = 5000


def cells(row: str) -> list[str]:
    """The cells of one table row, stripped."""
    return [c.strip() for c in row.strip().strip("|").split("|")]


def cell_value(c: str) -> float | None:
    """The number a cell states (``**~0.21**`` -> 0.21, ``0 (bit-exact)`` -> 0.0), or None."""
    words = _CLEAN.sub("", c).strip().split()
    return to_float(words[0].rstrip("%,")) if words else None


def _key(c: str) -> str:
    return _CLEAN.sub("", c).strip()


def _rows(lines, i: int) -> int:
    j = i + 2
    while j < len(lines) and j - i < MAX_ROWS and lines[j].text.lstrip().startswith("|"):
        j += 1
    return j


def _emit(lines, i: int, end: int, table, state: dict) -> int:
    head = [_key(c) for c in cells(lines[i].text)]
    rows = [(lines[j].no, cells(lines[j].text)) for j in range(i + 2, end)]
    state["md_tables"] = state.get("md_tables", 0) + 1
    got = 0
    if head and _STEP_HEADER.match(head[0]):
        for no, cs in rows:
            step = cell_value(cs[0]) if cs else None
            vals = {h: v for h, c in zip(head[1:], cs[1:]) if h and (v := cell_value(c)) is not None}
            if step is not None and vals:
                table.add("markdown", step, no, vals)
                got += 1
        return got
    if rows and all(_METRIC_KEY.match(_key(cs[0])) for _, cs in rows if cs and cs[0]):
        for no, cs in rows:
            v = next((x for c in cs[1:] if (x := cell_value(c)) is not None), None)
            if cs and v is not None:
                table.add("markdown", float(state["md_tables"]), no, {_key(cs[0]): v})
                got += 1
        return got
    for r, (no, cs) in enumerate(rows, 1):
        vals = {h: v for h, c in zip(head[1:], cs[1:]) if h and (v := cell_value(c)) is not None}
        if vals:
            table.add("markdown", float(r), no, vals)
            table.axes.update({k: "row" for k in vals})
            got += 1
    return got


def markdown_table(lines, i: int, table, state: dict) -> int:
    """Read one markdown table whose header is ``lines[i]``; lines read, or 0."""
    t = lines[i].text
    if not t.lstrip().startswith("|") or i + 1 >= len(lines) or "-" not in lines[i + 1].text:
        return 0
    sep = cells(lines[i + 1].text)
    if not sep or not all(_SEP_CELL.fullmatch(c) for c in sep):
        return 0
    end = _rows(lines, i)
    if not _emit(lines, i, end, table, state):
        return 0
    table.lines.update(ln.no for ln in lines[i:end])
    return end - i
