"""Metric series of a streamed log in bounded memory: every metric line's values folded in as they are read.

Each metric line is a record (step, line number, byte offset, in ``array`` columns). A series holds
(value, record id) entries, exact up to its capacity. Past it, it becomes buckets of ``width`` consecutive
points, each kept as at most four entries with their real record: the minimum and the maximum finite value of
the bucket, and its first value above / below the previous bucket's range (where a climb or a drop starts; a
bucket with no finite value keeps its first non-finite point). When the entries fill up again, neighbouring
buckets merge (width doubles). The first point, the last point and the first ``KEEP_NONFINITE``
non-finite points are kept apart, so the extremes, the first NaN and the shape of a climb survive any amount of
downsampling; ``n`` counts every point. New values wait in a small per-series buffer and are filed in batches
(whole buckets at a time with numpy when it is installed, :func:`_keep_rows`; else bucket by bucket, the min/max
found by the C builtins), so the work per metric line is a few C calls (its values gathered as a row of a block
of lines with the same keys), not a loop over values.

:meth:`SeriesStore.materialize` turns the store into an engine ``MetricTable`` (``Point`` lists, bounded: the
detectors of engine/series run on it unchanged) whose ``counts`` give each series' true number of points.
"""
from __future__ import annotations

import math
import re
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import islice

from grpo_debug.tools.run.names import IMPORTANT_KEYS

KEEP_NONFINITE = 3
BREAKOUTS = 4                 # points of a bucket kept beyond the previous bucket's range by more than its width
STORE_POINTS = 3_000_000      # entries held over all series (12 bytes each, plus 24 per metric line referenced)
SERIES_CAP = (2048, 65_536)   # entries one series may hold: (least unless series are very many, most)
TABLE_POINTS = 240_000        # points materialised over all series (Python objects: ~130 bytes each)
TABLE_CAP = (512, 16_384)
MAX_SERIES = 4000             # series kept; the values of later new names are counted, not kept
MAX_RUNS = 20_000             # runs of identical (format, keys) records kept at the start and at the end
PENDING = 1024                # values a series takes before they are filed (exact, or into buckets)
MAX_RECORDS = 2_000_000       # metric lines referenced before records no series holds any more are dropped
# series the detectors read first (grad norm, losses, KL, entropy, rewards, log-prob gaps): 4x the room
IMPORTANT = re.compile(IMPORTANT_KEYS, re.I)  # the one list of important series (tools/run/names.py)


def _finite(v: float) -> bool:
    return v - v == 0.0  # False for nan, inf, -inf


def _keep(vals, start: int, stop: int, lo: float, hi: float) -> tuple[list[int], float, float]:
    """(indices of ``vals[start:stop]`` (one bucket) to keep, in order; the bucket's finite range): its min and max
    finite value, its first value above ``hi`` / below ``lo`` (the previous bucket's range: where a climb or a drop
    starts) and up to ``BREAKOUTS`` values beyond that range by more than its width (the steps of the climb). The
    first index alone, and the range (lo, hi) unchanged, when no value is finite. Min and max are found by the C
    builtins when the slice is all finite."""
    seg = vals[start:stop]
    allfin = _finite(sum(seg))
    if allfin:
        mn, mx = min(seg), max(seg)
        out = {start + seg.index(mn), start + seg.index(mx)}
    else:
        fin = [i for i in range(start, stop) if _finite(vals[i])]
        if not fin:
            return [start], lo, hi
        a, b = min(fin, key=vals.__getitem__), max(fin, key=vals.__getitem__)
        out, mn, mx = {a, b}, vals[a], vals[b]
    far = hi - lo if hi > lo else 0.0
    if mx > hi:  # (generators: the scan stops at the first breakout, or at the BREAKOUTS-th far one)
        out.add(start + next(i for i, v in enumerate(seg) if v > hi))
        if mx > hi + far or not allfin:  # (an inf is beyond any range)
            out.update(start + i for i in islice((i for i, v in enumerate(seg) if v > hi + far), BREAKOUTS))
    if mn < lo:
        out.add(start + next(i for i, v in enumerate(seg) if v < lo))
        if mn < lo - far or not allfin:
            out.update(start + i for i in islice((i for i, v in enumerate(seg) if v < lo - far), BREAKOUTS))
    return sorted(out), mn, mx


