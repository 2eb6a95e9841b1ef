"""Stream a large (or gzip/zstd-compressed) log in bounded memory: every metric value, the lines that can matter.

A multi-pattern prefilter (prefilter.py) finds, per chunk, the candidate lines and the patterns each one
matches: metric shapes (``METRIC_MARKERS``), events, launch commands, rules' regexes. Then, in the chunk:

- metric lines (those a ``METRIC_MARKERS`` shape matches, and the head of the file) are normalised and their
  values extracted (engine/metrics.py, the same parsers as a small input; a verl step line whose key layout was
  seen before straight from its bytes, engine/verl_lines.py) into a
  :class:`~grpo_debug.tools.engine.series_store.SeriesStore` with each line's byte offset; the line itself is
  not kept (its text is read back by offset when a finding cites it). Other candidate lines are not read for
  metrics (the prose and ``key: value`` units would read chatter such as ``cuda:0`` as values);
- every other candidate line is kept by importance, under per-pattern quotas: the first ``QUOTA`` and the last
  ``QUOTA`` lines of each pattern (``ERROR_QUOTA`` for error and traceback patterns), so a pattern that matches
  routine chatter cannot flood memory. Each line not kept is counted per pattern with the line range it came
  from (``SparseLog.dropped``), never a silent cut;
- the first ``HEAD_LINES`` lines (launch commands, config prints), the last ``TAIL_LINES`` (a hang shows at the
  bottom) and the ``TRACEBACK_CONTEXT`` lines after each ``Traceback`` (its frames, within their own quota) are
  kept whole.

Kept lines have their real 1-based numbers, so the rest of the engine runs unchanged on a sparse log. A pattern
no engine can take is listed in ``unprefiltered`` (lines matching only it are not seen in streaming mode).
Without a store (``scan_stream(..., store=None)``), metric lines are kept as lines instead (at most
``MAX_CANDIDATES``; ``truncated`` says when more were found).
"""
from __future__ import annotations

import io
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Iterable

from grpo_debug.tools.engine.chatter_carry import apply_learned, record as record_chatter
from grpo_debug.tools.engine.events import EVENT_PATTERNS
from grpo_debug.tools.engine.line_quota import _KEEP, HEAD, TRACE, Dropped, Keeper, keep_lines, split_noisy  # noqa: F401
from grpo_debug.tools.engine.prefilter import _Engine, cached_engine
from grpo_debug.tools.engine.regex_literals import top_level_branches
from grpo_debug.tools.engine.verl_lines import VerlTemplates

CHUNK = 4 * 2**20
HEAD_LINES = 3000
TAIL_LINES = 1000
TRACEBACK_CONTEXT = 80
MAX_CANDIDATES = 400_000  # metric lines kept as lines when there is no series store
MAX_COPIES = 1000  # (kept for callers that read it; quotas now bound repeated lines)
# of a .gz/.zst log: the rest is not read (the summary says so). Memory is bounded whatever the size (streaming);
# the cap bounds the time a decompression bomb can take (the MCP server's per-call deadline also does).
MAX_DECOMPRESSED_BYTES = 16 * 2**30
# a compressed log is read up to MAX_RATIO times its size on disk (at least RATIO_FLOOR bytes): a real console log
# compresses 5-30x; a 1 MiB gzip of newlines holds 1 GiB (issue 21: five of them in a folder took 25 s)
MAX_RATIO, RATIO_FLOOR = 100, 64 << 20
HIT_LIMIT = 60_000     # prefilter hits per chunk before the chunk is looked at for a flood of chatter
MAX_REBUILDS = 6       # times the prefilter is rebuilt without chatter patterns

