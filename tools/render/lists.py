"""Plain-text rendering of the short list answers: rule lists (``grpo-debug rules``) and tool suggestions
(``grpo-debug suggest``)."""
from __future__ import annotations

from typing import Iterable

from grpo_debug.skills.schema import Rule
from grpo_debug.tools.models import Suggestion


def render_rule_list_text(rules: Iterable[Rule], symptom: str | None = None) -> str:
    """One row per rule: id, symptom, title, in aligned columns."""
    rules = list(rules)
    if not rules:
        return "no rules" + (f" for symptom {symptom}" if symptom else "") + "\n"
    w_id = max(len(r.id) for r in rules)
    w_sym = max(len(r.symptom) for r in rules)
    return "".join(f"{r.id:<{w_id}}  {r.symptom:<{w_sym}}  {r.title}\n" for r in rules)


def render_suggestion_text(res: Suggestion) -> str:
    """The summary, then one line per tool, rule and prompt to try."""
    out = [res.summary]
    out += [f"  tool {t.tool}" + (f" {t.operation}" if t.operation else "") + f": {t.why}" for t in res.tools]
    out += [f"  rule {r.rule_id} [{r.symptom}]: {r.title}" for r in res.rules]
    if res.prompts:
        out.append("  MCP prompts: " + ", ".join(res.prompts))
    return "\n".join(out) + "\n"
