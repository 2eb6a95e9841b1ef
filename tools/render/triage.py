"""Render a TriageResult or a rule as terminal text (rich) or markdown. Pure functions: they return a
string and never write to the terminal themselves, so they work without a TTY; colour only on request.

Log text is never parsed as rich markup (lines like ``[repeated 3x across cluster]`` or ``[36m`` stay
as they are): everything goes through :class:`rich.text.Text`.
"""
from __future__ import annotations

import math
from io import StringIO
from typing import Iterable

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from grpo_debug.skills.schema import Rule
from grpo_debug.tools.models import Coverage, Finding, SeriesSummary, TriageResult
from grpo_debug.tools.rule_page import RulePage, rule_page

DEFAULT_WIDTH = 100
MAX_METRIC_ROWS = 12
_CONF_STYLE = {"high": "bold red", "medium": "yellow", "low": "dim"}
_STATUS_STYLE = {"verified": "green", "partial": "yellow", "unverified": "dim", "not_found": "red"}


def _console(color: bool, width: int | None) -> Console:
    return Console(file=StringIO(), width=width or DEFAULT_WIDTH, force_terminal=color, no_color=not color,
                   color_system="standard" if color else None, highlight=False, markup=False, emoji=False,
                   force_jupyter=False, force_interactive=False, legacy_windows=False)


def _to_str(renderables: Iterable[RenderableType], color: bool, width: int | None) -> str:
    con = _console(color, width)
    for r in renderables:
        con.print(r)
    out = con.file.getvalue()  # type: ignore[attr-defined]
    return "\n".join(line.rstrip() for line in out.splitlines()) + "\n"


def fmt_num(v: float | None) -> str:
    """Compact number: 4 significant digits, integers without a point, nan/inf spelled out."""
    if v is None:
        return "-"
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if float(v).is_integer() and abs(v) < 1e9:
        return str(int(v))
    a = abs(v)
    return f"{v:.3g}" if (a >= 1e5 or a < 1e-3) else f"{v:.4g}"


def _section(label: str, body: RenderableType | str, indent: int = 3) -> RenderableType:
    if isinstance(body, str):
        return Padding(Text.assemble((f"{label}: ", "bold"), body), (0, 0, 0, indent))
    return Group(Padding(Text(f"{label}:", style="bold"), (0, 0, 0, indent)), Padding(body, (0, 0, 0, indent + 2)))


def _rows(rows: Iterable[tuple[str | Text, str | Text]], marker_style: str = "") -> Table:
    """Marker + text rows with a hanging indent: wrapped text stays right of the marker."""
    t = Table.grid(padding=(0, 1, 0, 0))
    t.add_column(no_wrap=True, style=marker_style)
    t.add_column(overflow="fold")
    for marker, text in rows:
        t.add_row(marker, text)
    return t


def _bullets(items: Iterable[str | Text]) -> Table:
    return _rows(("-", it) for it in items)


def finding_renderables(n: int, f: Finding) -> list[RenderableType]:
    head = Text.assemble((f"{n}. ", "bold"), (f"[{f.symptom}] ", "bold cyan"), (f.title, "bold"),
                         "  (confidence: ", (f.confidence, _CONF_STYLE.get(f.confidence, "")), ")")
    out: list[RenderableType] = [head]
    if f.evidence:
        ev = _rows(((f"L{e.line}:", Text.assemble(e.text, (f"  ({e.source})", "dim") if e.source else ""))
                    for e in f.evidence), marker_style="cyan")
        out.append(_section("Evidence", ev))
    if f.causes:
        causes = []
        for c in f.causes:
            mark = "" if c.verified else " [unverified source]"
            causes.append(Text.assemble((c.rule_id, "magenta"), f": {c.why}", (mark, "dim")))
        out.append(_section("Causes", _bullets(causes)))
    out.append(_section("Fix", f.fix))
    if f.edits:
        rows = []
        for e in f.edits:
            if e.line is not None and e.old is not None:
                rows.append((f"L{e.line}:", Text.assemble(("- " + e.old.strip(), "red"), "\n", ("+ " + e.new.strip(), "green"))))
            else:
                rows.append(("add:", Text.assemble(("+ " + e.new.strip(), "green"), (f"  ({e.note})" if e.note else "", "dim"))))
        out.append(_section("Change", _rows(rows, marker_style="cyan")))
    elif f.patch:
        out.append(_section("Patch", ", ".join(f"{k}={v}" for k, v in f.patch.items())))
    if f.settings:
        out.append(_section("Current settings", _bullets(f"{s.key} = {s.value!r} (L{s.line})" for s in f.settings)))
    if f.next_checks:
        out.append(_section("Next checks", _bullets(f.next_checks)))
    if f.sharpen:
        out.append(_section("Would sharpen this", _bullets(f.sharpen)))
    return out


