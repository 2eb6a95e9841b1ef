"""Triage of a run folder (or a metric-store file), and the one loader plot and compare share.

``triage_folder(path)``: :func:`~grpo_debug.tools.rundir.discover.find_inputs` -> merge (merge.py) -> the same
engine as a single-file triage (``tools.triage._result``) -> every line number mapped back to its own file:
an evidence item's ``line`` is the line in the file its ``source`` names (for a metric store: the store's
file and the 1-based step line of its listing, whose text names the step and the series). ``coverage.files``
says which files were read and how; ``coverage.skipped`` which were not and why.

``analyze(text=..., path=...)`` returns an :class:`Analysis` (context, run model, triage result) of a pasted
text, a file, a store file or a folder.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from grpo_debug.tools.errors import InputError


@dataclass
class Analysis:
    """One input analysed: ``ctx`` (engine context, its ``run`` the run model), ``result`` (TriageResult),
    ``label``, and ``merged`` (folder inputs: where each merged line came from) or None."""

    ctx: Any
    result: Any
    label: str
    merged: Any = None

    @property
    def run(self):
        return self.ctx.run

    def step_of_line(self, no: int) -> float | None:
        """The step of the last metric line at or before merged line ``no`` (None before any): its records and
        its series' points (a streamed log keeps a record per run of lines, and the points it kept)."""
        import bisect

        idx = self.__dict__.get("_steps")
        if idx is None:
            from grpo_debug.tools.run.build import COUNTER_AXES, _axis

            mt = self.ctx.metrics
            axes = getattr(mt, "axes", {})
            pairs = {r.line: r.step for r in mt.records  # (not counters of something else than steps)
                     if not all((axes.get(k) or _axis(r.fmt, k)) in COUNTER_AXES for k in r.keys)}
            for k, pts in mt.series.items():
                if axes.get(k) in COUNTER_AXES:
                    continue
                for p in pts:
                    pairs.setdefault(p.line, p.step)
            order = sorted(pairs)
            idx = self.__dict__["_steps"] = (order, [pairs[ln] for ln in order])
        i = bisect.bisect_right(idx[0], no) - 1
        return idx[1][i] if i >= 0 else None

    def step_at_line(self, no: int) -> float | None:
        """The step of merged line ``no`` when it is itself a metric line the run kept, else None."""
        self.step_of_line(no)  # builds the index
        order, steps = self.__dict__["_steps"]
        import bisect

        i = bisect.bisect_left(order, no)
        return steps[i] if i < len(order) and order[i] == no else None


def is_store_file(path: str) -> bool:
    from grpo_debug.tools.readers import sniff_file

    try:
        return os.path.isfile(path) and sniff_file(path) is not None
    except OSError:
        return False


def _inventory(path: str, limits):
    from grpo_debug.tools.readers import StoreRef, sniff_file
    from grpo_debug.tools.rundir.discover import Inventory, find_inputs

    if os.path.isdir(path):
        return find_inputs(path, limits)
    inv = Inventory(root=os.path.dirname(os.path.abspath(path)))
    inv.stores = [StoreRef(os.path.abspath(path), sniff_file(path))]
    return inv


def merge_path(path: str, rules=None, limits=None, progress=None, inventory=None, share: int | None = None):
    """The Merged context of a folder or a store file (tools/rundir/merge.py); ``inventory``: only these inputs
    of the folder (one run of a folder of runs, tools/rundir/runs.py), else everything found; ``share``: the logs
    sharing one budget of kept lines (merge.merge_texts)."""
    from grpo_debug.skills.loader import default_rules
    from grpo_debug.tools.rundir.discover import Limits
    from grpo_debug.tools.rundir.merge import Merged, attach_run, empty_context, merge_stores, merge_texts

    p = os.path.abspath(os.path.expanduser(os.fspath(path)))
    if not os.path.exists(p):
        raise InputError(f"{path}: no such file or folder")
    from grpo_debug.tools import safefs

    lim = limits or Limits()
    with safefs.anchored(p if os.path.isdir(p) else os.path.dirname(p)):  # no link below the folder is followed
        inv = inventory if inventory is not None else _inventory(p, lim)
        m = Merged(ctx=empty_context(), skipped=list(inv.skipped))
        merge_texts(m, inv, rules or default_rules(), lim, progress, share)
        merge_stores(m, inv, progress)
        attach_run(m, p)
    if not m.files:
        why = "; ".join(m.skipped[:3])
        raise InputError(f"{path}: no console log, config, launch script or metric store found (looked for "
                         "*.log/*.out/*.txt, *.yaml/*.json, *.sh, event files, wandb/, mlflow.db, ...)"
                         + (f"; skipped: {why}" if why else ""))
    return m, inv


