"""Stream a large (or gzip/zstd-compressed) log and keep only the lines that can matter.

A multi-pattern prefilter finds the lines that carry a metric, an event, a launch command or a rule's
regex; everything else is counted, not kept. The candidate lines keep their real 1-based numbers, so the
rest of the engine (normalise, extract, rules) runs unchanged on a sparse log. The first and last lines of
the file are always kept (launch commands sit at the top; a hang shows at the bottom), and so are the lines
after each ``Traceback`` (its frames).

Engines, fastest first: hyperscan (SIMD multi-pattern), google-re2 (linear time), Python ``re`` (slow on
alternations; used only when neither is installed). Patterns an engine cannot compile (look-behind,
back-references) are relaxed; if one still fails it is listed in ``unprefiltered`` (lines matching only it are
not seen in streaming mode).
"""
from __future__ import annotations

import gzip
import io
import os
import re
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

CHUNK = 8 * 2**20
HEAD_LINES = 3000
TAIL_LINES = 1000
TRACEBACK_CONTEXT = 80
MAX_CANDIDATES = 400_000

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


def _top_level_branches(p: str) -> list[str]:
    out, depth, cur, i = [], 0, "", 0
    while i < len(p):
        c = p[i]
        if c == "\\" and i + 1 < len(p):
            cur += p[i:i + 2]
            i += 2
            continue
        depth += c == "("
        depth -= c == ")"
        if c == "|" and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    return out + [cur]


_NEEDS_RELAX = re.compile(r"\(\?<?[=!]|\\[1-9]|\(\?i:|\\u[0-9a-fA-F]{4}")


def _relax(p: str) -> str | None:
    """Drop constructs hyperscan/RE2 reject so the prefilter over-approximates the Python pattern (the exact
    pattern is re-checked on each kept line): look-around assertions are removed, inline flag groups become
    plain groups, and top-level alternatives that use back-references are dropped (no safe relaxation)."""
    branches = [b for b in _top_level_branches(p) if not re.search(r"\\[1-9]", b)]
    if not branches:
        return None  # nothing safe to prefilter with: the caller scans every line for this pattern
    p = "|".join(branches)
    p = re.sub(r"\(\?<?[=!][^()]*\)", "", p)          # look-ahead / look-behind without nested groups
    return p.replace("(?i:", "(?:")


def build_patterns(rule_patterns: Iterable[str]) -> list[tuple[str, bool]]:
    """(pattern, caseless) for the prefilter: base markers, event patterns, rule regex signals."""
    from grpo_debug.tools.engine.events import EVENT_PATTERNS

    out = [(p, False) for p in BASE_MARKERS]
    out += [(p, "(?i" in p) for p in EVENT_PATTERNS.values()]
    out += [(p, True) for p in rule_patterns]
    return out


class _Engine:
    def __init__(self, patterns: list[tuple[str, bool]]):
        # an inline (?i: group is compiled as a caseless pattern (relaxing drops the inline flag)
        patterns = [(p, ci or "(?i" in p) for p, ci in patterns]
        self.patterns = patterns
        self.kind = "re"
        self.unprefiltered: list[str] = []
        self._hs = self._re2 = self._py = None
        try:
            self._init_hyperscan()
            self.kind = "hyperscan"
            return
        except Exception:  # noqa: BLE001 - not installed or a platform without wheels
            pass
        try:
            self._init_re2()
            self.kind = "re2"
            return
        except Exception:  # noqa: BLE001
            pass
        self._py = []
        for i, (p, ci) in enumerate(patterns):
            try:
                self._py.append((i, re.compile(p, re.M | (re.I if ci else 0))))
            except re.error:
                self.unprefiltered.append(p)

    def _init_hyperscan(self) -> None:
        import hyperscan

        def compile_db(items: list[tuple[int, str, int]]):
            db = hyperscan.Database()
            db.compile(expressions=[e.encode() for _, e, _ in items], ids=[i for i, _, _ in items],
                       elements=len(items), flags=[f for _, _, f in items])
            return db

        items = []
        for i, (p, ci) in enumerate(self.patterns):
            q = _relax(p) if _NEEDS_RELAX.search(p) else p
            if q is None:
                self.unprefiltered.append(p)
            else:  # MULTILINE: ^ and $ anchor at every line of the joined buffer
                items.append((i, q, hyperscan.HS_FLAG_MULTILINE | (hyperscan.HS_FLAG_CASELESS if ci else 0)))
        try:
            self._hs = compile_db(items)  # the common case: every pattern compiles as it is
            return
        except Exception:  # noqa: BLE001 - some pattern needs relaxing: probe them one by one
            pass
        ok = []
        for i, p, f in items:
            for cand in (c for c in (p, _relax(p)) if c is not None):
                try:
                    compile_db([(i, cand, f)])
                    ok.append((i, cand, f))
                    break
                except Exception:  # noqa: BLE001
                    continue
            else:
                self.unprefiltered.append(self.patterns[i][0])  # the original text: callers look it up
        self._hs = compile_db(ok)

    def _init_re2(self) -> None:
        import re2

        comp = []
        for i, (p, ci) in enumerate(self.patterns):
            for cand in (c for c in (p, _relax(p)) if c is not None):
                try:
                    comp.append((i, re2.compile(("(?im)" if ci else "(?m)") + cand)))
                    break
                except Exception:  # noqa: BLE001
                    continue
            else:
                self.unprefiltered.append(p)
        self._re2 = comp

    def scan(self, buf: bytes) -> Iterator[tuple[int, int]]:
        """(pattern index, match end offset) for every match in ``buf``."""
        if self._hs is not None:
            hits: list[tuple[int, int]] = []

            def on(pid: int, frm: int, to: int, flags: int, ctx: object) -> None:
                hits.append((pid, to))
            self._hs.scan(buf, match_event_handler=on)
            return iter(hits)
        if self._re2 is not None:
            text = buf.decode("latin-1")  # 1 byte -> 1 char: offsets stay byte offsets
            return ((i, m.end()) for i, r in self._re2 for m in r.finditer(text))
        text = buf.decode("latin-1")  # 1 byte -> 1 char: offsets stay byte offsets
        return ((i, m.end()) for i, r in self._py for m in r.finditer(text))


