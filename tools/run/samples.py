"""Rollout text samples a log prints (:class:`~grpo_debug.tools.run.model.Sample`).

Recognised: verl's reward managers print ``[prompt] ...``, ``[response] ...``, ``[ground_truth] ...``,
``[score] ...`` for the first ``num_examine`` samples of each data source
(verl/workers/reward_manager/naive.py, ``print("[prompt]", prompt_str)``); a response may run over several
lines, up to the next ``[role]`` marker or a metric/log line. Reports also quote model output inline: a span of at
least ``MIN_QUOTED`` characters between backticks or double quotes that holds letters of a non-Latin script or
several words is a ``quoted`` sample (:func:`quoted_samples`). TRL's GRPO trainer prints samples as a rich table
in a panel titled ``Step N`` (trl/trainer/utils.py ``print_prompt_completions_sample``: columns Prompt, Completion,
one per reward, Advantage; a section line between samples): each Completion cell, its wrapped lines joined, is a
``response`` sample (:func:`rich_table_samples`). At most ``MAX_SAMPLES`` samples of each kind, each
cut to ``MAX_CHARS`` characters.
"""
from __future__ import annotations

import re

from grpo_debug.tools.run.model import Sample

MAX_SAMPLES = 50
MAX_CHARS = 4000
MAX_LINES = 60
MIN_QUOTED = 24
_ROLES = ("prompt", "response", "ground_truth", "score", "acc", "pred")
_ROLE = re.compile(r"^\[(" + "|".join(_ROLES) + r")\]\s?(.*)$")
_STOP = re.compile(r"^\(?\w+ pid=|^step:\s*\d|^\[?\d{4}-\d\d-\d\d|^Traceback|^\w+Error\b|^INFO\b|^WARNING\b")


def extract_samples(lines) -> list[Sample]:
    """Samples of normalised lines (``.no``, ``.text``), in input order."""
    out: list[Sample] = []
    cur: Sample | None = None
    for ln in lines:
        t = ln.text
        m = _ROLE.match(t) if t.startswith("[") else None
        if m is None and ln.source in _ROLES:  # normalize reads "[prompt] " as a launcher prefix
            m = _ROLE.match(f"[{ln.source}] {t}")
        if m:
            if len(out) >= MAX_SAMPLES:
                break
            cur = Sample(text=m.group(2)[:MAX_CHARS], role=m.group(1), lines=[ln.no])
            out.append(cur)
            continue
        if cur is not None and cur.role in ("prompt", "response") and len(cur.lines) < MAX_LINES and not _STOP.match(t):
            if len(cur.text) < MAX_CHARS:
                cur.text = (cur.text + "\n" + t)[:MAX_CHARS]
            cur.lines.append(ln.no)
        else:
            cur = None
    return out


def _spans(t: str, mark: str) -> list[str]:
    """The texts between pairs of ``mark`` in ``t`` (odd segments of a split: pairs never overlap)."""
    parts = t.split(mark)
    return parts[1:len(parts) - (len(parts) + 1) % 2:2] if len(parts) >= 3 else []


def quoted_samples(lines) -> list[Sample]:
    """Inline quotes of model output in a report (``"Let compiled觉得觉得ikان ..."``), one Sample per quote."""
    out: list[Sample] = []
    for ln in lines:
        t = ln.text
        if "`" not in t and '"' not in t:
            continue
        seen: set[str] = set()
        for q in _spans(t, "`") + _spans(t, '"'):
            key = q.strip().strip('"')
            if key in seen:
                continue  # the same quote inside a code span
            seen.add(key)
            if len(q) >= MIN_QUOTED and (" " in q.strip() or any(ord(c) > 0x2FF for c in q)):
                out.append(Sample(text=q[:MAX_CHARS], role="quoted", lines=[ln.no]))
                if len(out) >= MAX_SAMPLES:
                    return out
    return out


_STEP_TITLE = re.compile(r"\bStep (\d+)\b")
_CELL_SPLIT = re.compile(r"[│┃]")


def _rich_rows(lines, i: int, col: int, step: float | None, out: list[Sample]) -> int:
    """Read the body of one rich table whose header is ``lines[i]``; returns the index after it."""
    cur: Sample | None = None
    j = i + 1
    while j < len(lines) and j - i < 2000:
        t = lines[j].text.strip()
        if not t.startswith(("│", "┃")):
            break
        if "─" in t or "━" in t:  # a border or section line: the current cell is complete
            cur = None
            if "└" in t or "┗" in t:
                return j + 1
            j += 1
            continue
        cells = _CELL_SPLIT.split(t)
        frag = cells[col].strip() if col < len(cells) else ""
        if frag:
            if cur is None:
                if len(out) >= MAX_SAMPLES:
                    return j
                cur = Sample(text="", role="response", step=step, lines=[])
                out.append(cur)
            cur.text = (cur.text + " " + frag).strip()[:MAX_CHARS]
            cur.lines.append(lines[j].no)
        j += 1
    return j


def rich_table_samples(lines) -> list[Sample]:
    """Completions of TRL's rich sample tables, one Sample per table row."""
    out: list[Sample] = []
    i = 0
    while i < len(lines):
        t = lines[i].text
        if "┃" in t and "Completion" in t:
            cells = [c.strip() for c in _CELL_SPLIT.split(t.strip())]
            col = cells.index("Completion") if "Completion" in cells else -1
            if col >= 0:
                title = next((m for k in range(max(0, i - 3), i) if (m := _STEP_TITLE.search(lines[k].text))), None)
                i = _rich_rows(lines, i, col, float(title.group(1)) if title else None, out)
                continue
        i += 1
    return out


def all_samples(lines) -> list[Sample]:
    """Every kind of sample above, in this order: verl prints, TRL rich tables, quotes in a report."""
    return extract_samples(lines) + rich_table_samples(lines) + quoted_samples(lines)

