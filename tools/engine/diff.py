"""All the edits of an answer as one change of the file: edits of the same line merged into one, and a
unified diff that ``patch -p0 FILE`` applies (GNU diff format, '\\ No newline at end of file' kept).

Each edit replaces line ``line`` (which reads ``old``) by ``new``; ``new`` may hold several lines (an added
key goes after its anchor line). Two edits of one line made independently (two findings on a one-line
launch command) are merged character by character: each one's changes to ``old`` are applied together,
and insertions at the same place are kept in order. A line left holding only a continuation backslash
(a flag removed from its own line) is dropped from the file.
"""
from __future__ import annotations

import difflib
import re

from grpo_debug.tools.models import Edit


def merge_line(old: str, news: list[str]) -> str | None:
    """``old`` with the changes of every text in ``news`` (each an edit of ``old``); None when two of them
    change the same characters differently."""
    regions: dict[tuple[int, int, str], int] = {}
    for order, new in enumerate(news):
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            if tag != "equal":
                regions.setdefault((i1, i2, new[j1:j2]), order)  # the same change from two edits counts once
    out, pos = [], 0
    for (i1, i2, rep), _ in sorted(regions.items(), key=lambda r: (r[0][0], r[0][1], r[1])):
        if i1 < pos:
            return None
        out += [old[pos:i1], rep]
        pos = i2
    out.append(old[pos:])
    return "".join(out)


def merge_edits(edits: list[Edit]) -> tuple[dict[int, tuple[str, str]], list[Edit]]:
    """line -> (old, merged new) for every located edit; and the edits that could not be merged or placed."""
    by_line: dict[int, list[Edit]] = {}
    left: list[Edit] = []
    for e in edits:
        if e.line is None or e.old is None:
            left.append(e)
        else:
            by_line.setdefault(e.line, []).append(e)
    merged: dict[int, tuple[str, str]] = {}
    for no, es in by_line.items():
        old = es[0].old
        news = list(dict.fromkeys(e.new for e in es if e.old == old))
        m = merge_line(old, news) if len(news) > 1 else news[0]
        if m is None:
            merged[no] = (old, news[0])
            left += [e for e in es if e.new != news[0]]
        else:
            merged[no] = (old, m)
        left += [e for e in es if e.old != old]
    return merged, left


def apply_merged(text: str, merged: dict[int, tuple[str, str]]) -> tuple[str, list[int]]:
    """``text`` with the merged edits; and the line numbers whose ``old`` no longer matched."""
    lines = text.split("\n")
    eol = "\r\n" if "\r\n" in text else "\n"
    stale: list[int] = []
    drop: set[int] = set()
    for no, (old, new) in merged.items():
        i = no - 1
        if not 0 <= i < len(lines) or lines[i].rstrip("\r") != old:
            stale.append(no)
            continue
        cr = "\r" if lines[i].endswith("\r") else ""
        continued = i > 0 and lines[i - 1].rstrip("\r").endswith("\\")
        if (re.fullmatch(r"\s*\\", new) and continued) or (not new.strip() and old.strip() and not continued):
            drop.add(i)  # a flag removed from its own line: nothing is left but blanks or the continuation
            continue
        lines[i] = new.replace("\n", eol) + cr
    return "\n".join(x for i, x in enumerate(lines) if i not in drop), stale


def unified_diff(text: str, new_text: str, label: str) -> str:
    """A unified diff of ``text`` -> ``new_text`` naming ``label`` on both sides (``patch -p0`` or
    ``patch FILE`` applies it); '' when nothing changes."""
    if text == new_text:
        return ""
    a, b = text.splitlines(keepends=True), new_text.splitlines(keepends=True)
    out = []
    for ln in difflib.unified_diff(a, b, fromfile=label, tofile=label):
        out.append(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n")
    return "".join(out)


def file_diff(text: str, edits: list[Edit], label: str) -> tuple[str, list[Edit]]:
    """The unified diff of every located edit of ``text``; and the edits it could not carry."""
    merged, left = merge_edits(edits)
    new_text, stale = apply_merged(text, merged)
    left += [e for e in edits if e.line in stale]
    return unified_diff(text, new_text, label), left