_MATCHERS: dict[tuple[tuple[str, bool], ...], "_Engine"] = {}
_MATCHERS_LOCK = threading.Lock()  # a hyperscan database has one scratch space: one scan at a time


PREFILTER_MIN_BYTES = 256 * 2**10  # below this, compiling a multi-pattern database costs more than it saves


def lines_matching(patterns: list[tuple[str, bool]], texts: list[str],
                   min_bytes: int = PREFILTER_MIN_BYTES) -> dict[int, set[int]]:
    """Pattern index -> indices of ``texts`` where the (prefilter form of the) pattern matches, in one pass
    of the fastest engine over the joined texts. Callers confirm each hit with the exact Python pattern;
    patterns the engine cannot take are absent (the caller then scans those itself), and so is everything
    when the texts are smaller than ``min_bytes``."""
    import bisect

    if sum(len(t) for t in texts) < min_bytes:
        return {}
    key = tuple(patterns)
    enc = [t.encode("utf-8", "replace") for t in texts]
    offsets, pos = [], 0
    for b in enc:
        offsets.append(pos)
        pos += len(b) + 1
    data = b"\n".join(enc)
    with _MATCHERS_LOCK:
        eng = _MATCHERS.get(key)
        if eng is None:
            eng = _MATCHERS[key] = _Engine(list(patterns))
        found = list(eng.scan(data))
    out: dict[int, set[int]] = {i: set() for i, (p, _) in enumerate(patterns) if p not in eng.unprefiltered}
    for pid, end in found:
        out.setdefault(pid, set()).add(bisect.bisect_right(offsets, max(0, end - 1)) - 1)
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


def scan_stream(stream: io.BufferedIOBase, rule_patterns: Iterable[str] = (), *, size: int | None = None,
                progress: Callable[[int, int | None], None] | None = None) -> SparseLog:
    """Read ``stream`` in chunks and keep the candidate lines (see module docstring)."""
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
    tb = b"Traceback (most recent"
    while True:
        block = stream.read(CHUNK)
        if block:
            raw_read += len(block)
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
        # which line starts are candidates in this chunk
        starts: set[int] = set()
        for _pid, end in eng.scan(chunk):
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
            pending_context = 0
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
        # number the candidate lines: count newlines between successive starts (C-speed bytes.count)
        prev, n = 0, line_no
        for s in sorted(starts):
            n += chunk.count(b"\n", prev, s)
            prev = s
            e = chunk.find(b"\n", s)
            if len(out.lines) < MAX_CANDIDATES:
                out.lines.append((n + 1, chunk[s:e].decode("utf-8", "replace")))
            else:
                out.truncated = True
        pending_context = carry_context
        nl = chunk.count(b"\n")
        last_chunks = (last_chunks + [(line_no, chunk)])[-2:]  # the tail is cut from these at the end
        line_no += nl
        out.bytes_read += len(chunk)
        if progress:
            progress(raw_read, size)
        if not block:
            break
    tail: list[tuple[int, bytes]] = []
    for base, ch in last_chunks:
        parts = ch.split(b"\n")[:-1]
        tail += [(base + i + 1, ln) for i, ln in enumerate(parts)][-TAIL_LINES:]
    tail = tail[-TAIL_LINES:]
    kept = {n for n, _ in out.lines}
    out.lines += [(n, ln.decode("utf-8", "replace")) for n, ln in tail if n not in kept]
    out.lines.sort(key=lambda x: x[0])
    out.total_lines = line_no
    return out


def scan_file(path: str | os.PathLike, rule_patterns: Iterable[str] = (),
              progress: Callable[[int, int | None], None] | None = None) -> SparseLog:
    stream, size = open_stream(path)
    with stream:
        return scan_stream(stream, rule_patterns, size=size, progress=progress)
