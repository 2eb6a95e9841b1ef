"""The MCP triage answer sized for an agent (issue 26): concise by default, the whole result with ``detail='full'``.

A concise answer holds the verdict, the top finding complete (symptom, confidence, onset, every evidence line,
the signals in words, the most likely cause's mechanism, the fix for this run and its line edits), the causal
chain (``consequence_of``), every other finding on one line (symptom, confidence, onset, one evidence line, the
rule id, a one-line fix), only the metric series the findings involve, and the coverage counts; ``more`` says
what was left out and that ``detail='full'`` gives it. Both forms are the same shape: the structured content is
a valid :class:`~grpo_debug.server.schemas.TriageAnswer` (a TriageResult), the text block is rendered from it
(server/concise_text.py), compact, never pretty-printed JSON. The CLI's ``--format json`` is untouched.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from mcp.types import CallToolResult, TextContent

from grpo_debug.server.concise_text import render_answer
from grpo_debug.server.schemas import TriageAnswer
from grpo_debug.tools.models import Finding, TriageResult
from grpo_debug.tools.render.concise import clip, involved_series, no_regex, one_line, short_summary, signal_words

Detail = Literal["concise", "full"]

#: Characters each form of a concise answer (the text block; the structured content as compact JSON) aims under.
CONCISE_BUDGET = 7_000


@dataclass(frozen=True)
class Knobs:
    """How much of each part a concise answer keeps; smaller sets are tried until the answer fits the budget."""

    evidence: int = 8          # evidence lines of the top finding
    excerpt: int = 220         # characters of one evidence line
    why: int = 900             # characters of the top cause's mechanism
    fix: int = 1_500           # characters of the top finding's fix
    causes: int = 3            # rule ids of the top finding's other causes
    others: int = 9            # other findings, one line each
    line_fix: int = 180        # characters of another finding's fix
    series: int = 8            # metric series the findings involve
    edits: int = 6             # line edits of the top finding
    runs: int = 12             # runs of a sweep, one line each


STEPS = (Knobs(), Knobs(excerpt=160, why=600, others=6, series=5, line_fix=140),
         Knobs(evidence=5, excerpt=140, why=400, fix=900, causes=2, others=4, series=3, line_fix=120, edits=3, runs=8),
         Knobs(evidence=3, excerpt=120, why=300, fix=600, causes=1, others=2, series=2, line_fix=100, edits=2, runs=4))



def _signals(matched: list[str]) -> list[str]:
    """The signals that fired, in words (no raw regexes), at most five."""
    return signal_words(matched)


def _onset(f: Finding) -> dict | None:
    o = getattr(f, "onset", None)
    if o is None:
        return None
    d = o.model_dump(mode="json", exclude_none=True) if hasattr(o, "model_dump") else o
    return d or None


def _evidence(f: Finding, n: int, chars: int) -> list[dict]:
    out = []
    for e in f.evidence[:n]:
        d: dict[str, Any] = {"line": e.line, "text": one_line(e.text, chars)}
        if e.source:
            d["source"] = e.source
        out.append(d)
    return out


def _common(f: Finding) -> dict:
    """The fields every finding keeps in both forms (besides evidence, causes and fix)."""
    d: dict[str, Any] = {"symptom": f.symptom, "title": one_line(f.title, 160), "confidence": f.confidence}
    if (o := _onset(f)) is not None:
        d["onset"] = o
    for extra in ("consequence_of", "run"):  # the causal chain; the run of a sweep (when the engine names them)
        v = getattr(f, extra, None)
        if v is not None:
            d[extra] = v
    if getattr(f, "risk", False):  # a configuration's risk, not an observed symptom: an agent must see the difference
        d["risk"] = True
    return d


def top_finding(f: Finding, k: Knobs) -> dict:
    """The first finding complete: every evidence line (up to ``k.evidence``), the signals in words, the most
    likely cause's mechanism, the other causes by rule id, the fix for this run, its edits and settings."""
    d = _common(f)
    d["evidence"] = _evidence(f, k.evidence, k.excerpt)
    causes = []
    for i, c in enumerate(f.causes[: 1 + k.causes]):
        cd: dict[str, Any] = {"rule_id": c.rule_id, "title": "" if c.title == f.title else one_line(c.title, 160),
                              "confidence": c.confidence, "why": clip(c.why, k.why) if i == 0 else "",
                              "fix": "", "verified": c.verified}
        if i == 0 and (sig := _signals(c.matched)):
            cd["matched"] = sig
        causes.append(cd)
    d["causes"] = causes
    d["fix"] = one_line(f.fix, k.fix)
    if f.edits:
        d["edits"] = [{k_: v for k_, v in {"key": e.key, "line": e.line, "old": one_line(e.old, k.excerpt) or None,
                                            "new": one_line(e.new, k.excerpt), "note": one_line(e.note, 160)}.items()
                       if v not in (None, "")} for e in f.edits[: k.edits]]
    elif f.patch:
        d["patch"] = f.patch
    if f.settings:
        d["settings"] = [s.model_dump(mode="json", exclude_none=True) for s in f.settings[:6]]
    if f.next_checks:
        d["next_checks"] = [one_line(x, 200) for x in f.next_checks[:2]]
    return d


