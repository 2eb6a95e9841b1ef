"""Large or compressed logs read in bounded memory: the streamed input of :func:`grpo_debug.tools.triage.triage_stream`.

tools/engine/large_logs.py scans the file once: every metric line's values go into a series store
(engine/series_store.py), the other candidate lines are kept under per-pattern quotas. This module turns that
into the pipeline's :class:`Context`: a MetricTable materialised from the store (bounded; ``counts`` hold the
true numbers of points), the kept lines, their events and config facts, and ``skipped`` notes that say what was
not kept and where. Metric lines a finding cites are read back from the file by byte offset
(:meth:`KeptLines.line_map`). The rules and the ranking then run unchanged (tools/triage.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from grpo_debug.tools.errors import InputError


@dataclass
class Streamed:
    """What reading a large log produced: the context, the kept lines, notes on what was not kept, and the
    whole input's line and byte counts."""

    ctx: object
    lines: list
    skipped: list[str] = field(default_factory=list)
    total_lines: int = 0
    bytes_read: int = 0
    partial: list[str] = field(default_factory=list)  # the notes among ``skipped`` that can change the answer


class LazyLines(dict):
    """Line number -> Line of the kept lines; ``get`` of a metric line that was not kept reads it back from the
    input by its byte offset (and keeps it)."""

    def __init__(self, kept, index, source):
        super().__init__((ln.no, ln) for ln in kept)
        self._index, self._source = index, source

    def get(self, no, default=None):
        hit = dict.get(self, no)
        if hit is not None or self._index is None:
            return hit if hit is not None else default
        off = self._index.get(no)
        if off is None:
            return default
        from grpo_debug.tools.engine.large_logs import read_lines
        from grpo_debug.tools.engine.normalize import normalize_line

        raw = read_lines(self._source, [off]).get(off)
        if raw is None:
            return default
        ln = self[no] = normalize_line(raw.decode("utf-8", "replace").replace("\x00", ""), no)
        return ln


class KeptLines(list):
    """The kept lines of a streamed log (a list of Line, in order); :meth:`line_map` also finds the metric lines."""

    index = None
    source = None

    def line_map(self) -> LazyLines:
        """Line number -> Line (tools/triage.line_map): kept lines, and metric lines read back when asked for."""
        return LazyLines(self, self.index, self.source)


def _events(lines: list, min_bytes: int | None = None) -> list:
    """Pattern events plus every traceback and error line classified, in line order (as tools/triage.py does);
    ``min_bytes``: events.extract_events'."""
    from grpo_debug.tools.engine.errors_classify import error_events
    from grpo_debug.tools.engine.events import extract_events

    evs = extract_events(lines, min_bytes) + error_events(lines)
    evs.sort(key=lambda e: (e.line, e.kind != "traceback"))
    return evs


def _labels(rb) -> dict[str, str]:
    """Prefilter pattern -> what it is for (rule ids of a regex signal, an event kind), for the notes."""
    from grpo_debug.skills.schema import RegexSignal
    from grpo_debug.tools.engine.events import EVENT_PATTERNS

    out: dict[str, list[str]] = {}
    for r in rb:
        for sig in r.match.signals():
            if isinstance(sig, RegexSignal):
                out.setdefault(sig.pattern, []).append(r.id)
    labels = {p: "rule " + ", ".join(ids[:2]) + (f" (+{len(ids) - 2})" if len(ids) > 2 else "") for p, ids in out.items()}
    labels.update({p: f"event {k}" for k, p in EVENT_PATTERNS.items()})
    return labels


def _n(x: int) -> str:
    return f"{x:,}"


def drop_notes(sparse, labels: dict[str, str]) -> list[str]:
    """One note per pattern whose lines were not all kept: what it matched, what was kept, which lines were not,
    and from which line routine chatter was no longer scanned for."""
    from grpo_debug.tools.engine.chatter_carry import FROM_EARLIER
    from grpo_debug.tools.engine.large_logs import TRACE

    def what(pid: int) -> str:
        if pid == TRACE:
            return "traceback frames"
        origin = sparse.patterns[sparse.parent.get(pid, pid)][0]
        pat = " | ".join(sparse.chatter.get(pid) or [sparse.patterns[pid][0]])
        part = "" if pat == origin else "an alternative of the regex of "
        return f"`{pat[:60]}{'...' if len(pat) > 60 else ''}` ({part}{labels.get(origin, 'log marker')})"

    notes = []
    for pid in sorted(set(sparse.dropped) | set(sparse.demoted), key=lambda p: -sparse.matched.get(p, 0)):
        d, n, q = sparse.dropped.get(pid), _n(sparse.matched.get(pid, 0)), _n(sparse.quota.get(pid, 0))
        gone = f"; {_n(d.count)} lines between {_n(d.first)} and {_n(d.last)} not kept" if d else ""
        if sparse.demoted.get(pid) == FROM_EARLIER:
            notes.append(f"{what(pid)}: routine chatter in an earlier log of the folder, not scanned for in this one")
        elif pid in sparse.demoted:
            notes.append(f"{what(pid)}: routine chatter: {n} lines matched up to line {_n(sparse.demoted[pid])}, then it "
                         f"was no longer scanned for; its first {q} and last {q} lines up to there kept{gone}")
        else:
            notes.append(f"{what(pid)}: {n} lines matched; the first {q} and last {q} kept{gone}")
    return notes


