"""Render a TriageResult as terminal text (rich): findings with evidence, causes and fix, the metrics
table and the coverage line. Pure functions: they return a string and never write to the terminal."""
from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from grpo_debug.tools.models import Coverage, Finding, SeriesSummary, TriageResult
from grpo_debug.tools.render.concise import involved_series, one_line, short_summary, signal_words
from grpo_debug.tools.render.text import CONF_STYLE, bullets, fmt_num, marker_rows, section, to_str

VERDICT_WORDS = {"healthy": "healthy", "not_healthy": "not healthy", "cannot_tell": "cannot tell"}
VERDICT_STYLE = {"healthy": "green", "not_healthy": "bold red", "cannot_tell": "yellow"}
MAX_METRIC_ROWS = 12
CONCISE_METRIC_ROWS = 6


#: The concise view (the default) writes out the top finding (two next checks) and gives every other one line;
#: --verbose writes out every finding.
CONCISE_CHECKS = 2


def _onset_words(f: Finding) -> str:
    """'  onset step 43 (grad_norm climb, L4910)' from the finding's onset; '' without one."""
    o = getattr(f, "onset", None)
    if o is None or getattr(o, "step", None) is None:
        return ""
    what = ", ".join(x for x in (getattr(o, "series", None), getattr(o, "kind", None),
                                 f"L{o.line}" if getattr(o, "line", None) is not None else None) if x)
    return f"  onset step {fmt_num(o.step)}" + (f" ({what})" if what else "")


def _head(n: int, f: Finding) -> Text:
    return Text.assemble((f"{n}. ", "bold"), ("risk " if f.risk else "", "yellow"), (f"[{f.symptom}] ", "bold cyan"),
                         (f.title, "bold"), "  (confidence: ", (f.confidence, CONF_STYLE.get(f.confidence, "")), ")",
                         (_onset_words(f), "dim"),
                         (f"  follows from {f.consequence_of + 1}" if f.consequence_of is not None else "", "dim"))


def finding_line(n: int, f: Finding) -> Text:
    """A finding after the first in the concise view: its head, then its first evidence line, the rule id of its
    most likely cause and a one-line fix (``--verbose`` writes it out)."""
    bits = [f"L{f.evidence[0].line}: {one_line(f.evidence[0].text, 160)}"] if f.evidence else []
    if f.causes:
        bits.append(f"rule {f.causes[0].rule_id}")
    bits.append(f"fix: {one_line(f.fix, 200)}")
    return Text.assemble(_head(n, f), "\n   ", " | ".join(bits))


def finding_renderables(n: int, f: Finding, verbose: bool = True, seen: set[str] | None = None) -> list[RenderableType]:
    """One finding written out. Concise (``verbose=False``, the top finding of the default view): every evidence
    line, the signals in words, the first cause's mechanism and the others' rule ids, the fix and the change, the
    settings, two next checks; hints already shown under an earlier finding (``seen``) are not repeated."""
    seen = set() if seen is None else seen
    out: list[RenderableType] = [_head(n, f)]
    evidence = f.evidence
    if evidence:
        ev = marker_rows(((f"L{e.line}:", Text.assemble(e.text, (f"  ({e.source})", "dim") if e.source else ""))
                    for e in evidence), marker_style="cyan")
        out.append(section("Evidence" + (f" ({len(f.evidence)} lines, first {len(evidence)})"
                                         if len(evidence) < len(f.evidence) else ""), ev))
    matched = f.causes[0].matched if f.causes else []
    seen_signals = [m for m in matched if m] if verbose else signal_words(matched)
    if seen_signals:  # what the detectors and patterns saw: "grad_norm climbs from step 197 (line 859212) ..."
        out.append(section("Signals", bullets(seen_signals)))
    if f.causes:
        causes = []
        for c in (f.causes if verbose else f.causes[:1]):
            mark = "" if c.verified else " [unverified source]"
            causes.append(Text.assemble((c.rule_id, "magenta"), f": {c.why}", (mark, "dim")))
        if not verbose and len(f.causes) > 1:
            causes.append(Text.assemble("also: ", (", ".join(c.rule_id for c in f.causes[1:]), "magenta")))
        out.append(section("Causes", bullets(causes)))
    out.append(section("Fix", f.fix))
    if f.edits:
        rows = []
        for e in f.edits:
            if e.line is not None and e.old is not None:
                rows.append((f"L{e.line}:", Text.assemble(("- " + e.old.strip(), "red"), "\n", ("+ " + e.new.strip(), "green"))))
            else:
                rows.append(("add:", Text.assemble(("+ " + e.new.strip(), "green"), (f"  ({e.note})" if e.note else "", "dim"))))
        out.append(section("Change", marker_rows(rows, marker_style="cyan")))
    elif f.patch:
        out.append(section("Patch", ", ".join(f"{k}={v}" for k, v in f.patch.items())))
    if f.settings:
        out.append(section("Current settings", bullets(f"{s.key} = {s.value!r} (L{s.line}{f' of {s.source}' if s.source else ''})"
                                                       for s in f.settings)))
    checks = [c for c in f.next_checks if c not in seen][: None if verbose else CONCISE_CHECKS]
    if checks:
        out.append(section("Next checks", bullets(checks)))
    sharpen = [x for x in f.sharpen if x not in seen]
    if sharpen and verbose:
        out.append(section("Would sharpen this", bullets(sharpen)))
    seen.update(checks, sharpen)
    return out


