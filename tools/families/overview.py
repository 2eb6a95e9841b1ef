"""The whole view an operation gives when it is called with no input (the seed documents every command
line without arguments): the checklist ``check`` applies, the symptom table ``diagnose`` works from, the
stream-safety analysis of the configurations the rules document. Each report ends with a note saying how
to give an input. Every item is built from the rule base, never from facts held here.
"""
from __future__ import annotations

from grpo_debug.skills.loader import RuleBase
from grpo_debug.skills.schema import (CheckSignal, ConfigSignal, DetectorSignal, EventSignal, ProbeSignal,
                                      QuerySignal, RegexSignal, Rule)
from grpo_debug.skills.symptoms import SYMPTOMS
from grpo_debug.tools.families.common import best_status, family_rules, rule_item
from grpo_debug.tools.models import FamilyReport, Item

SCRIPTS = {"playbook": "grpo_training_debug_playbook.py", "nan_guide": "grpo_nan_debugging_guide.py",
           "muon_clipping": "megatron_muon_clipping_avoidance_tool.py",
           "stream_safety": "cuda_stream_safety_pattern_synthesis.py",
           "knowledge_map": "algorithm_infra_knowledge_map.py"}


def input_hint(family: str, op: str, what: str) -> str:
    """The closing line of a whole view: how to run the operation on the caller's own input."""
    return (f"This is the whole view. For your own input give {what}: `grpo-debug {family} {op} INPUT` "
            f"(or `python3 tools/{SCRIPTS[family]} {op} INPUT`; over MCP, {family} with operation={op} and "
            "text or path). INPUT is a file or words.")


def describe_signal(s) -> str:
    """One signal as a short phrase a person can read (what ``check`` looks for)."""
    if isinstance(s, ConfigSignal):
        key = " / ".join(s.all_keys()[:3])
        val = "" if s.op in ("missing", "present", "truthy", "falsy") else f" {s.value!r}"
        return f"setting {key} {s.op}{val}"
    if isinstance(s, CheckSignal):
        return f"config arithmetic {s.check}"
    if isinstance(s, DetectorSignal):
        return f"metric test {s.detector}" + (f" {s.params}" if s.params else "")
    if isinstance(s, EventSignal):
        return f"{s.event} event" + (f" /{s.message}/" if s.message else "")
    if isinstance(s, RegexSignal):
        return f"log line /{s.pattern[:60]}/"
    if isinstance(s, ProbeSignal):
        return f"host fact {s.fact} {s.op} {s.value!r}"
    if isinstance(s, QuerySignal):
        return "question words: " + ", ".join(s.terms[:4])
    return s.kind


def checklist_report(family: str, rb: RuleBase) -> FamilyReport:
    """``check`` with no input: every rule the check applies, with the signals it looks for."""
    rules = sorted(family_rules(rb, family), key=lambda r: (r.symptom, r.id))
    items = []
    for r in rules:
        looks = [describe_signal(s) for s in r.match.all + r.match.any] or \
                [describe_signal(s) for m in r.match.either for s in m.all + m.any]
        items.append(rule_item(r, kind="check", body=f"{r.what} Looks for: " + "; ".join(dict.fromkeys(looks)) + "."))
    return FamilyReport(family=family, operation="check", items=items, rules=[r.id for r in rules],
                        summary=f"The checklist `check` applies: {len(items)} {family.replace('_', ' ')} rule(s), "
                                "each with the settings, log lines and metric tests it looks for.",
                        notes=[input_hint(family, "check", "a config, launch script or log")])


def symptom_table_report(family: str, rb: RuleBase) -> FamilyReport:
    """``diagnose`` with no input: the family's symptom -> causes -> fix table."""
    by_sym: dict[str, list[Rule]] = {}
    for r in family_rules(rb, family):
        by_sym.setdefault(r.symptom, []).append(r)
    items = []
    for code in [c for c in SYMPTOMS if c in by_sym] + sorted(set(by_sym) - set(SYMPTOMS)):
        rs = sorted(by_sym[code], key=lambda r: (r.kind != "diagnostic", -r.priority, r.id))
        items.append(Item(kind="symptom", id=code, title=SYMPTOMS.get(code, code), body="",
                          fields={"causes": [{"rule_id": r.id, "title": r.title, "fix": r.fix.summary,
                                              "verification": best_status(r)} for r in rs]}))
    return FamilyReport(family=family, operation="diagnose", items=items,
                        rules=[c["rule_id"] for i in items for c in i.fields["causes"]],
                        summary=f"The symptom table `diagnose` works from: {len(items)} symptom(s), "
                                f"{sum(len(i.fields['causes']) for i in items)} cause(s).",
                        notes=[input_hint(family, "diagnose", "symptom words, a metric name or a log")])


def documented_configs(rs: list[Rule]) -> list[tuple[Rule, str, str, str]]:
    """(rule, example name, expectation, config text) for every config example the rules document."""
    return [(r, e.name, e.expect, e.input) for r in rs for e in r.examples if e.format in ("yaml", "json", "sh")]


def stream_overview(rb: RuleBase, analyze) -> FamilyReport:
    """``stream_safety analyze`` with no input: the analysis of each configuration the stream-safety rules
    document (``analyze`` is the operation itself, called on each config text)."""
    items = []
    for r, name, expect, text in documented_configs(family_rules(rb, "stream_safety")):
        rep = analyze(text)
        found = [i.id for i in rep.items] + [c.rule_id for f in rep.findings for c in f.causes]
        items.append(Item(kind="analysis", id=r.id, title=f"{name} (documented as {expect})", body=rep.summary,
                          fields={"config": text.strip(), "found": sorted(set(found))}, verification=best_status(r)))
    return FamilyReport(family="stream_safety", operation="analyze", items=items, rules=sorted({i.id for i in items}),
                        summary=f"Stream-safety analysis of the {len(items)} configuration(s) the rules document "
                                "(one that should match, the ones that should not).",
                        notes=[input_hint("stream_safety", "analyze", "a config, launch script or Python snippet")])


def check_diagnose_avoid_gpu(family: str, operation: str, text, path, gpu, rb: RuleBase) -> FamilyReport:
    """The four operations shared by nan_guide and muon_clipping; with no input, check and diagnose give the
    whole view (the checklist, the symptom table)."""
    from grpo_debug.tools.families.common import (avoid_report, check_report, diagnose_report, gpu_report,
                                                  resolve_operation)

    op = resolve_operation(family, operation)
    if not text and not path and op in ("check", "diagnose"):
        return checklist_report(family, rb) if op == "check" else symptom_table_report(family, rb)
    return {"check": lambda: check_report(family, text, path, rb),
            "diagnose": lambda: diagnose_report(family, text, path, rb),
            "avoid": lambda: avoid_report(family, text, path, rb), "gpu": lambda: gpu_report(family, gpu, rb)}[op]()
