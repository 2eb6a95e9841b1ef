"""Generic findings from classified errors: no input that holds an error, a traceback or a non-finite metric
ends with zero findings.

Each error class (tools/engine/error_classes.py) whose symptom no rule finding already names becomes one
finding: the class's title, the error named (type, message, decisive frame), its lines as evidence, the
generic cause and what to check, citing the framework source of the error text. Rules that explain the error
more specifically rank above it (its score stays below any rule hit's).

An error the classifier has no class for, and the classes that say only that a process died (a native signal, a
dead vLLM engine, an Ascend NPU error, a driver error in a compiled kernel without a cache to blame), become one
``process_crash`` finding when no other finding explains them: the root error (the first full exception; a vLLM
EngineDeadError points at the error printed above it) with its type, message and decisive frame, the records that
followed it, and what to paste next; medium only when the process certainly died of it (:func:`_crash_confidence`).
It is never config_error, and never ray_actor_died / collective_hang for passing through Ray or torch.distributed
frames. A non-finite metric no rule explained gets a low-confidence finding too.
"""
from __future__ import annotations

import math
import re

from grpo_debug.tools.engine.error_classes import BY_NAME, UNKNOWN, ErrorClass
from grpo_debug.tools.engine.error_classes_crash import COMPILE_CACHE_LOAD
from grpo_debug.tools.engine.events import Event
from grpo_debug.tools.engine.match import Context
from grpo_debug.tools.models import Cause, Evidence, Finding

MAX_ERROR_FINDINGS = 3
CRASH = "process_crash"  # the symptom of an error that says only that a process died
_SCORE = {"high": 1.9, "medium": 1.8, "low": 1.0}  # below the weakest rule hit (low confidence + one regex = 2.0)
_PASTE_NEXT = ("the full traceback, up to and including its last line (the exception type and message)",
               "about 50 lines before the first error, from every process that failed (trainer, rollout server, "
               "Ray worker logs)",
               "framework and engine versions (pip list | grep -E 'verl|slime|openrlhf|trl|vllm|sglang|torch|ray|"
               "deepspeed|megatron')",
               "the launch command or config of the run")


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
    MAX_ERROR_FINDINGS, classified classes first), then one ``process_crash`` finding for the errors that say only
    that a process died (an unclassified exception, a native signal, a dead engine) when nothing else explains
    them (:func:`crash_finding`), and a non-finite metric fallback when nothing else holds."""
    named = {f.symptom for f in findings}
    groups: dict[tuple[str, str], list[Event]] = {}
    for ev in ctx.events_of("error"):
        cls = BY_NAME.get(ev.fields.get("class"), UNKNOWN)
        groups.setdefault((cls.name, symptom_of(cls, ev, ctx)), []).append(ev)
    order = sorted(groups.items(), key=lambda kv: (kv[0][0] == UNKNOWN.name, _rank(kv[1]), kv[1][0].line))
    _enrich(findings, order)
    out: list[Finding] = []
    crashes: list[Event] = []
    for (name, symptom), evs in order:
        if symptom == CRASH:
            crashes += evs
            continue
        if symptom in named or len(out) >= MAX_ERROR_FINDINGS:
            continue
        named.add(symptom)
        f = _finding(BY_NAME.get(name, UNKNOWN), evs, symptom, by_no)
        _add_context(f, evs[0], by_no)
        out.append(f)
    if crashes and not explained(crashes, findings) and not _follow(crashes, out):
        out.append(crash_finding(sorted(crashes, key=lambda e: e.line), ctx, by_no))
    if not findings and not out:
        nf = _nonfinite(ctx, by_no)
        if nf is not None:
            out.append(nf)
    return out


def _add_context(f: Finding, ev: Event, by_no: dict) -> None:
    """The line an error class cites as context (a compiled graph loaded from the cache before a driver error in a
    compiled kernel) joins the finding's evidence, and the finding is medium: two signals agree."""
    n = ev.fields.get("context_line")
    if n is None or n not in by_no or any(e.line == n for e in f.evidence):
        return
    ln = by_no[n]
    f.evidence.insert(0, Evidence(line=n, text=(ln.text.strip() or ln.raw.strip())[:240], source=ln.source))
    f.evidence = f.evidence[:8]
    if f.confidence == "low":
        f.confidence = "medium"
        f.score = _SCORE["medium"]
        for c in f.causes:
            c.confidence = "medium"


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