def chain_line(findings: list[Finding]) -> str:
    """The findings' causal chains as numbered roots and consequences, '1 cuda_oom -> 2 collective_hang -> 3
    ray_actor_died' (one chain per root that has consequences, '; ' between chains); '' when none."""
    kids: dict[int, list[int]] = {}
    for i, f in enumerate(findings):
        if f.consequence_of is not None and 0 <= f.consequence_of < len(findings):
            kids.setdefault(f.consequence_of, []).append(i)

    def walk(i: int) -> list[int]:
        return [i] + [j for k in kids.get(i, []) for j in walk(k)]

    roots = [i for i, f in enumerate(findings) if f.consequence_of is None and i in kids]
    return "; ".join(" -> ".join(f"{j + 1} {findings[j].symptom}" for j in walk(r)) for r in roots)


def _end_value(v: float | None, s: SeriesSummary) -> str:
    """A first/last cell. The JSON summary maps a non-finite value to null (tools/models.SeriesSummary), so a
    series that has points and went non-finite but shows no value there held NaN or Inf: ``nan/inf``, not the
    ``-`` of a value that is not known. A float NaN/Inf (an in-process summary) is spelled as it is."""
    if v is None and s.points and (s.first_nonfinite_step is not None or s.first_nonfinite_line is not None):
        return "nan/inf"
    return fmt_num(v)


def metrics_table(metrics: dict[str, SeriesSummary], max_rows: int = MAX_METRIC_ROWS) -> Table | None:
    if not metrics:
        return None
    # series that went non-finite first, then by name
    names = sorted(metrics, key=lambda k: (metrics[k].first_nonfinite_step is None, k))
    t = Table(title="Metrics", title_justify="left", show_edge=False, pad_edge=False, box=None,
              header_style="bold")
    widest = max(len(k) for k in names[:max_rows])
    for col in ("series", "points", "steps", "first", "last", "min", "max", "first non-finite"):
        if col == "series":  # a metric name is never broken mid-word
            t.add_column(col, justify="left", no_wrap=True, min_width=min(widest, 60), overflow="ellipsis")
        else:
            t.add_column(col, justify="right", overflow="fold")
    for k in names[:max_rows]:
        s = metrics[k]
        steps = f"{fmt_num(s.first_step)}-{fmt_num(s.last_step)}" if s.first_step is not None else "-"
        nf = "-"
        if s.first_nonfinite_step is not None or s.first_nonfinite_line is not None:
            nf = f"step {fmt_num(s.first_nonfinite_step)}"
            if s.first_nonfinite_line is not None:
                nf += f" (L{s.first_nonfinite_line})"
        t.add_row(k, str(s.points), steps, _end_value(s.first, s), _end_value(s.last, s), fmt_num(s.min),
                  fmt_num(s.max), nf)
    if len(names) > max_rows:
        t.caption = f"... {len(names) - max_rows} more series (all in --format json)"
        t.caption_justify = "left"
    return t


def coverage_line(c: Coverage) -> Text:
    def n(k: int, what: str) -> str:
        return f"{k} {what}" + ("" if k == 1 else "s")

    parts = [f"{n(c.lines_read, 'line')} ({c.bytes_read} bytes) of {c.input}",
             "formats: " + (", ".join(c.formats) if c.formats else "none recognised"),
             f"{n(c.metric_lines, 'metric line')}, {n(c.event_lines, 'event line')}, {n(c.config_facts, 'config fact')}",
             f"{n(c.lines_not_understood, 'line')} not understood"]
    if c.versions:
        parts.append("versions: " + "; ".join(c.versions))
    if c.skipped:
        parts.append("skipped: " + "; ".join(c.skipped))
    return Text.assemble(("Coverage: ", "bold"), "; ".join(parts))


def triage_renderables(result: TriageResult, verbose: bool = True, command: str = "triage") -> list[RenderableType]:
    """The whole answer: header (named after the command), summary, findings, metrics, coverage."""
    n = len(result.findings)
    out: list[RenderableType] = [
        Text.assemble((f"grpo-debug {command}", "bold"), f": {result.coverage.input} - "
                      f"{n} finding{'s' if n != 1 else ''}" + (" (truncated)" if result.truncated else "")),
        Text.assemble(("Verdict: ", "bold"), (VERDICT_WORDS.get(result.verdict, result.verdict),
                                              VERDICT_STYLE.get(result.verdict, ""))),
        Text.assemble(("Summary: ", "bold"), short_summary(result)),  # its signals, evidence and fix follow
    ]
    chain = chain_line(result.findings)
    if chain and "Chain:" not in short_summary(result):  # the summary states it already: said once
        out.append(Text.assemble(("Chain: ", "bold"), chain))
    seen: set[str] = set()
    for i, f in enumerate(result.findings, 1):
        out.append(Text(""))
        out.extend(finding_renderables(i, f, verbose, seen) if verbose or i == 1 else [finding_line(i, f)])
    metrics = result.metrics
    if not verbose and result.findings:  # only the series the findings involve
        metrics = {k: result.metrics[k] for k in involved_series(result, CONCISE_METRIC_ROWS)}
    table = metrics_table(metrics, MAX_METRIC_ROWS if verbose else CONCISE_METRIC_ROWS)
    if table is not None and len(metrics) < len(result.metrics) and not verbose:
        table.caption = f"... {len(result.metrics) - len(metrics)} more series (--verbose, --format json)"
    if table is not None:
        out += [Text(""), table]
    out += [Text(""), coverage_line(result.coverage)]
    if not verbose:
        out.append(Text("(concise: --verbose writes out every finding, cause, series and hint)", style="dim"))
    return out


def render_triage_text(result: TriageResult, *, color: bool = False, width: int | None = None,
                       verbose: bool = True, command: str = "triage") -> str:
    """The triage result as terminal text: findings (evidence, causes, fix, next checks), metrics, coverage.
    ``verbose=False`` is the CLI's concise default; ``command`` names the header (triage, check)."""
    return to_str(triage_renderables(result, verbose, command), color, width)