def _store_notes(store, table) -> list[str]:
    """What the series store downsampled or could not hold."""
    out = []
    from grpo_debug.tools.engine.series_store import IMPORTANT
    from grpo_debug.tools.run.names import FALLBACK_KEYS

    down = sorted(((k, table.count(k), len(pts)) for k, pts in table.series.items() if table.count(k) > len(pts)),
                  key=lambda t: (not re.search(FALLBACK_KEYS["grad_norm"], t[0]), not IMPORTANT.search(t[0]), -t[1], t[0]))
    if down:
        shown = "; ".join(f"{k}: {_n(n)} points kept as {_n(m)}" for k, n, m in down[:3])
        more = f"; {len(down) - 3} more series likewise" if len(down) > 3 else ""
        out.append(f"metric series downsampled ({shown}{more}): min and max of each bucket with their real step and "
                   "line, the first and last points and the first non-finite points kept")
    if store.dropped_series:
        out.append(f"more than {len(store.series)} metric names: the values of {len(store.dropped_series)} later "
                   f"names were not kept (first: {next(iter(store.dropped_series))})")
    if store.runs_dropped:
        out.append(f"{_n(store.runs_dropped)} changes of a metric line's format or key set in the middle of the run "
                   "were counted, not kept")
    return out


def _scan(path, rb, progress, label):
    """The large-log scan of ``path`` (a path or a binary stream) with ``rb``'s regex signals and a series store."""
    from grpo_debug.tools.engine.large_logs import scan_file, scan_stream
    from grpo_debug.tools.engine.series_store import SeriesStore

    pats = rb.regex_patterns()  # (pattern, ignore_case)
    try:
        if hasattr(path, "read"):  # an in-memory text with too many lines (see triage)
            return scan_stream(path, pats, progress=progress, store=SeriesStore())
        return scan_file(path, pats, progress=progress, store=SeriesStore())
    except (OSError, ValueError, EOFError) as e:
        raise InputError(f"{label or path}: cannot read: {e}") from e


def read_streamed(path, rb, *, progress=None, label: str | None = None, prefilter_kept: bool = False) -> Streamed:
    """Read a large or compressed log (a path, or a binary stream) in bounded memory with the prefilter of ``rb``'s
    regex signals. ``prefilter_kept``: the kept lines' events found through the multi-pattern prefilter however
    few they are (one of a folder's many logs, tools/rundir/merge.py: its database compiled once for them all).

    ``progress(bytes_done, bytes_total)`` is called as chunks are processed (bytes of the file on disk); a
    callback that takes a third argument also gets the phase, ``"reading"`` then ``"analysing"``. Raises
    InputError for an unreadable or undecodable (e.g. zstd without the zstandard package) file."""
    from grpo_debug.tools.engine.facts import extract_facts
    from grpo_debug.tools.engine.line_quota import _KEEP
    from grpo_debug.tools.engine.match import Context
    from grpo_debug.tools.engine.normalize import normalize_line

    sparse = _scan(path, rb, progress, label)
    metrics, index = sparse.store.materialize()
    metrics.lines.update(sparse.metric_kept)
    lines = KeptLines(normalize_line(raw.replace("\x00", ""), no) for no, raw in sparse.lines)
    lines.index, lines.source = index, sparse.source
    ctx = Context(lines=lines, events=_events(lines, 0 if prefilter_kept else None), metrics=metrics, facts=extract_facts(lines, skip=metrics.lines))
    skipped = drop_notes(sparse, _labels(rb)) + _store_notes(sparse.store, metrics)
    skipped.append(f"streamed with the {sparse.engine} prefilter: the values of all {_n(sparse.store.metric_lines)} metric "
                   f"lines read; {_n(len(lines))} of {_n(sparse.total_lines)} lines kept as text (event and command "
                   f"lines, tracebacks, the first {_KEEP.get()[0]} and last {_KEEP.get()[1]} lines)")
    if sparse.engine == "re":
        skipped.append("neither hyperscan nor google-re2 is installed: pip install 'grpo-debug[fast]' for grep-like speed")
    if sparse.unterminated:
        skipped.append(f"the last line ({_n(sparse.total_lines)}) has no newline: the log ends mid-line (cut, or still "
                       "being written), so that line may be partial")
    if sparse.unprefiltered:
        said = []
        for p in sparse.unprefiltered[:3]:
            kept = sparse.partly.get(p)
            said.append(p[:60] + (f" (its alternatives {', '.join(k[:30] for k in kept)} were scanned for)" if kept else ""))
        skipped.append(f"{len(sparse.unprefiltered)} rule pattern(s) could not be prefiltered whole (a back-reference); "
                       "lines matching only what the prefilter cannot take were not read: " + "; ".join(said))
    partial = []
    if sparse.capped:
        partial.append(f"only the first {sparse.capped / 2**30:.3g} GiB of the decompressed log were read (the input "
                       f"cap), up to line {_n(sparse.total_lines)}: anything later in the run is not seen; decompress "
                       "it and split it to triage the rest")
    if sparse.ended_early:
        partial.append(f"the input ends early (a truncated or corrupt compressed file, or a read error: "
                       f"{sparse.ended_early[:120]}); read up to line {_n(sparse.total_lines)}, anything after that is "
                       "not seen")
    return Streamed(ctx=ctx, lines=lines, skipped=partial + skipped, total_lines=sparse.total_lines,
                    bytes_read=sparse.bytes_read, partial=partial)
