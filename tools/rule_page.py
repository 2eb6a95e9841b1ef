"""A rule as a page: the view of one rule that the CLI (`grpo-debug rule ID`) and the MCP
`explain_rule` tool / `rule://{id}` resource return. Pure functions over the rule base.
"""
from __future__ import annotations

import difflib
from typing import Any, Iterable, Literal

from pydantic import BaseModel, Field

from typing import TYPE_CHECKING

from grpo_debug.skills.provenance import AppliesTo, Source

if TYPE_CHECKING:  # the rule model is only needed for type hints here
    from grpo_debug.skills.schema import Rule
from grpo_debug.skills.symptoms import SYMPTOMS


class ExampleView(BaseModel):
    name: str
    expect: Literal["match", "no_match"] = Field(description="Whether the rule must fire on this input.")
    input: str


class RulePage(BaseModel):
    """One rule of the knowledge base: what it detects, why it happens, how to fix it, and where the
    knowledge comes from (each source marked verified or not)."""

    id: str
    title: str
    symptom: str = Field(description="Symptom code this mechanism produces.")
    symptom_description: str = ""
    kind: Literal["diagnostic", "guidance"] = "diagnostic"
    confidence: Literal["high", "medium", "low"]
    what: str = Field(description="What the rule detects.")
    why: str = Field(description="The mechanism.")
    fix: str = Field(description="The change, naming the exact option/key/flag.")
    steps: list[str] = Field(default_factory=list)
    patch: dict[str, Any] | None = Field(None, description="key -> new value, where one applies.")
    safety: Literal["safe", "review"] = "safe"
    safety_note: str = ""
    signals: list[str] = Field(default_factory=list, description="How the rule recognises the mechanism, in words.")
    next_checks: list[str] = Field(default_factory=list)
    applies_to: AppliesTo = Field(default_factory=AppliesTo)
    sources: list[Source] = Field(default_factory=list, description="Provenance, each marked verified or not.")
    verified: bool = Field(False, description="True when at least one source was checked.")
    examples: list[ExampleView] = Field(default_factory=list)


class UnknownRuleError(KeyError):
    """No rule with this id; the message lists close ids."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "unknown rule"


def _signal_words(sig: Any) -> str:
    kind = getattr(sig, "kind", "?")
    if kind == "regex":
        return f"log line matches /{sig.pattern}/"
    if kind == "event":
        return f"event {sig.event}" + (f" with text /{sig.message}/" if sig.message else "")
    if kind == "detector":
        params = ", ".join(f"{k}={v}" for k, v in sig.params.items())
        return f"metric detector {sig.detector}" + (f" ({params})" if params else "")
    if kind == "config":
        keys = " | ".join(sig.all_keys())
        return f"config {keys} {sig.op}" + ("" if sig.op in ("missing", "present", "truthy", "falsy")
                                            else f" {sig.value!r}")
    if kind == "check":
        params = ", ".join(f"{k}={v}" for k, v in sig.params.items())
        return f"check {sig.check}" + (f" ({params})" if params else "")
    if kind == "query":
        return "question mentions " + ", ".join(sig.terms)
    return str(kind)


def rule_signals(rule: Rule) -> list[str]:
    m = rule.match
    out = [f"all: {_signal_words(s)}" for s in m.all]
    out += [f"any: {_signal_words(s)}" for s in m.any]
    out += [f"none: {_signal_words(s)}" for s in m.none]
    return out


def rule_page(rule: Rule) -> RulePage:
    return RulePage(
        id=rule.id, title=rule.title, symptom=rule.symptom,
        symptom_description=SYMPTOMS.get(rule.symptom, ""), kind=rule.kind,
        confidence=rule.confidence, what=rule.what, why=rule.why,
        fix=rule.fix.summary, steps=list(rule.fix.steps), patch=rule.fix.patch,
        safety=rule.fix.safety, safety_note=rule.fix.safety_note,
        signals=rule_signals(rule), next_checks=list(rule.next_checks),
        applies_to=rule.applies_to, sources=list(rule.sources), verified=rule.verified,
        examples=[ExampleView(name=e.name, expect=e.expect, input=e.input) for e in rule.examples],
    )


def close_ids(rule_id: str, ids: Iterable[str], n: int = 5) -> list[str]:
    """Ids that look like ``rule_id``: difflib matches first, then ids containing it."""
    ids = sorted(ids)
    out = difflib.get_close_matches(rule_id, ids, n=n, cutoff=0.5)
    needle = rule_id.lower().strip()
    for i in ids:
        if len(out) >= n:
            break
        if needle and needle in i and i not in out:
            out.append(i)
    return out


def find_rule(rules: Any, rule_id: str) -> Rule:
    """The rule with this id from a RuleBase, or UnknownRuleError naming close ids."""
    rule = rules.get(rule_id.strip())
    if rule is not None:
        return rule
    near = close_ids(rule_id, [r.id for r in rules])
    hint = f"close ids: {', '.join(near)}" if near else (f"{len(rules)} rules exist; list them with `grpo-debug rules` "
                                                                 "or the symptoms://codes resource")
    raise UnknownRuleError(f"unknown rule id {rule_id!r}; {hint}")
