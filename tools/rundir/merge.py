"""Merge what a run folder holds into one engine :class:`~grpo_debug.tools.engine.match.Context`.

Each text file (config, launch script, console log) is read on its own the way a single-file triage reads it
(``tools.triage.build_context``; a log over ``Limits.stream_bytes`` or compressed through the large-log
prefilter) and its line numbers are shifted into one numbering. Metric stores come after: each store's console
lines are read like a log; its config becomes one line per key (a fact each); its series become one line per
step, ``step N: key=value, ...`` (at most 40 keys a line), whose points go straight into the metric table, so the
rules, detectors and evidence work unchanged and a store's evidence names the file, the series and the step.

A (key, step) already read from a console log is not added again from a store, nor one already read from an
earlier store (an MLflow database and its ``mlruns`` copy of the same run); a series that stores fill in (a
console series, checkpoint-50 then checkpoint-70's trainer_state.json) is put back in step order. W&B's own ``_timestamp``/``_runtime``
series are left out. DeepSpeed's csv_monitor logs against samples: when the samples advance by a constant ``d``
from ``d``, the step is samples/d and the line says both.
"""
from __future__ import annotations

import bisect
import contextlib
import dataclasses
import math
import os
from dataclasses import dataclass, field

from grpo_debug.tools.engine.events import Event
from grpo_debug.tools.engine.facts import Fact, FactSet
from grpo_debug.tools.engine.match import Context
from grpo_debug.tools.engine.metrics import MetricTable, Record
from grpo_debug.tools.engine.normalize import Line

KEYS_PER_LINE = 40
SHARED_TOTAL_BYTES = 8 << 20  # logs of a folder above this in all are streamed with one budget of kept lines
SHARED_MIN_BYTES = 256 << 10
SHARED_MIN_HEAD, SHARED_MIN_TAIL = 200, 100
# the rank logs of one run (one launch and config in each): their head and tail lines in all at most this many
# (a floor of 200 + 100 lines a log kept 60,000 lines as text of 199 logs, where one file of their bytes keeps 4,000)
RANKS_HEAD_TOTAL, RANKS_TAIL_TOTAL, RANKS_MIN_HEAD, RANKS_MIN_TAIL = 6000, 3000, 20, 10
STORE_NOTES = 8
_STORE_FRAMEWORK = {"verl_jsonl": "verl", "trainer_state": "trl", "deepspeed_csv": "deepspeed"}


@dataclass
class Span:
    """Merged lines ``start..end`` came from ``rel``; ``store``: synthetic lines of a metric store."""

    start: int
    end: int
    rel: str
    offset: int
    store: bool = False


class MergedLines(list):
    """The merged lines (a list of Line in merged numbering) and, for each streamed log, its kept lines' lazy map
    (tools/streaming.KeptLines): :meth:`line_map` also finds a streamed log's metric lines, read back from the
    file by offset when evidence cites them (they are not held in memory)."""

    def __init__(self, *a) -> None:
        super().__init__(*a)
        self.streamed: list[tuple[int, object]] = []  # (merged offset, KeptLines) of each streamed file

    def line_map(self) -> dict:
        return _MergedMap(self)


class _MergedMap(dict):
    def __init__(self, lines: MergedLines) -> None:
        super().__init__((ln.no, ln) for ln in lines)
        self._lazy = [(off, kept.line_map()) for off, kept in lines.streamed]

    def get(self, no, default=None):
        hit = dict.get(self, no)
        if hit is not None:
            return hit
        for off, lazy in reversed(self._lazy):
            if no > off:
                ln = lazy.get(no - off)
                if ln is None:
                    return default
                ln = self[no] = dataclasses.replace(ln, no=no)
                return ln
        return default


@dataclass
class Merged:
    """The merged context, its lines, where each line came from, and coverage material."""

    ctx: Context
    lines: MergedLines = field(default_factory=MergedLines)
    spans: list[Span] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    bytes_read: int = 0
    lines_read: int = 0
    store_kinds: list[str] = field(default_factory=list)
    rules: object = None  # the rule base, for a store's console streamed as a log
    shared: bool = False  # its logs were streamed with a shared budget (many logs: merge_texts)
    dropped_points: int = 0  # store points not merged: an earlier file or run had that series at that step

    def locate(self, no: int) -> tuple[str, int, bool] | None:
        """(file relative to the folder, its own line number, synthetic store line?) of merged line ``no``."""
        i = bisect.bisect_right([s.start for s in self.spans], no) - 1
        if i < 0 or no > self.spans[i].end:
            return None
        s = self.spans[i]
        return s.rel, no - s.offset, s.store


def empty_context() -> Context:
    return Context(lines=[], events=[], metrics=MetricTable(), facts=FactSet())


