"""Route a free-text question to tools, operations and rules (the seed skill's triggers).

Pure function over skills/triggers.yaml and the rule base: trigger phrases and their words score the
tools; rules are ranked by :func:`grpo_debug.tools.search.rank_rules_for_query`. A pasted log or config
is routed to ``triage`` first. A text holding log lines or metric values is routed by the symptom they show
(tools/suggest_evidence.py: an error -> triage, a NaN value -> the NaN guide, grad_norm above the stated
clipping value -> the grad-norm guidance, not the NaN guide), and its rules ranked by that symptom's words.
"""
from __future__ import annotations

import re

from grpo_debug.skills.knowledge import triggers
from grpo_debug.skills.loader import RuleBase, default_rules
from grpo_debug.tools.search import query_terms, rank_rules_for_query, reads_as_question
from grpo_debug.tools.families.filtering import framework_first, input_frameworks
from grpo_debug.tools.inputs import looks_like_log_or_config
from grpo_debug.tools.models import RuleSuggestion, Suggestion, ToolSuggestion
from grpo_debug.tools.suggest_evidence import shown

_NONFINITE_WORD = re.compile(r"\b(?:nan|inf|infinity|non-?finite)s?\b", re.I)


def _written(low: str, phrase: str) -> bool:
    """``phrase`` in ``low`` from a word start; a short one (under 5 characters: 'inf', 'nan') to a word end too, so
    'information' holds no 'inf'; a longer one may be a stem ('explod' in 'exploding')."""
    tail = r"(?![a-z0-9_])" if len(phrase) < 5 else ""
    return re.search(r"(?<![a-z0-9_])" + re.escape(phrase) + tail, low) is not None


def suggest(text: str, rules: RuleBase | None = None, limit: int = 5) -> Suggestion:
    """Tools, operations and rules to try for ``text`` (a question, symptom words, or a pasted log)."""
    rb = rules or default_rules()
    low = (text or "").lower()
    scored: dict[tuple[str, str], tuple[float, str]] = {}
    prompts: list[str] = []
    q = query_terms(text or "")

    def said(phrase: str) -> bool:  # as written, or all its words in any order and spelling (rewards -> reward)
        terms = query_terms(phrase)
        return _written(low, phrase.lower()) or (len(terms) >= 2 and terms <= q)

    for t in triggers():
        s = 3.0 * said(t.phrase) + sum(1.0 for w in t.words if said(w))
        if s <= 0:
            continue
        key = (t.tool, t.operation)
        prev = scored.get(key, (0.0, ""))
        scored[key] = (prev[0] + s, prev[1] or f"matches the trigger '{t.phrase}'")
        if t.prompt and t.prompt not in prompts:
            prompts.append(t.prompt)
    pasted = looks_like_log_or_config(text or "") and not reads_as_question(text or "")
    if pasted:
        scored[("triage", "")] = (100.0, "the text looks like a log, config or launch script: triage it directly")
    seen = shown(text or "")  # what its log lines or metric values show outrank its words (a pasted log: after triage)
    for ev in seen.evidence:
        ev.score -= 20 if pasted and ev.tool != "triage" else 0
    if seen.finite and not _NONFINITE_WORD.search(low):  # the values it shows are finite: not the NaN guide
        scored = {k: v for k, v in scored.items() if k[0] != "nan_guide" or v[0] >= 100}
    for ev in seen.evidence:
        key = (ev.tool, ev.operation)
        if scored.get(key, (0.0, ""))[0] < ev.score:
            scored[key] = (ev.score, ev.why)
    tools = [ToolSuggestion(tool=k[0], operation=k[1], why=v[1]) for k, v in sorted(scored.items(), key=lambda kv: -kv[1][0])]
    if not any(t.tool == "triage" for t in tools):
        tools.append(ToolSuggestion(tool="triage", why="paste the failing log (or give its path) for a diagnosis from its own lines"))
    query = " ".join(dict.fromkeys(ev.query for ev in seen.evidence[:2])) or text or ""
    ranked = framework_first(rank_rules_for_query(query, list(rb)), input_frameworks(text or ""))[:limit]
    rs = [RuleSuggestion(rule_id=r.id, title=r.title, symptom=r.symptom, score=s) for s, r in ranked]
    head = tools[0]
    summary = (f"Start with {head.tool}" + (f" ({head.operation})" if head.operation else "") + f": {head.why}."
               + (f" Most relevant rule: {rs[0].rule_id}." if rs else ""))
    return Suggestion(summary=summary, tools=tools[:limit], rules=rs, prompts=prompts[:4])
