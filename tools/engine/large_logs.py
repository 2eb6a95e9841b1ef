"""Stream a large (or gzip/zstd-compressed) log and keep only the lines that can matter.

A multi-pattern prefilter finds the lines that carry a metric, an event, a launch command or a rule's
regex; everything else is counted, not kept. The candidate lines keep their real 1-based numbers, so the
rest of the engine (normalise, extract, rules) runs unchanged on a sparse log. The first and last lines of
the file are always kept (launch commands sit at the top; a hang shows at the bottom), and so are the lines
after each ``Traceback`` (its frames).

The multi-pattern engines are in prefilter.py. A pattern no engine can take is listed in ``unprefiltered``
(lines matching only it are not seen in streaming mode).
"""
from __future__ import annotations

import gzip
import io
import os
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

from grpo_debug.tools.engine.events import EVENT_PATTERNS
from grpo_debug.tools.engine.prefilter import _Engine

CHUNK = 8 * 2**20
HEAD_LINES = 3000
TAIL_LINES = 1000
TRACEBACK_CONTEXT = 80
MAX_CANDIDATES = 400_000
MAX_COPIES = 1000  # copies kept of one identical candidate line
MAX_DECOMPRESSED_BYTES = 256 * 2**20  # of a .gz/.zst log: the rest is not read (a note says so)

# Markers of lines the extractors use: metric formats, tracebacks and exception lines, launch commands,
# config prints. Event patterns and rule regexes are added by build_patterns().
BASE_MARKERS = [
    r"step:\s*\d", r"\b(?:step|rollout|perf|eval|Global step|global_step)[: ]\s*\d+[:,]", r"iteration\s+\d+\s*/",
    r"\{'[\w/ .-]+': ", r'\{"[\w/ .-]+": ', r"[Oo]verflow", r"OVERFLOW", r"skipped=\d", r"Traceback \(most recent",
    r"\w(?:Error|Exception|Exit|Interrupt)\b", r"^\s*Exception: ", r"python3? |torchrun|deepspeed |ray (?:job submit|start)|accelerate launch",
    r"config\.py:\d+:print", r"(?:Config|Arguments|Args)\(", r"\b(?:nan|inf|NaN|Inf)\b",
]


@dataclass
class SparseLog:
    lines: list[tuple[int, str]] = field(default_factory=list)  # (1-based line number, raw text)
    total_lines: int = 0
    bytes_read: int = 0
    engine: str = "re"
    unprefiltered: list[str] = field(default_factory=list)
    truncated: bool = False
    capped: int | None = None  # bytes after which reading stopped (the input cap), None when read to the end
    copies: dict[bytes, int] = field(default_factory=dict, repr=False)  # kept copies of each candidate line
    repeats: int = 0  # candidate lines not kept: more than MAX_COPIES copies of the same text


def build_patterns(rule_patterns: Iterable[str]) -> list[tuple[str, bool]]:
    """(pattern, caseless) for the prefilter: base markers, event patterns, rule regex signals."""
    out = [(p, False) for p in BASE_MARKERS]
    out += [(p, "(?i" in p) for p in EVENT_PATTERNS.values()]
    out += [(p, True) for p in rule_patterns]
    return out


def open_stream(path: str | os.PathLike) -> tuple[io.BufferedIOBase, int]:
    """A binary stream over a plain, .gz or .zst file, and its size on disk (bytes)."""
    p = os.fspath(path)
    size = os.path.getsize(p)
    with open(p, "rb") as fh:
        magic = fh.read(4)
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(p, "rb"), size
    if magic == b"\x28\xb5\x2f\xfd":
        try:
            import zstandard
        except ImportError as e:
            raise ValueError(f"{p} is zstd-compressed; pip install zstandard to read it (or decompress it first)") from e
        return zstandard.ZstdDecompressor().stream_reader(open(p, "rb")), size
    return open(p, "rb"), size


def _candidate_starts(chunk: bytes, eng: _Engine, pending_context: int, line_no: int,
                      room: int = MAX_CANDIDATES) -> tuple[set[int], int]:
    """Offsets of the line starts to keep in ``chunk`` (prefilter hits, traceback frames, the file's head)
    and how many traceback lines go on into the next chunk."""
    tb = b"Traceback (most recent"
    # which line starts are candidates in this chunk
    starts: set[int] = set()
    for _pid, end in eng.scan(chunk, limit=room):
        starts.add(chunk.rfind(b"\n", 0, max(0, end - 1)) + 1)
    # Traceback context: the following lines of each traceback
    carry_context = 0
    if pending_context:
        e = 0
        for _ in range(pending_context):
            if e >= len(chunk):
                break
            starts.add(e)
            e = chunk.find(b"\n", e) + 1
            if e <= 0:
                break
    pos = chunk.find(tb)
    while pos != -1:
        s = chunk.rfind(b"\n", 0, pos) + 1
        e = s
        for k in range(TRACEBACK_CONTEXT):
            e = chunk.find(b"\n", e) + 1
            if e <= 0 or e >= len(chunk):  # the traceback goes on in the next chunk
                carry_context = max(carry_context, TRACEBACK_CONTEXT - k)
                break
            starts.add(e)
        pos = chunk.find(tb, pos + 1)
    if line_no < HEAD_LINES:  # the head of the file
        e = 0
        for _ in range(HEAD_LINES - line_no):
            starts.add(e)
            e = chunk.find(b"\n", e) + 1
            if e <= 0 or e >= len(chunk):
                break
    return starts, carry_context