def _append(m: Merged, ctx: Context, lines: list[Line], n_lines: int, rel: str, store: bool = False) -> None:
    """Shift ``ctx`` (numbered 1..n_lines) past the merged lines and add it."""
    off = m.spans[-1].end if m.spans else 0
    if n_lines <= 0:
        return
    m.spans.append(Span(off + 1, off + n_lines, rel, off, store))
    m.lines += [dataclasses.replace(ln, no=ln.no + off) for ln in lines]
    if hasattr(lines, "line_map"):  # a streamed log (KeptLines): its metric lines are read back on demand
        m.lines.streamed.append((off, lines))
    t, mt = m.ctx.metrics, ctx.metrics
    for k in set(mt.series) | set(mt.counts):  # true point counts (a streamed log's series are thinned)
        if k in mt.counts or k in t.counts:
            t.counts[k] = t.count(k) + mt.count(k)
    for k, pts in mt.series.items():  # the file's points moved, shifted in place (its context is not used after)
        if off:
            for p in pts:
                p.line += off
        t.series.setdefault(k, []).extend(pts)
    t.records += [Record(r.fmt, r.step, r.line + off, r.keys) for r in mt.records]
    t.formats |= mt.formats
    t.lines |= {n + off for n in mt.lines}
    if hasattr(t, "axes"):
        t.axes.update(getattr(mt, "axes", {}))
    fs = m.ctx.facts
    fs.facts += [Fact(f.key, f.value, f.line + off, f.origin, f.text) for f in ctx.facts.facts]
    fs.formats |= ctx.facts.formats
    fs.command_lines |= {n + off for n in ctx.facts.command_lines}
    m.ctx.events += [Event(e.kind, [n + off for n in e.lines], e.text, e.fields) for e in ctx.events]


def _read_text(t, rb, lim, shared: bool = False) -> tuple[Context, list[Line], int, str, list[str]]:
    """(context, lines, line count, how, notes) of one text file."""
    from grpo_debug.tools.inputs import is_compressed, read_input
    from grpo_debug.tools.triage import build_context

    from pathlib import Path

    p = Path(t.path)
    if t.role == "log" and (t.size > lim.stream_bytes or is_compressed(p) or (shared and t.size > SHARED_MIN_BYTES)):
        return _read_sparse(p, rb, shared)
    s, _label, notes, hint = read_input(None, t.path)
    ctx, lines = build_context(s, hint)
    return ctx, lines, len(lines), t.role, notes


def _read_sparse(p, rb, shared: bool = False) -> tuple[Context, list[Line], int, str, list[str]]:
    """A large or compressed log read as a single-file triage streams it (tools/streaming.read_streamed): every
    metric value into bounded series, the other lines by importance, and a note for everything not kept.
    ``shared``: one of many logs (its few kept lines through the prefilter too)."""
    from grpo_debug.tools.streaming import read_streamed

    st = read_streamed(p, rb, label=str(p), prefilter_kept=shared)
    how = f"log, streamed ({len(st.lines)} of {st.total_lines} lines kept as text)"
    return st.ctx, st.lines, st.total_lines, how, st.skipped


