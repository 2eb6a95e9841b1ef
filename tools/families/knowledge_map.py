"""The algorithm-infra knowledge map (seed tool 5): theory, bug chain, decision, proof, cross-framework, GPU."""
from __future__ import annotations

import re

from grpo_debug.skills.knowledge import Derivation, derivations
from grpo_debug.skills.loader import RuleBase, default_rules
from grpo_debug.skills.schema import Rule
from grpo_debug.skills.symptoms import SYMPTOMS
from grpo_debug.tools.families.common import (PATTERN_CLASSES, STATUS_ORDER, best_status, frameworks_table,
                                              gpu_report, resolve_operation, rule_item)
from grpo_debug.tools.families.overview import input_hint
from grpo_debug.tools.inputs import read_input
from grpo_debug.tools.models import FamilyReport, Item
from grpo_debug.tools.families.filtering import filter_rules, no_match
from grpo_debug.tools.search import words


def _resolve_topic(text: str, rb: RuleBase, candidates: list[Rule] | None = None
                   ) -> tuple[list[Rule], list[Derivation], str | None]:
    """Rules, derivations and a pattern class/symptom named by free text (id, bug number, class, words);
    ``candidates`` are ranked first (the decisions, for ``decision``), then every rule."""
    low = (text or "").lower().strip()
    ders = derivations()
    named_pc = next((p for p in PATTERN_CLASSES if p in low.replace(" ", "_") or p.replace("_", " ") in low), None)
    pc = named_pc or next(  # a word of a class's name (muon) finds its derivations, never overrides the ranking
        (p for p in PATTERN_CLASSES if any(len(w) > 4 and w not in ("safety", "decision", "execution") and re.search(rf"\b{w}", low)
                                           for w in p.split("_"))), None)
    sym = next((c for c in SYMPTOMS if c in low), None)
    if low in rb.rules:
        rs = [rb.rules[low]]
    elif named_pc:
        rs = rb.by_pattern_class(named_pc)
    else:
        rs = _matching(text, candidates) or _matching(text, list(rb))
        if sym and not rs:
            rs = rb.by_symptom(sym)
    ids = {r.id for r in rs}
    ds = [d for d in ders.values() if d.id in low or (pc and d.topic == pc) or (sym and d.topic == sym)
          or ids & set(d.rules)]
    if not ds:
        ds = [d for d in ders.values() if words(d.title + " " + d.topic.replace("_", " ") + " " + d.id.replace("-", " ")) & words(low)]
    return rs, ds, pc or sym


def _matching(text: str, rules: list[Rule] | None) -> list[Rule]:
    """The rules the filter ``text`` matches (families/filtering.py), best first; empty when none does."""
    ranked, matched = filter_rules(text, rules or [], k=5)
    return [r for _, r in ranked] if matched else []


def _closest(text: str, rb: RuleBase) -> list[str]:
    return [r.id for _, r in filter_rules(text, list(rb))[0]]


def _derivation_item(d: Derivation) -> Item:
    return Item(kind="derivation", id=d.id, title=d.title, body=d.statement,
                fields={"steps": d.steps, "result": d.result, "topic": d.topic, "rules": d.rules,
                        "per_framework": [p.model_dump() for p in d.per_framework]},
                verification=min((s.status for s in d.sources), key=lambda s: STATUS_ORDER[s]))


def _bug_refs(r: Rule) -> list[str]:
    """The rule's sources that name an issue, a pull request or a bug number."""
    return [s.ref for s in r.sources if "#" in s.ref or "/pull/" in s.ref or "/issues/" in s.ref]


def _chain_item(r: Rule, ds: list[Derivation]) -> Item:
    """One bug -> pattern -> decision chain."""
    return Item(kind="chain", id=r.id, title=r.title,
                body=f"bug -> pattern: {r.pattern_class or r.symptom} -> decision: {', '.join(r.seed_refs) or r.fix.summary}",
                fields={"sources": [s.model_dump() for s in r.sources], "bugs": _bug_refs(r),
                        "pattern_class": r.pattern_class, "symptom": r.symptom, "decisions": r.seed_refs,
                        "fix": r.fix.summary, "derivations": [d.id for d in ds]}, verification=best_status(r))


def _decision_key(ref: str) -> tuple[int, int]:
    kind, _, num = ref.partition(" ")[2].partition(" ")
    return (0 if kind == "DO" else 1, int(num) if num.isdigit() else 0)


