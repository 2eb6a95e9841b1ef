"""What the five families share: rule selectors, query ranking, rule items, and the check / diagnose /
avoid / gpu operations that several families offer over their own selection of rules."""
from __future__ import annotations

import re
from functools import partial
from typing import Any, Callable

from grpo_debug.skills.knowledge import GpuSpec, family_selectors, find_gpu, gpu_specs
from grpo_debug.skills.loader import RuleBase
from grpo_debug.skills.schema import QuerySignal, Rule
from grpo_debug.tools.errors import FamilyError
from grpo_debug.tools.families import FAMILY_SPECS, SEED_GPU, SEED_OPERATION_ALIASES
from grpo_debug.tools.families.avoid import gpu_profile_named, is_gpu_profile
from grpo_debug.tools.families.filtering import filter_rules, framework_first, input_frameworks, no_match, own_framework
from grpo_debug.tools.inputs import looks_like_log_or_config, read_input
from grpo_debug.tools.models import FamilyReport, Finding, Item
from grpo_debug.tools.search import reads_as_question
from grpo_debug.tools.triage import triage_text

PATTERN_CLASSES = ("cuda_stream_safety", "muon_clipping", "discrete_decision_mismatch", "lora_distortion",
                   "execution_overlap_oom", "singleton_degeneration", "moe_fp16_nan")



# ---- selectors: which rules a family looks at (views, not knowledge) ---------------------------------

def _text_of(r: Rule) -> str:
    return " ".join([r.id, r.title, r.what, " ".join(r.tags), " ".join(r.seed_refs), r.pattern_class or ""]).lower()


def selects(family: str, r: Rule) -> bool:
    """True when ``family`` looks at rule ``r`` (skills/families.yaml)."""
    sel = family_selectors()[family]
    return (sel.all or r.symptom in sel.symptoms or r.pattern_class in sel.pattern_classes
            or bool(sel.words and re.search(sel.words, _text_of(r))))


STATUS_ORDER = {"verified": 0, "partial": 1, "unverified": 2, "not_found": 3}


def best_status(rule: Rule) -> str:
    """The best verification status among the rule's sources (verified > partial > unverified > not_found)."""
    return min((s.status for s in rule.sources), key=lambda s: STATUS_ORDER[s])


def rule_item(r: Rule, kind: str = "rule", body: str | None = None, **fields: Any) -> Item:
    """A rule as a family report item: symptom, fix, confidence, frameworks, seed refs and its best status."""
    return Item(kind=kind, id=r.id, title=r.title, body=body if body is not None else r.why,
                fields={"symptom": r.symptom, "fix": r.fix.summary, "confidence": r.confidence,
                        "frameworks": r.applies_to.frameworks, "seed_refs": r.seed_refs, **fields},
                verification=best_status(r))


def _engine_findings(text: str | None, path: str | None, keep: Callable[[Finding], bool] | None = None,
                     rules: RuleBase | None = None) -> tuple[list[Finding], str]:
    s, label, skipped, hint = read_input(text, path)
    res = triage_text(s, label=label, hint=hint, skipped=skipped, rules=rules)
    fs = [f for f in res.findings if keep is None or keep(f)]
    return fs, res.summary


def _resolve_gpu(gpu: str | None, default: str | None = None) -> GpuSpec | None:
    name = gpu or default
    if not name:
        return None
    spec = find_gpu(name)
    if spec is None:
        known = ", ".join(sorted(gpu_specs()))
        raise FamilyError(f"unknown GPU {name!r}; use one of: {known}")
    return spec


# ---- GPU-specific risks: derived from the spec fields and the rule base ----------------------------

