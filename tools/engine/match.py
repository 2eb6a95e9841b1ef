"""Evaluate rules against what the engine extracted from one input (a :class:`Context`).

A rule fires when every ``all`` signal holds, at least one ``any`` signal holds (if there are any) and
no ``none`` signal holds. The hit carries the evidence lines of the signals that held and a score used
for ranking: rule confidence, the number of distinct signal kinds that held (a log event plus a config
fact beats either alone) and the rule's ``priority`` nudge.
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from grpo_debug.skills.schema import (CheckSignal, ConfigSignal, DetectorSignal, EventSignal, Match, ProbeSignal,
                                      QuerySignal, RegexSignal, Rule)
from grpo_debug.tools.engine.config_checks import CHECKS
from grpo_debug.tools.engine.facts import FactSet
from grpo_debug.tools.engine.detectors import DETECTORS
from grpo_debug.tools.engine.events import Event
from grpo_debug.tools.engine.metrics import MetricTable
from grpo_debug.tools.engine.normalize import Line

CONF_WEIGHT = {"high": 3.0, "medium": 2.0, "low": 1.0}
KIND_WEIGHT = {"event": 1.5, "detector": 1.5, "check": 1.5, "probe": 1.5, "config": 1.0, "regex": 1.0, "query": 0.5}


@dataclass
class Context:
    lines: list[Line]
    events: list[Event]
    metrics: MetricTable
    facts: FactSet
    query: str = ""
    probe: dict[str, Any] = field(default_factory=dict)  # host_facts() keys without the 'probe.' prefix
    _by_kind: dict[str, list[Event]] = field(default_factory=dict)
    _regex_hits: dict[tuple[str, bool], set[int]] | None = None
    patterns: list[tuple[str, bool]] = field(default_factory=list)  # every rule regex, for one prefilter pass
    _run: Any = None  # the run model (tools/run), built on first use
    _sources: dict[int, str] | None = None  # line number -> process prefix, built on first use
    # {canonical framework: tools.run.versions.VersionHit}; None = versions not gathered (no version gating)
    versions: dict[str, Any] | None = None
    shown: set[str] = field(default_factory=set)  # canonical frameworks the input shows (for version gating)

    @property
    def run(self):
        """The :class:`~grpo_debug.tools.run.model.Run` of this input (canonical series and facts), built once from
        the context's own lines, metric table, facts and events."""
        if self._run is None:
            from grpo_debug.tools.run.build import from_context

            self._run = from_context(self)
        return self._run

    def source_of(self, no: int) -> str | None:
        """The process prefix (``Line.source``, e.g. ``RayWorkerWrapper pid=7``) of input line ``no``, if any."""
        if self._sources is None:
            self._sources = {ln.no: ln.source for ln in self.lines if ln.source}
        return self._sources.get(no)

    def regex_candidates(self, pattern: str, ignore_case: bool) -> set[int] | None:
        """Indices of lines that may match ``pattern``: all rule regexes run in one multi-pattern pass over
        the log (prefilter.lines_matching) the first time any is asked for; None = scan every line."""
        if self._regex_hits is None:
            from grpo_debug.tools.engine.prefilter import lines_matching

            pats = self.patterns or [(pattern, ignore_case)]
            res = lines_matching(pats, [ln.text for ln in self.lines])
            self._regex_hits = {pats[i]: v for i, v in res.items()}
        return self._regex_hits.get((pattern, ignore_case))

    def events_of(self, kind: str) -> list[Event]:
        if not self._by_kind:
            for e in self.events:
                self._by_kind.setdefault(e.kind, []).append(e)
        return self._by_kind.get(kind, [])


@dataclass
class SignalResult:
    lines: list[int]
    note: str
    kind: str
    focus: list[str] = field(default_factory=list)  # substrings the evidence excerpt should show
    patch: dict[str, Any] = field(default_factory=dict)  # values a check computed for this input
    hit: Any = None  # a detector signal's Hit (engine/hit.py): its onset, onset_kind, recovered


@dataclass
class RuleHit:
    rule: Rule
    results: list[SignalResult]
    score: float
    confidence: str = ""  # the rule's confidence, one step lower with an unknown version (engine/version_gate.py)
    version_notes: list[str] = field(default_factory=list)  # what the run's versions say about the rule's range
    version_sharpen: list[str] = field(default_factory=list)  # which version would decide

    @property
    def lines(self) -> list[int]:
        seen: list[int] = []
        for r in self.results:
            for n in r.lines:
                if n not in seen:
                    seen.append(n)
        return seen