def merge_texts(m: Merged, inv, rb, lim, progress=None, share: int | None = None) -> None:
    """Read every text input of the inventory into ``m`` (a bound on total bytes is a skipped note). ``share``:
    the number of logs that share one budget of kept lines when it is not just this inventory's (a folder of
    runs read one run at a time, tools/rundir/runs.py: each run's log gets 1/N of it)."""
    from grpo_debug.tools.engine.chatter_carry import carry_chatter
    from grpo_debug.tools.engine.large_logs import HEAD_LINES, TAIL_LINES, keep_lines

    total = sum(t.size for t in inv.texts)
    m.rules = rb
    logs = [t for t in inv.texts if t.role == "log"]
    # many logs (rank logs, a sweep): all streamed with one budget of kept lines, so a folder costs what the same
    # bytes cost as one file (60 rank logs of 86 MB: 45 s and 755 MB when each was read whole)
    n = max(len(logs), share or 0)
    shared = n > 1 and (bool(share) or sum(t.size for t in logs) > SHARED_TOTAL_BYTES)
    lo_head, lo_tail = SHARED_MIN_HEAD, SHARED_MIN_TAIL  # a sweep's run (``share``) keeps its own launch and config
    if shared and not share:
        lo_head = min(lo_head, max(RANKS_MIN_HEAD, RANKS_HEAD_TOTAL // n))
        lo_tail = min(lo_tail, max(RANKS_MIN_TAIL, RANKS_TAIL_TOTAL // n))
    head = max(lo_head, HEAD_LINES // n) if shared else HEAD_LINES
    tail = max(lo_tail, TAIL_LINES // n) if shared else TAIL_LINES
    m.shared = shared
    with keep_lines(head, tail, n if shared else 1), carry_chatter() if shared else contextlib.nullcontext():
        _merge_each(m, inv, rb, lim, progress, total, shared)  # (a log's chatter not scanned for again in the next)


def _merge_each(m: Merged, inv, rb, lim, progress, total: int, shared: bool) -> None:
    for t in inv.texts:
        if m.bytes_read + min(t.size, lim.stream_bytes) > lim.max_total_bytes:
            m.skipped.append(f"{t.rel}: not read (more than {lim.max_total_bytes >> 20} MiB of text read in all)")
            continue
        try:
            ctx, lines, n, how, notes = _read_text(t, rb, lim, shared)
        except Exception as e:  # noqa: BLE001 - one unreadable file must not stop the others
            m.skipped.append(f"{t.rel}: cannot read ({type(e).__name__}: {str(e)[:120]})")
            continue
        _append(m, ctx, lines, n, t.rel)
        if how.startswith("log, streamed"):  # what streaming did not keep belongs with the other cuts
            m.skipped += [f"{t.rel}: {x}" for x in notes]
            notes = []
        m.bytes_read += t.size
        m.lines_read += n
        what = [how, f"{n} lines"]
        if ctx.metrics.lines:
            what.append(f"{len(ctx.metrics.lines)} metric lines")
        if ctx.facts.facts:
            what.append(f"{len(ctx.facts)} config facts")
        if ctx.events:
            what.append(f"{len(ctx.events)} events")
        m.files.append(f"{t.rel}: " + ", ".join(what) + "".join(f"; {x}" for x in notes))
        if progress:
            progress(m.bytes_read, total)


def _fmt(v: float) -> str:
    return str(v).lower() if not math.isfinite(v) else f"{v:.6g}"


def _samples_step(xs: list[float]) -> float | None:
    """The samples-per-step d when xs = d, 2d, 3d, ... (DeepSpeed csv_monitor), else None."""
    xs = sorted(set(xs))
    if len(xs) < 2 or xs[0] <= 0:
        return None
    d = xs[0]
    return d if all(abs(x / d - round(x / d)) < 1e-9 for x in xs) else None


def _store_series_lines(m: Merged, run, rel: str, have: set[tuple[str, float]]) -> list[tuple[str, str, float, dict]]:
    """(text, source, step, values) per synthetic line of one store run's series."""
    by_x: dict[tuple[str, float], dict[str, tuple[float, str]]] = {}
    for key, s in run.series.items():
        if run.kind == "wandb" and key.startswith("_"):
            continue
        for x, v, where in s.points:
            by_x.setdefault((s.axis, x), {})[key] = (v, where)
    per = {}
    for axis in {a for a, _ in by_x}:
        per[axis] = _samples_step([x for a, x in by_x if a == axis]) if axis == "samples" else None
    out = []
    for (axis, x), vals in sorted(by_x.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        d = per.get(axis)
        step = x / d if d else x
        label = f"step {step:g} (samples {x:g})" if d else (f"samples {x:g}" if axis == "samples" else f"step {step:g}")
        keep = {k: vw for k, vw in vals.items() if (k, step) not in have}
        m.dropped_points += len(vals) - len(keep)
        have |= {(k, step) for k in keep}
        items = sorted(keep.items())
        for i in range(0, len(items), KEYS_PER_LINE):
            chunk = items[i:i + KEYS_PER_LINE]
            where = chunk[0][1][1].split("#")[0].split(" ")[0]
            src = rel if rel.endswith(where) or not where else f"{rel}/{where}"
            text = f"{label}: " + ", ".join(f"{k}={_fmt(v)}" for k, (v, _) in chunk)
            out.append((text, src, step, {k: v for k, (v, _) in chunk}))
    return out


def merge_store(m: Merged, run, rel: str, have: set[tuple[str, float]]) -> None:
    """Add one StoreRun: console lines as a log, config as facts, series as step lines."""
    from grpo_debug.tools.triage import build_context

    if run.console:
        ctx, lines = build_context("\n".join(run.console))
        _append(m, ctx, lines, len(lines), f"{rel} (console)")
        have |= {(k, p.step) for k, pts in ctx.metrics.series.items() for p in pts}
    elif run.console_file:  # a console too big to hold (W&B files/output.log): streamed like any big log
        from pathlib import Path

        try:
            ctx, lines, n, _how, notes = _read_sparse(Path(run.console_file), m.rules)
        except Exception as e:  # noqa: BLE001 - the store's series are still read
            m.skipped.append(f"{rel} (console): cannot read ({type(e).__name__}: {str(e)[:120]})")
        else:
            _append(m, ctx, lines, n, f"{rel} (console)")
            m.skipped += [f"{rel} (console): {x}" for x in notes]
            have |= {(k, p.step) for k, pts in ctx.metrics.series.items() for p in pts}
    ctx = empty_context()
    lines: list[Line] = []
    for k, v in run.config.items():
        if isinstance(v, (dict, list)) and not v:
            continue
        text = f"{k}: {v}"[:2000]
        lines.append(Line(len(lines) + 1, text, text, rel))
        ctx.facts.add(str(k), v, len(lines), "store", text)
    before = m.dropped_points
    rows = _store_series_lines(m, run, rel, have)
    if m.dropped_points > before:  # never silent: a point another file or run already gave at that step is not merged
        who = f" run {run.run_id}" if run.run_id else ""
        m.skipped.append(f"{rel}{who}: {m.dropped_points - before} points at steps an earlier file or run of this input "
                         "already has were not merged (the earlier values are used): the runs of one store are merged "
                         "as one run, not yet triaged apart")
    for text, src, step, vals in rows:
        lines.append(Line(len(lines) + 1, text, text, src))
        ctx.metrics.add(run.kind, step, len(lines), vals)
    _append(m, ctx, lines, len(lines), rel, store=True)
    n_pts = sum(len(v) for *_, v in rows)
    what = f"{run.kind} store" + (f" run {run.run_id}" if run.run_id else "")
    what += f", {len({k for *_, v in rows for k in v})} series, {n_pts} points, {len(run.config)} config keys"
    if run.console:
        what += f", {len(run.console)} console lines"
    if run.exit_code is not None:
        what += f", exit code {run.exit_code}"
    m.files.append(f"{rel}: {what}" + "".join(f"; {n}" for n in run.notes[:3]))
    m.skipped += [f"{rel}: {n}" for n in run.notes[:STORE_NOTES]]  # what a reader skipped is coverage too
    if len(run.notes) > STORE_NOTES:
        m.skipped.append(f"{rel}: {len(run.notes) - STORE_NOTES} more reader notes")
    if run.kind not in m.store_kinds:
        m.store_kinds.append(run.kind)


def merge_stores(m: Merged, inv, progress=None) -> None:
    """Read every store of the inventory into ``m``."""
    from grpo_debug.tools.readers import read_store

    series = m.ctx.metrics.series
    have = {(k, p.step) for k, pts in series.items() for p in pts}
    stores_from = m.spans[-1].end if m.spans else 0
    for ref in inv.stores:
        rel = inv.rel(ref.path)
        try:
            runs = read_store(ref.path)
        except Exception as e:  # noqa: BLE001 - read_store already guards each reader; belt and braces
            m.skipped.append(f"{rel}: {ref.kind} store unreadable ({type(e).__name__}: {str(e)[:120]})")
            continue
        for run in runs:
            merge_store(m, run, rel, have)
            try:
                m.bytes_read += os.path.getsize(ref.path) if os.path.isfile(ref.path) else 0
            except OSError:
                pass
    starts = [sp.start for sp in m.spans]
    for pts in series.values():  # a series filled in from several files or stores: back in step order
        if any(b.step < a.step for a, b in zip(pts, pts[1:])) and len(
                {bisect.bisect_right(starts, p.line) for p in pts}) > 1 and pts[-1].line > stores_from:
            pts.sort(key=lambda p: p.step)


def attach_run(m: Merged, source: str = "<folder>") -> None:
    """Build the context's run model once (as ``tools.run.build.build_run`` does), the frameworks the store kinds
    imply (as ``from_store`` does) known before the series are named, so their aliases apply."""
    from grpo_debug.tools.run.build import add_facts, add_table
    from grpo_debug.tools.run.frameworks import detect
    from grpo_debug.tools.run.model import FrameworkHit, Run
    from grpo_debug.tools.run.samples import all_samples

    m.ctx.lines = m.lines
    m.ctx.events.sort(key=lambda e: (e.line, e.kind != "traceback"))
    fws = detect(m.lines, m.ctx.facts, m.ctx.metrics.formats)
    for kind in m.store_kinds:
        fw = _STORE_FRAMEWORK.get(kind)
        if fw and not any(h.name == fw for h in fws):
            fws.append(FrameworkHit(name=fw, evidence=[f"{kind} store"], score=2))
    fws.sort(key=lambda h: -h.score)
    run = Run(source=source, frameworks=fws, events=list(m.ctx.events))
    add_table(run, m.ctx.metrics)
    add_facts(run, m.ctx.facts)
    run.samples = all_samples(m.lines)  # as tools/run/build.build_run does: one list of sample kinds
    run.formats |= set(m.store_kinds)
    m.ctx._run = run
    if m.shared and m.rules is not None:  # the rules' regexes over the kept lines in one prefilter pass, however
        from grpo_debug.tools.engine.prefilter import lines_matching  # few they are (match.Context.regex_candidates)

        pats = m.rules.regex_patterns()
        hits = lines_matching(pats, [ln.text for ln in m.lines], min_bytes=0)
        m.ctx._regex_hits = {pats[i]: v for i, v in hits.items()}
