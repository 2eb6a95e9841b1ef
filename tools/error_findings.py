"""Generic findings from classified errors: no input that holds an error, a traceback or a non-finite metric
ends with zero findings.

Each error class (tools/engine/error_classes.py) whose symptom no rule finding already names becomes one
finding: the class's title, the error named (type, message, decisive frame), its lines as evidence, the
generic cause and what to check, citing the framework source of the error text. Rules that explain the error
more specifically rank above it (its score stays below any rule hit's). An error the classifier has no class
for still gets a low-confidence finding that names it and says what to paste next; so does a non-finite
metric no rule explained.
"""
from __future__ import annotations

import math
import re

from grpo_debug.tools.engine.error_classes import BY_NAME, UNKNOWN, ErrorClass
from grpo_debug.tools.engine.events import Event
from grpo_debug.tools.engine.match import Context
from grpo_debug.tools.models import Cause, Evidence, Finding

MAX_ERROR_FINDINGS = 3
_SCORE = {"high": 1.9, "medium": 1.8, "low": 1.0}  # below the weakest rule hit (low confidence + one regex = 2.0)
_PASTE_NEXT = ("the full traceback, up to and including its last line (the exception type and message)",
               "about 50 lines before the first error, from every process that failed (trainer, rollout server, "
               "Ray worker logs)",
               "framework and engine versions (pip list | grep -E 'verl|slime|openrlhf|trl|vllm|sglang|torch|ray|"
               "deepspeed|megatron')",
               "the launch command or config of the run")
_RAY = re.compile(r"ray::|RayTaskError|/ray/|ActorDied|RayActorError")
_DIST = re.compile(r"torch/distributed|c10d|nccl|gloo|ProcessGroup", re.I)


def _unknown_symptom(ev: Event, ctx: Context) -> str:
    """The symptom code for an error no class explains: a failure inside a Ray actor is a dead actor, one in
    torch.distributed a blocked collective; otherwise the run failed on its setup (config_error)."""
    where = ev.text + " " + str(ev.fields.get("wrapper") or "")
    if _RAY.search(where):
        return "ray_actor_died"
    if _DIST.search(where):
        return "collective_hang"
    return "config_error"


def _describe(ev: Event) -> str:
    f = ev.fields
    head = f"{f.get('exc_type')}: {f.get('message')}".strip(": ") if f.get("exc_type") else (f.get("message") or "")
    if not head and f.get("frames"):
        head = f"a traceback whose exception line is missing (last frame {f['frames'][-1]})"
    if f.get("wrapper"):
        head += f" (wrapped as {f['wrapper']})"
    if f.get("decisive_frame"):
        head += f", raised at {f['decisive_frame']}"
    if f.get("causes"):
        head += "; caused by " + "; ".join(f["causes"][:2])
    return head[:400]


def _evidence(ev: Event, by_no: dict) -> list[Evidence]:
    nos = list(dict.fromkeys([ev.fields.get("exc_line") or ev.line, ev.line, *ev.lines[-3:]]))[:6]
    out = []
    for n in sorted(nos):
        ln = by_no.get(n)
        if ln is not None:
            t = (ln.text.strip() or ln.raw.strip())[:240]
            out.append(Evidence(line=n, text=t, source=ln.source))
    return out


def _finding(cls: ErrorClass, evs: list[Event], symptom: str, by_no: dict) -> Finding:
    ev = evs[0]
    known = cls is not UNKNOWN
    what = _describe(ev)
    title = f"{cls.title}: {what}" if known else f"Unclassified error: {what}"
    conf = cls.confidence if known else "low"
    why = cls.cause + (f" (error text from {cls.source})" if known else "")
    evidence = [e for x in evs[:2] for e in _evidence(x, by_no)]
    fix = f"Check {cls.check}"
    cause = Cause(rule_id=f"error-class:{cls.name}", title=cls.title, confidence=conf, why=why, fix=fix,
                  verified=known, matched=[f"{len(evs)} error record(s) of class {cls.name}", what[:160]])
    return Finding(symptom=symptom, title=title[:300], confidence=conf, evidence=evidence[:8], causes=[cause],
                   fix=fix, next_checks=[fix] + [f"paste {p}" for p in _PASTE_NEXT[:2]],
                   sharpen=list(_PASTE_NEXT), score=_SCORE[conf])


