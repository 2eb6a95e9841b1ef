"""The GRPO debug playbook (seed tool 1): pattern classes, symptom map, fixes, GPU report."""
from __future__ import annotations

from grpo_debug.skills.loader import RuleBase, default_rules
from grpo_debug.skills.symptoms import SYMPTOMS
from grpo_debug.tools.families.common import (PATTERN_CLASSES, STATUS_ORDER, best_status, gpu_report,
                                              resolve_operation, rule_item)
from grpo_debug.tools.models import FamilyReport, Item
from grpo_debug.tools.search import rank_rules_for_query


def playbook(operation: str, text: str | None = None, path: str | None = None, gpu: str | None = None,
             rules: RuleBase | None = None) -> FamilyReport:
    """The GRPO debug playbook: pattern classes, symptom map, fixes, GPU report (seed tool 1)."""
    rb = rules or default_rules()
    op = resolve_operation("playbook", operation)
    if op == "gpu":
        return gpu_report("playbook", gpu, rb)
    if op == "playbook":
        items = []
        for pc in PATTERN_CLASSES:
            rs = rb.by_pattern_class(pc)
            if not rs:
                continue
            bugs = [{"ref": s.ref, "status": s.status, "note": s.note} for r in rs for s in r.sources if "#" in s.ref or "/pull/" in s.ref or "/issues/" in s.ref]
            items.append(Item(kind="pattern", id=pc, title=pc.replace("_", " "), body=rs[0].why,
                              fields={"rules": [r.id for r in rs], "frameworks": sorted({f for r in rs for f in r.applies_to.frameworks}),
                                      "bugs": bugs, "fix": rs[0].fix.summary},
                              verification=min((best_status(r) for r in rs), key=lambda s: STATUS_ORDER[s])))
        return FamilyReport(family="playbook", operation=op, items=items, rules=[r for i in items for r in i.fields["rules"]],
                            summary=f"{len(items)} pattern classes from the seed skill, each with its rules, frameworks, root cause "
                                    "and the verification status of its bug numbers.")
    if op == "symptoms":
        items = []
        for code, desc in SYMPTOMS.items():
            rs = sorted(rb.by_symptom(code), key=lambda r: (r.kind != "diagnostic", -r.priority, r.id))
            if text and code not in text and not rank_rules_for_query(text, rs):
                continue
            items.append(Item(kind="symptom", id=code, title=desc, body="; ".join(r.title for r in rs[:3]),
                              fields={"causes": [{"rule_id": r.id, "title": r.title, "fix": r.fix.summary,
                                                  "verification": best_status(r)} for r in rs[:6]]}))
        return FamilyReport(family="playbook", operation=op, items=items,
                            rules=[c["rule_id"] for i in items for c in i.fields["causes"]],
                            summary=f"Symptom -> most likely causes -> fix, for {len(items)} symptom codes.")
    # fixes
    rs = [r for r in rb if r.seed_refs or r.pattern_class]
    if text:
        rs = [r for _, r in rank_rules_for_query(text, rs)] or rs
    items = [rule_item(r, kind="fix", body=r.fix.summary, steps=r.fix.steps, patch=r.fix.patch, safety=r.fix.safety,
                        sources=[s.model_dump() for s in r.sources]) for r in rs]
    return FamilyReport(family="playbook", operation=op, items=items, rules=[r.id for r in rs],
                        summary=f"Fix reference for {len(items)} seed bugs/rules, each with its sources' verification status.")
