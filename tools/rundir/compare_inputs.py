"""The two runs ``compare_runs`` compares, from what it was given (issue 26; issue 23 item 4).

- two inputs (``a`` and ``b``), each a paste, a file, a metric-store file or a folder: one run each;
- one paste, or one file that is not a folder: split by ``runs_split.split_text`` ([A]/[B] labels, header lines,
  a second launch line, the step numbering starting again), then, when that finds one run, with ``force`` (any
  restart of the step numbering cuts: the caller said it holds two runs);
- one folder: ``runs_split.group_folder`` with ``force`` (each log or run folder that looks like a run is one).

With more than two runs, each is triaged and reduced to a ``runs_compare.View``; the compared pair is the most
broken run (own medium/high findings and series outliers against its siblings, ``runs_compare.compare_views``;
the first such run in input order) as B against the run that is not broken whose config facts differ least from
B's as A (the nearest healthy sibling: what is left in the config diff is what sets B apart; the first other run
when all are broken). ``runs`` lists every run. Raises InputError naming what was seen and how to mark the runs when the
input does not make two runs.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from grpo_debug.tools.errors import InputError

_CONF = {"high": 3, "medium": 2, "low": 1}
HOW_TO_MARK = ("mark the runs: prefix run A's lines with '[A] ' and run B's with '[B] ', or put a line such as "
               "'=== run B ===' (or run B's own launch command) before run B's first step, or give run B "
               "separately (MCP `b`, CLI second argument)")


@dataclass
class Pair:
    """The compared runs (``A``, ``B``: tools/rundir/analyze.Analysis), every run of a split input (``runs``:
    {name, where, verdict, broken, role}) and how it was split (``how``, '' for two inputs)."""

    A: Any
    B: Any
    runs: list[dict[str, Any]] = field(default_factory=list)
    how: str = ""


def _nonblank(text: str | None) -> int:
    return sum(1 for ln in (text or "").splitlines() if ln.strip())


def _side(text: str | None, path: str | None, which: str):
    from grpo_debug.tools.rundir.analyze import analyze

    if text is not None and not _nonblank(text):
        raise InputError(f"run {which} is empty (no non-blank line): paste run {which}'s log, or give its path")
    return analyze(text=text, path=path)


def _holds_several(text: str | None, path: str | None, which: str) -> str:
    """'' when one side of a two-input comparison is one run, else a note that it holds several and was compared
    as one input (never silent: compare that side alone to compare its runs)."""
    from grpo_debug.tools.rundir.runs_split import split_text

    if path is not None and os.path.isdir(os.path.expanduser(path)):
        return ""
    try:
        from grpo_debug.tools.inputs import read_input

        got, _label, _skipped, _hint = read_input(text, path)
        parts = split_text(got)
    except Exception:  # noqa: BLE001 - the side's own analysis reports an unreadable input
        return ""
    if not parts or len(parts) < 2:
        return ""
    return (f"{which} holds {len(parts)} runs; it was compared as one input (compare {which} alone to compare "
            "its runs with each other)")


def _seen(text: str) -> str:
    """What a paste that did not split holds: lines, metric records and their steps, launch lines, labels."""
    from grpo_debug.tools.engine.metrics import extract_metrics
    from grpo_debug.tools.engine.normalize import normalize
    from grpo_debug.tools.rundir.runs_split import LAUNCH

    lines = text.splitlines()
    recs = extract_metrics(normalize(text)).records if len(text) <= 1 << 20 else []
    steps = [r.step for r in recs]
    launches = sum(1 for ln in lines if LAUNCH.match(ln))
    labels = sorted({m.group(1).upper() for ln in lines if (m := re.match(r"\s*\[([A-Za-z])\]", ln))})
    counted = f"{len(recs)} metric records" + (
        f" (steps {min(steps):g}-{max(steps):g}, never starting again)" if steps else "")
    parts = [f"{len(lines)} lines", counted if len(text) <= 1 << 20 else "metric records not counted (over 1 MiB)",
             f"{launches} launch line{'s' if launches != 1 else ''}"]
    parts.append(f"labels {'/'.join(labels)} only" if labels else "no [A]/[B] labels")
    return ", ".join(parts)


def _segments(text: str):
    from grpo_debug.tools.rundir.runs_split import SPLIT_MAX_CHARS, split_text

    if len(text) > SPLIT_MAX_CHARS:
        raise InputError(f"one input given and it is too large to search for several runs ({len(text) / 2**20:.1f} "
                         f"MiB > {SPLIT_MAX_CHARS >> 20} MiB, the bound of a paste of runs): give the two runs as two "
                         "files or folders (MCP `a` and `b`, CLI two arguments)")
    segs = split_text(text) or split_text(text, force=True)
    if not segs or len(segs) < 2:
        raise InputError(f"one input given and it holds one run ({_seen(text)}): {HOW_TO_MARK}")
    return segs


def _pick(views) -> tuple[int, int, list[bool]]:
    """(index of A, index of B, broken per run) among the runs' views (module docstring): broken is a medium/high
    finding of its own or a series outlier against its siblings."""
    from grpo_debug.tools.rundir.runs_compare import compare_views

    extra = compare_views(views)

    def score(v) -> tuple[int, int]:
        fs = [f for f in [*v.result.findings, *extra.get(v.name, [])] if not getattr(f, "risk", False)]
        return max((_CONF.get(f.confidence, 0) for f in fs), default=0), len([f for f in fs if
                                                                             _CONF.get(f.confidence, 0) >= 2])
    scores = [score(v) for v in views]
    b = max(range(len(views)), key=lambda i: (scores[i], -i))
    if scores[b][0] < 2:
        b = 1  # nothing broken: the second run against the first
    healthy = [i for i in range(len(views)) if i != b and scores[i][0] < 2]
    a = min(healthy, key=lambda i: (_distance(views[i], views[b]), i)) if healthy else (0 if b else 1)
    return a, b, [sc[0] >= 2 for sc in scores]


def _distance(u, v) -> int:
    """How many config facts (identifiers aside: runs_compare.IDENT) two runs' views set differently."""
    from grpo_debug.tools.rundir.runs_compare import IDENT

    keys = {k for k in (*u.facts, *v.facts) if not IDENT.search(k)}
    val = lambda w, k: repr(w.facts[k].value) if k in w.facts else None  # noqa: E731
    return sum(1 for k in keys if val(u, k) != val(v, k))