def _keep_lines(out: SparseLog, chunk: bytes, starts: set[int], line_no: int) -> None:
    """Append the lines at ``starts`` to ``out`` with their 1-based numbers (``line_no`` lines came before)."""
    # number the candidate lines: count newlines between successive starts (C-speed bytes.count)
    prev, n = 0, line_no
    for s in sorted(starts):
        n += chunk.count(b"\n", prev, s)
        prev = s
        e = chunk.find(b"\n", s)
        if len(out.lines) >= MAX_CANDIDATES:
            out.truncated = True
            continue
        raw = chunk[s:e]
        seen = out.copies.get(raw, 0)
        if seen >= MAX_COPIES:  # the same line again and again (a flood of `nan`): counted, not kept
            out.repeats += 1
            continue
        if len(out.copies) < MAX_CANDIDATES:
            out.copies[raw] = seen + 1
        out.lines.append((n + 1, raw.decode("utf-8", "replace")))


def _add_tail(out: SparseLog, last_chunks: list[tuple[int, bytes]]) -> None:
    """Keep the file's last TAIL_LINES lines (a hang shows at the bottom) and sort the kept lines."""
    tail: list[tuple[int, bytes]] = []
    for base, ch in last_chunks:  # the last lines of each chunk, found from its end (never split it whole)
        start = len(ch)
        for _ in range(TAIL_LINES):
            nl = ch.rfind(b"\n", 0, max(0, start - 1))
            start = nl + 1
            if nl < 0:
                break
        part = ch[start:].split(b"\n")[:-1]
        first = base + ch.count(b"\n", 0, start) + 1
        tail += [(first + i, ln) for i, ln in enumerate(part)]
    tail = tail[-TAIL_LINES:]
    kept = {n for n, _ in out.lines}
    out.lines += [(n, ln.decode("utf-8", "replace")) for n, ln in tail if n not in kept]
    out.lines.sort(key=lambda x: x[0])


def scan_stream(stream: io.BufferedIOBase, rule_patterns: Iterable[str] = (), *, size: int | None = None,
                progress: Callable[[int, int | None], None] | None = None, max_bytes: int | None = None) -> SparseLog:
    """Read ``stream`` in chunks and keep the candidate lines (see module docstring); stop after ``max_bytes``
    (decompressed) bytes when given (``capped`` then says so)."""
    rule_patterns = list(dict.fromkeys(rule_patterns))
    patterns = build_patterns(rule_patterns)
    eng = _Engine(patterns)
    out = SparseLog(engine=eng.kind, unprefiltered=list(eng.unprefiltered))
    last_chunks: list[tuple[int, bytes]] = []
    line_no = 0          # lines completed before the current chunk
    carry = b""
    pending_context = 0  # lines still to keep after a Traceback that crossed the chunk boundary
    skip_to_newline = False
    raw_read = 0
    while True:
        block = stream.read(CHUNK) if max_bytes is None or raw_read < max_bytes else b""
        if block:
            raw_read += len(block)
            if max_bytes is not None and raw_read >= max_bytes:
                out.capped = max_bytes
            if skip_to_newline:
                nlpos = block.find(b"\n")
                if nlpos == -1:
                    continue
                block, skip_to_newline = block[nlpos:], False
        buf = carry + block
        if not block:
            if not buf:
                break
            buf += b"" if buf.endswith(b"\n") else b"\n"
        cut = buf.rfind(b"\n") + 1
        if cut == 0:  # no newline in the whole chunk: a huge line; keep reading (bounded by the input cap)
            carry = buf
            if not block:
                break
            if len(carry) > 64 * 2**20:  # a single line over 64 MiB: keep its start, drop the rest of it
                carry = carry[: 20_000]
                skip_to_newline = True
            continue
        chunk, carry = buf[:cut], buf[cut:]
        room = MAX_CANDIDATES - len(out.lines) - out.repeats  # repeats count: a flood stops the scan too
        if room > 0:
            starts, carry_context = _candidate_starts(chunk, eng, pending_context, line_no, room)
        else:  # the candidate cap is reached: the rest is only counted (its tail is kept below)
            starts, carry_context, out.truncated = set(), 0, True
        _keep_lines(out, chunk, starts, line_no)
        pending_context = carry_context
        nl = chunk.count(b"\n")
        last_chunks = (last_chunks + [(line_no, chunk)])[-2:]  # the tail is cut from these at the end
        line_no += nl
        out.bytes_read += len(chunk)
        if progress:
            progress(raw_read, size)
        if not block:
            break
    out.copies = {}
    _add_tail(out, last_chunks)
    out.total_lines = line_no
    return out


def scan_file(path: str | os.PathLike, rule_patterns: Iterable[str] = (),
              progress: Callable[[int, int | None], None] | None = None, max_bytes: int | None = None) -> SparseLog:
    stream, size = open_stream(path)
    compressed = not isinstance(stream, io.BufferedReader)
    with stream:  # a compressed file is read up to MAX_DECOMPRESSED_BYTES (a 1 MB gzip can hold gigabytes)
        return scan_stream(stream, rule_patterns, size=size, progress=progress,
                           max_bytes=max_bytes if max_bytes is not None else (MAX_DECOMPRESSED_BYTES if compressed else None))
