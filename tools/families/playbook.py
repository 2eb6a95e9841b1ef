"""The GRPO debug playbook (seed tool 1): pattern classes, symptom map, fixes, GPU report."""
from __future__ import annotations

from grpo_debug.skills.loader import RuleBase, default_rules
from grpo_debug.skills.symptoms import SYMPTOMS
from grpo_debug.tools.families.common import (PATTERN_CLASSES, STATUS_ORDER, best_status, gpu_report,
                                              resolve_operation, rule_item)
from grpo_debug.tools.models import FamilyReport, Item
from grpo_debug.tools.families.filtering import filter_rules, no_match


def playbook(operation: str, text: str | None = None, path: str | None = None, gpu: str | None = None,
             rules: RuleBase | None = None) -> FamilyReport:
    """The GRPO debug playbook: pattern classes, symptom map, fixes, GPU report (seed tool 1)."""
    rb = rules or default_rules()
    op = resolve_operation("playbook", operation)
    if op == "gpu":
        return gpu_report("playbook", gpu, rb)
    if op == "playbook":
        items = []
        classes = PATTERN_CLASSES
        if text:  # the pattern classes whose rules the filter matches, the best first
            ranked, matched = filter_rules(text, [r for pc in PATTERN_CLASSES for r in rb.by_pattern_class(pc)])
            if not matched:
                return FamilyReport(family="playbook", operation=op, rules=[r.id for _, r in ranked],
                                    summary=no_match(text, "pattern class", [r.pattern_class for _, r in ranked]))
            classes = tuple(dict.fromkeys(r.pattern_class for _, r in ranked))
        for pc in classes:
            rs = rb.by_pattern_class(pc)
            if not rs:
                continue
            bugs = [{"ref": s.ref, "status": s.status, "note": s.note} for r in rs for s in r.sources if "#" in s.ref or "/pull/" in s.ref or "/issues/" in s.ref]
            items.append(Item(kind="pattern", id=pc, title=pc.replace("_", " "), body=rs[0].why,
                              fields={"rules": [r.id for r in rs], "frameworks": sorted({f for r in rs for f in r.applies_to.frameworks}),
                                      "bugs": bugs, "fix": rs[0].fix.summary},
                              verification=min((best_status(r) for r in rs), key=lambda s: STATUS_ORDER[s])))
        return FamilyReport(family="playbook", operation=op, items=items, rules=[r for i in items for r in i.fields["rules"]],
                            summary=f"{len(items)} pattern classes from the seed skill"
                                    + (f" matching {text.strip()[:80]!r}" if text else "") + ", each with its rules, "
                                    "frameworks, root cause and the verification status of its bug numbers.")
    if op == "symptoms":
        return _symptoms(text, rb)
    return _fixes(text, rb)


def _cause(r) -> dict:
    return {"rule_id": r.id, "title": r.title, "fix": r.fix.summary, "verification": best_status(r)}


def _symptoms(text: str | None, rb: RuleBase) -> FamilyReport:
    """``symptoms``: symptom -> most likely causes -> fix; with ``text``, only the symptoms whose rules match it,
    the best first, each with its matching causes first (a filtered answer holds at most 3 symptoms)."""
    by_code = {code: sorted(rb.by_symptom(code), key=lambda r: (r.kind != "diagnostic", -r.priority, r.id))
               for code in SYMPTOMS}
    order: list[tuple[str, list]] = [(c, rs) for c, rs in by_code.items()]
    if text:
        ranked, matched = filter_rules(text, [r for rs in by_code.values() for r in rs], k=12)
        if not matched:
            return FamilyReport(family="playbook", operation="symptoms", rules=[r.id for _, r in ranked],
                                summary=no_match(text, "symptom", [f"{r.symptom} ({r.id})" for _, r in ranked]))
        hits = [r for _, r in ranked]
        codes = list(dict.fromkeys(r.symptom for r in hits if r.symptom in by_code))[:3]
        order = [(c, [r for r in hits if r.symptom == c] + [r for r in by_code[c] if r not in hits]) for c in codes]
    items = [Item(kind="symptom", id=code, title=SYMPTOMS[code], body="; ".join(r.title for r in rs[:3]),
                  fields={"causes": [_cause(r) for r in rs[:4 if text else 6]]}) for code, rs in order]
    what = f" matching {text.strip()[:80]!r}" if text else ""
    return FamilyReport(family="playbook", operation="symptoms", items=items,
                        rules=[c["rule_id"] for i in items for c in i.fields["causes"]],
                        summary=f"Symptom -> most likely causes -> fix, for {len(items)} symptom code(s){what}.")


def _fixes(text: str | None, rb: RuleBase) -> FamilyReport:
    """``fixes``: the fix reference of the seed's bugs and rules; with ``text``, only the ones matching it."""
    rs = [r for r in rb if r.seed_refs or r.pattern_class]
    if text:
        ranked, matched = filter_rules(text, rs)
        if not matched:
            return FamilyReport(family="playbook", operation="fixes", rules=[r.id for _, r in ranked],
                                summary=no_match(text, "fix", [r.id for _, r in ranked]))
        rs = [r for _, r in ranked]
    items = [rule_item(r, kind="fix", body=r.fix.summary, steps=r.fix.steps, patch=r.fix.patch, safety=r.fix.safety,
                       sources=[s.model_dump() for s in r.sources]) for r in rs]
    what = f" matching {text.strip()[:80]!r}" if text else ""
    return FamilyReport(family="playbook", operation="fixes", items=items, rules=[r.id for r in rs],
                        summary=f"Fix reference for {len(items)} seed bugs/rules{what}, each with its sources' "
                                "verification status.")