# Shapes of the metric lines engine/metrics.py and engine/metric_formats read (verl, slime/Relax/OpenRLHF
# dicts, HF/TRL dicts, Megatron, DeepSpeed, prime-rl, NeMo-RL, AReaL, ROLL, tqdm postfixes, generic steps).
METRIC_MARKERS = [
    r"step:\s*\d", r"\b(?:step|rollout|perf|eval|Global step|global_step)[: ]\s*\d+[:,]", r"iteration\s+\d+\s*/",
    r"\{'[\w/ .-]+': ", r'\{"[\w/ .-]+": ', r"[Oo]verflow", r"OVERFLOW", r"skipped=\d", r"\bStep \d+(?: \| |:\s*$|/\d+)",
    r"\bTrain step \d+/", r"metrics_tag: ", r"^\s*•\s", r"\[(?:step|iter(?:ation)?) \d+\]", r"\bstep=\d",
    r"(?:it/s|s/it), [\w/]+=",
]
TRACEBACK_MARKER = r"Traceback \(most recent"
# Markers of lines the extractors use: metric formats, tracebacks and exception lines, launch commands,
# config prints. Event patterns and rule regexes are added by build_patterns().
BASE_MARKERS = [
    r"step:\s*\d", r"\b(?:step|rollout|perf|eval|Global step|global_step)[: ]\s*\d+[:,]", r"iteration\s+\d+\s*/",
    r"\{'[\w/ .-]+': ", r'\{"[\w/ .-]+": ', r"[Oo]verflow", r"OVERFLOW", r"skipped=\d", TRACEBACK_MARKER,
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
    partly: dict[str, list[str]] = field(default_factory=dict)  # an unprefiltered pattern -> its alternatives kept
    truncated: bool = False
    capped: int | None = None  # bytes after which reading stopped (the input cap), None when read to the end
    ended_early: str | None = None  # why reading stopped before the end (a truncated .gz, a read error), else None
    unterminated: bool = False  # the last line has no newline: the log ends mid-line (cut, or still being written)
    repeats: int = 0
    patterns: list[tuple[str, bool]] = field(default_factory=list)  # the prefilter's patterns, by id
    matched: dict[int, int] = field(default_factory=dict)  # pattern id -> candidate lines it matched (not metric lines)
    dropped: dict[int, Dropped] = field(default_factory=dict)  # pattern id -> lines of it not kept
    quota: dict[int, int] = field(default_factory=dict)  # pattern id -> first and last lines of it kept
    store: object = None  # the SeriesStore the metric lines went into (None: they were kept as lines)
    metric_kept: set[int] = field(default_factory=set)  # kept lines that are also metric lines
    source: object = None  # where metric lines are read back from by offset: a path, a seekable stream, a spool file
    parent: dict[int, int] = field(default_factory=dict)  # pattern id of an alternative -> the pattern it came from
    demoted: dict[int, int] = field(default_factory=dict)  # pattern id -> line from which it was no longer scanned for
    chatter: dict[int, list[str]] = field(default_factory=dict)  # ... and which of its alternatives that was


def build_patterns(rule_patterns: Iterable[str | tuple[str, bool]]) -> list[tuple[str, bool]]:
    """(pattern, caseless) for the prefilter: metric markers first (ids 0..len(METRIC_MARKERS)-1), base markers,
    event patterns, rule regex signals (a plain string is caseless, as a rule's regex is by default; a
    (pattern, ignore_case) pair keeps its case: a case-sensitive pattern is also cheaper to scan for); each pattern
    once."""
    out = [(p, False) for p in METRIC_MARKERS + BASE_MARKERS]
    out += [(p, "(?i" in p) for p in EVENT_PATTERNS.values()]
    out += [(p, True) if isinstance(p, str) else (p[0], bool(p[1])) for p in rule_patterns]
    return list(dict.fromkeys(out))


def _candidate_patterns(patterns: list[tuple[str, bool]], unprefiltered: list[str]) -> dict[str, list[tuple[str, bool]]]:
    """For each pattern no engine could take whole: its alternatives an engine can take (regex_literals.
    candidate_branches), with the pattern's case flag; patterns with none are left out."""
    from grpo_debug.tools.engine.regex_literals import candidate_branches

    ci = {p: c for p, c in patterns}
    out = {}
    for p in unprefiltered:
        bs = candidate_branches(p, re.I if ci.get(p) else 0)
        if bs:
            out[p] = [(b, bool(ci.get(p))) for b in bs]
    return out


def open_stream(path: str | os.PathLike) -> tuple[io.BufferedIOBase, int]:
    """A binary stream over a plain, .gz or .zst file, and its size on disk (bytes)."""
    stream, size, _raw = _open(path)
    return stream, size


def _open(path: str | os.PathLike) -> tuple[io.BufferedIOBase, int, io.BufferedReader | None]:
    """(decompressed stream, size on disk, the compressed file under it or None for a plain file)."""
    from grpo_debug.tools import safefs

    p = os.fspath(path)
    sf = safefs.open_file(p)  # one open, no link followed, regular files only (a FIFO never blocks here)
    size, magic = sf.size, sf.head(4)
    raw = sf.fileobj()
    if magic[:2] == b"\x1f\x8b":
        from grpo_debug.tools.engine.gzip_stream import GzipMembers

        return GzipMembers(raw), size, raw  # (gzip.GzipFile drops the last read's data of a cut file)
    if magic == b"\x28\xb5\x2f\xfd":
        try:
            import zstandard
        except ImportError as e:
            raw.close()
            raise ValueError(f"{p} is zstd-compressed; pip install zstandard to read it (or decompress it first)") from e
        from grpo_debug.tools.engine.zstd_frames import CheckedZstd, truncation

        problem = truncation(raw)  # the reader ends a cut file silently: the headers say whether it is whole
        return CheckedZstd(zstandard.ZstdDecompressor().stream_reader(raw), problem), size, raw
    return raw, size, None


def _line_pids(eng: _Engine, active: list[int], chunk: bytes, limit: int | None) -> tuple[dict[int, set[int]], bool]:
    """(line start offset -> ids of the patterns that match the line, for every candidate line of ``chunk``;
    whether the search stopped at ``limit`` lines). ``active[i]`` is the pattern id of the engine's pattern i.
    Exact (``_Engine.line_hits``): a relaxed engine form (a look-ahead dropped) is confirmed on its line, so
    verl's ``timing_s/update_weights:1.2`` on every metric line is not a weight-sync candidate."""
    starts, ids, stopped = eng.line_hits_stopped(chunk, limit)
    return {s: {active[i] for i in pids} for s, pids in zip(starts, ids)}, stopped


def _add_context(starts: dict[int, set[int]], chunk: bytes, pending: int, line_no: int,
                 tb_lines: list[int] | None = None) -> int:
    """Add the traceback frames (``TRACE``) and the file's head (``HEAD``) to ``starts``; return how many
    traceback lines go on into the next chunk. ``tb_lines``: the starts of the chunk's ``Traceback (most recent``
    lines when the prefilter found them (else they are searched for)."""
    tb = b"Traceback (most recent"

    def mark(s: int, pid: int) -> None:
        starts.setdefault(s, set()).add(pid)
    e = 0
    for _ in range(pending):  # a traceback that began in the previous chunk
        if e >= len(chunk):
            break
        mark(e, TRACE)
        e = chunk.find(b"\n", e) + 1
        if e <= 0:
            break
    carry = 0
    if tb_lines is None:
        tb_lines, pos = [], chunk.find(tb)
        while pos != -1:
            tb_lines.append(chunk.rfind(b"\n", 0, pos) + 1)
            pos = chunk.find(tb, pos + 1)
    for e in tb_lines:
        for k in range(TRACEBACK_CONTEXT):
            e = chunk.find(b"\n", e) + 1
            if e <= 0 or e >= len(chunk):  # the traceback goes on in the next chunk
                carry = max(carry, TRACEBACK_CONTEXT - k)
                break
            mark(e, TRACE)
    e = 0
    for _ in range(max(0, _KEEP.get()[0] - line_no)):  # the head of the file
        mark(e, HEAD)
        e = chunk.find(b"\n", e) + 1
        if e <= 0 or e >= len(chunk):
            break
    return carry


def _newlines_before(chunk: bytes, order: list[int], scratch: dict | None = None) -> tuple[list[int], int]:
    """(for each offset of ``order`` (ascending), how many newlines ``chunk`` has before it; how many it has in
    all). With numpy for a large chunk: ``bytes.count`` reads about 2 GB/s, numpy's compare about 10 (into a
    buffer kept in ``scratch`` from chunk to chunk: a fresh 4 MiB array each time costs page faults)."""
    if len(chunk) >= 2**20:
        try:
            import numpy as np
        except ImportError:
            np = None
        if np is not None:
            buf = (scratch or {}).get("nl")
            if buf is None or len(buf) < len(chunk):
                buf = np.empty(len(chunk) + 2**20, dtype=bool)
                if scratch is not None:
                    scratch["nl"] = buf
            eq = np.equal(np.frombuffer(chunk, dtype=np.uint8), 10, out=buf[: len(chunk)])
            nl = np.flatnonzero(eq)
            return np.searchsorted(nl, order).tolist(), len(nl)
    out, prev, k, count = [], 0, 0, chunk.count
    for s in order:
        k += count(b"\n", prev, s)
        prev = s
        out.append(k)
    return out, k + count(b"\n", prev)


class _Scanner:
    """The per-chunk work of :func:`scan_stream` (module docstring)."""

    def __init__(self, patterns: list[tuple[str, bool]], store, source, spool):
        self.patterns = list(patterns)
        self.active = list(range(len(patterns)))  # pattern ids the engine scans for, in its order
        self.eng = cached_engine(patterns)
        self.scratch: dict = {}  # buffers reused from chunk to chunk
        self.tb_pid = next((i for i, (p, _) in enumerate(patterns) if p == TRACEBACK_MARKER), None)
        self.metric = set(range(len(METRIC_MARKERS))) | {HEAD}
        self.keeper = Keeper(patterns)
        self.parent: dict[int, int] = {}
        self.demoted: dict[int, int] = {}
        self.chatter: dict[int, list[str]] = {}  # demoted pattern id -> its alternatives no longer scanned for
        self.rebuilds = 0
        self.store, self.source, self.spool = store, source, spool
        self.counters: dict = {}
        self.metric_kept: set[int] = set()
        self.plain: list[tuple[int, bytes]] = []  # metric lines kept as lines (no store)
        self.truncated = False
        if store is not None:
            from grpo_debug.tools.engine.metrics import MetricTable

            class _Sink(MetricTable):  # the metric parsers' table: values go to the store with their offsets
                def add(sink, fmt: str, step: float, line: int, values: dict) -> None:
                    if values:
                        store.add(fmt, step, line, sink.offsets.get(line, -1), values)
                        sink.lines.add(line)
                        if fmt == "verl":  # a layout the fast path may learn (verl_lines.py)
                            sink.verl.append((line, tuple(values)))
            self.sink = _Sink()
            self.sink.offsets, self.sink.verl = {}, []
            self.verl = VerlTemplates()
        if apply_learned(self):  # chatter an earlier log of the folder showed (engine/chatter_carry.py)
            self.eng = cached_engine([self.patterns[i] for i in self.active])

    def _hits(self, chunk: bytes, line_no: int) -> dict[int, set[int]]:
        """The candidate lines of ``chunk`` and their pattern ids. A chunk with more than HIT_LIMIT hits is looked
        at for a flood: the patterns that match a quarter of its lines (not metric markers) are no longer scanned
        for (their first lines here are still offered to their quotas), and the chunk is scanned again."""
        extra: dict[int, set[int]] = {}
        while True:
            starts, full = _line_pids(self.eng, self.active, chunk, HIT_LIMIT)
            if not full:
                break
            per: dict[int, int] = {}
            for pids in starts.values():
                for p in pids:
                    per[p] = per.get(p, 0) + 1
            noisy = {p for p, c in per.items() if c * 4 >= len(starts) and p not in self.metric}
            if not noisy or self.rebuilds >= MAX_REBUILDS:
                starts = _line_pids(self.eng, self.active, chunk, None)[0]
                break
            flood = {s: pids & noisy for s, pids in starts.items() if not pids.isdisjoint(noisy)}
            for s, pids in flood.items():
                extra.setdefault(s, set()).update(pids)
            self._demote(noisy, chunk.count(b"\n", 0, min(flood)) + line_no + 1,
                         {p: [chunk[s:chunk.find(b"\n", s)] for s, ps in list(flood.items())[:200] if p in ps] for p in noisy})
        for s, pids in extra.items():
            starts.setdefault(s, set()).update(pids)
        return starts

    def _demote(self, noisy: set[int], line: int, samples: dict[int, list[bytes]]) -> None:
        """Stop scanning for the chatter alternatives of the ``noisy`` patterns (line_quota.split_noisy) from
        ``line`` on; their other alternatives are scanned for as patterns of their own."""
        for p in sorted(noisy):
            pat, ci = self.patterns[p]
            self.active.remove(p)
            self.demoted[p] = line
            keep = split_noisy(pat, ci, samples.get(p, [])) or []
            self.chatter[p] = [b for b in top_level_branches(pat, re.I if ci else 0) if b not in keep] if keep else [pat]
            record_chatter((pat, ci), keep, self.chatter[p])  # (the next log of a folder starts with it: chatter_carry)
            self.keep_alternatives(p, keep, ci)
        self.eng = cached_engine([self.patterns[i] for i in self.active])
        self.rebuilds += 1

    def keep_alternatives(self, p: int, keep: list[str], ci: bool) -> None:
        """The alternatives ``keep`` of demoted pattern ``p`` scanned for as patterns of their own (their hits
        count as ``p``'s: ``parent``), under the same quotas."""
        for b in keep:
            q = len(self.patterns)
            self.patterns.append((b, ci))
            self.active.append(q)
            self.parent[q] = self.parent.get(p, p)
            self.keeper.add_pattern(q, b)

    def chunk(self, chunk: bytes, line_no: int, base: int | None, pending: int) -> tuple[int, int]:
        """Classify and keep the lines of ``chunk`` (``line_no`` lines before it; ``base``: its byte offset in
        the source, None when unknown); return (the traceback lines that go on into the next chunk, the lines
        of the file up to the end of the chunk)."""
        starts = self._hits(chunk, line_no)
        tb = self.tb_pid if self.tb_pid in self.active else None  # (a pattern demoted as chatter is not scanned for)
        carry = _add_context(starts, chunk, pending, line_no,
                             None if tb is None else sorted(s for s, pids in starts.items() if tb in pids))
        cands, metric = [], []
        order = sorted(starts)
        before, total = _newlines_before(chunk, order, self.scratch)
        for s, k in zip(order, before):
            pids = starts[s]
            cands.append((line_no + k + 1, s, pids))
            if not self.metric.isdisjoint(pids):
                metric.append((line_no + k + 1, s))
        found = self._metrics(chunk, metric, base) if metric and self.store is not None else set()
        matched = dict(self.keeper.matched)
        for no, s, pids in cands:
            self._offer(chunk, no, s, pids, found)
        self._chatter(matched, line_no + total)
        return carry, line_no + total

    def _offer(self, chunk: bytes, no: int, s: int, pids: set[int], found: set[int]) -> None:
        raw = chunk[s:chunk.find(b"\n", s)]
        if no in found:  # its values are in the store; kept as a line only for its other patterns
            rest = pids - self.metric
            if HEAD in pids:
                rest.add(HEAD)
            if not rest:
                return
            self.metric_kept.add(no)
            pids = rest
        elif self.store is None and not self.metric.isdisjoint(pids) and HEAD not in pids:
            if len(self.plain) < MAX_CANDIDATES:
                self.plain.append((no, raw))
            else:
                self.truncated = True
            return
        self.keeper.offer(no, raw, pids)

    def _chatter(self, before: dict[int, int], line: int) -> None:
        """Patterns past their quota that matched 1000+ lines of this chunk are chatter: stop scanning for them."""
        k = self.keeper
        noisy = {p for p in self.active if p not in self.metric and k.noisy(p)
                 and k.matched.get(p, 0) - before.get(p, 0) >= 1000}
        if noisy and self.rebuilds < MAX_REBUILDS:
            self._demote(noisy, line, {p: [r[1] for r in list(k.rings.get(p, ()))[-200:]] for p in noisy})

    def _metrics(self, chunk: bytes, metric: list[tuple[int, int]], base: int | None) -> set[int]:
        """Extract the values of the metric candidate lines into the store, in line order: a verl step line
        whose key layout was seen before straight from its bytes (verl_lines.py), every other line through the
        general parsers (normalised, engine/metrics.py); the line numbers that carried metrics."""
        sink, store, verl = self.sink, self.store, self.verl
        sink.lines = set()
        raws = [chunk[s:chunk.find(b"\n", s)] for _, s in metric]
        if self.spool is None:
            offs = [base + s for _, s in metric] if base is not None else [-1] * len(metric)
        else:  # a compressed input: metric lines go to a spool file, read back from there by offset
            offs, pos = [], self.spool.tell()
            for r in raws:
                offs.append(pos)
                pos += len(r) + 1
            self.spool.write(b"\n".join(raws) + b"\n")
        slow: list[int] = []  # indices of lines waiting for the general path
        for i, raw in enumerate(raws):
            got = verl.parse(raw) if verl.templates else None
            if got is None:
                slow.append(i)
                continue
            if slow:
                self._general(slow, metric, raws, offs)
                slow = []
            no = metric[i][0]
            store.add_row("verl", got[0], no, offs[i], got[1], got[2])
            sink.lines.add(no)
        if slow:
            self._general(slow, metric, raws, offs)
        return sink.lines

    def _general(self, idx: list[int], metric: list[tuple[int, int]], raws: list[bytes], offs: list[int]) -> None:
        """The general parsers on the lines ``idx``; the verl layouts they read become fast-path templates."""
        from grpo_debug.tools.engine.metrics import extract_metrics
        from grpo_debug.tools.engine.normalize import normalize_line

        sink = self.sink
        sink.offsets = {metric[i][0]: offs[i] for i in idx}
        lines = [normalize_line(raws[i].decode("utf-8", "replace").replace("\x00", ""), metric[i][0]) for i in idx]
        sink.verl = []
        extract_metrics(lines, table=sink, counters=self.counters)
        if sink.axes:  # a format that says its x is not a step (a markdown table's rows): as the in-memory table says
            self.store.axes.update(sink.axes)
        if sink.verl:
            raw_of = {metric[i][0]: raws[i] for i in idx}
            for no, keys in sink.verl[-3:]:  # the last layouts seen: the ones coming next
                self.verl.learn(raw_of[no], keys)


def _tail(last_chunks: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """The file's last TAIL_LINES lines (a hang shows at the bottom), cut from the last chunks from their end."""
    tail: list[tuple[int, bytes]] = []
    keep = _KEEP.get()[1]
    for base, ch in last_chunks:
        start = len(ch)
        for _ in range(keep):
            nl = ch.rfind(b"\n", 0, max(0, start - 1))
            start = nl + 1
            if nl < 0:
                break
        part = ch[start:].split(b"\n")[:-1]
        first = base + ch.count(b"\n", 0, start) + 1
        tail += [(first + i, ln) for i, ln in enumerate(part)]
    return tail[-keep:] if keep else []


def _report(progress, done: int, total: int | None, phase: str) -> None:
    """Call ``progress(done, total)``, or ``progress(done, total, phase)`` when it takes a third argument."""
    if progress is None:
        return
    import inspect

    try:
        params = inspect.signature(progress).parameters.values()
        takes = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params) >= 3 or any(
            p.kind == p.VAR_POSITIONAL for p in params)
    except (TypeError, ValueError):
        takes = False
    if takes:
        progress(done, total, phase)
    elif phase == "reading":
        progress(done, total)


def _reread_source(stream) -> tuple[object, int | None]:
    """Where metric lines can be read back by offset: (the stream or its file name, its start offset), or
    (None, None) when it cannot (a compressed or one-way stream: spool them)."""
    if isinstance(stream, io.BytesIO):
        return stream, stream.tell()
    if isinstance(stream, (io.BufferedReader, io.FileIO)) and stream.seekable():
        return stream.name, stream.tell()
    return None, None


def scan_stream(stream: io.BufferedIOBase, rule_patterns: Iterable[str | tuple[str, bool]] = (), *, size: int | None = None,
                progress: Callable[..., None] | None = None, max_bytes: int | None = None, store=None,
                position: Callable[[], int] | None = None) -> SparseLog:
    """Read ``stream`` in chunks: metric values into ``store`` (a SeriesStore; None keeps metric lines as lines),
    the other candidate lines under quotas (module docstring). Stop after ``max_bytes`` (decompressed) bytes when
    given (``capped`` then says so). ``progress(done, total[, phase])`` is called after each chunk is processed,
    with ``position()`` (bytes of the file consumed; default the bytes read) against ``size``."""
    patterns = build_patterns(list(dict.fromkeys(rule_patterns)))
    source, start = _reread_source(stream) if store is not None else (None, None)
    spool = tempfile.TemporaryFile(prefix="grpo-debug-spool-") if store is not None and source is None else None
    sc = _Scanner(patterns, store, source, spool)
    partly = _candidate_patterns(patterns, sc.eng.unprefiltered)
    if partly:  # keep the candidate lines of what an engine can take of those patterns (rules match them whole)
        sc = _Scanner(patterns + [b for bs in partly.values() for b in bs if b not in patterns], store, source, spool)
    out = SparseLog(engine=sc.eng.kind, unprefiltered=list(sc.eng.unprefiltered), store=store,
                    source=spool if spool is not None else source)
    out.partly = {p: [b for b, _ in bs] for p, bs in partly.items()}
    last_chunks: list[tuple[int, bytes]] = []
    line_no = pending = raw_read = 0
    carry, skip_to_newline, gap = b"", False, False  # gap: the buffer lost the middle of a huge line
    buf = bytearray(CHUNK)  # read into and reused: a fresh 4 MiB object per read costs page faults (~0.3 s/GB)
    view = memoryview(buf)
    while True:
        try:
            got = _read_into(stream, buf, view) if max_bytes is None or raw_read < max_bytes else 0
        except (EOFError, OSError, ValueError) as e:  # a truncated/corrupt .gz or a read error after some good data
            if not raw_read:
                raise
            out.ended_early, got = f"{type(e).__name__}: {e}", 0
        lo = 0  # the block is buf[lo:got]
        if got:
            raw_read += got
            if max_bytes is not None and raw_read >= max_bytes:
                out.capped = max_bytes
            if skip_to_newline:
                lo = buf.find(b"\n", 0, got)
                if lo == -1:
                    continue
                skip_to_newline = False
        end = raw_read  # source offset (from ``start``) of the end of the block
        cut = buf.rfind(b"\n", lo, got) + 1 if got else 0
        if got and cut == 0:  # no newline in the whole block: a huge line; keep reading (bounded by the input cap)
            carry += view[lo:got]
            if len(carry) > 64 * 2**20:  # a single line over 64 MiB: keep its start, drop the rest of it
                carry, skip_to_newline, gap = carry[: 20_000], True, True
            continue
        if got:
            chunk, rest = carry + view[lo:cut], bytes(view[cut:got])  # the one copy of the block's lines
            end -= len(rest)
        else:  # the end of the input: the last line, if it has no newline
            if not carry:
                break
            pad = 0 if carry.endswith(b"\n") else 1  # a newline added to close the last line (not counted as read)
            chunk, rest = carry + b"\n" * pad, b""
            end += pad
            out.unterminated = bool(pad)
        base = None if gap or start is None else start + end - len(chunk)
        carry, gap = rest, False
        last_chunks = (last_chunks + [(line_no, chunk)])[-2:]  # the tail is cut from these at the end
        pending, line_no = sc.chunk(chunk, line_no, base, pending)
        out.bytes_read += len(chunk) - (pad if not got else 0)
        _report(progress, position() if position else raw_read, size, "reading")
        if not got:
            break
    _finish(out, sc, last_chunks, line_no)
    total = size if size is not None else raw_read
    _report(progress, total, total, "reading")  # the end of the file (or of the input cap)
    _report(progress, total, total, "analysing")  # what the caller does next: a phase, not bytes
    return out


def _read_into(stream, buf: bytearray, view: memoryview) -> int:
    """Read up to ``len(buf)`` bytes of ``stream`` into ``buf``; how many (0 at the end)."""
    readinto = getattr(stream, "readinto", None)
    if readinto is not None:
        return readinto(view) or 0
    block = stream.read(len(buf))
    buf[: len(block)] = block
    return len(block)


def _finish(out: SparseLog, sc: _Scanner, last_chunks: list[tuple[int, bytes]], line_no: int) -> None:
    """The kept lines in order (quota lines, metric lines kept as lines, the tail) and the counts."""
    kept = dict(sc.keeper.lines())
    kept.update(sc.plain)
    for no, raw in _tail(last_chunks):
        kept.setdefault(no, raw)
    out.lines = [(no, kept[no].decode("utf-8", "replace")) for no in sorted(kept)]
    out.total_lines = line_no
    out.matched, out.dropped, out.quota = dict(sc.keeper.matched), dict(sc.keeper.dropped), dict(sc.keeper.quota)
    out.metric_kept = sc.metric_kept
    out.patterns, out.parent, out.demoted, out.chatter = sc.patterns, sc.parent, sc.demoted, sc.chatter
    out.truncated = sc.truncated
    if sc.spool is not None:
        sc.spool.flush()


def scan_file(path: str | os.PathLike, rule_patterns: Iterable[str | tuple[str, bool]] = (),
              progress: Callable[..., None] | None = None, max_bytes: int | None = None, store=None) -> SparseLog:
    """:func:`scan_stream` over a plain, .gz or .zst file; a compressed file is read up to MAX_DECOMPRESSED_BYTES
    (a 1 MB gzip can hold gigabytes). Progress counts the bytes of the file on disk."""
    stream, size, raw = _open(path)

    def position() -> int:  # how far into the compressed file decompression is
        try:
            return min(size, raw.tell())
        except (OSError, ValueError):
            return 0
    try:
        with stream:
            return scan_stream(stream, rule_patterns, size=size, progress=progress, store=store,
                               position=position if raw is not None else None,
                               max_bytes=max_bytes if max_bytes is not None else (
                                   min(MAX_DECOMPRESSED_BYTES, max(RATIO_FLOOR, MAX_RATIO * size)) if raw else None))
    finally:
        if raw is not None:
            raw.close()


def read_lines(source, offsets: list[int]) -> dict[int, bytes]:
    """The lines that start at ``offsets`` of ``source`` (a path, or a seekable binary stream); offset -> raw line."""
    if source is None or not offsets:
        return {}
    if isinstance(source, (str, bytes, os.PathLike)):
        from grpo_debug.tools import safefs

        try:
            fh = safefs.open_file(os.fsdecode(source)).fileobj()
        except OSError:  # gone or swapped for a link since it was scanned: its lines are not cited
            return {}
    else:
        fh = source
    try:
        out = {}
        for off in sorted(set(offsets)):
            fh.seek(off)
            out[off] = fh.readline(1 << 20).rstrip(b"\n")
        return out
    finally:
        if fh is not source:
            fh.close()
