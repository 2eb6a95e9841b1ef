"""Triage: a log, config or launch script in; ranked findings backed by the input's own lines out.

Pipeline (see ARCHITECTURE.md): read -> normalise -> extract (events, metric series, config facts)
-> evaluate every rule -> group hits by symptom -> rank -> the :class:`TriageResult` contract.
"""
from __future__ import annotations

import math
import os
import re
from pathlib import Path

import yaml

from grpo_debug.skills.loader import RuleBase, default_rules
from grpo_debug.tools.engine.facts import extract_facts
from grpo_debug.tools.engine.edits import (already_set, clipping_on, edits_for_patch, input_frameworks, removes_safeguard,
                                           rule_patch)
from grpo_debug.tools.engine.events import extract_events
from grpo_debug.tools.engine.layout import is_layout
from grpo_debug.tools.engine.match import Context, RuleHit, evaluate
from grpo_debug.tools.engine.metrics import MetricTable, extract_metrics, is_finite
from grpo_debug.tools.engine.normalize import MAX_LINE_CHARS, Line, normalize, normalize_line
from grpo_debug.tools.engine.onset import finding_onset
from grpo_debug.tools.engine.ranking import direct_evidence, is_risk, observed, rank
from grpo_debug.tools.engine.verdict import verdict as judge
from grpo_debug.tools.engine.version_gate import fix_frameworks, fix_summary
from grpo_debug.tools.errors import InputError  # noqa: F401  (re-exported: grpo_debug.tools.triage.InputError)
from grpo_debug.tools.inputs import STREAM_THRESHOLD, is_compressed, looks_like_document, read_input, refuse_binary
from grpo_debug.tools.models import Cause, Coverage, Evidence, Finding, SeriesSummary, Setting, TriageResult

MAX_EVIDENCE = 8
MAX_DENSE_LINES = 200_000  # lines of a text read line by line; a longer one goes through the prefilter
MAX_SERIES = 60
EXCERPT = 240


def build_context(s: str, hint: str | None = None, query: str = "") -> tuple[Context, list[Line]]:
    lines = normalize(s)
    metrics = extract_metrics(lines)
    doc = looks_like_document(s, hint)
    try:
        facts = extract_facts(lines, s if doc else None, hint if hint in ("yaml", "json") else None, skip=metrics.lines)
    except (ValueError, yaml.YAMLError):  # a document the sniffed format cannot parse is read as a log
        facts, doc = extract_facts(lines, None, None, skip=metrics.lines), False
    if not doc or not facts.formats & {"yaml-config", "json-config"}:
        from grpo_debug.tools.engine.blocks import block_facts

        block_facts(facts, lines)  # configs in code fences, prose, or before/after log lines
    ctx = Context(lines=lines, events=_events(lines), metrics=metrics, facts=facts, query=query)
    return ctx, lines


def _events(lines: list[Line]) -> list:
    """Pattern events (engine/events.py) plus every traceback and error line classified (engine/errors_classify.py)."""
    from grpo_debug.tools.engine.errors_classify import error_events

    evs = extract_events(lines) + error_events(lines)
    evs.sort(key=lambda e: (e.line, e.kind != "traceback"))
    return evs