def _place(m, no: int, source: str | None) -> tuple[int, str]:
    loc = m.locate(no)
    if loc is None:
        return no, source or ""
    rel, local, store = loc
    if store:
        return local, source or rel
    return local, rel + (f" [{source}]" if source else "")


_LINE_REF = re.compile(r"\(line (\d+)\)")
_NOTE_LINE = re.compile(r"\bline (\d+)\b")


def _note_line(m, no: int, name_file: bool = True) -> str:
    """'line 4 of train.log' (or 'line 4' without ``name_file``) for merged line ``no`` in an edit's note."""
    loc = m.locate(no)
    if loc is None or loc[2]:
        return f"line {no}"
    return f"line {loc[1]} of {loc[0]}" if name_file else f"line {loc[1]}"


def _line_ref(m, no: int) -> str:
    """'(train.log line 40)' for merged line ``no`` of a detector's sentence; a store's line: '(its file)'."""
    loc = m.locate(no)
    if loc is None:
        return f"(line {no})"
    if loc[2]:
        ln = next((x for x in m.lines if x.no == no), None)
        return f"({ln.source if ln is not None and ln.source else loc[0]})"
    return f"({loc[0]} line {loc[1]})"


def remap(result, m) -> None:
    """Map the result's merged line numbers back to (file, line) in place."""
    for f in result.findings:
        if getattr(f, "onset", None) is not None and f.onset.line is not None:  # (file, line), as its evidence
            src = next((e.source for e in f.evidence if e.line == f.onset.line), None)
            f.onset.line, f.onset.file = _place(m, f.onset.line, src)
            f.onset.file = f.onset.file or None
        for e in f.evidence:
            e.line, e.source = _place(m, e.line, e.source)
        for s in f.settings:
            s.line, s.source = _place(m, s.line, None)
            s.source = s.source or None
        keep = []
        for ed in f.edits:
            loc = m.locate(ed.line) if ed.line else None
            if loc and loc[2]:
                continue  # a metric store's config cannot be edited in place
            # merged line numbers in the note: "line 3" when the note ends with "(in file)", else "line 3 of file"
            ed.note = _NOTE_LINE.sub(lambda mo: _note_line(m, int(mo.group(1)), loc is None), ed.note)
            if loc:
                ed.line, ed.note = loc[1], (ed.note + f" (in {loc[0]})").strip()
            keep.append(ed)
        f.edits = keep
        for c in f.causes:
            c.matched = [_LINE_REF.sub(lambda mo: _line_ref(m, int(mo.group(1))), t) for t in c.matched]
        f.next_checks = [_LINE_REF.sub(lambda mo: _line_ref(m, int(mo.group(1))), t) for t in f.next_checks]
        f.fix = _LINE_REF.sub(lambda mo: _line_ref(m, int(mo.group(1))), f.fix)
    for e in result.coverage.not_understood_sample:
        e.line, e.source = _place(m, e.line, e.source)
    for s in result.metrics.values():
        if s.first_nonfinite_line is not None:
            s.first_nonfinite_line = _place(m, s.first_nonfinite_line, None)[0]


def _summary(result) -> str:
    from grpo_debug.tools.triage import _summary as summary

    s = summary(result.findings, result.coverage, None, reason=result._reason)  # the verdict's reason first
    ev = result.findings[0].evidence[0] if result.findings and result.findings[0].evidence else None
    if ev is not None and ev.source:
        s = s.replace(f"Evidence: line {ev.line}:", f"Evidence: {ev.source} line {ev.line}:", 1)
    return s


def triage_folder(path, *, rules=None, max_findings: int = 10, progress=None, limits=None, **kw):
    """Triage every file of a run folder (or one metric-store file) as one run. ``kw``: passed to the engine's
    result builder (e.g. ``versions``). Raises InputError for a missing path."""
    return folder_result(path, rules=rules, max_findings=max_findings, progress=progress, limits=limits, **kw)[0]