def gpu_items(spec: GpuSpec, family: str, rb: RuleBase) -> list[Item]:
    """Risks for ``spec`` as seen by ``family``: spec-derived checks plus the rules that name this GPU."""
    items: list[Item] = [Item(kind="gpu", id=spec.id, title=spec.name,
                              body=f"{spec.memory_gb:g} GB {spec.memory_type}, {spec.arch} (CC {spec.compute_capability}), "
                                   f"bf16={'yes' if spec.bf16 else 'no'}, fp8={'yes' if spec.fp8 else 'no'}, {spec.interconnect}",
                              fields=spec.model_dump(exclude={"sources"}),
                              verification=min((s.status for s in spec.sources), key=lambda s: STATUS_ORDER[s]))]
    sel = partial(selects, family)
    risks = family_selectors()[family].gpu_risks
    names = {spec.id, *(a.lower() for a in spec.aliases)}
    for r in rb:
        text = _text_of(r) + " " + r.applies_to.hardware.lower() + " " + " ".join(
            t for s in r.match.signals() if isinstance(s, QuerySignal) for t in s.terms)
        if sel(r) and any(re.search(rf"\b{re.escape(n)}\b", text) for n in names):
            items.append(rule_item(r, kind="gpu_rule"))
    if not spec.bf16:
        for r in rb:
            if sel(r) and re.search(r"bf16|fp16|precision", _text_of(r)):
                items.append(rule_item(r, kind="gpu_risk", body=f"{spec.name} has no bf16: training falls back to fp16 "
                                        f"with loss scaling, so fp16 overflow risks apply. {r.why}"))
    if "no nvlink" in spec.interconnect.lower() and "pcie_only" in risks:
        items.append(Item(kind="gpu_risk", id=f"{spec.id}-pcie-only", title="No NVLink: collectives and weight sync cross PCIe",
                          body="Tensor-parallel all-reduce, FSDP/ZeRO gathers and actor-to-rollout weight sync run over PCIe; "
                               "prefer data parallel over TP within a node, and keep weight-sync groups small.",
                          fields={"interconnect": spec.interconnect}, verification="unverified"))
    if spec.memory_gb <= 24 and "small_memory" in risks:
        for r in rb:
            if r.symptom == "cuda_oom" and sel(r) and r.kind == "guidance":
                items.append(rule_item(r, kind="gpu_risk"))
    seen: set[tuple[str, str]] = set()
    uniq = []
    for it in items:
        if (it.kind, it.id) not in seen:
            seen.add((it.kind, it.id))
            uniq.append(it)
    return uniq


# ---- families --------------------------------------------------------------------------------------

def require_input(text: str | None, path: str | None, what: str, family: str, op: str) -> None:
    """Raise FamilyError naming what the operation needs when neither text nor path is given."""
    if not text and not path:
        raise FamilyError(f"{family} {op} needs input: {what} (as `text`, or a file as `path`)")


def family_rules(rb: RuleBase, family: str) -> list[Rule]:
    """The rules ``family`` looks at (skills/families.yaml)."""
    return [r for r in rb if selects(family, r)]


def check_report(family: str, text, path, rb) -> FamilyReport:
    """The ``check`` operation: triage findings on the input, kept to the causes among the family's rules."""
    require_input(text, path, "a config, launch script or log", family, "check")
    ids = {r.id for r in family_rules(rb, family)}
    fs, _ = _engine_findings(text, path, rules=rb)
    fs = [f.model_copy(update={"causes": [c for c in f.causes if c.rule_id in ids]}) for f in fs]
    fs = [f for f in fs if f.causes]
    summary = (f"{len(fs)} {family.replace('_', ' ')} risk(s) in the input: " + "; ".join(f"{f.symptom} ({f.causes[0].rule_id})" for f in fs[:3])
               if fs else f"No {family.replace('_', ' ')} risk matched the input. Rules checked: {len(ids)}.")
    return FamilyReport(family=family, operation="check", summary=summary, findings=fs,
                        rules=sorted({c.rule_id for f in fs for c in f.causes}))