def excerpt(text: str, focus: list[str] = (), width: int = EXCERPT) -> str:
    """``text`` cut to ``width`` characters around the first focus term (in ``focus`` order: what the finding is
    about comes first, e.g. the series that went NaN before the others it names) that it contains (a metric key,
    the matched substring), so the excerpt shows what proves the finding; '...' marks each cut."""
    if len(text) <= width:
        return text
    low = text.lower()
    pos = next((i for f in focus if f and (i := low.find(f.lower())) >= 0), 0)
    start = max(0, pos - width // 3)  # (not pulled back at the end of the line: the term stays near the start)
    out = text[start:start + width]
    head = ""
    if start and (m := _STEP_HEAD.search(text, 0, min(start, 160))):  # keep the line's step in a cut metric line
        head = m.group(0).rstrip(" -|,") + " "
    return head + ("..." if start else "") + out + ("..." if start + width < len(text) else "")


# the step field a metric line opens with: verl "step:12", "[step 12]", "Global step 12:", "iteration 12/ 300"
_STEP_HEAD = re.compile(r"(?:\bstep[:= ]\s*\d+|\[step \d+\]|\bGlobal step \d+|\biteration\s+\d+\s*/\s*\d+)", re.I)


def line_map(lines: list[Line]) -> dict[int, Line]:
    """Line number -> Line; works for a dense log and for the sparse log of a streamed file (whose metric lines
    are read back from the file when asked for: tools/streaming.KeptLines)."""
    lazy = getattr(lines, "line_map", None)
    return lazy() if lazy is not None else {ln.no: ln for ln in lines}


def _evidence(lines: list[Line], nos: list[int], focus: list[str] = ()) -> list[Evidence]:
    by_no = lines if isinstance(lines, dict) else line_map(lines)
    out = []
    for n in nos:
        ln = by_no.get(n)
        if ln is not None:
            t = ln.text.strip() or ln.raw.strip()
            out.append(Evidence(line=n, text=excerpt(t, focus), source=ln.source))
    return out


_KEYLIKE = re.compile(r"--[A-Za-z][\w-]+|\b[A-Za-z_][\w]*(?:\.[\w]+)+\b|\b[a-z]+_[a-z0-9_]+\b|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b")


def _settings(fix_text: str, patch: dict | None, ctx: Context) -> list[Setting]:
    """The input's current values of the keys/flags a fix names (``--flag`` as flag_name)."""
    names = [t.lstrip("-").replace("-", "_") if t.startswith("--") else t for t in _KEYLIKE.findall(fix_text)]
    names += list(patch or {})
    out: list[Setting] = []
    seen: set[tuple[str, int]] = set()
    for n in dict.fromkeys(names):
        f = ctx.facts.get(n)
        if f is not None and (f.key, f.line) not in seen:
            seen.add((f.key, f.line))
            out.append(Setting(key=f.key, value=f.value, line=f.line))
    return out[:8]


_KNOWN_CACHE: dict[int, tuple[RuleBase, frozenset[str]]] = {}


def _known_keys(rb: RuleBase) -> frozenset[str]:
    """Key names the rule base uses (config signal keys, fix patch keys, key-like words of fixes)."""
    hit = _KNOWN_CACHE.get(id(rb))
    if hit is not None and hit[0] is rb:
        return hit[1]
    known: set[str] = set()
    for r in rb:
        for sig in r.match.signals():
            if getattr(sig, "kind", "") == "config":
                known |= {k.lower() for k in sig.all_keys()}
        known |= {k.lower() for k in (r.fix.patch or {})}
        for t in _KEYLIKE.findall(" ".join([r.fix.summary, *r.fix.steps])):
            known.add(t.lstrip("-").replace("-", "_").lower())
    _KNOWN_CACHE[id(rb)] = (rb, frozenset(known))
    return _KNOWN_CACHE[id(rb)][1]


def _is_known(key: str, known: frozenset[str]) -> bool:
    parts = key.lower().split(".")
    return any(".".join(parts[i:]) in known for i in range(len(parts)))


def _series_summary(t: MetricTable) -> dict[str, SeriesSummary]:
    def prio(k: str) -> tuple[int, str]:
        import re
        important = re.search(r"grad.?norm|loss|kl|entropy|reward|score|log_prob|probs_diff|clip|length|lr", k, re.I)
        return (0 if important else 1, k)

    out: dict[str, SeriesSummary] = {}
    for k in sorted(t.series, key=prio)[:MAX_SERIES]:
        pts = t.series[k]
        fin = [p.value for p in pts if is_finite(p.value)]
        bad = next((p for p in pts if not is_finite(p.value)), None)
        r = lambda v: None if v is None else (v if math.isfinite(v) else None)  # noqa: E731
        out[k] = SeriesSummary(points=t.count(k), first_step=pts[0].step, last_step=pts[-1].step,
                               first=r(pts[0].value), last=r(pts[-1].value),
                               min=min(fin) if fin else None, max=max(fin) if fin else None,
                               first_nonfinite_step=bad.step if bad else None,
                               first_nonfinite_line=bad.line if bad else None)
    return out


def _sharpen(rule_sharpen: list[str], ctx: Context) -> list[str]:
    out = list(rule_sharpen)
    if not ctx.versions and not any(f.key.startswith("versions.") for f in ctx.facts.facts):
        out.append("framework and engine versions (pip list | grep -E 'verl|slime|vllm|sglang|torch|deepspeed|megatron')")
    if len(ctx.facts) == 0:
        out.append("the full config or launch command of the run")
    if not ctx.metrics.series:
        out.append("the per-step metric lines around the failure")
    return list(dict.fromkeys(out))[:6]


def config_lines(ctx: Context) -> set[int]:
    """The input's setting lines (config facts, launch commands, config blocks): a regex hit on one of them
    observes a setting, not the run (tools/engine/ranking.observed)."""
    return {f.line for f in ctx.facts.facts} | set(ctx.facts.command_lines) | set(ctx.facts.block_lines)


def _group(hits: list[RuleHit], ctx: Context, lines: list[Line]) -> list[tuple[Finding, int | None]]:
    """One finding per symptom code, most likely first, each with its key evidence line (the first
    line of an event/detector/check signal of its top cause, for the summary)."""
    keyed: list[tuple[Finding, int | None]] = []
    lines = line_map(lines)
    by_symptom: dict[str, list[RuleHit]] = {}
    for h in hits:
        by_symptom.setdefault(h.rule.symptom, []).append(h)
    findings = []
    stated: set[int] = set()
    settings_lines = config_lines(ctx)
    fws, in_fws = fix_frameworks(ctx), input_frameworks(ctx.facts, lines)  # once per input, not per rule
    for symptom, hs in by_symptom.items():
        hs.sort(key=lambda h: -h.score)
        top = hs[0]
        nos: list[int] = []
        for h in hs:
            for n in h.lines:
                if n not in nos:
                    nos.append(n)
        causes = [Cause(rule_id=h.rule.id, title=h.rule.title, confidence=h.confidence or h.rule.confidence,
                        why=h.rule.why, fix=fix_summary(h.rule.fix, fws), verified=h.rule.verified,
                        matched=[r.note for r in h.results][:4]) for h in hs[:4]]
        focus = [f for h in hs for r in h.results for f in r.focus]
        direct = direct_evidence(symptom, (r for h in hs for r in h.results))  # the input states the symptom
        confidence = "high" if direct else (top.confidence or top.rule.confidence)
        onset, recovered = finding_onset(hs, lines)  # where the change starts (tools/engine/onset.py)
        if recovered:  # only an isolated spike that came back: said so, never medium or high
            confidence = "low"
        risk = is_risk(symptom, (r for h in hs for r in h.results), settings_lines)  # config only: a risk
        confidence = "low" if risk else confidence
        key = next((n for kinds in (("event", "detector"), ("check", "regex", "config"))
                    for r in top.results if r.kind in kinds for n in r.lines), None)
        nxt = list(top.rule.next_checks) + [f"grpo-debug rule {top.rule.id} (MCP: explain_rule) for the whole rule"]
        score = top.score + 0.3 * min(3, len(hs) - 1)
        patch: dict = {}
        for h in hs:  # the top cause first; other causes' changes only for keys it does not set
            if h is not top and h.rule.fix.safety == "review":
                continue  # a change its own rule says to review is never slipped into another cause's edits
            computed = {k: v for r in h.results for k, v in r.patch.items()}  # a check's values for this input
            for k, v in rule_patch(h.rule.fix, h.rule.applies_to.frameworks, computed, ctx.facts, lines, in_fws).items():
                if not (removes_safeguard(k, v) and not observed(h.results, settings_lines)):
                    patch.setdefault(k, v)  # a safeguard is turned off only for a symptom this rule observed
        text = fix_summary(top.rule.fix, fws)  # the fix as this input's framework writes it (engine/version_gate.py)
        settings = _settings(" ".join([text, *top.rule.fix.steps]), top.rule.fix.patch, ctx)
        findings.append(Finding(
            symptom=symptom, title=top.rule.title + (f" (an isolated spike at step {onset.step} that recovered)"
                                                     if recovered and onset else ""), confidence=confidence, onset=onset,
            evidence=_evidence(lines, sorted(set(nos[:MAX_EVIDENCE]) | ({key} if key else set())), focus),
            causes=causes, fix=_fix_text(text, top.rule.fix, ctx, lines, in_fws, settings, patch),
            patch=patch or None, edits=edits_for_patch(patch, ctx.facts, lines), settings=settings,
            next_checks=nxt[:5], sharpen=_sharpen(top.rule.sharpen, ctx), score=round(score, 2), risk=risk))
        keyed.append((findings[-1], key))
        if direct:
            stated.add(id(findings[-1]))
    return rank(keyed, stated)  # what ended or broke the run first (tools/engine/ranking.py)


def _settings_behind_nan(findings: list[Finding], rb: RuleBase) -> None:
    """A non-finite metric and, in the same run, a setting that is a NaN risk (a rule whose title or tags carry the
    NaN guide's words: gradient clipping off, fp16, overflow, ...; skills/families.yaml nan_guide) that another
    finding points at with an exact change: the non-finite finding's first next check names that setting, so the
    generic checklist is not read first."""
    from grpo_debug.skills.knowledge import family_selectors

    nan = next((f for f in findings if f.symptom == "nan_inf"), None)
    words = family_selectors()["nan_guide"].words
    if nan is None or not words:
        return
    for f in findings:
        rule = rb.get(f.causes[0].rule_id) if f.causes and f is not nan else None
        if rule is None or not (f.edits or f.settings) \
                or not re.search(words, " ".join([rule.title, *rule.tags]).lower()):
            continue
        where = f.settings[0] if f.settings else None
        said = f"{where.key} = {where.value!r} (line {where.line})" if where else f.edits[0].key
        nan.next_checks.insert(0, f"This run's own settings carry a NaN risk: {said} ({f.title}); the "
                                  f"{f.symptom} finding has the change")
        return


def _sets(settings: list[Setting], patch: dict | None) -> str:
    """' This input sets: k = v (line N); ...' for a checklist fix (no patch) whose keys the input sets, so a
    check the input already answers (clipping on: clip_grad = 1.0) is not asked again."""
    if patch or not settings:
        return ""
    return " This input sets: " + "; ".join(f"{s.key} = {s.value!r} (line {s.line})" for s in settings[:4]) + "."


_CLIP_WORDS = re.compile(r"clip(?:ping|_grad|-grad)|grad_clip|gradient_clipping|max_grad_norm|max_norm", re.I)


def _fix_text(text: str, fix, ctx: Context, lines, frameworks: set[str], settings: list[Setting], patch: dict) -> str:
    """The finding's fix: ``text`` (the rule's fix for this input's framework) with what the input already has said
    first, not asked again: every setting of the patch already so ('Already so in this input: clip_grad = 1.0
    (line 12): ...'), or, for a fix that names gradient clipping, clipping already on ('Gradient clipping is already
    on at 1.0 (key, line N).'); then the values a checklist fix's keys have in the input (:func:`_sets`)."""
    done = already_set(fix, ctx.facts, lines, frameworks)
    lead = ""
    clip = clipping_on(ctx.facts) if _CLIP_WORDS.search(text) else None
    if clip is not None and not any(d.startswith(clip.key + " ") for d in done):
        lead = f"Gradient clipping is already on at {clip.value} ({clip.key}, line {clip.line}). "
    if done:
        lead += f"Already so in this input: {'; '.join(done)}. "
        settings = [s for s in settings if not any(d.startswith(s.key + " ") for d in done)]
    return lead + text + _sets(settings, patch)


def _clip_words(text: str, n: int) -> str:
    """``text`` cut to about n characters at a word boundary, with an ellipsis when cut."""
    text = text.rstrip(". ")
    if len(text) <= n:
        return text
    cut = text[:n].rsplit(" ", 1)[0]
    return cut + " ..."


def _summary(findings: list[Finding], cov: Coverage, key: int | None = None, notes: list[str] | None = None,
             reason: str = "", chain: str | None = None) -> str:
    """The one-paragraph answer: the verdict's ``reason`` first (engine/verdict.py), the causal ``chain`` sentence
    (engine/chain.py; None: said from the findings' ``consequence_of`` and evidence lines), then the headline.
    ``notes``: what the summary must say about the input (a streamed log: only what can change the answer, such as
    a compressed log not read to its end, not the per-pattern bookkeeping that ``coverage.skipped`` also holds);
    None: the first two of ``cov.skipped``."""
    from grpo_debug.tools.engine.chain import chain_sentence, when

    tail = notes if notes is not None else cov.skipped[:2]
    lead = (reason + " ") if reason else ""
    if not findings:
        what = ", ".join(cov.formats) or "no known log or config format"
        s = lead + (f"No known failure pattern matched in {cov.lines_read} lines ({what}; {cov.metric_lines} metric "
                    f"lines, {cov.event_lines} error/event lines, {cov.config_facts} config facts).")
        if not reason.startswith("Healthy"):
            s += (" This is not a verdict that the run is healthy: paste the lines around the failure, the per-step "
                  "metrics and the launch command.")
        return s + (" Note: " + "; ".join(notes) + "." if notes else "")
    f = findings[0]
    ev = next((e for e in f.evidence if e.line == key), f.evidence[0] if f.evidence else None)
    if chain is None:
        chain = chain_sentence(findings, {id(g): when(g, key if g is f else None) for g in findings})
    s = lead + (chain + " " if chain else "")
    s += (f"Risk of the configuration (no symptom observed in the input): {f.symptom} - {f.title} (low confidence)."
          if f.risk else f"Most likely: {f.symptom} - {f.title} ({f.confidence} confidence).")
    if f.causes and f.causes[0].matched:
        s += " Signals: " + "; ".join(m for m in f.causes[0].matched[:3]) + "."
    if ev:
        s += f" Evidence: line {ev.line}: {_clip_words(ev.text, 160)}."
    s += " Fix: " + f.fix.rstrip(".") + "."
    if len(findings) > 1:
        s += " Also: " + "; ".join(f"{x.symptom} ({'risk: ' if x.risk else ''}{x.title})" for x in findings[1:3]) + "."
    if tail:
        s += " Note: " + "; ".join(tail) + "."
    return s


def triage_text(s: str, *, label: str = "<text>", hint: str | None = None, skipped: list[str] | None = None,
                rules: RuleBase | None = None, max_findings: int = 10, versions=None) -> TriageResult:
    """Triage decoded text. Pure: no I/O. See :func:`triage` for the arguments."""
    if s.count("\n") > MAX_DENSE_LINES:  # every line through every extractor would cost minutes: prefilter it
        import io

        return triage_stream(io.BytesIO(s.encode("utf-8", "replace")), rules=rules, max_findings=max_findings,
                             label=label, skipped=list(skipped or []) + [f"more than {MAX_DENSE_LINES} lines: read "
                                                                         "through the large-log prefilter"],
                             versions=versions)
    ctx, lines = build_context(s, hint)
    skipped = list(skipped or [])
    if not s.strip():
        skipped.append("the input is empty")
    return _result(ctx, lines, label=label, skipped=skipped, rules=rules, max_findings=max_findings,
                   lines_read=len(lines), bytes_read=len(s.encode("utf-8", "replace")), versions=versions)


def rule_patterns(rb: RuleBase) -> list[tuple[str, bool]]:
    """Every regex signal of the rule base as (pattern, ignore_case), in a stable order (RuleBase.regex_patterns)."""
    return rb.regex_patterns()


def _result(ctx: Context, lines: list[Line], *, label: str, skipped: list[str], rules: RuleBase | None,
            max_findings: int, lines_read: int, bytes_read: int, streamed: bool = False, versions=None,
            summary_notes: list[str] | None = None) -> TriageResult:
    from grpo_debug.tools.engine.version_gate import annotate, attach_versions

    rb = rules or default_rules()
    ctx.patterns = rule_patterns(rb)
    attach_versions(ctx, rb, versions)  # the run's framework versions gate rules (engine/version_gate.py)
    hits = [h for r in rb if (h := evaluate(r, ctx)) is not None]
    keyed = _group(hits, ctx, lines)
    annotate([f for f, _ in keyed], hits, ctx)
    from grpo_debug.tools.error_findings import error_findings

    keyed += [(f, f.evidence[0].line if f.evidence else None) for f in error_findings(ctx, line_map(lines), [f for f, _ in keyed])]
    findings = [f for f, _ in keyed]
    for f in findings:  # the onset's file: the input's path (a folder's files: rundir/analyze.py remap)
        if f.onset is not None and f.onset.line is not None and label != "<text>":
            f.onset.file = label
    _settings_behind_nan(findings, rb)
    used = (set(ctx.metrics.lines) | {n for e in ctx.events for n in e.lines} | {f.line for f in ctx.facts.facts}
            | ctx.facts.command_lines | ctx.facts.block_lines)
    not_understood = [ln for ln in lines if ln.no not in used and not ln.text.lstrip().startswith("#")
                      and not is_layout(ln.text)]  # brackets, rules and progress bars are formatting (engine/layout.py)
    cut = [ln.no for ln in lines if ln.cut]
    if cut:
        skipped.append(f"{len(cut)} line(s) longer than {MAX_LINE_CHARS} characters were cut (first: line {cut[0]})")
    known = _known_keys(rb)
    config_keys = sorted({f.key for f in ctx.facts.facts if not _is_known(f.key, known)})
    n_not = len(not_understood) + (lines_read - len(lines) if streamed else 0)
    cov = Coverage(
        input=label, bytes_read=bytes_read, lines_read=lines_read,
        formats=sorted(ctx.metrics.formats | ctx.facts.formats | ({"python-traceback"} if ctx.events_of("traceback") else set())
                       | {f"framework:{h.name}" for h in ctx.run.frameworks if h.score >= 2}),
        metric_lines=len(ctx.metrics.lines), event_lines=len({n for e in ctx.events for n in e.lines}),
        config_facts=len(ctx.facts), lines_not_understood=n_not,
        not_understood_sample=_evidence(lines, [ln.no for ln in not_understood[:5]]), skipped=skipped,
        unknown_config_keys=config_keys[:50], versions=[h.describe() for h in (ctx.versions or {}).values()][:12])
    keyed, chain = _chain(keyed, ctx, lines)  # roots first, consequence_of, risks last (engine/chain.py)
    findings = [f for f, _ in keyed]
    truncated = len(findings) > max_findings
    findings = findings[:max_findings]
    verdict, reason = judge(findings, ctx.metrics, len(ctx.facts))
    res = TriageResult(summary=_summary(findings, cov, keyed[0][1] if keyed else None, summary_notes, reason, chain),
                       verdict=verdict, findings=findings, metrics=_series_summary(ctx.metrics), coverage=cov,
                       truncated=truncated)
    res._reason, res._chain = reason, chain
    return res


def _chain(keyed: list, ctx: Context, lines) -> tuple[list, str]:
    """``keyed`` in the answer's order with ``consequence_of`` set (engine/chain.order); a collective timeout names
    the ranks that did not report it, with their last lines as evidence. Returns (keyed, the chain sentence or
    '')."""
    from grpo_debug.tools.engine import chain

    for f, _ in keyed:  # a classified error of the same symptom (tools/error_findings.py) observes it
        if f.risk and any(c.rule_id.startswith("error-class:") for c in f.causes):
            f.risk = False
    keyed = chain.order(keyed)
    said: dict[int, str] = {id(f): "" for f, _ in keyed}
    by_no = line_map(lines)
    hang = next((f for f, _ in keyed if f.symptom == "collective_hang" and not f.risk), None)
    evs = ctx.events_of("nccl_timeout") if hang is not None else []
    if evs:
        timed, silent = chain.silent_ranks([by_no[n] for e in evs for n in e.lines if n in by_no], lines,
                                           chain.world_size(ctx.facts, lines))
        if silent and 2 * len(silent) <= len(timed):  # most ranks report: the few silent ones are the culprits
            last = [n for r in silent[:4] for n in chain.last_lines_of(r, lines)]
            said[id(hang)] = f"ranks {chain.spans(timed)} timed out; rank(s) {chain.spans(silent)} did not report"
            hang.next_checks.insert(0, f"Rank(s) {chain.spans(silent)} did not report the timeout the others "
                                       f"({chain.spans(timed)}) did: look at their last lines first"
                                       + (f" (lines {', '.join(map(str, last))})" if last else " (none in this input)"))
            hang.evidence += [e for e in _evidence(by_no, last) if all(e.line != x.line for x in hang.evidence)]
    for f, k in keyed:  # the rank a crash happened on, when its line names one ("vLLM OOM on rank 28")
        ranks = chain.ranks_in(chain.raw(by_no[k])) if f.symptom in chain.CRASH_ROOTS and k in by_no else set()
        if len(ranks) == 1:
            said[id(f)] = f"rank {next(iter(ranks))}"
    at = {id(f): chain.when(f, k) for f, k in keyed}
    return keyed, chain.chain_sentence([f for f, _ in keyed], at, said, {id(f): k for f, k in keyed})


def triage_stream(path, *, rules: RuleBase | None = None, max_findings: int = 10,
                  progress=None, label: str | None = None, skipped: list[str] | None = None,
                  versions=None) -> TriageResult:
    """Triage a large or compressed log in bounded memory: tools/streaming.py reads it (see ``read_streamed``),
    then the pipeline here. ``progress(bytes_done, bytes_total)`` is called as the work proceeds. Raises
    InputError for an unreadable or undecodable (e.g. zstd without the zstandard package) file."""
    return stream_and_result(path, rules=rules, max_findings=max_findings, progress=progress, label=label,
                             skipped=skipped, versions=versions)[1]


def stream_and_result(path, *, rules: RuleBase | None = None, max_findings: int = 10, progress=None,
                      label: str | None = None, skipped: list[str] | None = None, versions=None):
    """(the Streamed read of ``path``, its TriageResult): :func:`triage_stream` for callers that also need the
    context (plot and compare). The summary carries the caller's notes and what can change the answer (the input
    not read to its end), not the per-pattern bookkeeping of ``coverage.skipped``."""
    from grpo_debug.tools.streaming import read_streamed

    rb = rules or default_rules()
    st = read_streamed(path, rb, progress=progress, label=label)
    res = _result(st.ctx, st.lines, label=label or str(path), skipped=list(skipped or []) + st.skipped, rules=rb,
                  max_findings=max_findings, lines_read=st.total_lines, bytes_read=st.bytes_read, streamed=True,
                  versions=versions, summary_notes=list(skipped or []) + st.partial)
    return st, res


def streamable(path: str | os.PathLike) -> Path | None:
    """``path`` as a Path when it is a file to stream (over STREAM_THRESHOLD bytes, or compressed), else None.
    Raises InputError for a large binary file (a shared library is refused, not streamed)."""
    p = Path(path).expanduser()
    if not (p.is_file() and (p.stat().st_size > STREAM_THRESHOLD or is_compressed(p))):
        return None
    if not is_compressed(p):
        from grpo_debug.tools import safefs

        head = safefs.head(p, 65536)
        why = refuse_binary(head, sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13, 27)), str(p))
        if why:
            raise InputError(why)
    return p


