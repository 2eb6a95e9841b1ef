"""Rules gated by the run's framework versions, and answers in the spelling of the user's release (issue 12,
part 1). Pure functions over a rule and the resolved versions (:mod:`grpo_debug.tools.run.versions`).

Gating (:func:`gate`), per framework ``F`` for which the rule's ``versions`` give a bounded range
``[introduced_in, fixed_in)``:

- the range's ``when`` signals, if any, pick the case the range is about (DeepSpeed's omitted
  ``gradient_clipping``: its default changed in 0.19.3, an explicit 0 is off in every release); when one does
  not hold the range does not apply;
- ``F``'s version known (argument, input or host) and outside the range: the rule does not fire;
- known and inside: it fires as usual, and says which version put it in range;
- unknown, or known only as a range that straddles a bound: it fires at one lower confidence
  (high -> medium -> low) and says which version would decide ("verl < 0.7.0 only; your version is unknown:
  paste `pip show verl`"). An unknown version never silences a rule;
- a range of a framework the input does not show while it shows another framework the rule names does not
  apply (a TRL range on a verl run, even with trl in its pip list); a library's (DeepSpeed, vLLM, ...) known
  version applies under any trainer (:func:`applies_to_run`).

Dialect (:func:`speak`): a rule ``identifiers`` entry with ``replaced_by`` is a renamed spelling (OpenRLHF
``--max_norm`` until 0.10.2 -> ``--actor.max_norm``; TRL's divisibility message until 0.20.0). With the
version known the fix names the user's spelling (the other one is replaced where the text names only it, and
a leading note gives the user's spelling where the text names both; a cause's ``why``, which names old
spellings on purpose, only gets the note); unknown, the text gives both.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from grpo_debug.skills.schema import Rule, VersionRange
from grpo_debug.tools.run.versions import VersionHit, canonical, compare

LOWER = {"high": "medium", "medium": "low", "low": "low"}
_PIP = {"megatron": "megatron-core", "torch": "torch", "transformers": "transformers"}


@dataclass
class Gate:
    """``fire``: False = outside the rule's range. ``lower``: fire one confidence step lower (unknown version).
    ``notes``: what the versions say, for the finding's signals. ``sharpen``: what to paste to decide."""

    fire: bool = True
    lower: bool = False
    notes: list[str] = field(default_factory=list)
    sharpen: list[str] = field(default_factory=list)


def range_text(fw: str, lo: str, hi: str) -> str:
    """``verl < 0.7.0``, ``trl >= 0.14.0, < 0.15.0``, ``openrlhf >= 0.10.2``."""
    parts = ([f">= {lo}"] if lo else []) + ([f"< {hi}"] if hi else [])
    return f"{fw} " + ", ".join(parts)


def relation(hit: VersionHit | None, lo: str, hi: str) -> str:
    """'in', 'out' or 'unknown': where the user's version (exact, or a range ``[hit.lo, hit.hi)``) lies against
    the half-open ``[lo, hi)``. A bound that is not a release number counts as unknown."""
    if hit is None:
        return "unknown"
    try:
        if hit.exact:
            ok = (not lo or compare(hit.version, lo) >= 0) and (not hi or compare(hit.version, hi) < 0)
            return "in" if ok else "out"
        if (hi and hit.lo and compare(hit.lo, hi) >= 0) or (lo and hit.hi and compare(hit.hi, lo) <= 0):
            return "out"
        if (not lo or (hit.lo and compare(hit.lo, lo) >= 0)) and (not hi or (hit.hi and compare(hit.hi, hi) <= 0)):
            return "in"
    except ValueError:
        pass
    return "unknown"