def line_finding(f: Finding, k: Knobs) -> dict:
    """Another finding on one line: symptom, confidence, onset, its first evidence line, the rule id of its most
    likely cause and a one-line fix (the contract fields; the rest with detail='full')."""
    d = _common(f)
    d["evidence"] = _evidence(f, 1, k.excerpt)
    if f.causes:
        c = f.causes[0]
        d["causes"] = [{"rule_id": c.rule_id, "title": "", "confidence": c.confidence, "why": "", "fix": "",
                        "verified": c.verified}]
    d["fix"] = one_line(f.fix, k.line_fix)
    return d


def _coverage(res: TriageResult) -> dict:
    c = res.coverage
    d = c.model_dump(mode="json", include={"input", "bytes_read", "lines_read", "formats", "metric_lines",
                                           "event_lines", "config_facts", "lines_not_understood"})
    d["input"] = clip(d["input"], 300)
    d["formats"] = d["formats"][:8]
    if c.skipped:
        d["skipped"] = [one_line(no_regex(x), 200) for x in c.skipped[:3]]
    if c.versions:
        d["versions"] = [one_line(x, 120) for x in c.versions[:3]]
    if c.files:
        d["files"] = [one_line(x, 100) for x in c.files[:5]]
    return d


def _runs(res: TriageResult, k: Knobs) -> list | None:
    """A sweep's runs, each cut to its scalar fields and its findings' symptoms (None when there are none)."""
    runs = getattr(res, "runs", None)
    if not runs:
        return None
    out = []
    for r in runs[: k.runs]:
        d = r.model_dump(mode="json") if hasattr(r, "model_dump") else dict(r)
        keep = {k_: (one_line(v, 200) if isinstance(v, str) else v) for k_, v in d.items()
                if v is None or isinstance(v, (str, int, float, bool))}
        fs = d.get("findings")
        if isinstance(fs, list):
            keep["findings"] = [_run_finding(x) for x in fs[:5]]
        if isinstance(d.get("config"), dict) and d["config"]:
            keep["config"] = {k_: (one_line(v, 80) if isinstance(v, str) else v)
                              for k_, v in list(d["config"].items())[:4]}
        out.append(keep)
    return out


def _run_finding(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: v for k, v in x.items() if k in ("symptom", "confidence", "onset", "rule_ids", "index")}
    return x


