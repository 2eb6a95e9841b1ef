"""The runs a plot overlays, and the step each finding is marked at (tools/rundir/plot.py).

Runs: ``also`` given (more paths: the CLI's extra RUN arguments, the MCP tool's ``also``): the input and each of
them, one run each; else a folder that ``runs_split.group_folder`` splits (a sweep: one run per log or run folder,
shared configs with each; rank logs of one run stay one), or a paste / small file that ``runs_split.split_text``
splits ([A]/[B] labels, header lines, a second launch, the step numbering starting again); else one run. At most
``MAX_RUNS`` are drawn (one colour each); the rest are named in a note.

Marks (:func:`marks_of`): a finding with an ``onset`` (tools/engine/onset.py) is marked at ``onset.step`` on the
panel of ``onset.series`` only; a finding without one (an error line, a config risk) at the smallest step its
evidence names (the metric line itself, else the last metric line before it), on every panel of its run.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

MAX_RUNS = 8


@dataclass
class RunPlot:
    """One run to draw: ``name`` (None for a lone run), its ``analysis`` (tools/rundir/analyze.Analysis)."""

    name: str | None
    analysis: Any
    marks: list[tuple[str, float, str | None]] = field(default_factory=list)


def marks_of(analysis) -> list[tuple[str, float, str | None]]:
    """(symptom, step, series name or None for every panel) per finding that names a step (module docstring)."""
    out = []
    for f in analysis.result.findings:
        on = getattr(f, "onset", None)
        if on is not None and on.step is not None:
            out.append((f.symptom, float(on.step), on.series))
            continue
        exact = [st for e in f.evidence if (st := analysis.step_at_line(e.line)) is not None]
        steps = exact or [st for e in f.evidence if (st := analysis.step_of_line(e.line)) is not None]
        if steps:
            out.append((f.symptom, float(min(steps)), None))
    return out


def on_panel(marks, s) -> list[tuple[str, float]]:
    """The (symptom, step) marks that belong on series ``s``'s panel: its own onsets and the run-wide ones."""
    names = {s.name, *getattr(s, "raw_keys", [])}
    return [(sym, x) for sym, x, ser in marks if ser is None or ser in names]


def _folder_runs(path: str) -> tuple[list[RunPlot], int] | None:
    from grpo_debug.tools import safefs
    from grpo_debug.tools.rundir.analyze import Analysis, folder_result
    from grpo_debug.tools.rundir.discover import Inventory, Limits, find_inputs
    from grpo_debug.tools.rundir.runs_split import group_folder

    root = os.path.abspath(os.path.expanduser(path))
    with safefs.anchored(root):
        inv = find_inputs(root, Limits())
        groups = group_folder(inv)
    if not groups:
        return None
    out = []
    for g in groups[:MAX_RUNS]:
        res, m = folder_result(root, inventory=Inventory(root=root, texts=list(g.texts), stores=list(g.stores)),
                               label=g.name)
        out.append(RunPlot(g.name, Analysis(m.ctx, res, f"{path} {g.name}", m)))
    return out, len(groups)


def _text_runs(text: str) -> tuple[list[RunPlot], int] | None:
    from grpo_debug.tools.rundir.analyze import analyze
    from grpo_debug.tools.rundir.runs_split import split_text

    segs = split_text(text)
    if not segs or len(segs) < 2:
        return None
    return [RunPlot(s.name, analyze(text=s.text)) for s in segs[:MAX_RUNS]], len(segs)


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}#{seen[n]}")
    return out


def _name(path: str | None) -> str:
    if path is None:
        return "<text>"
    p = os.path.normpath(str(path))
    return os.path.basename(p) or p


def load_runs(text: str | None = None, path: str | None = None, also: list[str] | None = None) -> tuple[list, str]:
    """(the runs to draw, how they were found: '' for one run). Raises InputError as ``analyze`` does."""
    from grpo_debug.tools.rundir.analyze import analyze, is_store_file
    from grpo_debug.tools.triage import streamable

    if also:
        paths = [path, *also][:MAX_RUNS]
        names = _unique([_name(path), *map(_name, also)])
        runs = [RunPlot(names[0], analyze(text=text, path=path))]
        runs += [RunPlot(n, analyze(path=p)) for n, p in zip(names[1:], paths[1:])]
        how = f"{len(runs)} inputs" + (f" (the first {MAX_RUNS} of {1 + len(also)})" if 1 + len(also) > MAX_RUNS
                                       else "")
        return runs, how
    found, how = None, ""
    if text is not None:
        found, how = _text_runs(text), "split from the paste"
    elif path is not None and os.path.isdir(os.path.expanduser(path)):
        found, how = _folder_runs(path), "one per log or run folder"
    elif path is not None and not is_store_file(path) and streamable(path) is None:
        from grpo_debug.tools.inputs import read_input

        found, how = _text_runs(read_input(None, path)[0]), "split from the file"
    if not found:
        return [RunPlot(None, analyze(text=text, path=path))], ""
    runs, total = found
    cut = f", the first {len(runs)} of {total} drawn" if total > len(runs) else ""
    return runs, f"{total} runs, {how}{cut}"
