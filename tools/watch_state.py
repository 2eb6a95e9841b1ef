"""Followers of growing inputs for ``grpo-debug watch`` (tools/watch.py), and the saved state of a watch.

Each follower owns one file and reads only its new bytes (``os.pread`` from the last offset, in blocks of at most
``BLOCK`` bytes, cut at the last complete line or record; the unfinished rest is carried, never read again):

- :class:`LogFollower`: a console log, fed to the streaming scanner of engine/large_logs.py (``_Scanner.chunk``)
  exactly as a whole-file scan feeds it, chunk by chunk: metric values into a bounded
  :class:`~grpo_debug.tools.engine.series_store.SeriesStore`, other candidate lines under the per-pattern quotas,
  the last ``TAIL_LINES`` lines in a ring. Its state is bounded whatever the file's size.
- :class:`JsonlFollower`: verl's file-logger JSONL (``{"step": N, "data": {...}}`` a line), into a store.
- :class:`TfeventsFollower`: a TensorBoard event file (length-prefixed records), scalars into a store.

Rotation and truncation: every poll ``lstat``s the path. Another file under the name (rotation: ``log`` renamed to
``log.1`` and a new ``log`` created) is reopened by name through :func:`grpo_debug.tools.safefs.open_file` after
the old descriptor is read to its end; a file shorter than the offset (truncation, ``> log``) is read again from
byte 0. Either starts a new *generation*: line numbers, store and kept lines start afresh (the evidence of a
finding is read back from the file by offset, and the old bytes are gone or renamed); alerts already given stay
given (tools/watch.py keys them by run, symptom and rule).

:func:`snapshot` builds the engine ``Context`` of a follower's current state: the store materialised (bounded by
its budget, engine/series_store.py ``TABLE_POINTS``), the kept lines normalised (cached across snapshots). Its
cost is bounded by the store and the quotas, not by the file's size.
"""
from __future__ import annotations

import collections
import hashlib
import json
import math
import os
import re
import stat

from grpo_debug.tools import safefs

BLOCK = 4 << 20         # bytes read from one file per poll
MAX_CARRY = 4 << 20     # an unfinished line longer than this is dropped up to its newline (counted)
HEAD_ID = 4096          # bytes hashed to tell the same file after a restart
# new bytes holding one of these are evaluated at once (tools/watch.py): a non-finite value, an error, a traceback,
# an OOM or a kill; one C-level search per chunk (a line in the file's head is not counted by the line quotas)
URGENT = re.compile(rb"\b(?:nan|NaN|NAN|-?inf|-?Inf|INF)\b|Error\b|Exception\b|Traceback|out of memory|Killed|"
                    rb"Timeout|timed out|SIGKILL|SIGTERM|Segmentation fault")
_DIGITS = re.compile(rb"[0-9]+")
URGENT_KINDS = 4096
URGENT_LINES = 4096  # urgent lines looked at per chunk (a flood of them: the first ones)


class _Gen:
    """One generation of a followed console log: the scanner's state since the file (re)started."""

    def __init__(self, patterns, path: str, line_no: int = 0):
        from grpo_debug.tools.engine.large_logs import TAIL_LINES, _Scanner
        from grpo_debug.tools.engine.series_store import SeriesStore

        self.store = SeriesStore()
        self.sc = _Scanner(patterns, self.store, path, None)
        self.line_no, self.pending = line_no, 0
        self.tail: collections.deque = collections.deque(maxlen=TAIL_LINES)
        self.cache: dict[int, object] = {}  # line number -> normalised Line, kept across snapshots
        self.urgent = 0  # chunks that held an URGENT word on a kind of line not seen before
        self.urgent_kinds: set[bytes] = set()  # those lines with digits dropped (a bounded set)

    def feed(self, chunk: bytes, base: int) -> None:
        """Scan ``chunk`` (complete lines, each ending in a newline) that starts at byte ``base`` of the file."""
        from grpo_debug.tools.engine.large_logs import _tail

        first = self.line_no
        self.pending, self.line_no = self.sc.chunk(chunk, first, base, self.pending)
        self.tail.extend(_tail([(first, chunk)]))
        if self._new_urgent(chunk):
            self.urgent += 1

    def _new_urgent(self, chunk: bytes) -> bool:
        """Whether ``chunk`` holds an URGENT word on a line whose shape (digits dropped, first 160 bytes) was not
        seen before: routine chatter that repeats a warning does not re-run the rules every ``min_gap`` seconds
        (that cost 11% of a core at 1 MB/s); a first NaN, error or traceback still does at once. The lines are
        found by the prefilter engine (engine/prefilter.py: hyperscan when installed, 1 ms/MiB; Python's ``re``
        over URGENT took 33 ms/MiB, half of the watcher's reading cost), at most URGENT_LINES per chunk."""
        starts, _ = urgent_engine().line_hits(chunk, URGENT_LINES)
        new, find, kinds = False, chunk.find, self.urgent_kinds
        for a in starts:
            b = find(b"\n", a)
            shape = _DIGITS.sub(b"", chunk[a:b if b >= 0 else len(chunk)][:400])[:160]
            if shape not in kinds:
                if len(kinds) < URGENT_KINDS:
                    kinds.add(shape)
                new = True
        return new