def gate(rule: Rule, versions: dict[str, VersionHit], shown: set[str], holds=None) -> Gate:
    """The verdict of ``rule``'s version ranges for one input.

    Args:
        versions: {canonical framework: VersionHit} (:func:`grpo_debug.tools.run.versions.resolve`).
        shown: canonical frameworks the input shows (``tools/run/frameworks.detect``).
        holds: ``holds(signal) -> bool`` for a range's ``when`` signals (the engine's ``eval_signal``).
    """
    g = Gate()
    for name, vr in rule.versions.items():
        if not (vr.introduced_in or vr.fixed_in) or not _scoped(vr, holds):
            continue
        fw = canonical(name)
        if not applies_to_run(fw, rule, versions, shown):
            continue
        hit = versions.get(fw)
        rng = range_text(name, vr.introduced_in, vr.fixed_in)
        rel = relation(hit, vr.introduced_in, vr.fixed_in)
        if rel == "out":
            return Gate(fire=False, notes=[f"{rng} only; yours: {hit.describe()}"])
        if rel == "in":
            g.notes.append(f"{rng}: yours is {hit.describe()}")
            continue
        g.lower = True
        known = f"only {hit.describe()} is known" if hit else "your version is unknown"
        g.notes.append(f"{rng} only; {known}: paste `pip show {_PIP.get(fw, fw)}`")
        g.sharpen.append(f"the {name} version (`pip show {_PIP.get(fw, fw)}`): the rule holds for {rng}")
    return g


def _scoped(vr: VersionRange, holds) -> bool:
    when = getattr(vr, "when", None) or []
    return not when or holds is None or all(holds(s) for s in when)


# ------------------------------------------------------------------------------------------- dialect

def _rx(name: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.-])" + re.escape(name) + r"(?![\w-]|\.\w)")


def _pairs(rule: Rule) -> list[tuple[str, str, str, str, str]]:
    """(framework, old, new, boundary, kind) for each renamed spelling of the rule."""
    out = []
    for i in rule.identifiers:
        if i.replaced_by and i.until:
            out.append((canonical(i.framework), i.name, i.replaced_by, i.until, i.kind))
    return out


def speak(text: str, rule: Rule, versions: dict[str, VersionHit], shown: set[str], replace: bool = True) -> str:
    """``text`` (a fix) in the spelling of the user's release; see the module docstring. ``replace=False`` (a
    mechanism's history, where the other spelling is named on purpose) only adds the leading note."""
    if not text:
        return text
    notes: dict[str, list[str]] = {}
    for fw, old, new, at, kind in _pairs(rule):
        if fw not in shown and fw not in versions and fw not in {canonical(f) for f in rule.applies_to.frameworks}:
            continue
        has_old, has_new = bool(_rx(old).search(text)), bool(_rx(new).search(text))
        if not (has_old or has_new):
            continue
        rel = relation(versions.get(fw), at, "")  # in = the user's release has the new spelling
        if rel == "unknown":
            if has_old != has_new:
                text = text.rstrip() + (f" ({fw} {at} and later: {new})" if has_old else
                                        f" ({fw} before {at}: {old})")
            continue
        mine, other = (new, old) if rel == "in" else (old, new)
        if replace and not _rx(mine).search(text):
            text = _rx(other).sub(lambda m: mine, text)
        else:
            notes.setdefault(versions[fw].span(), []).append(_quoted(mine, kind))
    if notes:
        lead = "; ".join(f"your {k} {'prints' if all(x.startswith(chr(39)) for x in v) else 'spells it'} "
                         + ", ".join(v) for k, v in notes.items())
        text = lead[0].upper() + lead[1:] + ". " + text
    return text


def _quoted(name: str, kind: str) -> str:
    return f"'{name}'" if kind == "message" else name


# ------------------------------------------------------------------------------------------- the pipeline's hooks

# trainers are alternatives to each other: a TRL range says nothing about a verl run that has trl installed;
# libraries (DeepSpeed, Megatron, vLLM, SGLang, Ray, torch, transformers, NCCL) run under them
TRAINERS = {"verl", "slime", "relax", "openrlhf", "trl", "rllm", "skyrl", "areal", "nemo-rl", "roll", "prime-rl",
            "pipelinerl", "paddlenlp"}


def attach_versions(ctx, rules, versions=None, host: bool = False) -> None:
    """Resolve the input's versions onto ``ctx`` (``ctx.versions``, ``ctx.shown``) before rules are evaluated.

    ``versions``: the caller's ``verl=0.9.0,deepspeed=0.19.5`` text (the word ``host`` adds the host's installed
    releases) or a parsed {framework: VersionHit}; ``host``: read the host's too. Raises ValueError for a bad
    ``versions`` text. ``ctx.shown``: frameworks the input shows by code, config keys or log format (a pip line
    alone does not make a run a TRL run)."""
    from grpo_debug.tools.run.frameworks import detect as detect_frameworks
    from grpo_debug.tools.run.version_units import detect

    class _NoVersions:  # the facts without pip/comment version rows, for detect()
        facts = [f for f in ctx.facts.facts if not f.key.lower().startswith("versions.")]

    metric_lines = ctx.metrics.lines
    text_lines = [ln for ln in ctx.lines if ln.no not in metric_lines]  # a long log is mostly metric lines
    shown = {canonical(h.name) for h in detect_frameworks(text_lines, _NoVersions, ctx.metrics.formats)}
    ctx.versions = detect(text_lines, ctx.facts, rules, shown, versions, host)
    ctx.shown = shown