def _keep_rows(vals, start: int, nb: int, w: int, lo: float, hi: float):
    """:func:`_keep` on the ``nb`` consecutive buckets of ``w`` values at ``vals[start:]``, with numpy, each bucket's
    (lo, hi) being the previous bucket's range: (the kept positions as a flat boolean mask, in order; each bucket's
    min and max, two arrays of ``nb``). None when numpy is missing or a value is not finite (then :func:`_keep`,
    bucket by bucket)."""
    try:
        import numpy as np
    except ImportError:
        return None
    rows = np.frombuffer(vals, dtype=np.float64, count=nb * w, offset=start * 8).reshape(nb, w)
    if not np.isfinite(rows).all():
        return None
    mins, maxs = rows.min(axis=1), rows.max(axis=1)
    lo_ = np.concatenate(([lo], mins[:-1]))
    hi_ = np.concatenate(([hi], maxs[:-1]))
    with np.errstate(invalid="ignore", over="ignore"):
        far = np.where(hi_ > lo_, hi_ - lo_, 0.0)
        up, down = hi_ + far, lo_ - far
    keep = np.zeros((nb, w), dtype=bool)
    r = np.arange(nb)
    keep[r, rows.argmin(axis=1)] = True
    keep[r, rows.argmax(axis=1)] = True
    for above, bound, beyond in ((True, hi_, up), (False, lo_, down)):
        past = rows > bound[:, None] if above else rows < bound[:, None]
        hit = past.any(axis=1)
        keep[r[hit], past[hit].argmax(axis=1)] = True  # the first value beyond the previous range
        far_past = rows > beyond[:, None] if above else rows < beyond[:, None]
        keep |= far_past & (np.cumsum(far_past, axis=1) <= BREAKOUTS)  # the first BREAKOUTS far beyond it
    return keep.ravel(), mins, maxs


