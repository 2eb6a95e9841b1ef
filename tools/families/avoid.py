"""The ``avoid`` operation of the families: recommendations that do no harm (issue 12, part 6).

With a config, launch script or log, every recommendation is derived from that input:

- *raised*: the rule fired on the input; its patch is the one the engine writes for this input (its
  framework's own keys, moved only the way the rule means; tools/engine/edits.py ``rule_patch``), with
  the edits of the finding;
- *precaution*: the rule did not fire, but part of its pattern is in the input (one of its config
  signals holds) and nothing in the input contradicts it; no patch;
- left out: rules of another framework, and rules the input contradicts (a signal about a key the
  input sets that does not hold, e.g. "fp16 and bf16 both enabled" when bf16 is off, or one of the
  rule's ``none`` signals holds, e.g. Muon for the generic clipping-off rule).

Without an input (or with a few words), every recommendation is conditional ("Only when: <what the
rule is about>") and carries no patch that switches a safety off; GPU profiles (the RTX 4090 one) come
only when that GPU is named.

Switching off a safety (gradient clipping, NaN checks) is recommended only where the rule's mechanism
requires it: the rule fired on the input, and the text says why (the rule's mechanism). When one
recommendation turns a safety off and another turns it on, the one that turns it on is scoped ("not
where ... applies"), so an answer never says both ``--clip-grad 0`` and "set clipping back to 1.0".
A recommendation whose setting the input already has says so instead of asking for it again.
"""
from __future__ import annotations

import re
from typing import Any

from grpo_debug.skills.knowledge import gpu_specs
from grpo_debug.skills.schema import ConfigSignal, Rule
from grpo_debug.tools.engine.edits import already_set, input_frameworks, rule_patch
from grpo_debug.tools.engine.match import Context, eval_signal, evaluate
from grpo_debug.tools.inputs import looks_like_log_or_config, read_input
from grpo_debug.tools.models import FamilyReport, Finding, Item

_SAFETIES = {"gradient clipping": re.compile(r"(^|\.)(clip_grad|gradient_clipping|max_grad_norm|max_norm|grad_clip)$"),
             "NaN checks": re.compile(r"check_for_nan|nan_check|detect_anomaly")}
_RESTORES = {"gradient clipping": re.compile(r"\b(clipping|clip.grad|max_grad_norm|max_norm|gradient_clipping)\b[^.;]{0,60}?"
                                             r"\b1(\.0)?\b", re.I)}
_ALIASES = {"megatron-lm": "megatron", "hf-trainer": "trl", "megatron-deepspeed": "deepspeed"}


def _norm(fws) -> set[str]:
    return {_ALIASES.get(f, f) for f in fws}


def _all_patches(r: Rule) -> dict[str, Any]:
    out = dict(r.fix.patch or {})
    for p in r.fix.patch_by_framework.values():
        out.update(p)
    return out


def safety_effect(r: Rule) -> dict[str, str]:
    """safety -> 'off' or 'on' for what the rule's fix does to it (its patches, else its fix text)."""
    out: dict[str, str] = {}
    for k, v in _all_patches(r).items():
        for name, rx in _SAFETIES.items():
            if rx.search(k):
                off = (v in (0, False) and not k.startswith("no_")) or (k.startswith("no_") and v is True)
                out[name] = "off" if off else "on"
    for name, rx in _RESTORES.items():
        if name not in out and rx.search(r.fix.summary):
            out[name] = "on"
    return out


def _presence(r: Rule, ctx: Context) -> tuple[str, list[str]]:
    """'contradicted', 'partial' (with the signals that hold) or 'absent' for a rule that did not fire."""
    m = r.match
    if any(eval_signal(s, ctx) is not None for s in m.none):
        return "contradicted", []
    subs = [m] + list(m.either)
    for sub in subs:
        for s in sub.all:
            if isinstance(s, ConfigSignal) and ctx.facts.get(*s.all_keys()) is not None and eval_signal(s, ctx) is None:
                if sub is m or len(subs) == 2:
                    return "contradicted", []
    held = [res.note for sub in subs for s in (*sub.all, *sub.any, *sub.support)
            if isinstance(s, ConfigSignal) and s.op != "missing" and (res := eval_signal(s, ctx)) is not None]
    held = list(dict.fromkeys(held))
    return ("partial", held) if held else ("absent", [])


def is_gpu_profile(r: Rule) -> bool:
    """True when the rule is a profile of one GPU (its ``applies_to.hardware`` names a GPU of skills/gpus.yaml)."""
    hw = r.applies_to.hardware.lower()
    return bool(hw) and any(re.search(rf"\b{re.escape(n.lower())}\b", hw) for s in gpu_specs().values()
                            for n in (s.name, *s.aliases) if len(n) > 3)


def _best_status(r: Rule) -> str:
    order = {"verified": 0, "partial": 1, "unverified": 2, "not_found": 3}  # as families/common.best_status
    return min((x.status for x in r.sources), key=lambda x: order[x])


def _names(spec) -> list[str]:
    return [n.lower() for n in (spec.id, spec.name, *spec.aliases) if len(n) > 3]


def gpu_profile_named(r: Rule, text: str) -> bool:
    """True when ``text`` names a GPU whose profile rule ``r`` is (any spelling of skills/gpus.yaml in both)."""
    hw, low = r.applies_to.hardware.lower(), (text or "").lower()
    return any(any(re.search(rf"\b{re.escape(n)}\b", hw) for n in _names(s)) and
               any(re.search(rf"\b{re.escape(n)}\b", low) for n in _names(s)) for s in gpu_specs().values())


_TITLE_PREFIX = {"precaution": "(not in this input) ", "conditional": "(if it applies) "}