@lru_cache(maxsize=4096)
def _rx(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    return re.compile(pattern, re.I if ignore_case else 0)


def _cmp(op: str, a: Any, b: Any) -> bool:
    if op in ("missing", "present"):
        raise AssertionError("handled by caller")
    if op == "truthy":
        return bool(a) and str(a).lower() not in ("false", "0", "none", "off")
    if op == "falsy":
        return not a or str(a).lower() in ("false", "0", "none", "off")
    if op == "regex":
        return re.search(str(b), str(a), re.I) is not None
    if op in ("in", "not_in"):
        vals = [str(x).lower() for x in (b if isinstance(b, list) else [b])]
        return (str(a).lower() in vals) == (op == "in")
    if isinstance(a, str) and isinstance(b, str):
        a, b = a.lower(), b.lower()
    if op in ("eq", "ne"):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
            res = float(a) == float(b)
        else:
            res = a == b or str(a).lower() == str(b).lower()
        return res if op == "eq" else not res
    fn = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge}[op]
    try:
        return fn(float(a), float(b))
    except (TypeError, ValueError):
        return False


def run_detector(name: str, params: dict[str, Any], ctx: Context):
    """Run detector ``name`` (engine/detectors.py over the MetricTable, or engine/series over the run model).

    ``metric:`` names a canonical series (``metric: grad_norm``). A series detector reads it from ``ctx.run``; for a
    table detector it becomes a ``keys`` regex of exactly that series' raw keys. When the run has no such series, a
    ``keys`` regex given beside it is used instead (raw spellings the alias table does not map yet); with neither,
    the signal does not hold. Returns the detector's Hit or None."""
    fn = DETECTORS.get(name)
    if fn is None:
        return None
    if getattr(fn, "reads_run", False):
        return fn(ctx.run, **params)
    metric = params.pop("metric", None)
    if metric is not None:
        s = ctx.run.series_of(metric)
        if s is not None:
            params["keys"] = "^(?:" + "|".join(re.escape(k) for k in s.raw_keys) + ")$"
        elif not params.get("keys"):
            return None
    return fn(ctx.metrics, **params)


def eval_signal(sig, ctx: Context) -> SignalResult | None:
    """Evaluate one signal; None when it does not hold."""
    if isinstance(sig, RegexSignal):
        rx = _rx(sig.pattern, sig.ignore_case)
        cand = ctx.regex_candidates(sig.pattern, sig.ignore_case)
        hits, focus = [], []
        for i in (sorted(cand) if cand is not None else range(len(ctx.lines))):
            ln = ctx.lines[i]
            m = rx.search(ln.text)
            if m:
                hits.append(ln.no)
                if m.group(0) and len(focus) < 3:
                    focus.append(m.group(0))
                if len(hits) >= sig.max_lines:
                    break
        return SignalResult(hits, f"log matches /{sig.pattern}/", "regex", focus) if hits else None
    if isinstance(sig, EventSignal):
        evs = ctx.events_of(sig.event)
        if sig.message:
            rx = _rx(sig.message, True)
            evs = [e for e in evs if rx.search(e.text)]
        if sig.source and evs:
            rx, source = _rx(sig.source, False), ctx.source_of
            evs = [e for e in evs if e.lines and rx.search(source(e.lines[0]) or "")]
        if not evs:
            return None
        lines: list[int] = []
        for e in evs[:3]:
            if e.kind == "traceback" and e.fields.get("exc_line"):
                lines += [e.fields["exc_line"], *e.lines[-3:-1]]
            else:
                lines += e.lines[:4]
        for e in evs[:3]:
            lines += e.fields.get("related", [])[:4]
        port = evs[0].fields.get("port")
        return SignalResult(lines, f"{sig.event} event ({len(evs)}x)", "event", [str(port)] if port else [])
    if isinstance(sig, DetectorSignal):
        hit = run_detector(sig.detector, dict(sig.params), ctx)
        if hit is None:
            return None
        from grpo_debug.tools.engine.onset import for_hit

        for_hit(ctx.run, hit, sig.detector)  # where the change starts, when the detector did not say
        return SignalResult(hit.lines, hit.message, "detector", list(hit.keys), hit=hit)
    if isinstance(sig, ConfigSignal):
        facts = [f for k in sig.all_keys() for f in ctx.facts.find(k)]
        if sig.op == "missing":
            return None if facts else SignalResult([], f"{sig.all_keys()[0]} is not set", "config")
        if not facts:
            return None
        if sig.op == "present":
            f = facts[-1]
            return SignalResult([f.line], f"{f.key} is set ({f.value!r})", "config", [f.key.rsplit(".", 1)[-1]])
        last = max(facts, key=lambda f: f.line)  # the effective (last) setting
        if _cmp(sig.op, last.value, sig.value):
            return SignalResult([last.line], f"{last.key} = {last.value!r}", "config", [last.key.rsplit(".", 1)[-1]])
        return None
    if isinstance(sig, CheckSignal):
        fn = CHECKS.get(sig.check)
        if fn is None:
            return None
        res = fn(ctx.facts, **sig.params)
        if not res:
            return None
        return SignalResult(res[0], res[1], "check", [], res[2] if len(res) > 2 else {})
    if isinstance(sig, ProbeSignal):
        if sig.fact not in ctx.probe:
            return SignalResult([], f"probe fact {sig.fact} is unknown", "probe") if sig.op == "missing" else None
        v = ctx.probe[sig.fact]
        if sig.op == "present" or _cmp(sig.op, v, sig.value) if sig.op not in ("missing", "present") else sig.op == "present":
            return SignalResult([], f"host: {sig.fact} = {v!r}", "probe")
        return None
    if isinstance(sig, QuerySignal):
        q = ctx.query.lower()
        terms = [t for t in sig.terms if t.lower() in q]
        return SignalResult([], f"question mentions {', '.join(terms)}", "query") if q and terms else None
    return None


