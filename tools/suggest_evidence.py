"""What a question's text shows, for ``suggest`` (issue 26): the engine's cheap signals run over it, so a text
that holds log lines or metric values is routed by the symptom they show rather than by its words.

Signals, each a :class:`Evidence` (the tool to start with, why, the words to rank rules by):

- an error or traceback (tools/engine/errors_classify.classify_all) -> ``triage``, naming the line and class;
- a non-finite metric value (tools/engine/metrics, or ``name = nan`` in prose) -> ``nan_guide diagnose``;
- ``grad_norm`` above the clipping value the text states (``clip_grad: 1.0``, ``--clip-grad 1.0``,
  ``max_grad_norm=1.0``, "clipping is set to 1.0") with finite values -> the grad-norm guidance (``playbook
  symptoms`` for a grad-norm spike), saying what the logged norm is (skills/aliases.yaml's description);
- a reward series that is 0 at every point shown -> ``playbook symptoms`` for zero rewards.

The logged grad norm is the one before clipping where it is the value ``torch.nn.utils.clip_grad_norm_``
returns (PyTorch docs: the total norm, the same as ``get_total_norm()`` followed by ``clip_grads_with_norm_``);
the answer quotes skills/aliases.yaml's description of ``grad_norm`` rather than holding that fact here.

``finite`` lists the metrics the text shows with finite values only (a keyword route to the NaN guide is then
dropped unless the text says nan/inf).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_NUM = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?)\b"
_CLIP_KEY = (r"(?:clip(?:ping)?(?:[_-]grad(?:[_-]norm)?)?|max[_-]grad[_-]norm|gradient[_-]clipping|grad[_-]clip"
             r"(?:ping)?|max_norm)")
#: the clipping threshold as a setting or in prose: a key, at most 30 non-digit characters, then the number
_CLIP = re.compile(rf"(?<![\w/]){_CLIP_KEY}(?![\w/])[^\d\n]{{0,30}}?(?<![\w.])(\d+(?:\.\d+)?)(?![\w.])", re.I)
#: a metric compared with a value in prose: ``grad_norm > 1``, ``grad norm is 5.3``, ``loss went to nan``
_PROSE_VALUE = re.compile(
    r"(?<![\w/.\-])([A-Za-z][\w/.\-]*?|grad(?:ient)?\s+norm)\s*(>=|>|≥|=|:|\bis\b|\bwas\b|\breached\b|\bhits?\b|"
    r"\babove\b|\bover\b|\bexceeds?\b|\b(?:goes|went|jumps?|jumped)\s+to\b|\bbecame\b|\bbecomes\b)\s*"
    rf"(?:about\s+|around\s+|~\s*)?({_NUM})", re.I)


@dataclass
class Evidence:
    """One symptom the text shows: where to start, why (with the line), and the words rules are ranked by."""

    tool: str
    operation: str
    why: str
    query: str
    score: float


@dataclass
class Shown:
    """What the text shows: evidence, strongest first, and the metrics seen with finite values only."""

    evidence: list[Evidence] = field(default_factory=list)
    finite: set[str] = field(default_factory=set)


def _canonical(key: str) -> str | None:
    from grpo_debug.tools.search import metric_terms

    if _CLIP.match(key + " 1") or re.fullmatch(_CLIP_KEY, key, re.I):
        return None  # a clipping setting, not a metric
    ids = metric_terms(key.replace(" ", "_"))[0] or metric_terms(key)[0]
    return sorted(ids)[0] if len(ids) == 1 else None


def _values(text: str, lines) -> dict[str, list[tuple[float, int, str]]]:
    """canonical metric -> [(value, line, comparison)]: the metric reader's series plus prose comparisons
    (``>`` / ``above``: the value is a lower bound)."""
    from grpo_debug.tools.engine.metrics import extract_metrics

    out: dict[str, list[tuple[float, int, str]]] = {}
    for key, pts in extract_metrics(lines).series.items():
        cid = _canonical(key)
        if cid:
            out.setdefault(cid, []).extend((p.value, p.line, "=") for p in pts)
    for no, ln in enumerate(text.splitlines(), 1):
        for m in _PROSE_VALUE.finditer(ln):
            cid = _canonical(m.group(1))
            if cid:
                op = ">" if re.match(r">|≥|above|over|exceed", m.group(2), re.I) else "="
                out.setdefault(cid, []).append((float(m.group(3).replace("infinity", "inf")), no, op))
    return out


def _clip_value(text: str) -> tuple[float, int] | None:
    for no, ln in enumerate(text.splitlines(), 1):
        m = _CLIP.search(ln)
        if m:
            return float(m.group(1)), no
    return None


def _errors(lines) -> list[Evidence]:
    from grpo_debug.tools.engine.errors_classify import classify_all

    recs = classify_all(lines)
    if not recs:
        return []
    r = recs[0]
    cls = "" if r.cls.name == "unclassified" else f" [{r.cls.name}]"
    head = f"{r.short_type}: {r.message}" if r.exc_type else r.message
    return [Evidence("triage", "", f"line {r.line} shows an error{cls} {head[:120]}: triage the log (or its path) "
                     "for the cause and the fix", f"{r.cls.symptom.replace('_', ' ')} {r.cls.title} {head[:80]}", 120.0)]


def _grad_norm_evidence(text: str, vals: list[tuple[float, int, str]]) -> Evidence | None:
    clip = _clip_value(text)
    finite = [v for v in vals if math.isfinite(v[0])]
    if clip is None or clip[0] <= 0 or not finite:
        return None
    above = [v for v in finite if v[0] > clip[0] or (v[2] == ">" and v[0] >= clip[0])]
    if not above:
        return None
    v, no, op = max(above)
    what = ""
    try:
        from grpo_debug.skills.aliases import load_aliases

        what = f"; the logged grad_norm is the {load_aliases().metrics['grad_norm'].description}"
    except (ImportError, OSError, ValueError, KeyError):
        pass
    return Evidence("playbook", "symptoms",
                    f"grad_norm {'>' if op == '>' else '='} {v:g} (line {no}) is above the clipping value {clip[0]:g} "
                    f"(line {clip[1]}){what}, so a value above it alone is expected, not a NaN: read the grad-norm "
                    "guidance (text 'grad_norm spike'), and triage the log to tell a sustained climb from one spike",
                    "grad_norm spike clipping", 110.0)


def shown(text: str) -> Shown:
    """The evidence in ``text`` (see the module doc); empty for words only. Reads at most 256 KiB."""
    from grpo_debug.tools.engine.normalize import normalize

    text = (text or "")[:256 * 1024]
    out = Shown()
    if not re.search(r"\d|nan|inf|error|traceback|exception", text, re.I):
        return out
    lines = normalize(text)
    out.evidence += _errors(lines)
    vals = _values(text, lines)
    for cid, vs in sorted(vals.items()):
        bad = [v for v in vs if not math.isfinite(v[0])]
        if bad:
            out.evidence.append(Evidence("nan_guide", "diagnose", f"line {bad[0][1]} shows {cid} = {bad[0][0]}: a "
                                         "non-finite value; diagnose it (or triage the whole log for where it starts)",
                                         f"{cid} nan", 115.0))
        else:
            out.finite.add(cid)
    if "grad_norm" in out.finite:
        ev = _grad_norm_evidence(text, vals["grad_norm"])
        if ev:
            out.evidence.append(ev)
    rewards = [v for cid, vs in vals.items() if cid.startswith("reward") for v in vs]
    if len(rewards) >= 2 and all(v[0] == 0 for v in rewards):
        out.evidence.append(Evidence("playbook", "symptoms", f"the reward is 0 at all {len(rewards)} values shown "
                                     f"(lines {rewards[0][1]}-{rewards[-1][1]}): the zero-reward causes",
                                     "reward all zero", 105.0))
    out.evidence.sort(key=lambda e: -e.score)
    return out