def _rows(views, a: int, b: int, broken: list[bool]) -> list[dict[str, Any]]:
    """One row per run, broken runs first (then input order): a bounded answer cuts from the end."""
    out = []
    for i, v in enumerate(views):
        role = "A" if i == a else "B" if i == b else ""
        out.append({"name": v.name, "where": v.source, "verdict": getattr(v.result, "verdict", None),
                    "broken": broken[i], "role": role})
    return sorted(out, key=lambda r: not r["broken"])


def _where(seg, lines: list[str]) -> str:
    """'lines 2-61': the first and last paste line of a run's own (a labelled run: its labelled lines, not the
    unlabelled ones every run shares)."""
    if seg.how != "labels":
        return seg.where()
    own = [no for no, t in zip(seg.nos, seg.texts) if no <= len(lines) and lines[no - 1] != t]
    return f"lines {own[0]}-{own[-1]}" if own else seg.where()


def _paste_pair(text: str, label: str) -> Pair:
    from grpo_debug.tools.rundir.analyze import analyze
    from grpo_debug.tools.rundir.runs_compare import view

    segs = _segments(text)
    lines = text.split("\n")
    runs = []
    for s in segs:
        an = analyze(text=s.text)
        an.place = lambda no, nos=s.nos: (nos[no - 1] if 1 <= no <= len(nos) else no, None)  # the paste's lines
        an.label = f"{label} {s.name} ({_where(s, lines)})"
        runs.append(an)
    views = [view(s.name, _where(s, lines), an.result, an.run, an.place) for s, an in zip(segs, runs)]
    a, b, bad = _pick(views)
    a, b = (a, b) if len(segs) > 2 else (0, 1)
    how = {"labels": "line labels", "headers": "header lines", "restart": "the step numbering starting again"}
    return Pair(runs[a], runs[b], _rows(views, a, b, bad), f"{len(segs)} runs, split by {how.get(segs[0].how, 'runs')}")


def _folder_pair(path: str) -> Pair:
    from grpo_debug.tools import safefs
    from grpo_debug.tools.rundir.analyze import Analysis, folder_result
    from grpo_debug.tools.rundir.discover import Inventory, Limits, find_inputs
    from grpo_debug.tools.rundir.runs_compare import view
    from grpo_debug.tools.rundir.runs_split import group_folder

    root = os.path.abspath(os.path.expanduser(path))
    with safefs.anchored(root):
        inv = find_inputs(root, Limits())
        groups = group_folder(inv, force=True)
    if not groups:
        n = sum(1 for t in inv.texts if t.role == "log")
        raise InputError(f"one folder given and it holds one run ({path}: {n} log{'s' if n != 1 else ''}, "
                         f"{len(inv.stores)} metric store{'s' if len(inv.stores) != 1 else ''}): give two runs' "
                         "files or folders (MCP `a` and `b`, CLI two arguments)")

    def one(g):
        inv_g = Inventory(root=root, texts=list(g.texts), stores=list(g.stores))
        res, m = folder_result(root, inventory=inv_g, label=g.name)
        return Analysis(m.ctx, res, f"{path} {g.name}", m), m

    views = []
    for g in groups:  # one run's context at a time; the pair is read again below
        an, m = one(g)

        def place(no: int, m=m) -> tuple[int, str | None]:
            loc = m.locate(no)
            return (loc[1], loc[0]) if loc else (no, None)

        views.append(view(g.name, g.name, an.result, an.run, place))
        del an, m
    a, b, bad = _pick(views)
    a, b = (a, b) if len(groups) > 2 else (0, 1)
    return Pair(one(groups[a])[0], one(groups[b])[0], _rows(views, a, b, bad),
                f"{len(groups)} runs, one per log or folder")


def load_pair(a_text: str | None = None, a_path: str | None = None, b_text: str | None = None,
              b_path: str | None = None) -> Pair:
    """The Pair to compare (module docstring). Raises InputError for no input, an empty run, or one input that
    does not hold two runs (the message names what it holds and how to mark the runs)."""
    from grpo_debug.tools.inputs import read_input

    if a_text is None and a_path is None:
        if b_text is None and b_path is None:
            raise InputError("give two runs (a and b, each a paste, file or folder), or one paste holding both")
        a_text, a_path, b_text, b_path = b_text, b_path, None, None
    if b_text is not None or b_path is not None:
        how = "; ".join(n for n in (_holds_several(a_text, a_path, "A"), _holds_several(b_text, b_path, "B")) if n)
        return Pair(_side(a_text, a_path, "A"), _side(b_text, b_path, "B"), how=how)
    if a_path is not None and os.path.isdir(os.path.expanduser(a_path)):
        return _folder_pair(a_path)
    if a_text is not None and not _nonblank(a_text):
        raise InputError("the paste is empty (no non-blank line): paste both runs' logs, or give two paths")
    text, label, _skipped, _hint = read_input(a_text, a_path)
    return _paste_pair(text, label)