def triage(text: str | None = None, path: str | os.PathLike | None = None, *, rules: RuleBase | None = None,
           max_findings: int = 10, progress=None, versions=None) -> TriageResult:
    """Triage a training log, config or launch script given as text or as a path.

    Args:
        text: pasted text (a log, YAML/JSON config, or shell script). Exactly one of text/path.
        path: a file to read (extension .yaml/.yml/.json/.sh selects config parsing; else sniffed).
        rules: rule base to use (default: packaged rules plus GRPO_DEBUG_RULES packs).
        max_findings: findings kept, most likely first (``truncated`` says when more were found).
        progress: optional ``progress(bytes_done, bytes_total)`` callback for streamed (large) files.
        versions: the run's framework versions, ``"verl=0.9.0,deepspeed=0.19.5"`` (``host`` adds this machine's
            installed releases); they win over versions the input prints (tools/run/versions.py). Rules outside
            their version range do not fire; with a version unknown they fire one confidence step lower.

    Returns:
        TriageResult (the contract in tools/models.py). Never empty-and-silent: with no finding the summary says
        what was read and what to paste next.

    Raises:
        InputError: neither or both arguments, or a path that is missing, a directory or unreadable.
    """
    p = streamable(path) if path is not None and text is None else None
    if p is not None:
        return triage_stream(p, rules=rules, max_findings=max_findings, progress=progress, versions=versions)
    s, label, skipped, hint = read_input(text, path)
    return triage_text(s, label=label, hint=hint, skipped=skipped, rules=rules, max_findings=max_findings,
                       versions=versions)
