"""CUDA stream safety (seed tool 4): map, analyze a config or Python snippet, compare, GPU."""
from __future__ import annotations

from grpo_debug.skills.loader import RuleBase, default_rules
from grpo_debug.tools.families.common import (check_report, family_rules, frameworks_table, gpu_report,
                                              resolve_operation, rule_item)
from grpo_debug.tools.families.overview import stream_overview
from grpo_debug.tools.models import FamilyReport, Finding, Item
from grpo_debug.tools.inputs import is_python, read_input
from grpo_debug.tools.families.filtering import filter_rules, no_match
from grpo_debug.tools.search import framework_terms


def stream_safety(operation: str, text: str | None = None, path: str | None = None, gpu: str | None = None,
                  rules: RuleBase | None = None) -> FamilyReport:
    """CUDA stream safety (seed tool 4): map the patterns across frameworks, analyze a config or a Python
    snippet, compare frameworks, per-GPU report."""
    rb = rules or default_rules()
    op = resolve_operation("stream_safety", operation)
    rs = family_rules(rb, "stream_safety")
    if op == "gpu":
        return gpu_report("stream_safety", gpu, rb)
    if op == "map":
        return _map(rs, text)
    if op == "compare":
        return _compare(rs, text if text else read_input(None, path)[0] if path else "")
    if not text and not path:  # no input: the analysis of the configurations the rules document
        return stream_overview(rb, lambda t: stream_safety("analyze", text=t, rules=rb))
    src = text if text is not None else read_input(None, path)[0]
    items: list[Item] = []
    notes: list[str] = []
    try:
        from grpo_debug.tools.analyzers import cuda_streams as ss
    except ImportError:  # analyzer not available in this build
        ss = None
    if ss is not None and (is_python(src) or (path or "").endswith(".py")):
        rep = ss.analyze_code(src, path or "<snippet>")
        if rep.error:
            notes.append(rep.error)
        items += [Item(kind="stream_finding", id=f.check, title=f.message, body=f.fix,
                       fields={"severity": f.severity, "line": f.line, "end_line": f.end_line, "source": f.source})
                  for f in rep.findings]
        summary = rep.summary
        fs: list[Finding] = []
    else:
        r = check_report("stream_safety", text, path, rb)
        fs = r.findings
        if ss is not None:
            from grpo_debug.tools.triage import build_context
            ctx, _ = build_context(src, "json" if src.lstrip().startswith("{") else None)
            rep = ss.analyze_config({f.key: f.value for f in ctx.facts.facts})
            items += [Item(kind="stream_finding", id=f.check, title=f.message, body=f.fix,
                           fields={"severity": f.severity, "line": f.line, "source": f.source}) for f in rep.findings]
        summary = r.summary if fs or not items else f"{len(items)} stream-safety signal(s) in the config."
    return FamilyReport(family="stream_safety", operation="analyze", summary=summary, items=items, findings=fs,
                        rules=sorted({c.rule_id for f in fs for c in f.causes}), notes=notes)


def _map(rs: list, text: str | None) -> FamilyReport:
    """``map``: the stream-safety patterns with their references; ``text`` keeps the ones it matches."""
    what = ""
    if text:
        ranked, matched = filter_rules(text, rs)
        if not matched:
            return FamilyReport(family="stream_safety", operation="map", rules=[r.id for _, r in ranked],
                                summary=no_match(text, "stream-safety pattern", [r.id for _, r in ranked]))
        rs, what = [r for _, r in ranked], f" matching {text.strip()[:80]!r}"
    items = [rule_item(r, kind="pattern", sources=[s.model_dump() for s in r.sources]) for r in rs]
    return FamilyReport(family="stream_safety", operation="map", items=items, rules=[r.id for r in rs],
                        summary=f"{len(items)} stream-safety patterns{what} (record_stream, overlap_comm, side-stream "
                                "lifetimes) with their real references and verification status.")


def _compare(rs: list, text: str) -> FamilyReport:
    """``compare``: the stream-safety mechanisms side by side, for the frameworks the input names (all
    frameworks without one), the rules the input's words rank first when it names none."""
    named = framework_terms(text) if text else set()
    if text and not named:
        ranked, matched = filter_rules(text, rs, k=len(rs))
        if not matched:
            return FamilyReport(family="stream_safety", operation="compare", rules=[r.id for _, r in ranked],
                                summary=no_match(text, "stream-safety rule", [r.id for _, r in ranked]))
        rs = [r for _, r in ranked]
    items = [i for i in frameworks_table(rs) if not named or i.id.lower() in named]
    what = f" for {', '.join(i.id for i in items) or text.strip()}" if named else f" for {text.strip()!r}" if text else ""
    notes = [] if items or not named else [f"No stream-safety rule names {', '.join(sorted(named))}; "
                                           "compare without input lists every framework."]
    return FamilyReport(family="stream_safety", operation="compare", items=items,
                        rules=sorted({r for i in items for r in i.fields["rules"]}), notes=notes,
                        summary=f"Stream-safety mechanisms side by side{what}: {len(items)} framework(s).")