def _eval_match(m: Match, ctx: Context, mode: str) -> list[SignalResult] | None:
    def ok(sig) -> SignalResult | None:
        if mode == "triage" and isinstance(sig, QuerySignal):
            return None
        return eval_signal(sig, ctx)

    results: list[SignalResult] = []
    for sig in m.all:
        r = ok(sig)
        if r is None:
            return None
        results.append(r)
    if m.any:
        anys = [r for r in (ok(s) for s in m.any) if r is not None]
        if not anys:
            return None
        results += anys
    for sig in m.none:
        if ok(sig) is not None:
            return None
    if m.either:
        subs = [r for r in (_eval_match(x, ctx, mode) for x in m.either) if r is not None]
        if not subs:
            return None
        results += max(subs, key=len)
    results += [r for r in (ok(s) for s in m.support) if r is not None]
    return results


# trainer frameworks (a rule about a library such as vLLM or DeepSpeed applies under any trainer); Relax is a slime
# derivative and reads slime's flags, the HF Trainer is TRL's base
TRAINERS = {"verl", "slime", "relax", "openrlhf", "trl", "skyrl", "areal", "nemo_rl", "roll", "prime_rl", "rllm",
            "pipelinerl", "paddlenlp", "hf_trainer"}
_KIN = {"relax": "slime", "hf_trainer": "trl"}


def other_trainer(rule: Rule, ctx: Context) -> str | None:
    """The trainer the run clearly is when ``rule`` is about one or two other trainers only, else None.

    Clearly: the run model's most evident framework is a trainer with score >= 4 (a launched ``-m`` package, or a
    version line plus config keys; tools/run/frameworks.py). A rule that names a library or three or more
    frameworks is general and never gated; nor is one whose framework the input shows at all."""
    names = {f.lower().replace("-", "_") for f in rule.applies_to.frameworks}
    if ctx.query or not names or len(names) > 2 or not names <= TRAINERS:
        return None
    fws = ctx.run.frameworks
    if not fws or fws[0].name not in TRAINERS or fws[0].score < 4:
        return None
    shown = {h.name for h in fws} | {_KIN.get(h.name, h.name) for h in fws}
    return None if (names | {_KIN.get(n, n) for n in names}) & shown else fws[0].name


def evaluate(rule: Rule, ctx: Context, *, mode: str = "triage") -> RuleHit | None:
    """Evaluate ``rule``. In triage mode query signals never hold (they route free-text questions); a rule about
    other trainers than the one the run clearly is does not fire (:func:`other_trainer`)."""
    if mode == "triage" and other_trainer(rule, ctx):
        return None
    results = _eval_match(rule.match, ctx, mode)
    if results is None:
        return None
    confidence, notes, sharpen = rule.confidence, [], []
    if ctx.versions is not None and rule.versions:
        from grpo_debug.tools.engine.version_gate import LOWER, gate

        g = gate(rule, ctx.versions, ctx.shown, lambda sig: eval_signal(sig, ctx) is not None)
        if not g.fire:
            return None
        confidence, notes, sharpen = LOWER[confidence] if g.lower else confidence, g.notes, g.sharpen
    kinds = {r.kind for r in results}
    score = CONF_WEIGHT[confidence] + sum(KIND_WEIGHT[k] for k in kinds) + 0.5 * rule.priority
    if rule.kind == "guidance":
        score -= 1.0
    return RuleHit(rule, results, score, confidence, notes, sharpen)
