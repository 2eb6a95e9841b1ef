"""Render a rule page as terminal text (rich) or as markdown (the MCP ``rule://{id}`` resource)."""
from __future__ import annotations

from rich.console import RenderableType
from rich.padding import Padding
from rich.text import Text

from grpo_debug.skills.schema import Rule
from grpo_debug.tools.render.text import CONF_STYLE, STATUS_STYLE, bullets, marker_rows, section, to_str
from grpo_debug.tools.rule_page import RulePage, rule_page


def _as_page(rule: Rule | RulePage) -> RulePage:
    return rule if isinstance(rule, RulePage) else rule_page(rule)


def rule_renderables(page: RulePage) -> list[RenderableType]:
    out: list[RenderableType] = [
        Text.assemble((page.id, "bold magenta"), "  ", (page.title, "bold")),
        Text.assemble("symptom: ", (page.symptom, "cyan"),
                      f" ({page.symptom_description})" if page.symptom_description else "",
                      " | confidence: ", (page.confidence, CONF_STYLE.get(page.confidence, "")),
                      " | kind: ", page.kind),
        Text(""),
        section("What", page.what, 0),
        section("Why", page.why, 0),
        section("Fix", page.fix, 0),
    ]
    if page.steps:
        out.append(Padding(marker_rows((f"{i}.", s) for i, s in enumerate(page.steps, 1)), (0, 0, 0, 2)))
    if page.patch:
        out.append(section("Patch", ", ".join(f"{k}={v}" for k, v in page.patch.items()), 2))
    out.append(section("Safety", page.safety + (f": {page.safety_note}" if page.safety_note else ""), 2))
    if page.signals:
        out.append(section("Signals", bullets(page.signals), 0))
    if page.next_checks:
        out.append(section("Next checks", bullets(page.next_checks), 0))
    a = page.applies_to
    applies = "; ".join(x for x in (", ".join(a.frameworks), a.versions, a.hardware) if x) or "any"
    out.append(section("Applies to", applies, 0))
    srcs = [Text.assemble((f"[{s.status}] ", STATUS_STYLE.get(s.status, "")), s.ref,
                          (f" - {s.note}" if s.note else "")) for s in page.sources]
    out.append(section("Sources", bullets(srcs) if srcs else "none", 0))
    pos = sum(e.expect == "match" for e in page.examples)
    out.append(section("Examples", f"{len(page.examples)} ({pos} match, {len(page.examples) - pos} no_match)", 0))
    return out


def render_rule_text(rule: Rule | RulePage, *, color: bool = False, width: int | None = None) -> str:
    """One rule as a page: id, title, symptom, confidence, what, why, fix, applies-to, sources, examples."""
    return to_str(rule_renderables(_as_page(rule)), color, width)


def render_rule_markdown(rule: Rule | RulePage) -> str:
    """The rule page as markdown (the MCP ``rule://{id}`` resource)."""
    p = _as_page(rule)
    md = [f"# {p.id}: {p.title}", "",
          f"- symptom: `{p.symptom}`" + (f" ({p.symptom_description})" if p.symptom_description else ""),
          f"- confidence: {p.confidence}", f"- kind: {p.kind}",
          f"- verified: {'yes' if p.verified else 'no (no source checked)'}", "",
          "## What", "", p.what, "", "## Why", "", p.why, "", "## Fix", "", p.fix, ""]
    md += [f"{i}. {s}" for i, s in enumerate(p.steps, 1)] + ([""] if p.steps else [])
    if p.patch:
        md += ["Patch:", "", "```yaml", *(f"{k}: {v}" for k, v in p.patch.items()), "```", ""]
    md += [f"Safety: {p.safety}" + (f" ({p.safety_note})" if p.safety_note else ""), ""]
    if p.signals:
        md += ["## Signals", "", *(f"- {s}" for s in p.signals), ""]
    if p.next_checks:
        md += ["## Next checks", "", *(f"- {s}" for s in p.next_checks), ""]
    a = p.applies_to
    md += ["## Applies to", "", f"- frameworks: {', '.join(a.frameworks) or 'any'}"]
    md += [f"- versions: {a.versions}"] if a.versions else []
    md += [f"- hardware: {a.hardware}"] if a.hardware else []
    md += ["", "## Sources", ""]
    md += [f"- [{s.status}] {s.ref}" + (f" ({s.note})" if s.note else "") for s in p.sources]
    pos = sum(e.expect == "match" for e in p.examples)
    md += ["", "## Examples", "", f"{len(p.examples)} examples ({pos} match, {len(p.examples) - pos} no_match)"]
    return "\n".join(md) + "\n"

