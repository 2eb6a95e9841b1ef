"""Runs of one input compared (issue 23 item 4): the run that is an outlier against its siblings, and the config
facts that set it apart.

Each run is first triaged on its own; :func:`view` keeps of it what the comparison needs (its findings, its config
facts, a level per key series) and drops the rest, so a sweep of 30 logs holds 30 small views, not 30 contexts.

Outlier by a series (``GAPS``): a series' level is the median of its finite values (at least 3 points). Run R is an
outlier when its level is at least ``GAP`` (10) times the median of its siblings' levels and at least 3 times the
farthest sibling's, in the direction that is bad for the series (grad norm, clip ratio, length, log-prob gap: high;
entropy: either way). That is an order of magnitude apart from runs of the same input, which no healthy seed or
learning-rate neighbour shows; it is a ``medium`` finding of the series' symptom (never ``high``: a different model
size or loss aggregation moves the level too, so the finding names the config facts that differ).

Config facts that explain a run (:func:`explaining`): the run is broken (a medium/high finding, or an outlier) and
its value of a fact is one no healthy sibling has (with no healthy sibling: no other run has). Per-run identifiers
(experiment/run names, output folders, the seed, ranks, hosts, ports) are not explanations. A broken run that is
not a series outlier gets a ``runs:config_difference`` finding: ``medium`` when at least two healthy siblings agree
with each other and at most 3 facts set it apart, else ``low``.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable

GAP = 10.0
FAR = 3.0
MIN_POINTS = 3
MAX_EXPLAIN = 5
PROFILE = ("grad_norm", "entropy", "kl", "kl_loss", "ppo_kl", "loss", "reward_mean", "score_mean",
           "response_length_mean", "response_length_clip_ratio", "logprob_mismatch", "pg_clipfrac", "lr")
GAPS = {"grad_norm": ("grad_norm_spike", "high"), "entropy": ("entropy_anomaly", "both"),
        "response_length_clip_ratio": ("length_blowup", "high"), "response_length_mean": ("length_blowup", "high"),
        "logprob_mismatch": ("logprob_mismatch", "high"), "ppo_kl": ("logprob_mismatch", "high")}
IDENT = re.compile(r"(?:experiment|run|exp|job|project|wandb|trial|group)[_.]?(?:name|id)$|(?:output|save|log|logging|"
                   r"checkpoint|ckpt|default_local|tensorboard|cache)_?dir$|(?:^|[._])seed$|hostname|master_(?:addr|port)"
                   r"|(?:^|[._])(?:local_?)?rank$|node_?rank|(?:^|[._])port$|(?:^|[._])pid$|timestamp|date$", re.I)
_CONF = {"high": 3, "medium": 2, "low": 1}


@dataclass
class FactView:
    value: Any
    raw_key: str
    line: int | None
    source: str | None


@dataclass
class View:
    """What the comparison keeps of one triaged run: ``result`` (its TriageResult, lines in the input's own
    numbering), ``facts`` (name -> FactView), ``series`` (name -> {median, max, last, points, nonfinite_step,
    at: (line, source, step, value) of the point nearest the median, peak: same for the max})."""

    name: str
    source: str
    result: Any
    facts: dict[str, FactView] = field(default_factory=dict)
    series: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def broken(self) -> bool:
        """A medium/high finding of its own (risks aside)."""
        return any(_CONF[f.confidence] >= 2 and not getattr(f, "risk", False) for f in self.result.findings)


def _num(v: float) -> float | str:
    return float(f"{v:.4g}") if math.isfinite(v) else str(v)


def _series_view(s, place) -> dict[str, Any] | None:
    fin = [p for p in s.points if math.isfinite(p.value)]
    if not fin:
        return None
    med = statistics.median(p.value for p in fin)
    near = min(fin, key=lambda p: abs(p.value - med))
    peak = max(fin, key=lambda p: p.value)
    bad = s.first_nonfinite()

    def at(p):
        line, src = place(p.line) if p.line is not None else (None, p.where)
        return line, src, p.step, p.value

    return {"median": med, "max": peak.value, "last": s.points[-1].value, "points": len(s.points),
            "nonfinite_step": bad.step if bad else None, "at": at(near), "peak": at(peak)}


def view(name: str, source: str, result, run, place: Callable[[int], tuple[int, str | None]]) -> View:
    """The View of one triaged run. ``run``: its run model (tools/run/model.Run); ``place(line)``: (line, file) of
    a line number of that run's own numbering in the input's numbering."""
    v = View(name, source, result)
    if run is None:
        return v
    for f in sorted(run.facts, key=lambda f: f.line or 0):  # the last setting wins
        line, src = place(f.line) if f.line is not None else (None, f.where)
        v.facts[f.name] = FactView(f.value, f.raw_key, line, src)
    for k in PROFILE:
        s = run.series_of(k)
        if s is not None and (sv := _series_view(s, place)) is not None:
            v.series[k] = sv
    return v


def _gap(views: list[View], k: str, direction: str) -> list[tuple[View, float, list[View]]]:
    have = [(v, v.series[k]["median"]) for v in views if k in v.series and v.series[k]["points"] >= MIN_POINTS
            and v.series[k]["median"] > 0]
    out = []
    for v, lvl in have:
        others = [(u, x) for u, x in have if u is not v]
        if not others:
            continue
        mo = statistics.median(x for _, x in others)
        up = direction in ("high", "both") and lvl >= GAP * mo and lvl >= FAR * max(x for _, x in others)
        down = direction in ("low", "both") and lvl * GAP <= mo and lvl * FAR <= min(x for _, x in others)
        if up or down:
            out.append((v, lvl / mo, [u for u, _ in others]))
    if len(out) == 2 and len(have) == 2:  # two runs apart: the broken one, else the lower entropy / higher level
        a, b = out
        pick = a if a[0].broken and not b[0].broken else b if b[0].broken and not a[0].broken else \
            (a if a[1] < 1 else b) if direction == "both" else (a if a[1] > 1 else b)
        out = [pick]
    return out


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4g}"
    s = str(x)
    return s if len(s) <= 60 else s[:57] + "..."


def explaining(v: View, views: list[View]) -> list[tuple[str, FactView | None, list[Any], list[View]]]:
    """(fact name, v's FactView or None, the reference runs' values, the reference runs) for each fact whose value
    in ``v`` no reference run has: the healthy siblings, else every other run (module docstring)."""
    others = [u for u in views if u is not v]
    ref = [u for u in others if not u.broken] or others
    if not v.facts or not ref:
        return []
    out = []
    for k in dict.fromkeys([*v.facts, *(k for u in ref for k in u.facts)]):
        mine = v.facts.get(k)
        if IDENT.search(k) or (mine is not None and IDENT.search(mine.raw_key)):
            continue
        theirs = [u.facts.get(k) for u in ref]
        if (mine is None or not any(theirs)) and ("." in k or (mine is None and not all(theirs))):
            continue  # set in some runs only: a difference only for a canonical fact (every other run sets it)
        vals = [t.value if t else None for t in theirs]
        if (mine.value if mine else None) in vals or repr(mine.value if mine else None) in map(repr, vals):
            continue
        out.append((k, mine, vals, ref))
    out.sort(key=lambda r: ("." in r[0], r[1] is None, len(set(map(repr, r[2]))) > 1))
    return out


def _diff_words(v: View, rows) -> str:
    parts = []
    for k, mine, vals, ref in rows[:MAX_EXPLAIN]:
        uniq = list(dict.fromkeys(_fmt(x) if x is not None else "unset" for x in vals))
        parts.append(f"{(mine.raw_key if mine else k)}={_fmt(mine.value) if mine else 'unset'} "
                     f"({', '.join(u.name for u in ref[:3])}{'...' if len(ref) > 3 else ''}: {', '.join(uniq[:3])})")
    return "; ".join(parts)


def _fact_evidence(v: View, rows) -> list:
    from grpo_debug.tools.models import Evidence

    ev = []
    for k, mine, _vals, ref in rows[:MAX_EXPLAIN]:
        for who, fv in [(v, mine)] + [(u, u.facts.get(k)) for u in ref[:1]]:
            if fv is not None and fv.line is not None:
                ev.append(Evidence(line=fv.line, text=f"{who.name}: {fv.raw_key}={_fmt(fv.value)}", source=fv.source))
    return ev


def _fix(v: View, rows, fallback: str) -> str:
    if not rows:
        return fallback
    k, mine, vals, ref = rows[0]
    good = next((x for x in vals if x is not None), None)
    key = mine.raw_key if mine else next((u.facts[k].raw_key for u in ref if u.facts.get(k)), k)
    if good is None:
        return f"Remove {key} from {v.name} (the runs that stay healthy do not set it), or find why it breaks {v.name}."
    return (f"Set {key}={_fmt(good)} in {v.name} as in {ref[0].name}, the run that stays healthy, or find why "
            f"{v.name}'s {_fmt(mine.value) if mine else 'default'} breaks it.")


def _cause(rule: str, title: str, conf: str, why: str, fix: str, matched: list[str]):
    from grpo_debug.tools.models import Cause

    return Cause(rule_id=rule, title=title, confidence=conf, why=why, fix=fix, verified=False, matched=matched)


def _gap_finding(v: View, k: str, symptom: str, ratio: float, sibs: list[View], rows):
    from grpo_debug.tools.models import Evidence, Finding

    me = v.series[k]
    lv = ", ".join(f"{u.name} {_fmt(u.series[k]['median'])}" for u in sibs[:4])
    word = f"{ratio:.0f}x" if ratio >= 1 else f"1/{1 / ratio:.0f}"
    title = f"{v.name}: {k} median {_fmt(me['median'])} is {word} the other run{'s' if len(sibs) > 1 else ''}' ({lv})"
    if len(sibs) == 1:
        title = title.replace("the other run' (", "the other run's (")
    why = (f"Runs of the same input sit an order of magnitude apart in {k}: {v.name}'s level (median over "
           f"{me['points']} points, max {_fmt(me['max'])}) against {lv}.")
    if rows:
        why += f" Config facts that set {v.name} apart: {_diff_words(v, rows)}."
    else:
        why += f" No config fact read differs: the data, code commit or environment of {v.name} does."
    fix = _fix(v, rows, f"Diff {v.name}'s inputs (data files, code commit, environment) against "
                        f"{sibs[0].name}'s; `grpo-debug compare` on the two shows the first step they diverge.")
    ev = []
    for who in [v, *sibs[:1]]:
        line, src, step, val = who.series[k]["at"]
        if line is not None:
            ev.append(Evidence(line=line, text=f"{who.name}: {k}={_fmt(val)} at step {step:g} (median "
                                                f"{_fmt(who.series[k]['median'])})", source=src))
    ev += _fact_evidence(v, rows)
    return Finding(symptom=symptom, title=title, confidence="medium", evidence=ev, fix=fix, run=v.name,
                   causes=[_cause("runs:outlier", f"{k} of {v.name} is {word} its siblings'", "medium", why, fix,
                                  [f"{k} median {_fmt(me['median'])} vs {lv}"])],
                   next_checks=[f"plot {k} of every run side by side (`grpo-debug plot` on each run)"])


def _config_finding(v: View, rows, views: list[View]):
    from grpo_debug.tools.models import Finding

    top = next(f for f in v.result.findings if _CONF[f.confidence] >= 2)
    ref = rows[0][3]
    healthy = [u for u in views if u is not v and not u.broken]
    agree = len(healthy) >= 2 and len({repr(u.facts.get(rows[0][0]).value if u.facts.get(rows[0][0]) else None)
                                       for u in healthy}) == 1
    conf = "medium" if agree and len(rows) <= 3 else "low"
    words = _diff_words(v, rows)
    who = ("the healthy run" if len(healthy) == 1 else "the healthy runs") if healthy else \
        ("the other run" if len(ref) == 1 else "the other runs")
    title = f"{v.name} ({top.symptom}) differs from {who}: {words}"
    why = (f"{v.name} shows {top.symptom} ({top.title[:120]}) while {', '.join(u.name for u in ref[:4])} "
           f"{'do' if len(ref) > 1 else 'does'} not; the config facts only it has: {words}.")
    fix = _fix(v, rows, top.fix)
    ev = _fact_evidence(v, rows) or list(top.evidence[:1])
    return Finding(symptom=top.symptom, title=title[:300], confidence=conf, evidence=ev, fix=fix, run=v.name,
                   causes=[_cause("runs:config_difference", f"the config of {v.name} differs from its siblings'", conf,
                                  why, fix, [words])])


def compare_views(views: list[View]) -> dict[str, list]:
    """Run name -> the comparison's findings about that run (module docstring); no run is compared alone."""
    out: dict[str, list] = {v.name: [] for v in views}
    if len(views) < 2:
        return out
    outliers: dict[str, list] = {}
    for k, (symptom, direction) in GAPS.items():
        for v, ratio, sibs in _gap(views, k, direction):
            outliers.setdefault(v.name, []).append((k, symptom, ratio, sibs))
    for v in views:
        rows = explaining(v, views) if (v.broken or v.name in outliers) else []
        for k, symptom, ratio, sibs in outliers.get(v.name, [])[:2]:
            out[v.name].append(_gap_finding(v, k, symptom, ratio, sibs, rows))
        if v.broken and v.name not in outliers and rows and any(not u.broken for u in views if u is not v):
            out[v.name].append(_config_finding(v, rows, views))
    return out