# Findings of these symptoms describe a series, not an error: they never explain a crash. A dead actor or a
# collective timeout follows a crash (the rank that died never reaches the collective): one logged after the crash
# does not explain it either.
_SERIES = frozenset({"grad_norm_spike", "loss_plateau", "logprob_mismatch", "reward_zero", "entropy_anomaly",
                     "length_blowup", "garbled_rollout"})
_CONSEQUENCES = frozenset({"ray_actor_died", "collective_hang"})
_KERNEL_CLASSES = frozenset({"compiled_kernel_driver_error", "triton_driver_error"})
_CACHE_LOAD = re.compile(COMPILE_CACHE_LOAD)
# driver errors that say the kernel image does not fit this GPU or driver: an artifact built elsewhere (a cache)
_IMAGE_ERROR = re.compile(r"(?i)kernel image|invalid device function|\bPTX\b|unsupported toolchain|"
                          r"named symbol not found|invalid source")
_FRAME_AT = re.compile(r"^(?P<file>.*):(?P<no>\d+) in (?P<func>.*)$")
# classes whose record says the cause is another error printed before it
_POINTS_ABOVE = frozenset({"vllm_engine_dead"})


def symptom_of(cls: ErrorClass, ev: Event, ctx: Context) -> str:
    """The symptom of one classified error: the class's own, except that a driver error inside a compiled kernel
    whose image does not fit, after a line that loaded the compiled graph from a cache, is a compile-cache error.
    The cache line, when there is one, is kept as ``ev.fields['context_line']`` (cited as evidence)."""
    if cls.name in _KERNEL_CLASSES:
        n = _cache_load_before(ctx, ev.line)
        if n is not None:
            ev.fields["context_line"] = n
            head = f"{ev.fields.get('exc_type') or ''}: {ev.fields.get('message') or ''}"
            if _IMAGE_ERROR.search(head):
                return "compile_cache_error"
    return cls.symptom


def _cache_load_before(ctx: Context, line: int) -> int | None:
    """The last line before ``line`` that says a compiled graph was loaded from a cache (vLLM)."""
    found = None
    for ln in ctx.lines:
        if ln.no >= line:
            break
        if "Directly load" in ln.text and _CACHE_LOAD.search(ln.text):
            found = ln.no
    return found


def explained(crashes: list[Event], findings: list[Finding]) -> bool:
    """Whether another finding already explains the crash records: a medium/high finding of an error symptom (not a
    series symptom, and not a dead actor or timeout logged after the crash), or any finding citing their lines."""
    lines = {n for e in crashes for n in e.lines}
    first = min(e.line for e in crashes)
    if findings and not any(e.fields.get("exc_type") or e.fields.get("class") != UNKNOWN.name for e in crashes):
        return True  # only a traceback cut before its exception line: another finding says more
    for f in findings:
        cited = {e.line for e in f.evidence}
        if cited & lines:
            return True
        if f.symptom in _SERIES or f.confidence == "low":
            continue
        if f.symptom in _CONSEQUENCES and cited and min(cited) > first:
            continue
        return True
    return False


def _follow(crashes: list[Event], errors: list[Finding]) -> bool:
    """Whether a classified error finding explains the crash records: any, except a dead actor or a collective
    timeout first logged after the crash (those follow from it)."""
    first = min(e.line for e in crashes)
    for f in errors:
        cited = [e.line for e in f.evidence]
        if not (f.symptom in _CONSEQUENCES and cited and min(cited) > first):
            return True
    return False


def _root(evs: list[Event]) -> Event:
    """The error the others follow from: the first exception (type and message) whose class does not say its cause
    is printed above it, else the first record."""
    full = [e for e in evs if e.fields.get("exc_type") and e.fields.get("class") not in _POINTS_ABOVE]
    named = [e for e in evs if e.fields.get("class") not in _POINTS_ABOVE]
    return (full or named or evs)[0]


def _continued(ctx: Context, line: int) -> bool:
    """Whether training went on after ``line``: a metric line follows it."""
    return any(n > line for n in ctx.metrics.lines)