def _whole_view(op: str, rb: RuleBase) -> FamilyReport:
    """theory / bug / decision with no input: every pattern-class theory with its derivations, every rule
    that names a bug as a bug -> pattern -> decision chain, every MUST DO / MUST NOT with its rules."""
    ders = derivations()
    items: list[Item] = []
    if op == "theory":
        for pc in PATTERN_CLASSES:
            rs = rb.by_pattern_class(pc)
            if rs:
                ds = [d.id for d in ders.values() if d.topic == pc or set(d.rules) & {r.id for r in rs}]
                items.append(Item(kind="theory", id=pc, title=pc.replace("_", " "), body=rs[0].why,
                                  fields={"rules": [r.id for r in rs], "derivations": ds, "fix": rs[0].fix.summary},
                                  verification=min((best_status(r) for r in rs), key=lambda s: STATUS_ORDER[s])))
        items += [_derivation_item(d) for d in ders.values()]
        what, summary = "a bug number, pattern class, symptom or rule id", "theories (pattern classes) and derivations"
    elif op == "bug":
        rs = sorted((r for r in rb if _bug_refs(r) and (r.pattern_class or r.seed_refs)),
                    key=lambda r: (r.pattern_class or "~", r.id))
        items = [_chain_item(r, [d for d in ders.values() if r.id in d.rules]) for r in rs]
        what, summary = "a bug number (#8061) or rule id", "bug -> pattern -> decision chains"
    else:
        refs = sorted({x for r in rb for x in r.seed_refs if x.startswith("MUST ")}, key=_decision_key)
        for ref in refs:
            rs = [r for r in rb if ref in r.seed_refs]
            ds = [d for d in ders.values() if set(d.rules) & {r.id for r in rs}]
            items.append(Item(kind="decision", id=ref, title="; ".join(r.title for r in rs[:2]), body=rs[0].why,
                              fields={"rules": [r.id for r in rs], "fix": rs[0].fix.summary,
                                      "derivations": [d.id for d in ds]},
                              verification=min((best_status(r) for r in rs), key=lambda s: STATUS_ORDER[s])))
        what, summary = "a seed rule ('MUST DO 7'), a question or a rule id", "MUST DO / MUST NOT decisions with their rules"
    ids = [i for it in items for i in (it.fields.get("rules") or [it.id]) if i in rb.rules]
    return FamilyReport(family="knowledge_map", operation=op, items=items, rules=list(dict.fromkeys(ids)),
                        summary=f"Every {op}: {len(items)} {summary}.", notes=[input_hint("knowledge_map", op, what)])


def knowledge_map(operation: str, text: str | None = None, path: str | None = None, gpu: str | None = None,
                  rules: RuleBase | None = None) -> FamilyReport:
    """Algorithm-infra knowledge map (seed tool 5): theory -> bug -> decision chains, proofs, cross-framework."""
    rb = rules or default_rules()
    op = resolve_operation("knowledge_map", operation)
    if op == "gpu":
        return gpu_report("knowledge_map", gpu, rb)
    if path and not text:
        text = read_input(None, path)[0]
    ders = derivations()
    if op == "proof":
        if text:
            _, ds, _ = _resolve_topic(text, rb)
        else:
            ds = list(ders.values())
        items = [_derivation_item(d) for d in ds]
        return FamilyReport(family="knowledge_map", operation=op, items=items, rules=sorted({r for d in ds for r in d.rules}),
                            summary=(f"{len(items)} derivation(s): " + "; ".join(d.title for d in ds[:3])) if items
                            else f"No derivation matches {text!r}; available: {', '.join(ders) or 'none'}.")
    if op == "cross":
        topic = text or "cuda_stream_safety"
        rs, _, name = _resolve_topic(topic, rb)
        items = frameworks_table(rs)
        return FamilyReport(family="knowledge_map", operation=op, items=items, rules=[r.id for r in rs],
                            summary=f"{name or topic}: {len(rs)} rule(s) across {len(items)} framework(s)." if rs
                            else no_match(topic, "rule", _closest(topic, rb)))
    if not text:  # no input: every theory, every bug chain, every decision
        return _whole_view(op, rb)
    if op == "decision":
        m = re.search(r"must\s*(do|not)\s*(\d+)", text.lower())
        if m:
            tag = f"MUST {'DO' if m.group(1) == 'do' else 'NOT'} {m.group(2)}"
            rs = [r for r in rb if any(ref.upper() == tag for ref in r.seed_refs)]
        else:  # a question about a setting: the rules that carry a MUST DO / MUST NOT first
            rs, _, _ = _resolve_topic(text, rb, [r for r in rb if any(x.startswith("MUST ") for x in r.seed_refs)])
    else:
        rs, _, _ = _resolve_topic(text, rb)
    items: list[Item] = []
    for r in rs:
        ds = [d for d in ders.values() if r.id in d.rules]
        if op == "theory":
            items.append(rule_item(r, kind="theory", body=r.why))
        elif op == "bug":
            items.append(_chain_item(r, ds))
        else:
            items.append(rule_item(r, kind="decision", body=r.why, justification=[d.result for d in ds],
                                    derivations=[d.id for d in ds]))
        items += [_derivation_item(d) for d in ds if op == "theory" and not any(i.id == d.id for i in items)]
    if not items:
        return FamilyReport(family="knowledge_map", operation=op, summary=no_match(text, "rule", _closest(text, rb)),
                            notes=["Try a rule id (grpo-debug rules), a pattern class, a symptom code or a bug number."])
    return FamilyReport(family="knowledge_map", operation=op, items=items, rules=[r.id for r in rs],
                        summary=f"{op} for {text!r}: " + "; ".join(r.title for r in rs[:3]))