class _Series:
    """One series: values and record ids (``vals``, ``recs``), exact or in buckets of ``width`` points (``bnd``:
    the entry index where each bucket starts); new values wait in ``pv``/``pr`` and are filed in batches."""

    __slots__ = ("vals", "recs", "bnd", "pv", "pr", "width", "cap", "n", "first", "last", "bad", "weight", "lo", "hi")

    def __init__(self, weight: int):
        self.vals, self.recs, self.bnd, self.pv, self.pr = array("d"), array("q"), array("q"), array("d"), array("q")
        self.width, self.cap, self.n, self.weight = 1, SERIES_CAP[1], 0, weight
        self.first = self.last = None
        self.lo, self.hi = math.inf, -math.inf  # the last filed bucket's finite range
        self.bad: list[tuple[float, int]] = []

    def file(self, final: bool = False) -> None:
        """File the waiting values: exact while there is room, else into buckets (a partial last bucket stays
        waiting unless ``final``)."""
        pv, pr = self.pv, self.pr
        if not pv:
            return
        if self.first is None:
            self.first = (pv[0], pr[0])
        self.last = (pv[-1], pr[-1])
        if len(self.bad) < KEEP_NONFINITE and not _finite(sum(pv)):
            self.bad += [(v, r) for v, r in zip(pv, pr) if not _finite(v)][: KEEP_NONFINITE - len(self.bad)]
        if self.width == 1:
            take = len(pv)
            self.vals.extend(pv)
            self.recs.extend(pr)
        else:
            w = self.width
            take = len(pv) if final else len(pv) - len(pv) % w
            self._buckets(pv, pr, 0, take, w)
        self.n += take
        del pv[:take], pr[:take]
        while len(self.vals) >= self.cap:
            self._merge()

    def _buckets(self, vals: array, recs: array, start: int, stop: int, w: int) -> None:
        """File ``vals[start:stop]`` (and their record ids) as buckets of ``w`` (the last may be shorter): what
        :func:`_keep` keeps of each, whole buckets with numpy when it is installed and they are all finite."""
        nb = (stop - start) // w
        rows = _keep_rows(vals, start, nb, w, self.lo, self.hi) if nb > 1 else None
        if rows is not None:
            import numpy as np

            keep, mins, maxs = rows
            self.lo, self.hi = float(mins[-1]), float(maxs[-1])
            at = np.flatnonzero(keep)
            counts = keep.reshape(nb, w).sum(axis=1)
            first = len(self.vals)
            self.bnd.extend((first + np.concatenate(([0], np.cumsum(counts)[:-1]))).tolist())
            at += start
            self.vals.extend(np.frombuffer(vals, dtype=np.float64)[at].tolist())
            self.recs.extend(np.frombuffer(recs, dtype=np.int64)[at].tolist())
            start += nb * w
        for i in range(start, stop, w):
            idx, self.lo, self.hi = _keep(vals, i, min(stop, i + w), self.lo, self.hi)
            self.bnd.append(len(self.vals))
            for j in idx:
                self.vals.append(vals[j])
                self.recs.append(recs[j])

    def _merge(self) -> None:
        """Fewer entries: exact points become buckets of 16, else neighbouring buckets merge (width doubles); each
        bucket keeps its min, max and first breakouts of the previous bucket's range (at most 4 entries)."""
        vals, recs = self.vals, self.recs
        if self.width == 1:  # regular buckets: the same as the loop below, whole buckets at a time
            self.vals, self.recs, self.bnd, self.width = array("d"), array("q"), array("q"), 16
            self.lo, self.hi = math.inf, -math.inf
            self._buckets(vals, recs, 0, len(vals), 16)
            return
        bnd, self.width = list(self.bnd[::2]), self.width * 2
        nv, nr, nb = array("d"), array("q"), array("q")
        lo, hi = math.inf, -math.inf
        for b, e in zip(bnd, bnd[1:] + [len(vals)]):
            idx, lo, hi = _keep(vals, b, e, lo, hi)
            nb.append(len(nv))
            for j in idx:
                nv.append(vals[j])
                nr.append(recs[j])
        self.vals, self.recs, self.bnd, self.lo, self.hi = nv, nr, nb, lo, hi

    def held(self) -> tuple[array, array]:
        """Every held value and its record id (two columns, in record order), the first, last and first
        non-finite points included."""
        self.file(final=True)
        vals, recs = array("d", self.vals), array("q", self.recs)
        for q in (self.first, self.last, *self.bad):
            if q is not None:
                i = bisect_left(recs, q[1])
                if i == len(recs) or recs[i] != q[1]:
                    vals.insert(i, q[0])
                    recs.insert(i, q[1])
        return vals, recs


def _groups(vals: array, g: int) -> tuple[set[int], list[tuple[int, float, float]]]:
    """:func:`_keep` on consecutive groups of ``g`` values, each group's (lo, hi) the previous one's range: (the
    kept indices; (start, range after it) per group). Whole groups with numpy when it is installed and they are
    all finite."""
    n, nb = len(vals), len(vals) // g
    rows = _keep_rows(vals, 0, nb, g, math.inf, -math.inf) if nb > 1 else None
    keep: set[int] = set()
    ranges: list[tuple[int, float, float]] = []
    lo, hi, start = math.inf, -math.inf, 0
    if rows is not None:
        import numpy as np

        mask, mins, maxs = rows
        keep.update(np.flatnonzero(mask).tolist())
        ranges = list(zip(range(0, nb * g, g), mins.tolist(), maxs.tolist()))
        start, lo, hi = nb * g, ranges[-1][1], ranges[-1][2]
    for i in range(start, n, g):
        idx, lo, hi = _keep(vals, i, min(n, i + g), lo, hi)
        keep.update(idx)
        ranges.append((i, lo, hi))
    return keep, ranges