def diagnose_report(family: str, text, path, rb) -> FamilyReport:
    """The ``diagnose`` operation: findings for a log or config, else the family's rules ranked for the words."""
    require_input(text, path, "symptom words or a log", family, "diagnose")
    rules = family_rules(rb, family)
    if path or (looks_like_log_or_config(text or "") and not reads_as_question(text or "")):
        rep = check_report(family, text, path, rb)
        rep.operation = "diagnose"
        if rep.findings:
            return rep
    # the family's own symptom is implied by the question (nan_guide diagnose actor/entropy: entropy went NaN)
    implied = tuple(w for code in family_selectors()[family].symptoms for w in code.split("_"))
    rules = [r for r in rules if not is_gpu_profile(r) or gpu_profile_named(r, text or "")]  # where it names the GPU
    ranked, matched = filter_rules(text or "", rules, implied=implied)
    fws = input_frameworks(text or "")
    ranked = framework_first(ranked, fws) if matched else []
    items = [rule_item(r, kind="cause", score=s, **({"own_framework": own_framework(r, fws)} if fws else {}))
             for s, r in ranked]
    closest = [r.id for _, r in filter_rules(text or "", rules, implied=implied)[0]] if not matched else []
    summary = ("Most likely causes for the described symptoms" + (f" ({', '.join(sorted(fws))} first)" if fws else "")
               + ": " + "; ".join(f"{it.title} ({it.id})" for it in items[:3])
               if items else no_match(text or "", f"{family.replace('_', ' ')} cause", closest)
               + " For a log, triage it.")
    return FamilyReport(family=family, operation="diagnose", summary=summary, items=items, rules=[i.id for i in items])


def avoid_report(family: str, text, path, rb) -> FamilyReport:
    """The ``avoid`` operation: recommendations derived from the input's framework and facts, or conditional
    ones without an input; no two contradict, and a safety goes off only where a rule fired (families/avoid.py)."""
    from grpo_debug.tools.families.avoid import avoid

    return avoid(family, family_rules(rb, family), text, path, rb)


def gpu_report(family: str, gpu: str | None, rb) -> FamilyReport:
    """The ``gpu`` operation: one GPU's spec and the risks the family sees for it (default: the RTX 4090)."""
    spec = _resolve_gpu(gpu, SEED_GPU)
    items = gpu_items(spec, family, rb)
    n = len([i for i in items if i.kind != "gpu"])
    return FamilyReport(family=family, operation="gpu", gpu=spec, items=items,
                        rules=[i.id for i in items if i.kind in ("gpu_rule", "gpu_risk") and i.id in rb.rules],
                        summary=f"{spec.name}: {spec.memory_gb:g} GB, CC {spec.compute_capability}, "
                                f"bf16 {'yes' if spec.bf16 else 'no'}; {n} {family.replace('_', ' ')} item(s) for this GPU.",
                        notes=["GPU spec sources: " + "; ".join(f"[{s.status}] {s.ref}" for s in spec.sources)])


def resolve_operation(family: str, operation: str) -> str:
    """The operation's canonical name (seed aliases resolved); FamilyError when the family has no such operation."""
    op = SEED_OPERATION_ALIASES.get(operation, operation)
    spec = FAMILY_SPECS[family]
    if op not in spec.operations:
        raise FamilyError(f"{family}: unknown operation {operation!r}; use one of {', '.join(spec.operations)} "
                          f"(or {', '.join(SEED_OPERATION_ALIASES)})")
    return op


def frameworks_table(rs: list[Rule]) -> list[Item]:
    """One comparison item per framework: the rules, mechanisms and fixes that apply to it."""
    by_fw: dict[str, list[Rule]] = {}
    for r in rs:
        for fw in r.applies_to.frameworks or ["(any)"]:
            by_fw.setdefault(fw, []).append(r)
    return [Item(kind="comparison", id=fw, title=fw, body="; ".join(r.title for r in v),
                 fields={"rules": [r.id for r in v], "mechanisms": [r.why for r in v],
                         "fixes": [r.fix.summary for r in v]},
                 verification=min((best_status(r) for r in v), key=lambda s: STATUS_ORDER[s]))
            for fw, v in sorted(by_fw.items())]