def _crash_confidence(root: Event, cls: ErrorClass, evs: list[Event], ctx: Context) -> str:
    """Medium when the process certainly died of it; low when the run went on after it or the record is partial.
    An unclassified exception is medium only with a second sign of death: a native crash or a dead engine logged
    with it, or a traceback that reached the interpreter's top level (a ``<module>`` frame)."""
    if _continued(ctx, max(e.lines[-1] for e in evs)):
        return "low"
    if cls is not UNKNOWN:
        return "medium" if root.fields.get("context_line") else cls.confidence
    f = root.fields
    if not (f.get("exc_type") and f.get("message")):
        return "low"
    died = any(BY_NAME.get(e.fields.get("class"), UNKNOWN).confidence == "medium" for e in evs if e is not root)
    top = any(str(fr).endswith(" in <module>") for fr in f.get("frames") or ())
    return "medium" if died or top else "low"


def _frame_line(root: Event, by_no: dict) -> int | None:
    """The input line of the record's decisive frame (``File "x.py", line N`` / ``x.py:N in f``)."""
    m = _FRAME_AT.match(root.fields.get("decisive_frame") or "")
    if not m:
        return None
    for n in root.lines:
        t = by_no[n].text if n in by_no else ""
        if m.group("file") in t and (f"line {m.group('no')}" in t or f":{m.group('no')}" in t):
            return n
    return None


def _crash_evidence(root: Event, evs: list[Event], by_no: dict) -> list[Evidence]:
    nos = [root.fields.get("exc_line") or root.line, _frame_line(root, by_no), root.line,
           root.fields.get("context_line"), *[e.fields.get("exc_line") or e.line for e in evs if e is not root][:2]]
    out = []
    for n in sorted({n for n in nos if n is not None}):
        if n in by_no:
            ln = by_no[n]
            out.append(Evidence(line=n, text=(ln.text.strip() or ln.raw.strip())[:240], source=ln.source))
    return out[:8]


def _crash_fix(root: Event, cls: ErrorClass) -> str:
    if cls is not UNKNOWN:
        return f"Check {cls.check}"
    m = _FRAME_AT.match(root.fields.get("decisive_frame") or "")
    where = f"{m.group('func')} ({m.group('file').rsplit('/', 1)[-1]}:{m.group('no')})" if m else "the last frame"
    what = root.fields.get("exc_type") or "the error"
    return (f"Check what {where} was given when it raised {what}: the values and settings it reads, the lines "
            f"logged just before the traceback, and the versions of the package it belongs to.")


def crash_finding(evs: list[Event], ctx: Context, by_no: dict) -> Finding:
    """One ``process_crash`` finding for the records that say only that a process died (``evs`` in line order):
    the root error (:func:`_root`) named with its type, message and decisive frame, the records that followed
    it, and what to paste next. Confidence medium at most (:func:`_crash_confidence`)."""
    root = _root(evs)
    cls = BY_NAME.get(root.fields.get("class"), UNKNOWN)
    known = cls is not UNKNOWN
    what = _describe(root)
    conf = _crash_confidence(root, cls, evs, ctx)
    later = [e for e in evs if e is not root and e.line > root.line]
    then = "; then " + "; ".join(_describe(e)[:120] for e in later[:2]) if later else ""
    if known:
        why = f"{cls.cause} (error text from {cls.source}){then}"
    else:
        why = (f"{what[:200]} ended the process, and no error class of this engine explains it: that a process "
               f"crashed is certain, why is not; the cause is in the decisive frame or the input it got{then}.")
    fix = _crash_fix(root, cls)
    paste = list(_PASTE_NEXT[:3]) if root.fields.get("exc_type") else [
        "the rest of the traceback, up to its last line (the exception type and message)", *_PASTE_NEXT[1:3]]
    cause = Cause(rule_id=f"error-class:{cls.name}", title=cls.title, confidence=conf, why=why, fix=fix,
                  verified=known, matched=[f"{len(evs)} crash record(s)", what[:160]])
    title = f"{cls.title}: {what}" if known else f"Process crash (unclassified error): {what}"
    return Finding(symptom=CRASH, title=title[:300], confidence=conf, evidence=_crash_evidence(root, evs, by_no),
                   causes=[cause], fix=fix, next_checks=[fix] + [f"paste {p}" for p in paste],
                   sharpen=list(_PASTE_NEXT), score=_SCORE[conf])


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
