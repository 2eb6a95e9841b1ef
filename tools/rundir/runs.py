"""Several runs in one input (issue 23 item 4): split, each run triaged on its own, the runs compared.

    from grpo_debug.tools.rundir.runs import triage_paste_runs, triage_folder_runs
    res = triage_paste_runs(text)            # a [A]/[B] paste, a second launch, "same script, other commit"
    res = triage_folder_runs("sweep/")       # a folder of independent logs: one run per log (or run folder)

Both return None when the input is one run (the caller triages it as before). Which parts are runs:
``runs_split.py``; the comparison (outliers, the config facts that set a run apart): ``runs_compare.py``.

The answer: top-level ``findings`` is the ranked list over all runs, each finding naming its ``run``: the runs
most broken first (a high finding before a medium one, then how many), each run's findings in its own order with
the comparison's findings about it after its first finding (first when it has no medium/high one of its own), a
run's share of the list at least 2 findings. ``runs`` lists every run (name, where it is, verdict, its findings'
symptom / confidence / rule ids, the config facts that differ between the runs, its key series' levels), broken
runs first. ``metrics`` are the first run's; ``coverage`` adds up what was read. A folder's runs are triaged one
after the other (each merged, triaged and reduced to a small view before the next is read), so a sweep of 30
large logs holds one run's context at a time.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
from typing import Any

from grpo_debug.tools.rundir.runs_compare import View, compare_views, view

_CONF = {"high": 3, "medium": 2, "low": 1}
_LINE_REF = re.compile(r"\bline (\d+)\b")


# ---------------------------------------------------------------------------- renumbering a segment's result

def _renumber(result, place) -> None:
    """Every line number of a segment's result put into the paste's numbering (``place(no) -> no``)."""
    sub = lambda t: _LINE_REF.sub(lambda m: f"line {place(int(m.group(1)))}", t)  # noqa: E731
    for f in result.findings:
        for e in f.evidence:
            e.line = place(e.line)
        for s in f.settings:
            s.line = place(s.line)
        for ed in f.edits:
            if ed.line:
                ed.line = place(ed.line)
            ed.note = sub(ed.note)
        for c in f.causes:
            c.matched = [sub(t) for t in c.matched]
        f.next_checks = [sub(t) for t in f.next_checks]
        f.fix = sub(f.fix)
        onset = getattr(f, "onset", None)
        if isinstance(onset, dict) and isinstance(onset.get("line"), int):
            onset["line"] = place(onset["line"])
        elif onset is not None and isinstance(getattr(onset, "line", None), int):
            onset.line = place(onset.line)
    for e in result.coverage.not_understood_sample:
        e.line = place(e.line)
    for s in result.metrics.values():
        if s.first_nonfinite_line is not None:
            s.first_nonfinite_line = place(s.first_nonfinite_line)


def _segment_result(seg, hint, rules, max_findings: int, versions):
    """(TriageResult in the paste's numbering, run model) of one segment."""
    from grpo_debug.tools.triage import MAX_DENSE_LINES, _result, build_context, stream_and_result

    s = seg.text
    label = f"<text> {seg.name}"
    if s.count("\n") > MAX_DENSE_LINES:
        st, res = stream_and_result(io.BytesIO(s.encode("utf-8", "replace")), rules=rules, max_findings=max_findings,
                                    label=label, versions=versions)
        ctx = st.ctx
    else:
        ctx, lines = build_context(s, hint)
        res = _result(ctx, lines, label=label, skipped=[], rules=rules, max_findings=max_findings,
                      lines_read=len(lines), bytes_read=len(s.encode("utf-8", "replace")), versions=versions)
    nos = seg.nos

    def place(no: int) -> int:
        return nos[no - 1] if 1 <= no <= len(nos) else no

    _renumber(res, place)
    return res, ctx.run, place


def triage_paste_runs(text: str, *, label: str = "<text>", hint: str | None = None, force: bool = False,
                      rules=None, max_findings: int = 10, versions=None, **_ignored):
    """The multi-run TriageResult of a paste holding several runs (runs_split.split_text), or None for one run.
    ``force``: the CLI's ``--split-runs`` (any restart of the step numbering cuts)."""
    from grpo_debug.tools.rundir.runs_split import split_text

    if hint in ("yaml", "json"):
        return None
    segs = split_text(text, force=force)
    if not segs:
        return None
    from grpo_debug.skills.loader import default_rules

    rb = rules or default_rules()
    views = []
    for seg in segs:
        res, run, place = _segment_result(seg, hint, rb, max_findings, versions)
        for f in res.findings:
            f.run = seg.name
        v = view(seg.name, seg.where(), res, run, lambda no, p=place: (p(no), None))
        _overrides(v, seg, text, run)
        views.append(v)
    how = _how(segs)
    total = text.count("\n") + (0 if text.endswith("\n") else 1)
    return combine(views, label=label, how=how, max_findings=max_findings,
                   lines_read=total, bytes_read=len(text.encode("utf-8", "replace")))


_OVERRIDE = re.compile(r"(?<![\w.-])((?:\+{1,2})?[A-Za-z_]\w*(?:\.\w+)+)=([^\s,;'\"]+)")


def _overrides(v: View, seg, text: str, run) -> None:
    """``key=value`` overrides the line that opens a contiguous run names ("# same script, only
    trainer.n_gpus_per_node=1"): facts of that run for the comparison (its own triage reads the lines as written)."""
    from grpo_debug.tools.engine.facts import parse_override_value
    from grpo_debug.tools.run.names import config_name
    from grpo_debug.tools.rundir.runs_compare import FactView

    if seg.how != "restart" or not seg.span or seg.span[0] == 1:
        return
    no = seg.span[0]
    line = text.split("\n", no)[no - 1] if no <= text.count("\n") + 1 else ""
    for key, val in _OVERRIDE.findall(line[:2000]):
        key = key.lstrip("+")
        name = config_name(key, run.framework if run is not None else None) or key
        v.facts[name] = FactView(parse_override_value(val), key, no, None)


def _how(segs) -> str:
    return {"labels": "split on the runs' line labels", "headers": "split on the runs' header lines",
            "restart": "split where a run starts again: a second launch line, or the steps from the start"
            }.get(segs[0].how, "split into runs")


# ---------------------------------------------------------------------------- a folder of runs

def triage_folder_runs(path, folder_result, *, force: bool = False, rules=None, max_findings: int = 10,
                       progress=None, limits=None, versions=None, **_ignored):
    """The multi-run TriageResult of a folder of independent runs (runs_split.group_folder), or None when the
    folder is one run (rank logs, a run folder). Each run is merged and triaged alone, one after the other, by
    ``folder_result(path, inventory=..., ...) -> (TriageResult, Merged)`` (tools/rundir/analyze.folder_result)."""
    from grpo_debug.skills.loader import default_rules
    from grpo_debug.tools import safefs
    from grpo_debug.tools.rundir.discover import Limits, find_inputs
    from grpo_debug.tools.rundir.runs_split import group_folder

    root = os.path.abspath(os.path.expanduser(os.fspath(path)))
    lim = limits or Limits()
    with safefs.anchored(root):
        inv = find_inputs(root, lim)
        groups = group_folder(inv, force=force)
    if not groups:
        return None
    from grpo_debug.tools.engine.chatter_carry import carry_chatter
    from grpo_debug.tools.rundir.merge import SHARED_MIN_BYTES, SHARED_TOTAL_BYTES

    rb = rules or default_rules()
    share = None
    if sum(t.size for t in inv.texts if t.role == "log") > SHARED_TOTAL_BYTES:
        # a big sweep: each run's log through the large-log prefilter with its share of one budget of kept lines,
        # as the folder's logs would be read together (30 logs of 1.4 MB: 67 s with a whole budget each, 4,000
        # of a log's 6,900 lines kept as text and parsed; the same bytes as one file: 4.5 s)
        lim = dataclasses.replace(lim, stream_bytes=min(lim.stream_bytes, SHARED_MIN_BYTES))
        share = sum(t.role == "log" for t in inv.texts)
    with carry_chatter() if share else contextlib.nullcontext():  # one log's chatter not scanned for in the next
        views = _triage_groups(groups, root, folder_result, rb, lim, share, dict(
            max_findings=max_findings, progress=progress, versions=versions))
    out = combine(views, label=str(path), how=f"a folder of {len(groups)} independent runs, one per "
                                                 f"{'log' if all(os.sep not in g.name for g in groups) else 'entry'}",
                  max_findings=max_findings, skipped=list(inv.skipped))
    return out


def _triage_groups(groups, root, folder_result, rb, lim, share, kw) -> list[View]:
    """Each run of the folder merged, triaged and reduced to its View, one after the other."""
    from grpo_debug.tools.rundir.discover import Inventory

    order = {"config": 0, "script": 1, "log": 2}
    views = []
    for g in groups:
        inv_g = Inventory(root=root, texts=sorted(g.texts, key=lambda t: (order[t.role], t.rel)), stores=list(g.stores))
        res, m = folder_result(root, rules=rb, limits=lim, inventory=inv_g, label=g.name, share=share, **kw)
        for f in res.findings:
            f.run = g.name

        def place(no: int, m=m) -> tuple[int, str | None]:
            loc = m.locate(no)
            return (loc[1], loc[0]) if loc else (no, None)

        views.append(view(g.name, g.name, res, m.ctx.run, place))
        del m  # one run's context at a time (the view keeps no line of it)
    return views


# ---------------------------------------------------------------------------- the answer

def _severity(v: View, extra: list) -> tuple[int, int]:
    fs = [f for f in [*v.result.findings, *extra] if not getattr(f, "risk", False)]
    best = max((_CONF[f.confidence] for f in fs), default=0)
    return best, sum(_CONF[f.confidence] >= 2 for f in fs)


def _run_findings(v: View, extra: list) -> tuple[list, dict[int, int]]:
    """The run's findings with the comparison's placed (module docstring), and own index -> position."""
    own = list(v.result.findings)
    lead = 1 if own and _CONF[own[0].confidence] >= 2 else 0
    seq = own[:lead] + extra + own[lead:]
    pos = {i: (i if i < lead else i + len(extra)) for i in range(len(own))}
    return seq, pos


_KEY_SERIES = ("grad_norm", "entropy", "reward_mean", "score_mean", "response_length_mean", "kl", "loss")


def _summary_row(v: View, seq: list, diff_keys: list[str], many: bool = False):
    """The run's RunSummary, compact (a sweep of 30 runs stays inside an MCP answer): up to 5 findings of a broken
    run (2 of another), the differing config facts, up to 4 key series' levels; with ``many`` runs, a run with no
    medium/high finding keeps its findings without titles and 2 series' median and max."""
    from grpo_debug.tools.models import RunSummary
    from grpo_debug.tools.rundir.runs_compare import _num

    verdict = getattr(v.result, "verdict", None)
    broken = any(_CONF[f.confidence] >= 2 and not getattr(f, "risk", False) for f in seq)
    if broken and verdict == "healthy":  # a finding of the comparison (an outlier) makes it not healthy
        verdict = "not_healthy"
    cfg = {k: v.facts[k].value for k in diff_keys if k in v.facts}
    series = {k: {"median": _num(s["median"]), "max": _num(s["max"]), "last": _num(s["last"]), "points": s["points"]}
              | ({"nonfinite_step": s["nonfinite_step"]} if s["nonfinite_step"] is not None else {})
              for k in _KEY_SERIES if (s := v.series.get(k))}
    short = many and not broken
    if short:
        series = {k: {"median": x["median"], "max": x["max"]} for k, x in list(series.items())[:2]}
    return RunSummary(name=v.name, source=v.source, verdict=verdict,
                      findings=[{"symptom": f.symptom, "confidence": f.confidence, "rule_ids": [c.rule_id for c in
                                                                                                f.causes][:3]}
                                | ({} if short else {"title": f.title[:120]}) for f in seq[:5 if broken else 2]],
                      config=cfg, series=dict(list(series.items())[:4]))


def _coverage(views: list[View], label: str, lines_read: int | None, bytes_read: int | None, skipped: list[str]):
    from grpo_debug.tools.models import Coverage

    covs = [v.result.coverage for v in views]
    first = covs[0]
    return Coverage(
        input=label, bytes_read=bytes_read if bytes_read is not None else sum(c.bytes_read for c in covs),
        lines_read=lines_read if lines_read is not None else sum(c.lines_read for c in covs),
        formats=sorted(set().union(*(c.formats for c in covs))), metric_lines=sum(c.metric_lines for c in covs),
        event_lines=sum(c.event_lines for c in covs), config_facts=sum(c.config_facts for c in covs),
        lines_not_understood=sum(c.lines_not_understood for c in covs), not_understood_sample=first.not_understood_sample,
        skipped=(skipped + [f"{v.name}: {s}" for v in views for s in v.result.coverage.skipped])[:60],
        unknown_config_keys=first.unknown_config_keys,
        files=[x for v in views for x in v.result.coverage.files][:200],
        versions=list(dict.fromkeys(x for c in covs for x in c.versions))[:12])


def _verdict(views: list[View], findings: list) -> str | None:
    vs = [getattr(v.result, "verdict", None) for v in views]
    if all(x is None for x in vs):
        return None
    if "not_healthy" in vs or any(_CONF[f.confidence] >= 2 and not getattr(f, "risk", False) for f in findings):
        return "not_healthy"
    return "healthy" if all(x == "healthy" for x in vs) else "cannot_tell"


def _summary_text(order: list[View], how: str, findings: list, extra: dict) -> str:
    broken = [v for v in order if _severity(v, extra[v.name])[0] >= 2]
    fine = [v for v in order if v not in broken]
    parts = [f"{len(order)} runs in this input ({how}), each triaged on its own."]
    if broken:
        parts.append("Not healthy: " + "; ".join(
            f"{v.name} ({', '.join(dict.fromkeys(f.symptom for f in [*extra[v.name], *v.result.findings] if _CONF[f.confidence] >= 2))})"
            for v in broken[:8]) + (f" and {len(broken) - 8} more" if len(broken) > 8 else "") + ".")
    if fine:
        parts.append(f"No medium/high finding: {', '.join(v.name for v in fine[:10])}"
                     + (f" and {len(fine) - 10} more" if len(fine) > 10 else "") + ".")
    outl = [f for fs in extra.values() for f in fs if not findings or f is not findings[0]]
    if outl:
        parts.append("Compared: " + " ".join(f.title.rstrip(".") + "." for f in outl[:3]))
    if findings:
        f = findings[0]
        ev = f.evidence[0] if f.evidence else None
        where = f" Evidence: {ev.source + ' ' if ev and ev.source else ''}line {ev.line}: {ev.text[:160]}" if ev else ""
        parts.append(f"First: [{f.run}] {f.symptom} ({f.confidence}): {f.title[:200]}. Fix: {f.fix[:240]}{where}")
    return " ".join(parts)


def combine(views: list[View], *, label: str, how: str, max_findings: int = 10, lines_read: int | None = None,
            bytes_read: int | None = None, skipped: list[str] | None = None):
    """One TriageResult over several triaged runs (module docstring): findings ranked over all runs, each naming
    its run, ``runs`` broken first, ``consequence_of`` indices renumbered into the combined list."""
    from grpo_debug.tools.models import TriageResult
    from grpo_debug.tools.rundir.runs_split import differing_facts, Unit

    extra = compare_views(views)
    idx = {v.name: i for i, v in enumerate(views)}
    order = sorted(views, key=lambda v: (*(-x for x in _severity(v, extra[v.name])), idx[v.name]))
    n_broken = sum(_severity(v, extra[v.name])[0] >= 2 for v in order) or 1
    share = max(2, max_findings // n_broken)
    findings, total = [], 0
    seqs = {}
    for v in order:
        seq, pos = _run_findings(v, extra[v.name])
        seqs[v.name] = seq
        total += len(seq)
        room = max_findings - len(findings)
        take = seq[:max(min(share, room), 1 if _severity(v, extra[v.name])[0] >= 2 else min(share, room))]
        base = len(findings)
        local = {pos[i]: base + pos[i] for i in pos if pos[i] < len(take)}
        for f in take:
            c = getattr(f, "consequence_of", None)
            if c is not None:
                f.consequence_of = local.get(pos.get(c, -1))
        findings += take
    keys = differing_facts([Unit(v.name, facts={k: fv.value for k, fv in v.facts.items()}) for v in views])
    from grpo_debug.tools.rundir.runs_compare import IDENT

    keys = [k for k in keys if not IDENT.search(k)][:12]
    res = TriageResult(summary=_summary_text(order, how, findings, extra), findings=findings,
                       metrics=order[0].result.metrics,
                       coverage=_coverage(views, label, lines_read, bytes_read, list(skipped or [])),
                       truncated=total > len(findings) or any(v.result.truncated for v in views),
                       runs=[_summary_row(v, seqs[v.name], keys, len(views) > 8) for v in order])
    verdict = _verdict(views, findings)
    if verdict is not None and "verdict" in type(res).model_fields:
        res.verdict = verdict
    return res
