"""Config blocks inside a mixed paste: a YAML/JSON config in a markdown code fence, in issue prose, before or
after log lines, or after log lines kept in ``#`` comments.

The whole-document reader (facts.py) only reads an input that is one document. Real reports paste a config
between prose and a log, so this reader finds each block and flattens it with the same safe loader
(facts.flatten_document -> documents.py), keeping the input's own line numbers:

- a fenced block (```` ```yaml ````, ```` ```json ````, or an unlabelled fence whose lines read as a mapping);
- an unfenced run of mapping lines (``key: value`` at the left margin, indented children, ``- item`` lists and
  comments) holding at least :data:`MIN_KEYS` keys.

Log-shaped lines (``INFO: ...``, ``ValueError: ...``, ``Step 3: ...``) never start a block: a top-level key is
lower-case like a config key. A block that does not parse is skipped (never an exception).
"""
from __future__ import annotations

import re

from grpo_debug.tools.engine.facts import FactSet, flatten_document
from grpo_debug.tools.engine.normalize import Line

MIN_KEYS = 2
MAX_BLOCK_LINES = 2000
_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)\s*$")
_TOP_KEY = re.compile(r"^[a-z_][\w.-]*:(?:\s|$)")
_CHILD = re.compile(r"^\s+(?:[\w.\"'-]+:(?:\s|$)|- |#)|^- ")
_COMMENT = re.compile(r"^\s*#")


def _is_block_line(t: str) -> bool:
    return bool(_TOP_KEY.match(t) or _CHILD.match(t) or _COMMENT.match(t))


def _blocks(lines: list[Line]) -> list[tuple[list[Line], str]]:
    """(lines of the block, fence language or '') for every candidate block, in order."""
    out: list[tuple[list[Line], str]] = []
    i, n = 0, len(lines)
    while i < n:
        m = _FENCE.match(lines[i].raw)
        if m:
            j = i + 1
            while j < n and not (_FENCE.match(lines[j].raw) and lines[j].raw.strip().startswith(m.group(1)[0])):
                j += 1
            if j - i - 1 <= MAX_BLOCK_LINES:
                out.append((lines[i + 1:j], m.group(2).lower()))
            i = j + 1
            continue
        if _TOP_KEY.match(lines[i].raw):
            j = i
            while j < n and j - i < MAX_BLOCK_LINES and (_is_block_line(lines[j].raw) or not lines[j].raw.strip()) \
                    and not _FENCE.match(lines[j].raw):
                j += 1
            out.append((lines[i:j], ""))
            i = max(j, i + 1)
            continue
        i += 1
    return out


def block_facts(fs: FactSet, lines: list[Line]) -> int:
    """Add the facts of every config block of ``lines`` to ``fs`` (keys already set on the same line are not
    added twice); returns the number of blocks read."""
    have = {(f.key, f.line) for f in fs.facts}
    read = 0
    for block, lang in _blocks(lines):
        if lang and lang not in ("yaml", "yml", "json", "jsonc"):
            continue
        keys = sum(bool(_TOP_KEY.match(x.raw) or re.match(r"^\s+[\w.\"'-]+:(?:\s|$)", x.raw)) for x in block)
        if keys < MIN_KEYS and lang not in ("yaml", "yml", "json", "jsonc"):
            continue
        flat = flatten_document("\n".join(x.raw for x in block))
        if not flat:
            continue
        fmt = "json" if block and block[0].raw.lstrip().startswith("{") else "yaml"
        for key, val, no in flat:
            real = block[no - 1] if 0 < no <= len(block) else block[0]
            if (key, real.no) not in have:
                fs.add(key, val, real.no, fmt, real.text)
                have.add((key, real.no))
        fs.formats.add(f"embedded-{fmt}")
        fs.block_lines.update(x.no for x in block if x.raw.strip())
        read += 1
    return read