def urgent_engine():
    """The prefilter engine over URGENT alone (built once per thread, engine/prefilter.py cached_engine)."""
    from grpo_debug.tools.engine.prefilter import cached_engine

    return cached_engine([(URGENT.pattern.decode(), False)])


class _FileFollower:
    """What every follower shares: the descriptor, its identity (device, inode), the offset, the carry."""

    kind = "file"

    def __init__(self, path: str):
        self.path = path
        self.fd: int | None = None
        self.ident: tuple[int, int] | None = None
        self.offset = 0           # the next byte of the current file to read
        self.carry = b""          # the unfinished last line (or record) read so far
        self.skip = False         # dropping an over-long line up to its newline
        self.generation = 0
        self.bytes_read = 0       # bytes read from disk by this follower, history and new
        self.notes: list[str] = []
        self.error: str | None = None

    # -- opening -------------------------------------------------------------------------------------------
    def open(self, offset: int | None = None) -> bool:
        """Open the path through safefs (no link, regular file only); start at ``offset`` (None: 0). False when it
        does not exist yet; raises safefs.Refused for a link, FIFO or folder."""
        try:  # anchored at the file's folder: a link under the name (swapped in at a rotation) fails the open
            with safefs.anchored(os.path.dirname(os.path.abspath(self.path))):
                sf = safefs.open_file(self.path)
        except FileNotFoundError:
            return False
        st = os.fstat(sf.fd)
        self.fd, self.ident = sf.fd, (st.st_dev, st.st_ino)
        sf._closed = True  # the descriptor is ours now
        self.offset = min(offset or 0, st.st_size)
        self.carry, self.skip = b"", False
        self.start_generation(self.offset)
        return True

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def head_id(self) -> str:
        """A hash of the file's first HEAD_ID bytes (with the identity, tells the same file after a restart)."""
        if self.fd is None:
            return ""
        return hashlib.sha256(os.pread(self.fd, HEAD_ID, 0)).hexdigest()[:16]

    def start_generation(self, offset: int) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def consume(self, data: bytes, base: int, final: bool = False) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    # -- polling -------------------------------------------------------------------------------------------
    def _swapped(self) -> bool:
        """Whether the name now holds another file than the open descriptor (rotation)."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return False  # renamed away, not yet recreated: go on reading the old descriptor
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
            return (st.st_dev, st.st_ino) != self.ident  # the reopen refuses it and says why
        return (st.st_dev, st.st_ino) != self.ident

    def poll(self) -> int:
        """Read what is new (at most BLOCK bytes); handle rotation and truncation. The number of new bytes."""
        if self.fd is None and not self.open(0):
            return 0
        size = os.fstat(self.fd).st_size
        if size < self.offset:  # truncated in place: read it again from the start
            self.notes.append(f"{self.path}: truncated (now {size} bytes, was read to {self.offset}); read from byte 0")
            self.offset, self.carry, self.skip = 0, b"", False
            self.generation += 1
            self.start_generation(0)
        if size > self.offset:
            return self._read(min(BLOCK, size - self.offset))
        if self._swapped():
            self.consume(b"", self.offset, final=True)
            self.close()
            self.notes.append(f"{self.path}: rotated (another file under the name); reopened from byte 0")
            self.generation += 1
            if not self.open(0):
                return 0
            return self.poll()
        return 0

    def _read(self, n: int) -> int:
        data = os.pread(self.fd, n, self.offset)
        base = self.offset - len(self.carry)
        self.offset += len(data)
        self.bytes_read += len(data)
        self.consume(data, base)
        return len(data)

    def lines_of(self, data: bytes, base: int, final: bool = False) -> tuple[bytes, int]:
        """The complete lines of carry + ``data`` (ending in a newline) and the offset they start at; the rest
        is carried. ``final``: the rest is closed as a line too (the file was rotated away)."""
        if self.skip:
            nl = data.find(b"\n")
            if nl < 0:
                return b"", base
            data, base, self.skip = data[nl + 1:], base + len(self.carry) + nl + 1, False
            self.carry = b""
        buf = self.carry + data if self.carry else data
        cut = buf.rfind(b"\n") + 1
        if final and cut < len(buf):
            buf, cut = buf + b"\n", len(buf) + 1
        self.carry = buf[cut:]
        if len(self.carry) > MAX_CARRY:
            self.notes.append(f"{self.path}: a line over {MAX_CARRY} bytes at byte {base + cut} skipped")
            self.carry, self.skip = b"", True
        return buf[:cut], base


class LogFollower(_FileFollower):
    """A growing console log through the streaming scanner (module docstring)."""

    kind = "log"

    def __init__(self, path: str, patterns):
        super().__init__(path)
        self.patterns = patterns
        self.gen: _Gen | None = None

    def start_generation(self, offset: int) -> None:
        lines = 0
        if offset:  # started past the history (--from-end, a resume): count its lines, so numbers stay real
            pos = 0
            while pos < offset:
                block = os.pread(self.fd, min(BLOCK, offset - pos), pos)
                if not block:
                    break
                lines += block.count(b"\n")
                pos += len(block)
            if offset and os.pread(self.fd, 1, offset - 1) != b"\n":
                self.carry, self.skip = b"", True  # started mid-line: that line is not read
        self.gen = _Gen(self.patterns, self.path, lines)

    def consume(self, data: bytes, base: int, final: bool = False) -> None:
        chunk, start = self.lines_of(data, base, final)
        if chunk:
            self.gen.feed(chunk, start)

    def counts(self) -> tuple[int, int]:
        """(lines, metric lines) of the current generation."""
        return (self.gen.line_no, self.gen.store.metric_lines) if self.gen else (0, 0)

    def urgent(self) -> int:
        """Chunks read so far that held an URGENT word (a change: evaluate at once)."""
        return self.gen.urgent if self.gen else 0

    def signature(self) -> tuple[int, int, int, int]:
        """What the rules read, in counts: (metric lines, kept candidate lines, patterns seen, log2 of the
        candidate lines matched). Equal signatures: the new bytes were chatter no rule reads (tools/watch.py
        skips the interval's evaluation); a new pattern (the third count) is evaluated at once."""
        if not self.gen:
            return (0, 0, 0, 0)
        k = self.gen.sc.keeper
        return (self.gen.store.metric_lines, len(k.kept), len(k.first), sum(k.matched.values()).bit_length())


class _StoreFollower(_FileFollower):
    """A metric store file into a SeriesStore; its snapshot has no kept lines (its evidence is read back)."""

    def start_generation(self, offset: int) -> None:
        from grpo_debug.tools.engine.series_store import SeriesStore

        self.store, self.records, self.bad, self.nonfinite = SeriesStore(), 0, 0, 0

    def counts(self) -> tuple[int, int]:
        return self.records, self.store.metric_lines

    def urgent(self) -> int:
        """Non-finite values read so far (a change: evaluate at once)."""
        return self.nonfinite

    def signature(self) -> tuple[int, int, int, int]:
        """(metric values added, 0, 0, records): as LogFollower.signature, for a store."""
        return (self.store.metric_lines, 0, 0, self.records)


class JsonlFollower(_StoreFollower):
    """verl's file-logger JSONL (tools/readers/textstores.py read_verl_jsonl): null read as NaN."""

    kind = "jsonl"

    def consume(self, data: bytes, base: int, final: bool = False) -> None:
        from grpo_debug.tools.readers.base import as_number, flatten

        chunk, off = self.lines_of(data, base, final)
        for raw in chunk.split(b"\n")[:-1]:
            self.records += 1
            start, off = off, off + len(raw) + 1
            try:
                d = json.loads(raw)
                step, flat = float(d["step"]), flatten(d["data"], sep="/", max_keys=4000)
            except (ValueError, KeyError, TypeError, RecursionError):
                self.bad += 1
                continue
            vals = {k: (math.nan if v is None else x) for k, v in flat.items()
                    if v is None or (x := as_number(v)) is not None}
            if vals and math.isfinite(step):
                self.nonfinite += not math.isfinite(sum(vals.values()))
                self.store.add("verl", step, self.records, start, vals)


class TfeventsFollower(_StoreFollower):
    """A TensorBoard event file: complete records only (a record still being written waits in the carry)."""

    kind = "tfevents"

    def consume(self, data: bytes, base: int, final: bool = False) -> None:
        import struct

        from grpo_debug.tools.readers.tfevents import _event

        buf = self.carry + data if self.carry else data
        pos, best, skipped = 0, {}, {}
        while len(buf) - pos >= 12:
            (length,) = struct.unpack_from("<Q", buf, pos)
            if length > MAX_CARRY:
                self.notes.append(f"{self.path}: a {length}-byte record at byte {base + pos}; the rest not read")
                self.skip, buf, pos = True, b"", 0
                break
            if len(buf) - pos < 16 + length:
                break
            try:
                _event(buf[pos + 12:pos + 12 + length], f"record {self.records}", (0, self.records), best, skipped)
            except Exception:  # noqa: BLE001 - a record that is not an Event is skipped, as the reader does
                self.bad += 1
            self.records += 1
            pos += 16 + length
        self.carry = b"" if self.skip else bytes(buf[pos:])
        by_step: dict[float, dict[str, float]] = {}
        for (tag, step), (order, value, _where) in best.items():
            by_step.setdefault(step, {})[tag] = value
        for step in sorted(by_step):
            self.nonfinite += not math.isfinite(sum(by_step[step].values()))
            self.store.add("tensorboard", step, self.records, -1, by_step[step])


def snapshot(f) -> tuple[object, list]:
    """(engine Context, kept lines) of a follower's current state; cost bounded by its store and quotas."""
    from grpo_debug.tools.engine.facts import extract_facts
    from grpo_debug.tools.engine.match import Context
    from grpo_debug.tools.engine.normalize import normalize_line
    from grpo_debug.tools.streaming import KeptLines, _events

    if isinstance(f, LogFollower):
        g = f.gen
        store, kept = g.store, dict(g.sc.keeper.lines())
        for no, raw in g.tail:
            kept.setdefault(no, raw)
        cache = {no: g.cache.get(no) or normalize_line(kept[no].decode("utf-8", "replace").replace("\x00", ""), no)
                 for no in sorted(kept)}
        g.cache = cache
        lines = KeptLines(cache.values())
        metric_kept = g.sc.metric_kept
    else:
        store, lines, metric_kept = f.store, KeptLines(), set()
    metrics, index = store.materialize()
    metrics.lines.update(metric_kept)
    lines.index, lines.source = index, f.path
    ctx = Context(lines=lines, events=_events(lines), metrics=metrics, facts=extract_facts(lines, skip=metrics.lines))
    return ctx, lines


def load_state(path: str | None) -> dict:
    """The saved state (``{"files": {path: {...}}, "alerted": {key: {...}}}``), {} when none. Raises ValueError
    for a file that is not a watch state."""
    if not path or not os.path.exists(path):
        return {}
    try:
        d = json.loads(safefs.read_bytes(path, 64 << 20))
    except (OSError, ValueError) as e:
        raise ValueError(f"--state {path[:200]}: not a watch state file ({str(e)[:120]}); remove it or pass "
                         "another path") from e
    if not isinstance(d, dict) or d.get("kind") != "grpo-debug-watch":
        raise ValueError(f"--state {path[:200]}: not a watch state file; remove it or pass another path")
    return d


def save_state(path: str, files: dict, alerted: dict) -> None:
    """Write the state atomically and never through a link (tools/safe_write.py replace_file: an exclusively
    created temp file in the same folder, then os.replace). Raises safe_write.UnsafeWrite / OSError."""
    from grpo_debug.tools.safe_write import replace_file

    data = {"kind": "grpo-debug-watch", "version": 1, "files": files, "alerted": alerted}
    replace_file(path, json.dumps(data).encode(), new_mode=0o600)