def folder_result(path, *, rules=None, max_findings: int = 10, progress=None, limits=None, inventory=None,
                  label: str | None = None, share: int | None = None, **kw):
    """(TriageResult, Merged) of :func:`triage_folder`; ``inventory``: only these inputs of the folder; ``share``:
    the logs sharing one budget of kept lines (merge.merge_texts)."""
    from grpo_debug.tools.triage import _result

    m, _inv = merge_path(path, rules, limits, progress, inventory, share)
    result = _result(m.ctx, m.lines, label=label or str(path), skipped=m.skipped, rules=rules,
                     max_findings=max_findings, lines_read=m.lines_read + sum(s.end - s.start + 1 for s in m.spans
                                                                             if s.store),
                     bytes_read=m.bytes_read, **{k: v for k, v in kw.items() if v is not None})
    remap(result, m)
    result.coverage.files = m.files
    result.summary = _summary(result)
    return result, m


def analyze(text: str | None = None, path: str | None = None, *, rules=None, max_findings: int = 20) -> Analysis:
    """Analyse one input (pasted text, a file, a store file or a folder) for plot and compare."""
    from grpo_debug.tools.inputs import read_input
    from grpo_debug.tools.triage import _result, build_context, streamable

    if path is not None and text is None and (os.path.isdir(path) or is_store_file(path)):
        m, _ = merge_path(path, rules)
        res = _result(m.ctx, m.lines, label=str(path), skipped=m.skipped, rules=rules, max_findings=max_findings,
                      lines_read=m.lines_read, bytes_read=m.bytes_read)
        res.coverage.files = m.files
        return Analysis(m.ctx, res, str(path), m)
    big = streamable(path) if path is not None and text is None else None
    if big is not None:  # a large or compressed log: streamed as triage streams it (bounded series, notes)
        from grpo_debug.tools.triage import stream_and_result

        st, res = stream_and_result(big, rules=rules, max_findings=max_findings, label=str(big))
        return Analysis(st.ctx, res, str(big))
    s, label, skipped, hint = read_input(text, path)
    ctx, lines = build_context(s, hint)
    res = _result(ctx, lines, label=label, skipped=skipped, rules=rules, max_findings=max_findings,
                  lines_read=len(lines), bytes_read=len(s))
    return Analysis(ctx, res, label)


def triage_any(text: str | None = None, path=None, *, runs: str | None = None, **kw):
    """What both faces call: a run folder or a metric-store file through :func:`triage_folder`, anything else
    through ``tools.triage.triage`` (``kw``: rules, max_findings, progress, versions). An input holding several
    runs (a folder of independent logs, a [A]/[B] paste, a second launch) is split and each run triaged on its own
    (tools/rundir/runs.py); ``runs``: "one" never splits (the CLI's ``--one-run``), "split" splits on weaker signs
    (``--split-runs``), None decides from the input."""
    from grpo_debug.tools.triage import streamable, triage

    if runs not in (None, "one", "split"):
        raise InputError(f"runs={str(runs)[:20]!r}: give 'one', 'split' or nothing")
    if text is None and path is not None:
        p = os.path.expanduser(os.fspath(path))
        if os.path.isdir(p) and runs != "one":
            from grpo_debug.tools.rundir.runs import triage_folder_runs

            res = triage_folder_runs(p, folder_result, force=runs == "split", **kw)
            if res is not None:
                return res
        if os.path.isdir(p) or is_store_file(p):
            res = triage_folder(p, **kw)
            logs = [f for f in res.coverage.files if ": log" in f]
            if os.path.isdir(p) and len(logs) > 1 and runs is None:  # merged: say so, and how to keep them apart
                res.coverage.skipped.append(f"{len(logs)} logs read as one run (rank logs or one run's pieces: no "
                                            "sign of separate runs); --split-runs (CLI) triages each log on its own")
            return res
    if runs != "one" and (text is None) != (path is None) and (text is not None or (
            os.path.isfile(os.path.expanduser(os.fspath(path))) and streamable(path) is None)):
        return _paste_runs(text, path, runs == "split", **kw)
    return triage(text=text, path=path, **kw)


def _paste_runs(text, path, force: bool, *, rules=None, max_findings: int = 10, progress=None, versions=None):
    """A paste (or a file not large enough to stream) holding several runs triaged run by run (runs.py), else the
    single-run triage of what was read (as ``tools.triage.triage`` does)."""
    from grpo_debug.tools.inputs import read_input
    from grpo_debug.tools.rundir.runs import triage_paste_runs
    from grpo_debug.tools.triage import triage_text

    s, label, skipped, hint = read_input(text, path)
    res = triage_paste_runs(s, label=label, hint=hint, force=force, rules=rules, max_findings=max_findings,
                            versions=versions)
    return res if res is not None else triage_text(s, label=label, hint=hint, skipped=skipped, rules=rules,
                                                   max_findings=max_findings, versions=versions)