def metrics_table(metrics: dict[str, SeriesSummary], max_rows: int = MAX_METRIC_ROWS) -> Table | None:
    if not metrics:
        return None
    # series that went non-finite first, then by name
    names = sorted(metrics, key=lambda k: (metrics[k].first_nonfinite_step is None, k))
    t = Table(title="Metrics", title_justify="left", show_edge=False, pad_edge=False, box=None,
              header_style="bold")
    for col in ("series", "points", "steps", "first", "last", "min", "max", "first non-finite"):
        t.add_column(col, justify="left" if col == "series" else "right", overflow="fold")
    for k in names[:max_rows]:
        s = metrics[k]
        steps = f"{fmt_num(s.first_step)}-{fmt_num(s.last_step)}" if s.first_step is not None else "-"
        nf = "-"
        if s.first_nonfinite_step is not None or s.first_nonfinite_line is not None:
            nf = f"step {fmt_num(s.first_nonfinite_step)}"
            if s.first_nonfinite_line is not None:
                nf += f" (L{s.first_nonfinite_line})"
        t.add_row(k, str(s.points), steps, fmt_num(s.first), fmt_num(s.last), fmt_num(s.min), fmt_num(s.max), nf)
    if len(names) > max_rows:
        t.caption = f"... {len(names) - max_rows} more series (all in --format json)"
        t.caption_justify = "left"
    return t


def coverage_line(c: Coverage) -> Text:
    parts = [f"{c.lines_read} lines ({c.bytes_read} bytes) of {c.input}",
             "formats: " + (", ".join(c.formats) if c.formats else "none recognised"),
             f"{c.metric_lines} metric lines, {c.event_lines} event lines, {c.config_facts} config facts",
             f"{c.lines_not_understood} lines not understood"]
    if c.skipped:
        parts.append("skipped: " + "; ".join(c.skipped))
    return Text.assemble(("Coverage: ", "bold"), "; ".join(parts))


def triage_renderables(result: TriageResult) -> list[RenderableType]:
    n = len(result.findings)
    out: list[RenderableType] = [
        Text.assemble(("grpo-debug triage", "bold"), f": {result.coverage.input} - "
                      f"{n} finding{'s' if n != 1 else ''}" + (" (truncated)" if result.truncated else "")),
        Text.assemble(("Summary: ", "bold"), result.summary),
    ]
    for i, f in enumerate(result.findings, 1):
        out.append(Text(""))
        out.extend(finding_renderables(i, f))
    table = metrics_table(result.metrics)
    if table is not None:
        out += [Text(""), table]
    out += [Text(""), coverage_line(result.coverage)]
    return out


def render_triage_text(result: TriageResult, *, color: bool = False, width: int | None = None) -> str:
    """The triage result as terminal text: findings (evidence, causes, fix, next checks), metrics, coverage."""
    return _to_str(triage_renderables(result), color, width)


def _as_page(rule: Rule | RulePage) -> RulePage:
    return rule if isinstance(rule, RulePage) else rule_page(rule)


def rule_renderables(page: RulePage) -> list[RenderableType]:
    out: list[RenderableType] = [
        Text.assemble((page.id, "bold magenta"), "  ", (page.title, "bold")),
        Text.assemble("symptom: ", (page.symptom, "cyan"),
                      f" ({page.symptom_description})" if page.symptom_description else "",
                      " | confidence: ", (page.confidence, _CONF_STYLE.get(page.confidence, "")),
                      " | kind: ", page.kind),
        Text(""),
        _section("What", page.what, 0),
        _section("Why", page.why, 0),
        _section("Fix", page.fix, 0),
    ]
    if page.steps:
        out.append(Padding(_rows((f"{i}.", s) for i, s in enumerate(page.steps, 1)), (0, 0, 0, 2)))
    if page.patch:
        out.append(_section("Patch", ", ".join(f"{k}={v}" for k, v in page.patch.items()), 2))
    out.append(_section("Safety", page.safety + (f": {page.safety_note}" if page.safety_note else ""), 2))
    if page.signals:
        out.append(_section("Signals", _bullets(page.signals), 0))
    if page.next_checks:
        out.append(_section("Next checks", _bullets(page.next_checks), 0))
    a = page.applies_to
    applies = "; ".join(x for x in (", ".join(a.frameworks), a.versions, a.hardware) if x) or "any"
    out.append(_section("Applies to", applies, 0))
    srcs = [Text.assemble((f"[{s.status}] ", _STATUS_STYLE.get(s.status, "")), s.ref,
                          (f" - {s.note}" if s.note else "")) for s in page.sources]
    out.append(_section("Sources", _bullets(srcs) if srcs else "none", 0))
    pos = sum(e.expect == "match" for e in page.examples)
    out.append(_section("Examples", f"{len(page.examples)} ({pos} match, {len(page.examples) - pos} no_match)", 0))
    return out


def render_rule_text(rule: Rule | RulePage, *, color: bool = False, width: int | None = None) -> str:
    """One rule as a page: id, title, symptom, confidence, what, why, fix, applies-to, sources, examples."""
    return _to_str(rule_renderables(_as_page(rule)), color, width)


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