def _more(res: TriageResult, d: dict, tool: str) -> str:
    """What a concise answer left out, ending in how to get it ('' when nothing was left out)."""
    left: list[str] = []
    fs = res.findings
    if fs:
        top = d["findings"][0]
        if (n := len(fs[0].evidence) - len(top["evidence"])) > 0:
            left.append(f"{n} more evidence lines")
        if (n := len(fs[0].causes) - len(top.get("causes", []))) > 0:
            left.append(f"{n} more causes")
        if len(fs) > len(d["findings"]):
            left.append(f"{len(fs) - len(d['findings'])} more findings")
        if len(fs) > 1:
            left.append("the other findings' evidence, causes and checks")
    if (n := len(res.metrics) - len(d["metrics"])) > 0:
        left.append(f"{n} more metric series")
    cov = res.coverage
    if cov.unknown_config_keys:
        left.append(f"{len(cov.unknown_config_keys)} config keys no rule reads")
    if cov.not_understood_sample:
        left.append("a sample of the lines not understood")
    if len(cov.files) > len(d["coverage"].get("files", [])):
        left.append(f"{len(cov.files)} files read")
    if res.diff and not d.get("diff"):
        left.append("the unified diff")
    runs = getattr(res, "runs", None) or []
    if len(runs) > len(d.get("runs") or []):
        left.append(f"{len(runs) - len(d.get('runs') or [])} more runs")
    if not left:
        return ""
    return f"call {tool} with detail='full' for " + ", ".join(left)


def concise_dict(res: TriageResult, k: Knobs, tool: str = "triage") -> dict:
    """The concise answer's structured content for one set of knobs (see the module doc)."""
    d: dict[str, Any] = {"summary": short_summary(res)}
    if getattr(res, "verdict", None) is not None:
        d["verdict"] = res.verdict  # type: ignore[attr-defined]
    fs = res.findings
    d["findings"] = ([top_finding(fs[0], k)] + [line_finding(f, k) for f in fs[1: 1 + k.others]]) if fs else []
    d["metrics"] = {key: res.metrics[key].model_dump(mode="json", exclude_none=True)
                    for key in involved_series(res, k.series)}
    d["coverage"] = _coverage(res)
    if (runs := _runs(res, k)) is not None:
        d["runs"] = runs
    if res.diff and len(res.diff) <= 2_500:
        d["diff"] = res.diff
    d["more"] = _more(res, d, tool)
    d["truncated"] = bool(res.truncated or d["more"])
    return d


def _size(d: dict) -> int:
    return len(json.dumps(d, separators=(",", ":"), ensure_ascii=False))


def concise_answer(res: TriageResult, tool: str = "triage") -> CallToolResult:
    """The concise MCP answer of a (bounded) TriageResult: the first knobs whose structured content and text
    both fit CONCISE_BUDGET characters; the smallest otherwise. Falls back to the full answer should a trimmed
    form not validate as a TriageAnswer (a field the engine added that this module does not know)."""
    for k in STEPS:
        d = concise_dict(res, k, tool)
        text = render_answer(d, tool)
        if _size(d) <= CONCISE_BUDGET and len(text) <= CONCISE_BUDGET:
            break
    try:
        TriageAnswer.model_validate(d)
    except Exception:  # noqa: BLE001 - never fail a call for its concise form
        return full_answer(res, tool)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=d)


def full_answer(res: TriageResult, tool: str = "triage") -> CallToolResult:
    """The whole (bounded) result as structured content, with its compact text rendering (every finding)."""
    d = res.model_dump(mode="json", by_alias=True)
    d["more"] = ""
    text = render_answer(d, tool, summary=short_summary(res), full=True)  # its signals, evidence and fix follow in full
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=d)


def answer(res: TriageResult, detail: Detail = "concise", tool: str = "triage") -> CallToolResult:
    """The MCP answer of ``tool`` (triage, check_config) at ``detail``."""
    return full_answer(res, tool) if detail == "full" else concise_answer(res, tool)


__all__ = ["CONCISE_BUDGET", "Detail", "Knobs", "STEPS", "answer", "concise_answer", "concise_dict",
           "full_answer", "involved_series"]
