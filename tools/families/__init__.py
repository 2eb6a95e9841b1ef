"""The seed skill's five tool families as views over one rule base and one engine.

``playbook``, ``nan_guide``, ``muon_clipping``, ``stream_safety`` and ``knowledge_map`` each take an
``operation`` (the seed's sub-commands) and optional input (``text``: symptom words, a log, a config, a
Python snippet, a bug id; ``path``: a file), plus a ``gpu`` from the spec table. No family holds a fact
of its own: every item is built from rules (skills/rules), derivations (skills/derivations), the GPU
table (skills/gpus.yaml) or the triage engine's findings on the input. A family is only a *selector*
over the rule base (:data:`FAMILY_SELECTORS`) plus a layout.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Literal


from grpo_debug.skills.knowledge import Derivation, GpuSpec, derivations, find_gpu, gpu_specs
from grpo_debug.skills.loader import RuleBase, default_rules
from grpo_debug.skills.schema import QuerySignal, Rule
from grpo_debug.skills.symptoms import SYMPTOMS
from grpo_debug.tools.models import FamilyReport, Finding, Item
from grpo_debug.tools.triage import read_input, triage_text

Family = Literal["playbook", "nan_guide", "muon_clipping", "stream_safety", "knowledge_map"]

OPERATIONS: dict[str, tuple[str, ...]] = {
    "playbook": ("playbook", "symptoms", "fixes", "gpu"),
    "nan_guide": ("check", "diagnose", "avoid", "gpu"),
    "muon_clipping": ("check", "diagnose", "avoid", "gpu"),
    "stream_safety": ("map", "analyze", "compare", "gpu"),
    "knowledge_map": ("theory", "bug", "decision", "proof", "cross", "gpu"),
}
SEED_OPERATION_ALIASES = {"rtx4090": "gpu"}  # the seed's sub-command; gpu defaults to rtx4090 then

PATTERN_CLASSES = ("cuda_stream_safety", "muon_clipping", "discrete_decision_mismatch", "lora_distortion",
                   "execution_overlap_oom", "singleton_degeneration", "moe_fp16_nan")


from grpo_debug.tools.errors import FamilyError  # noqa: E402  (re-exported)


# ---- selectors: which rules a family looks at (views, not knowledge) ---------------------------------

def _text_of(r: Rule) -> str:
    return " ".join([r.id, r.title, r.what, " ".join(r.tags), " ".join(r.seed_refs), r.pattern_class or ""]).lower()


FAMILY_SELECTORS: dict[str, Callable[[Rule], bool]] = {
    "nan_guide": lambda r: r.symptom == "nan_inf" or r.pattern_class == "moe_fp16_nan"
    or bool(re.search(r"\bnan\b|fp16|precision|overflow|clipping", _text_of(r))),
    "muon_clipping": lambda r: r.pattern_class == "muon_clipping" or "muon" in _text_of(r),
    "stream_safety": lambda r: r.pattern_class in ("cuda_stream_safety", "execution_overlap_oom")
    or bool(re.search(r"record_stream|overlap_comm|stream", _text_of(r))),
    "playbook": lambda r: True,
    "knowledge_map": lambda r: True,
}

_STATUS_ORDER = {"verified": 0, "partial": 1, "unverified": 2, "not_found": 3}


def best_status(rule: Rule) -> str:
    return min((s.status for s in rule.sources), key=lambda s: _STATUS_ORDER[s])


def _rule_item(r: Rule, kind: str = "rule", body: str | None = None, **fields: Any) -> Item:
    return Item(kind=kind, id=r.id, title=r.title, body=body if body is not None else r.why,
                fields={"symptom": r.symptom, "fix": r.fix.summary, "confidence": r.confidence,
                        "frameworks": r.applies_to.frameworks, "seed_refs": r.seed_refs, **fields},
                verification=best_status(r))


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9_#.+-]{2,}", text.lower()) if w not in _STOP}


_STOP = {"the", "and", "for", "with", "in", "on", "of", "to", "is", "my", "a", "an", "at", "it", "after", "when",
         "what", "why", "how", "does", "do", "run", "training", "train", "grpo", "i", "we", "our", "be", "are"}


def rank_rules_for_query(text: str, rules: list[Rule]) -> list[tuple[float, Rule]]:
    """Score rules against free text: query-signal phrases (x3), seed bug numbers and ids (x4), then
    word overlap with title/what/tags. Highest first; zero scores dropped."""
    low = text.lower()
    words = _words(text)
    out = []
    for r in rules:
        score = 0.0
        for s in r.match.signals():
            if isinstance(s, QuerySignal):
                score += 3 * sum(1 for t in s.terms if t.lower() in low)
        if r.id in low:
            score += 6
        nums = {n for src in r.sources for n in re.findall(r"(?:#|/(?:issues|pull)/)(\d{2,6})\b", src.ref + " " + src.note)}
        nums |= {n for ref in r.seed_refs for n in re.findall(r"#(\d{2,6})", ref)}
        score += 4 * sum(1 for n in nums if re.search(rf"(?<![\w.]){n}(?!\d)", low))
        score += len(words & _words(r.title + " " + r.what + " " + " ".join(r.tags)))
        if score > 0:
            out.append((score, r))
    out.sort(key=lambda x: (-x[0], x[1].id))
    return out


def _looks_like_log_or_config(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return len(lines) >= 3 or bool(re.search(r"step[: ]\d|Traceback|Error:|^\s*[\w.]+=|--\w|^\s*\{|^\s*\w+:\s", text, re.M))


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
                              verification=min((s.status for s in spec.sources), key=lambda s: _STATUS_ORDER[s]))]
    sel = FAMILY_SELECTORS[family]
    names = {spec.id, *(a.lower() for a in spec.aliases)}
    for r in rb:
        text = _text_of(r) + " " + r.applies_to.hardware.lower() + " " + " ".join(
            t for s in r.match.signals() if isinstance(s, QuerySignal) for t in s.terms)
        if sel(r) and any(re.search(rf"\b{re.escape(n)}\b", text) for n in names):
            items.append(_rule_item(r, kind="gpu_rule"))
    if not spec.bf16:
        for r in rb:
            if sel(r) and re.search(r"bf16|fp16|precision", _text_of(r)):
                items.append(_rule_item(r, kind="gpu_risk", body=f"{spec.name} has no bf16: training falls back to fp16 "
                                        f"with loss scaling, so fp16 overflow risks apply. {r.why}"))
    if "no nvlink" in spec.interconnect.lower() and family in ("playbook", "stream_safety", "knowledge_map"):
        items.append(Item(kind="gpu_risk", id=f"{spec.id}-pcie-only", title="No NVLink: collectives and weight sync cross PCIe",
                          body="Tensor-parallel all-reduce, FSDP/ZeRO gathers and actor-to-rollout weight sync run over PCIe; "
                               "prefer data parallel over TP within a node, and keep weight-sync groups small.",
                          fields={"interconnect": spec.interconnect}, verification="unverified"))
    if spec.memory_gb <= 24 and family in ("playbook", "nan_guide", "knowledge_map"):
        for r in rb:
            if r.symptom == "cuda_oom" and sel(r) and r.kind == "guidance":
                items.append(_rule_item(r, kind="gpu_risk"))
    seen: set[tuple[str, str]] = set()
    uniq = []
    for it in items:
        if (it.kind, it.id) not in seen:
            seen.add((it.kind, it.id))
            uniq.append(it)
    return uniq


# ---- families --------------------------------------------------------------------------------------

def _need(text: str | None, path: str | None, what: str, family: str, op: str) -> None:
    if not text and not path:
        raise FamilyError(f"{family} {op} needs input: {what} (as `text`, or a file as `path`)")


def _family_rules(rb: RuleBase, family: str) -> list[Rule]:
    return [r for r in rb if FAMILY_SELECTORS[family](r)]


def _check(family: str, text, path, rb) -> FamilyReport:
    _need(text, path, "a config, launch script or log", family, "check")
    ids = {r.id for r in _family_rules(rb, family)}
    fs, _ = _engine_findings(text, path, rules=rb)
    fs = [f.model_copy(update={"causes": [c for c in f.causes if c.rule_id in ids]}) for f in fs]
    fs = [f for f in fs if f.causes]
    summary = (f"{len(fs)} {family.replace('_', ' ')} risk(s) in the input: " + "; ".join(f"{f.symptom} ({f.causes[0].rule_id})" for f in fs[:3])
               if fs else f"No {family.replace('_', ' ')} risk matched the input. Rules checked: {len(ids)}.")
    return FamilyReport(family=family, operation="check", summary=summary, findings=fs,
                        rules=sorted({c.rule_id for f in fs for c in f.causes}))


def _diagnose(family: str, text, path, rb) -> FamilyReport:
    _need(text, path, "symptom words or a log", family, "diagnose")
    rules = _family_rules(rb, family)
    if path or _looks_like_log_or_config(text or ""):
        rep = _check(family, text, path, rb)
        rep.operation = "diagnose"
        if rep.findings:
            return rep
    ranked = rank_rules_for_query(text or "", rules)[:8]
    items = [_rule_item(r, kind="cause", score=s) for s, r in ranked]
    summary = ("Most likely causes for the described symptoms: " + "; ".join(f"{it.title} ({it.id})" for it in items[:3])
               if items else "No rule of this family matches the description; try triage with the log itself.")
    return FamilyReport(family=family, operation="diagnose", summary=summary, items=items, rules=[i.id for i in items])


def _avoid(family: str, text, path, rb) -> FamilyReport:
    rules = _family_rules(rb, family)
    if text or path:
        src = text if text else read_input(None, path)[0]
        ranked = [r for _, r in rank_rules_for_query(src, rules)] or rules
    else:
        ranked = sorted(rules, key=lambda r: (r.kind != "guidance", -r.priority, r.id))
    items, patch = [], {}
    for r in ranked[:12]:
        items.append(_rule_item(r, kind="recommendation", body=r.fix.summary, why=r.why, patch=r.fix.patch,
                                safety=r.fix.safety))
        for k, v in (r.fix.patch or {}).items():
            patch.setdefault(k, v)
    summary = f"{len(items)} recommendation(s)" + (" with a combined config patch." if patch else ".")
    notes = ["Patch keys are as each rule names them (verl dotted keys, DeepSpeed JSON keys, Megatron/slime flags); "
             "apply only those of your framework."] if patch else []
    return FamilyReport(family=family, operation="avoid", summary=summary, items=items, rules=[i.id for i in items],
                        notes=notes + ([f"combined patch: {patch}"] if patch else []))


def _gpu(family: str, gpu: str | None, rb) -> FamilyReport:
    spec = _resolve_gpu(gpu, "rtx4090")
    items = gpu_items(spec, family, rb)
    n = len([i for i in items if i.kind != "gpu"])
    return FamilyReport(family=family, operation="gpu", gpu=spec, items=items,
                        rules=[i.id for i in items if i.kind in ("gpu_rule", "gpu_risk") and i.id in rb.rules],
                        summary=f"{spec.name}: {spec.memory_gb:g} GB, CC {spec.compute_capability}, "
                                f"bf16 {'yes' if spec.bf16 else 'no'}; {n} {family.replace('_', ' ')} item(s) for this GPU.",
                        notes=["GPU spec sources: " + "; ".join(f"[{s.status}] {s.ref}" for s in spec.sources)])


def playbook(operation: str, text: str | None = None, path: str | None = None, gpu: str | None = None,
             rules: RuleBase | None = None) -> FamilyReport:
    """The GRPO debug playbook: pattern classes, symptom map, fixes, GPU report (seed tool 1)."""
    rb = rules or default_rules()
    op = _op("playbook", operation)
    if op == "gpu":
        return _gpu("playbook", gpu, rb)
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
                              verification=min((best_status(r) for r in rs), key=lambda s: _STATUS_ORDER[s])))
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
    items = [_rule_item(r, kind="fix", body=r.fix.summary, steps=r.fix.steps, patch=r.fix.patch, safety=r.fix.safety,
                        sources=[s.model_dump() for s in r.sources]) for r in rs]
    return FamilyReport(family="playbook", operation=op, items=items, rules=[r.id for r in rs],
                        summary=f"Fix reference for {len(items)} seed bugs/rules, each with its sources' verification status.")


def _op(family: str, operation: str) -> str:
    op = SEED_OPERATION_ALIASES.get(operation, operation)
    if op not in OPERATIONS[family]:
        raise FamilyError(f"{family}: unknown operation {operation!r}; use one of {', '.join(OPERATIONS[family])} (or rtx4090)")
    return op


def nan_guide(operation: str, text: str | None = None, path: str | None = None, gpu: str | None = None,
              rules: RuleBase | None = None) -> FamilyReport:
    """NaN debugging guide (seed tool 2): check a config for NaN risks, diagnose from symptoms or a log,
    avoidance recommendations, per-GPU NaN risks."""
    rb = rules or default_rules()
    op = _op("nan_guide", operation)
    return {"check": lambda: _check("nan_guide", text, path, rb), "diagnose": lambda: _diagnose("nan_guide", text, path, rb),
            "avoid": lambda: _avoid("nan_guide", text, path, rb), "gpu": lambda: _gpu("nan_guide", gpu, rb)}[op]()


def muon_clipping(operation: str, text: str | None = None, path: str | None = None, gpu: str | None = None,
                  rules: RuleBase | None = None) -> FamilyReport:
    """Muon clipping avoidance (seed tool 3): Muon under global grad-norm clipping / ChainedOptimizer."""
    rb = rules or default_rules()
    op = _op("muon_clipping", operation)
    return {"check": lambda: _check("muon_clipping", text, path, rb),
            "diagnose": lambda: _diagnose("muon_clipping", text, path, rb),
            "avoid": lambda: _avoid("muon_clipping", text, path, rb), "gpu": lambda: _gpu("muon_clipping", gpu, rb)}[op]()


def _frameworks_table(rs: list[Rule]) -> list[Item]:
    by_fw: dict[str, list[Rule]] = {}
    for r in rs:
        for fw in r.applies_to.frameworks or ["(any)"]:
            by_fw.setdefault(fw, []).append(r)
    return [Item(kind="comparison", id=fw, title=fw, body="; ".join(r.title for r in v),
                 fields={"rules": [r.id for r in v], "mechanisms": [r.why for r in v],
                         "fixes": [r.fix.summary for r in v]},
                 verification=min((best_status(r) for r in v), key=lambda s: _STATUS_ORDER[s]))
            for fw, v in sorted(by_fw.items())]


def _is_python(text: str) -> bool:
    return bool(re.search(r"^\s*(import |from \S+ import |def |class |with |[\w.]+\s*=\s*torch\.)", text, re.M))


def stream_safety(operation: str, text: str | None = None, path: str | None = None, gpu: str | None = None,
                  rules: RuleBase | None = None) -> FamilyReport:
    """CUDA stream safety (seed tool 4): map the patterns across frameworks, analyze a config or a Python
    snippet, compare frameworks, per-GPU report."""
    rb = rules or default_rules()
    op = _op("stream_safety", operation)
    rs = _family_rules(rb, "stream_safety")
    if op == "gpu":
        return _gpu("stream_safety", gpu, rb)
    if op == "map":
        items = [_rule_item(r, kind="pattern", sources=[s.model_dump() for s in r.sources]) for r in rs]
        return FamilyReport(family="stream_safety", operation=op, items=items, rules=[r.id for r in rs],
                            summary=f"{len(items)} stream-safety patterns (record_stream, overlap_comm, side-stream lifetimes) "
                                    "with their real references and verification status.")
    if op == "compare":
        items = _frameworks_table(rs)
        return FamilyReport(family="stream_safety", operation=op, items=items, rules=[r.id for r in rs],
                            summary=f"Stream-safety mechanisms side by side for {len(items)} frameworks.")
    _need(text, path, "a config, launch script or a Python snippet", "stream_safety", "analyze")
    src = text if text is not None else read_input(None, path)[0]
    items: list[Item] = []
    notes: list[str] = []
    try:
        from grpo_debug.tools.analyzers import cuda_streams as ss
    except ImportError:  # analyzer not available in this build
        ss = None
    if ss is not None and (_is_python(src) or (path or "").endswith(".py")):
        rep = ss.analyze_code(src, path or "<snippet>")
        if rep.error:
            notes.append(rep.error)
        items += [Item(kind="stream_finding", id=f.check, title=f.message, body=f.fix,
                       fields={"severity": f.severity, "line": f.line, "end_line": f.end_line, "source": f.source})
                  for f in rep.findings]
        summary = rep.summary
        fs: list[Finding] = []
    else:
        r = _check("stream_safety", text, path, rb)
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


# ---- knowledge map ---------------------------------------------------------------------------------

def _resolve_topic(text: str, rb: RuleBase) -> tuple[list[Rule], list[Derivation], str | None]:
    """Rules, derivations and a pattern class/symptom named by free text (id, bug number, class, words)."""
    low = (text or "").lower().strip()
    ders = derivations()
    pc = next((p for p in PATTERN_CLASSES if p in low.replace(" ", "_") or p.replace("_", " ") in low), None) or next(
        (p for p in PATTERN_CLASSES if any(len(w) > 4 and w not in ("safety", "decision", "execution") and re.search(rf"\b{w}", low)
                                           for w in p.split("_"))), None)
    sym = next((c for c in SYMPTOMS if c in low), None)
    if low in rb.rules:
        rs = [rb.rules[low]]
    elif pc:
        rs = rb.by_pattern_class(pc)
    else:
        rs = [r for _, r in rank_rules_for_query(text, list(rb))][:5]
        if sym and not rs:
            rs = rb.by_symptom(sym)
    ids = {r.id for r in rs}
    ds = [d for d in ders.values() if d.id in low or (pc and d.topic == pc) or (sym and d.topic == sym)
          or ids & set(d.rules)]
    if not ds:
        ds = [d for d in ders.values() if _words(d.title + " " + d.topic.replace("_", " ") + " " + d.id.replace("-", " ")) & _words(low)]
    return rs, ds, pc or sym


def _derivation_item(d: Derivation) -> Item:
    return Item(kind="derivation", id=d.id, title=d.title, body=d.statement,
                fields={"steps": d.steps, "result": d.result, "topic": d.topic, "rules": d.rules,
                        "per_framework": [p.model_dump() for p in d.per_framework]},
                verification=min((s.status for s in d.sources), key=lambda s: _STATUS_ORDER[s]))


def knowledge_map(operation: str, text: str | None = None, path: str | None = None, gpu: str | None = None,
                  rules: RuleBase | None = None) -> FamilyReport:
    """Algorithm-infra knowledge map (seed tool 5): theory -> bug -> decision chains, proofs, cross-framework."""
    rb = rules or default_rules()
    op = _op("knowledge_map", operation)
    if op == "gpu":
        return _gpu("knowledge_map", gpu, rb)
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
        items = _frameworks_table(rs)
        return FamilyReport(family="knowledge_map", operation=op, items=items, rules=[r.id for r in rs],
                            summary=f"{name or topic}: {len(rs)} rule(s) across {len(items)} framework(s).")
    _need(text, None, {"theory": "a bug, pattern class or symptom", "bug": "a bug number (#8061) or rule id",
                       "decision": "a seed rule ('MUST DO 7') or rule id"}[op], "knowledge_map", op)
    if op == "decision":
        m = re.search(r"must\s*(do|not)\s*(\d+)", text.lower())
        if m:
            tag = f"MUST {'DO' if m.group(1) == 'do' else 'NOT'} {m.group(2)}"
            rs = [r for r in rb if any(ref.upper() == tag for ref in r.seed_refs)]
        else:
            rs, _, _ = _resolve_topic(text, rb)
    else:
        rs, _, _ = _resolve_topic(text, rb)
    items: list[Item] = []
    for r in rs:
        ds = [d for d in ders.values() if r.id in d.rules]
        if op == "theory":
            items.append(_rule_item(r, kind="theory", body=r.why))
        elif op == "bug":
            items.append(Item(kind="chain", id=r.id, title=r.title,
                              body=f"bug -> pattern: {r.pattern_class or r.symptom} -> decision: {', '.join(r.seed_refs) or r.fix.summary}",
                              fields={"sources": [s.model_dump() for s in r.sources], "pattern_class": r.pattern_class,
                                      "symptom": r.symptom, "decisions": r.seed_refs, "fix": r.fix.summary,
                                      "derivations": [d.id for d in ds]}, verification=best_status(r)))
        else:
            items.append(_rule_item(r, kind="decision", body=r.why, justification=[d.result for d in ds],
                                    derivations=[d.id for d in ds]))
        items += [_derivation_item(d) for d in ds if op == "theory" and not any(i.id == d.id for i in items)]
    if not items:
        return FamilyReport(family="knowledge_map", operation=op, summary=f"Nothing in the rule base matches {text!r}.",
                            notes=["Try a rule id (grpo-debug rules), a pattern class, a symptom code or a bug number."])
    return FamilyReport(family="knowledge_map", operation=op, items=items, rules=[r.id for r in rs],
                        summary=f"{op} for {text!r}: " + "; ".join(r.title for r in rs[:3]))


FAMILIES: dict[str, Callable[..., FamilyReport]] = {
    "playbook": playbook, "nan_guide": nan_guide, "muon_clipping": muon_clipping,
    "stream_safety": stream_safety, "knowledge_map": knowledge_map,
}


def run_family(family: str, operation: str, text: str | None = None, path: str | None = None,
               gpu: str | None = None) -> FamilyReport:
    """Dispatch to a family. Raises FamilyError (unknown family/operation/GPU, missing input) and
    InputError (unreadable path)."""
    fn = FAMILIES.get(family)
    if fn is None:
        raise FamilyError(f"unknown family {family!r}; use one of {', '.join(FAMILIES)}")
    if operation == "rtx4090" and not gpu:
        gpu = "rtx4090"
    return fn(operation, text=text, path=path, gpu=gpu)