def applies_to_run(fw: str, rule: Rule, versions: dict[str, VersionHit], shown: set[str]) -> bool:
    """Does framework ``fw``'s range concern this run (see :func:`gate`)."""
    if fw in shown:
        return True
    if fw in versions and fw not in TRAINERS:
        return True
    return not any(canonical(f) in shown for f in rule.applies_to.frameworks)


def annotate(findings, hits, ctx) -> None:
    """Each cause's confidence, version notes and fix in the user's spelling; the finding's fix and sharpen."""
    if ctx.versions is None:
        return
    by_id = {h.rule.id: h for h in hits}
    for f in findings:
        for i, c in enumerate(f.causes):
            h = by_id.get(c.rule_id)
            if h is None:
                continue
            c.confidence = h.confidence or c.confidence
            c.matched = list(dict.fromkeys(h.version_notes + c.matched))[:5]
            c.fix = speak(c.fix, h.rule, ctx.versions, ctx.shown)
            c.why = speak(c.why, h.rule, ctx.versions, ctx.shown, replace=False)
            if i == 0:
                f.fix = speak(f.fix, h.rule, ctx.versions, ctx.shown)
                f.sharpen = list(dict.fromkeys(h.version_sharpen + f.sharpen))[:6]


# ------------------------------------------------------------------------------------------- the fix for this run

# tools/run/frameworks.detect's names -> the rules' names (skills/schema.FIX_FRAMEWORKS); a fix written for the
# framework a derivative reads the flags of serves it too (Relax reads slime's, the HF Trainer is TRL's base)
_RULE_NAME = {"nemo_rl": "nemo-rl", "prime_rl": "prime-rl", "hf_trainer": "trl"}
_KIN = {"relax": "slime", "hf-trainer": "trl"}
MIN_EVIDENCE = 2  # a framework's score (tools/run/frameworks.py) before a fix is written for it, unless it is the only one


def fix_frameworks(ctx) -> list[str]:
    """The input's frameworks a fix may be written for, in the rules' names: trainers first, then libraries, each
    most evident first (``ctx.run.frameworks``, the one detector), those with MIN_EVIDENCE or the only one shown
    (one sourced marker such as ``--rollout-max-response-len``, with nothing else pointing elsewhere); computed once
    per Context."""
    cached = getattr(ctx, "_fix_frameworks", None)
    if cached is not None:
        return cached
    shown = ctx.run.frameworks
    hits = [h for h in shown if h.score >= MIN_EVIDENCE or len(shown) == 1]
    names = [_RULE_NAME.get(h.name, h.name) for h in hits]
    out = [n for n in names if canonical(n) in TRAINERS] + [n for n in names if canonical(n) not in TRAINERS]
    ctx._fix_frameworks = list(dict.fromkeys(out))
    return ctx._fix_frameworks


def fix_summary(fix, frameworks: list[str]) -> str:
    """The fix as this input's user writes it: ``fix.summary_by_framework`` of the first of ``frameworks`` (most
    evident first, see :func:`fix_frameworks`) that has one (a Relax input takes slime's), else the generic
    ``fix.summary`` (unknown framework, or one the rule has no text for)."""
    by = getattr(fix, "summary_by_framework", None) or {}
    for fw in frameworks:
        text = by.get(fw) or by.get(_KIN.get(fw, ""))
        if text:
            return text
    return fix.summary


def fix_framework(fix, frameworks: list[str]) -> str | None:
    """The framework whose text :func:`fix_summary` picks, or None for the generic summary."""
    by = getattr(fix, "summary_by_framework", None) or {}
    return next((fw if fw in by else _KIN[fw] for fw in frameworks if fw in by or _KIN.get(fw) in by), None)