def _item(r: Rule, status: str, body: str, **fields: Any) -> Item:
    """A recommendation; the rule's title (a statement about a run) is marked when it is not about this input."""
    it = Item(kind="recommendation", id=r.id, title=r.title, body=body, verification=_best_status(r),
              fields={"symptom": r.symptom, "fix": r.fix.summary, "confidence": r.confidence,
                      "frameworks": r.applies_to.frameworks, "seed_refs": r.seed_refs, "why": r.why,
                      "safety": r.fix.safety, "status": status, **fields})
    it.title = _TITLE_PREFIX.get(status, "") + it.title
    return it


def _why_off(r: Rule, effect: dict[str, str]) -> str:
    offs = [s for s, e in effect.items() if e == "off"]
    if not offs:
        return ""
    first = re.split(r"(?<=[.!?])\s", r.why.strip(), maxsplit=1)[0]
    return f" This switches {' and '.join(offs)} off only because of this mechanism: {first}"


def input_items(rules: list[Rule], s: str, label: str, hint: str | None, rb) -> tuple[list[Item], dict, list[str]]:
    """Recommendations derived from an input (see the module doc): items, the combined patch, notes."""
    from grpo_debug.tools.triage import build_context, line_map, triage_text

    ctx, lines = build_context(s, hint)
    lmap = line_map(lines)
    res = triage_text(s, label=label, hint=hint, rules=rb)
    finding_of: dict[str, Finding] = {c.rule_id: f for f in res.findings for c in f.causes}
    fws = _norm(input_frameworks(ctx.facts, lmap))
    items, patch, skipped = [], {}, 0
    for r in rules:
        if fws and r.applies_to.frameworks and not (_norm(r.applies_to.frameworks) & fws):
            skipped += 1
            continue
        effect, done = safety_effect(r), already_set(r.fix, ctx.facts, lmap)
        have = f" Already so in the input: {'; '.join(done)}." if done else ""
        if r.id in finding_of:
            f = finding_of[r.id]
            hit = evaluate(r, ctx)
            computed = {k: v for x in (hit.results if hit else []) for k, v in x.patch.items()}
            p = rule_patch(r.fix, r.applies_to.frameworks, computed, ctx.facts, lmap)
            edits = [e.model_dump() for e in f.edits if any(k in e.key for k in p)]
            items.append(_item(r, "raised on this input", r.fix.summary + _why_off(r, effect) + have,
                               patch=p or None, edits=edits, evidence=[e.line for e in f.evidence]))
            for k, v in p.items():
                patch.setdefault(k, v)
            continue
        state, held = _presence(r, ctx)
        if state != "partial" or any(e == "off" for e in effect.values()):  # a safety goes off only where a rule fired
            skipped += 1
            continue
        items.append(_item(r, "precaution", f"Not raised on this input; part of it is there ({'; '.join(held[:3])}). "
                                            f"Only when: {r.what} {r.fix.summary}{have}"))
    notes = [f"Derived from the input: frameworks {', '.join(sorted(fws)) or 'not recognised'}; "
             f"{skipped} rule(s) of this family left out (another framework, or not in the input)."]
    return items, patch, notes


def conditional_items(rules: list[Rule], gpu_named: str = "") -> list[Item]:
    """Recommendations without an input: each says when it applies; no patch switches a safety off."""
    items = []
    for r in rules:
        if is_gpu_profile(r) and not gpu_profile_named(r, gpu_named):
            continue
        effect = safety_effect(r)  # no patch: without the input none can be derived for its framework
        items.append(_item(r, "conditional", f"Only when: {r.what} {r.fix.summary}" + _why_off(r, effect)))
    return items


def scope_conflicts(items: list[Item], rules: dict[str, Rule]) -> None:
    """An item that turns a safety on while another turns it off is scoped to where the other does not apply,
    and loses its patch when the other was raised on the input."""
    offs: dict[str, list[Item]] = {}
    for it in items:
        for s, e in safety_effect(rules[it.id]).items():
            if e == "off":
                offs.setdefault(s, []).append(it)
    for it in items:
        for s, e in safety_effect(rules[it.id]).items():
            if e == "on" and offs.get(s):
                ids = ", ".join(o.id for o in offs[s])
                it.body += f" Not where {ids} applies: there {s} is turned off on purpose (see its mechanism)."
                if any(o.fields.get("status") == "raised on this input" for o in offs[s]):
                    it.fields["patch"] = None


def avoid(family: str, rules: list[Rule], text: str | None, path: str | None, rb) -> FamilyReport:
    """The ``avoid`` operation (see the module doc)."""
    from grpo_debug.tools.families.filtering import filter_rules, no_match

    patch: dict = {}
    missed = ""
    if path or (text and looks_like_log_or_config(text)):
        s, label, _, hint = read_input(text, path)
        items, patch, notes = input_items(rules, s, label, hint, rb)
    else:
        ranked = sorted(rules, key=lambda r: (r.kind != "guidance", -r.priority, r.id))
        if text:  # a described setup: the recommendations it matches, none when it matches none
            found, matched = filter_rules(text, rules)
            ranked = [r for _, r in found] if matched else []
            missed = "" if matched else no_match(text, "recommendation", [r.id for _, r in found])
        items = conditional_items(ranked[:12], gpu_named=text or "")
        notes = ["No config or log given: each recommendation says when it applies. Give the config, launch "
                 "script or log to get recommendations and a patch derived from it."]
    scope_conflicts(items, rb.rules)
    items = items[:12]
    summary = missed or f"{len(items)} recommendation(s)" + (" with a config patch for this input." if patch else ".")
    return FamilyReport(family=family, operation="avoid", summary=summary, items=items, rules=[i.id for i in items],
                        notes=notes + ([f"combined patch: {patch}"] if patch else []))