def error_findings(ctx: Context, by_no: dict, findings: list[Finding]) -> list[Finding]:
    """Findings for the classified errors whose symptom no existing finding names (at most
    MAX_ERROR_FINDINGS, classified classes first), and a non-finite metric fallback when nothing else holds."""
    named = {f.symptom for f in findings}
    groups: dict[tuple[str, str], list[Event]] = {}
    for ev in ctx.events_of("error"):
        cls = BY_NAME.get(ev.fields.get("class"), UNKNOWN)
        symptom = cls.symptom if cls is not UNKNOWN else _unknown_symptom(ev, ctx)
        groups.setdefault((cls.name, symptom), []).append(ev)
    order = sorted(groups.items(), key=lambda kv: (kv[0][0] == UNKNOWN.name, _rank(kv[1]), kv[1][0].line))
    _enrich(findings, order)
    out: list[Finding] = []
    for (name, symptom), evs in order:
        if symptom in named or len(out) >= MAX_ERROR_FINDINGS:
            continue
        if name == UNKNOWN.name and (out or findings or len(groups) > 1):
            continue  # an unclassified error only when nothing else explains the input
        named.add(symptom)
        out.append(_finding(BY_NAME.get(name, UNKNOWN), evs, symptom, by_no))
    if not findings and not out:
        nf = _nonfinite(ctx, by_no)
        if nf is not None:
            out.append(nf)
    return out


def _enrich(findings: list[Finding], order: list) -> None:
    """A rule finding whose symptom a classified error shares gets the error's class as a last cause: the error
    named (type, message, decisive frame), its generic cause and what to check, with the framework source."""
    for (name, symptom), evs in order:
        cls = BY_NAME.get(name)
        for f in findings:
            if cls is None or f.symptom != symptom or any(c.rule_id == f"error-class:{name}" for c in f.causes):
                continue
            what = _describe(evs[0])
            f.causes.append(Cause(rule_id=f"error-class:{name}", title=f"{cls.title}: {what}"[:300], confidence="low",
                                  why=f"{cls.cause} (error text from {cls.source})", fix=f"Check {cls.check}",
                                  verified=True, matched=[f"{len(evs)} error record(s) of class {name}"]))


def _rank(evs: list[Event]) -> int:
    """Exceptions before bare error lines; an error-level line before prose that only names the error."""
    ev = evs[0]
    return 0 if ev.fields.get("exc_type") else (1 if ev.fields.get("frames") else 2)


# a blank run is entered only at its first blank ((?<!\s)\s): linear on long blank runs
_NONFINITE_CELL = re.compile(r"(?:^|[:=|,(\[]|(?<!\s)\s)\s*([-+]?(?:nan|inf(?:inity)?))\s*(?=$|[|,;)\]]|\s)", re.I)
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.])", re.I)


def _nonfinite_cells(ctx: Context) -> list[int]:
    """Lines that print a value as NaN/Inf next to numbers (a markdown table row, ``key: nan``, a CSV row)
    in a format the metric readers do not know yet."""
    out = []
    for ln in ctx.lines:
        t = ln.text
        if len(t) < 400 and _NONFINITE_CELL.search(t) and _NUMBER.search(t) and not t.lstrip().startswith("#"):
            out.append(ln.no)
    return out


def _nonfinite(ctx: Context, by_no: dict) -> Finding | None:
    cells = _nonfinite_cells(ctx) if not any(ctx.metrics.series.values()) else []
    if cells:
        why = f"{len(cells)} line(s) print a value as NaN/Inf (first: line {cells[0]}); the format is not one the " \
              "metric readers know, so the metric is not named."
        fix = ("Check which metric the column or key is (loss, grad_norm, reward), the first step where it turned "
               "non-finite, the loss scale (fp16), lr and grad clipping; paste the raw per-step log lines.")
        cause = Cause(rule_id="error-class:nonfinite_value", title="A logged value is NaN/Inf", confidence="low",
                      why=why, fix=fix, verified=False, matched=[why])
        ev = [Evidence(line=n, text=by_no[n].text.strip()[:240]) for n in cells[:6] if n in by_no]
        return Finding(symptom="nan_inf", title="Values printed as NaN/Inf", confidence="low", evidence=ev,
                       causes=[cause], fix=fix, next_checks=[fix], sharpen=list(_PASTE_NEXT[2:]), score=_SCORE["low"])
    for key, pts in ctx.metrics.series.items():
        bad = next((p for p in pts if math.isnan(p.value) or math.isinf(p.value)), None)
        if bad is None:
            continue
        ev = [Evidence(line=bad.line, text=by_no[bad.line].text.strip()[:240])] if bad.line in by_no else []
        why = f"{key} is {bad.value} at step {bad.step:g} (line {bad.line}); no rule explains it yet."
        fix = "Check the first step where a metric turned non-finite, the loss scale (fp16), lr and grad clipping."
        cause = Cause(rule_id="error-class:nonfinite_metric", title="A metric became non-finite", confidence="low",
                      why=why, fix=fix, verified=False, matched=[why])
        return Finding(symptom="nan_inf", title=f"{key} became non-finite at step {bad.step:g}", confidence="low",
                       evidence=ev, causes=[cause], fix=fix, next_checks=[fix], sharpen=list(_PASTE_NEXT[2:]),
                       score=_SCORE["low"])
    return None