def _thin(vals: array, budget: int) -> list[int]:
    """Indices of at most about ``budget`` of ``vals``: per group, what :func:`_keep` keeps, plus the first, the last and
    the first non-finite points; the groups that break out of the previous group's range the most (a climb, a
    drop) are kept whole with the room left, so a short climb stays a climb, not a spike. Groups are as small as
    the budget allows (a noisy series keeps about 3 points a group; a group twice as large when that is too many)."""
    n = len(vals)
    if n <= budget:
        return list(range(n))
    base = {0, n - 1}
    if not _finite(sum(vals)):
        base.update([i for i in range(n) if not _finite(vals[i])][:KEEP_NONFINITE])
    g = math.ceil(3 * n / max(1, budget // 2))
    while True:
        keep, ranges = _groups(vals, g)
        keep.update(base)
        jumps, lo, hi = [], math.inf, -math.inf
        for i, nlo, nhi in ranges:
            if hi > lo and (nhi > 2 * hi - lo or nlo < 2 * lo - hi):  # beyond the previous range by more than its width
                jumps.append((-max(nhi - hi, lo - nlo) / (hi - lo), i))
            lo, hi = nlo, nhi
        if len(keep) <= budget * 2 // 3 or g >= n:
            break
        g *= 2
    room = budget - len(keep)
    for _, i in sorted(jumps):
        if room < g:
            break
        keep.update(range(i, min(n, i + g)))
        room -= g
    return sorted(keep)


@dataclass
class Run:
    """Consecutive metric records of one format with the same keys: the first and last (step, line) and how many."""

    fmt: str
    keys: frozenset
    first: tuple[float, int]
    last: tuple[float, int]
    count: int = 1


@dataclass
class SeriesStore:
    """Every metric value of a streamed log, per series, in bounded memory (module docstring). Each metric line is
    a record (step, line number, byte offset) that the series' entries point to."""

    series: dict[str, _Series] = field(default_factory=dict)
    formats: set[str] = field(default_factory=set)
    axes: dict[str, str] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)
    tail_runs: list[Run] = field(default_factory=list)
    runs_dropped: int = 0
    metric_lines: int = 0
    dropped_series: dict[str, int] = field(default_factory=dict)
    r_step: array = field(default_factory=lambda: array("d"))
    r_line: array = field(default_factory=lambda: array("q"))
    r_off: array = field(default_factory=lambda: array("q"))
    _keysets: dict[tuple, frozenset] = field(default_factory=dict, repr=False)
    _live: int = 0  # records referenced at the last compaction
    _keys: tuple = ()  # the keys of the block being gathered, its rows (flat) and record ids
    _rows: array = field(default_factory=lambda: array("d"), repr=False)
    _rids: array = field(default_factory=lambda: array("q"), repr=False)

    def _new(self, key: str) -> _Series | None:
        if len(self.series) >= MAX_SERIES:
            return None
        s = self.series[key] = _Series(4 if IMPORTANT.search(key) else 1)
        lo, hi = SERIES_CAP
        share = STORE_POINTS // sum(x.weight for x in self.series.values())
        floor = max(32, min(lo, STORE_POINTS // len(self.series)))  # the least, unless series are very many
        for other in self.series.values():  # every series' room shrinks as series appear
            other.cap = max(floor, min(hi, share * other.weight))
        return s

    def add(self, fmt: str, step: float, line: int, off: int, values: dict[str, float]) -> None:
        """Fold one metric line (``values`` by raw key, at ``step``; ``line`` 1-based, ``off`` its byte offset or -1).
        Lines with the same keys in a row are gathered as rows of one block and filed per series by slicing."""
        self.add_row(fmt, step, line, off, tuple(values), values.values())

    def add_row(self, fmt: str, step: float, line: int, off: int, keys: tuple[str, ...], vals) -> None:
        """:meth:`add` with the keys and the values (an iterable of floats, in key order) apart: a caller that
        reads many lines with one key layout passes the same ``keys`` tuple each time (compared by identity)."""
        rid = len(self.r_line)
        self.r_step.append(step)
        self.r_line.append(line)
        self.r_off.append(off)
        if keys is not self._keys and keys != self._keys or len(self._rids) >= PENDING:
            self._flush()
            self._keys = keys
        rows, n = self._rows, len(self._rows)
        try:
            rows.extend(vals)
        except TypeError:  # a value that is not a plain number
            del rows[n:]
            rows.extend([float(v) for v in vals])
        self._rids.append(rid)
        self.metric_lines += 1
        self.formats.add(fmt)
        self._record(fmt, step, line, keys)
        if rid >= max(MAX_RECORDS, 2 * self._live):
            self._compact()

    def _flush(self) -> None:
        """File the gathered block: each key's column goes to its series."""
        rids, rows, keys = self._rids, self._rows, self._keys
        if not rids:
            return
        nk, series = len(keys), self.series
        for j, k in enumerate(keys):
            s = series.get(k)
            if s is None:
                s = self._new(k)
                if s is None:
                    self.dropped_series[k] = self.dropped_series.get(k, 0) + len(rids)
                    continue
            s.pv.extend(rows[j::nk])
            s.pr.extend(rids)
            if len(s.pv) >= max(PENDING, s.width):
                s.file()
        self._rids, self._rows = array("q"), array("d")

    def _compact(self) -> None:
        """Drop the records no series refers to any more (their ids are renumbered)."""
        self._flush()
        for s in self.series.values():
            s.file()
        live = set()
        for s in self.series.values():
            live.update(s.recs, s.pr, (q[1] for q in (s.first, s.last, *s.bad) if q is not None))
        order = sorted(live)
        self._live = len(order)
        new = {r: i for i, r in enumerate(order)}
        self.r_step = array("d", (self.r_step[r] for r in order))
        self.r_line = array("q", (self.r_line[r] for r in order))
        self.r_off = array("q", (self.r_off[r] for r in order))
        for s in self.series.values():
            s.recs = array("q", (new[r] for r in s.recs))  # (bucket boundaries index entries: unchanged)
            s.pr = array("q", (new[r] for r in s.pr))
            s.first, s.last = [None if q is None else (q[0], new[q[1]]) for q in (s.first, s.last)]
            s.bad = [(v, new[r]) for v, r in s.bad]

    def _record(self, fmt: str, step: float, line: int, t: tuple) -> None:
        keys = self._keysets.get(t)
        if keys is None:
            keys = frozenset(t)
            if len(self._keysets) < 10_000:
                self._keysets[t] = keys
        runs = self.tail_runs if len(self.runs) >= MAX_RUNS else self.runs
        if runs and runs[-1].fmt == fmt and runs[-1].keys == keys:
            r = runs[-1]
            r.last, r.count = (step, line), r.count + 1
            return
        runs.append(Run(fmt, keys, (step, line), (step, line)))
        if len(self.tail_runs) > MAX_RUNS:
            del self.tail_runs[: MAX_RUNS // 2]
            self.runs_dropped += MAX_RUNS // 2

    def materialize(self) -> tuple["MetricTable", "LineIndex"]:  # noqa: F821
        """An engine MetricTable of the held points (at most about TABLE_POINTS over all series; ``counts`` are the
        true numbers of points) and the byte offsets of its points' lines."""
        from grpo_debug.tools.engine.metrics import LineSet, MetricTable, Point, Record

        self._flush()
        table = MetricTable(formats=set(self.formats), axes=dict(self.axes))
        weight = sum(s.weight for s in self.series.values()) or 1
        lo, hi = TABLE_CAP
        lo = max(16, min(lo, TABLE_POINTS // max(1, len(self.series))))  # the least, unless series are very many
        used: set[int] = set()
        steps, nos = self.r_step, self.r_line
        for k, s in self.series.items():
            budget = max(lo, min(hi, TABLE_POINTS * s.weight // weight))
            vals, recs = s.held()
            idx = _thin(vals, budget)
            table.series[k] = [Point(steps[recs[i]], vals[i], nos[recs[i]]) for i in idx]
            table.counts[k] = s.n
            used.update(recs[i] for i in idx)
        for r in self.runs + self.tail_runs:
            table.records.append(Record(r.fmt, r.first[0], r.first[1], r.keys))
            if r.count > 1:
                table.records.append(Record(r.fmt, r.last[0], r.last[1], r.keys))
        index = {nos[r]: self.r_off[r] for r in used}
        table.lines = LineSet(index)
        table.lines.total = self.metric_lines
        return table, LineIndex.of(index)


@dataclass
class LineIndex:
    """Line number -> byte offset of the materialised metric points (sorted columns; ``get`` by bisection)."""

    nos: array = field(default_factory=lambda: array("q"))
    offs: array = field(default_factory=lambda: array("q"))

    @classmethod
    def of(cls, d: dict[int, int]) -> "LineIndex":
        out = cls()
        for n in sorted(d):
            out.nos.append(n)
            out.offs.append(d[n])
        return out

    def get(self, no: int) -> int | None:
        i = bisect_left(self.nos, no)
        if i < len(self.nos) and self.nos[i] == no and self.offs[i] >= 0:
            return self.offs[i]
        return None
