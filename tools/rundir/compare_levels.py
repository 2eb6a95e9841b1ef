"""What two runs' series say when their steps do not line up: levels, alignment by position or progress, and
which run looks broken (the parts of ``compare.py`` that need no common step).

Levels (:func:`levels`): per canonical series both runs log, each run's first, last, min, max and median of its
finite values, the number of points and the non-finite count. The ``factor`` is
``max(|med_A|, |med_B|) / min(|med_A|, |med_B|)`` when both medians are non-zero and every value of both runs
is of one sign (None otherwise, ``note`` says why: ``crosses zero`` (a policy loss around 0 has no level ratio), or
``zero`` (one median is 0)); a row is ``far`` at a factor of at least ``LEVEL_GAP`` (10): an order of
magnitude, which seeds or learning-rate neighbours of one setup do not show (the same bound as
``runs_compare.GAP``). One point per run is enough for a level. A non-negative series whose medians are not far
apart but whose maxima are (a late blow-up) is ``peak_far`` with ``peak_factor``.

Alignment (:func:`align`): on the steps both runs logged when there are at least ``compare.SUSTAIN`` of them;
when the steps do not overlap at all, by position (the i-th point of each run) when the runs are about as long
(lengths within 1.5x), else by relative progress (point i of the shorter run against point
``round(i (n_long - 1) / (n_short - 1))`` of the longer). A partial overlap of one or two steps stays on steps
(a run that stopped at step 2 is not stretched over the other's whole length): no divergence is dated, the
levels speak.

Broken (:func:`broken`), first rule that decides: a run with non-finite values where the other has none; a run
with a medium/high finding of its own (not a risk) where the other has none; a ``far`` level in a series'
bad direction (``runs_compare.GAPS``: grad norm, clip ratio, length, log-prob gap high; entropy: the lower one);
then a ``peak_far`` one of the series that are bad high.
"""
from __future__ import annotations

import math
import statistics
from typing import Any

LEVEL_GAP = 10.0
MAX_LEVELS = 6
SAME_LENGTH = 1.5
_CONF = {"high": 3, "medium": 2, "low": 1}


def _num(v: float) -> float | str:
    return float(f"{v:.4g}") if math.isfinite(v) else str(v)


def stats(series) -> dict[str, Any]:
    """{n, first, last, min, max, median} of a series' points (finite values for the statistics, absent when it
    has none; ``nonfinite``: their count when some are NaN/inf). Values rounded to 4 significant digits."""
    pts = series.points
    fin = [p.value for p in pts if math.isfinite(p.value)]
    out: dict[str, Any] = {"n": len(pts)}
    if len(fin) < len(pts):
        out["nonfinite"] = len(pts) - len(fin)
    if fin:
        out |= {"first": _num(fin[0]), "last": _num(fin[-1]), "min": _num(min(fin)), "max": _num(max(fin)),
                "median": _num(statistics.median(fin))}
    return out


def shared(ra, rb) -> list[tuple[str, Any, Any]]:
    """(name, series of A, series of B) for every canonical series both runs log (every shared series when they
    share no canonical one), in A's order."""
    pairs = [(k, s, rb.series_of(k)) for k, s in ra.series.items()]
    pairs = [(k, s, t) for k, s, t in pairs if t is not None and s.points and t.points]
    canon = [p for p in pairs if p[1].canonical or p[2].canonical]
    return canon or pairs


def factor(ma: float | None, mb: float | None) -> tuple[float | None, str]:
    """(factor between two medians, '' / 'zero' / 'sign' when no factor applies): module docstring."""
    if ma is None or mb is None or not (isinstance(ma, float) and isinstance(mb, float)):
        return None, ""
    if ma == 0 or mb == 0:
        return None, "zero" if ma != mb else ""
    if (ma > 0) != (mb > 0):
        return None, "sign"
    lo, hi = sorted((abs(ma), abs(mb)))
    return hi / lo, ""


def _one_sign(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Every finite value of both runs >= 0, or every one <= 0."""
    lo, hi = min(a["min"], b["min"]), max(a["max"], b["max"])
    return isinstance(lo, float) and isinstance(hi, float) and (lo >= 0 or hi <= 0)


def levels(ra, rb) -> list[dict[str, Any]]:
    """One row per shared series, {metric, a: stats, b: stats, factor, higher ('A'/'B'), far}, the largest factor
    first (rows without a factor last, then by name); at most ``MAX_LEVELS`` rows (module docstring)."""
    rows = []
    for k, sa, sb in shared(ra, rb):
        a, b = stats(sa), stats(sb)
        if "median" in a and "median" in b and not _one_sign(a, b):
            f, why = None, "crosses zero"  # a loss around 0: the ratio of two medians near 0 means nothing
        else:
            f, why = factor(a.get("median"), b.get("median"))
        row = {"metric": k, "a": a, "b": b, "factor": round(f, 3) if f is not None else None,
               "far": bool(f is not None and f >= LEVEL_GAP)}
        if f is not None:
            row["higher"] = "A" if abs(a["median"]) > abs(b["median"]) else "B"
        elif why:
            row["note"] = why
        _peak(row)
        rows.append(row)
    rows.sort(key=lambda r: (not r["far"], not r.get("peak_far"), r["factor"] is None,
                             -(r["factor"] or 0.0), r["metric"]))
    return rows[:MAX_LEVELS]


def _peak(row: dict[str, Any]) -> None:
    """``peak_factor`` / ``peak_far`` / ``peak_higher`` of a non-negative series whose medians are not far apart:
    the factor between the runs' maxima (a run that blew up late keeps its median and not its max)."""
    a, b = row["a"], row["b"]
    if row["far"] or "max" not in a or "max" not in b or not _one_sign(a, b) or min(a["min"], b["min"]) < 0:
        return
    f, _ = factor(a["max"], b["max"])
    if f is not None and f >= LEVEL_GAP:
        row |= {"peak_factor": round(f, 3), "peak_far": True, "peak_higher": "A" if a["max"] > b["max"] else "B"}


def _points(s) -> list[tuple[float, float]]:
    last: dict[float, float] = {}
    for p in s.points:  # a repeated step: its last value
        last[p.step] = p.value
    return sorted(last.items())


def align(sa, sb, sustain: int) -> tuple[str, list[tuple[float, float, float]]]:
    """(how, [(x, value of A, value of B)]) of two series (module docstring): how is 'step', 'position',
    'progress', or 'few' (fewer than ``sustain`` common steps that overlap: nothing to date); x is the step
    ('step'), else A's step at that position."""
    a, b = _points(sa), _points(sb)
    da, db = dict(a), dict(b)
    common = sorted(set(da) & set(db))
    if len(common) >= sustain:
        return "step", [(t, da[t], db[t]) for t in common]
    if common or len(a) < sustain or len(b) < sustain:
        return "few", [(t, da[t], db[t]) for t in common]
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    if len(long_) <= SAME_LENGTH * len(short):
        pairs = list(zip(a, b))
        return "position", [(pa[0], pa[1], pb[1]) for pa, pb in pairs]
    n, m = len(short), len(long_)
    idx = [round(i * (m - 1) / (n - 1)) for i in range(n)]
    if short is a:
        return "progress", [(a[i][0], a[i][1], b[j][1]) for i, j in enumerate(idx)]
    return "progress", [(a[j][0], a[j][1], b[i][1]) for i, j in enumerate(idx)]


def overlap(ra, rb) -> dict[str, Any]:
    """{a: [first, last step], b: [...], common: number of steps both runs logged} over the shared series."""
    sa_steps, sb_steps = set(), set()
    for _k, sa, sb in shared(ra, rb):
        sa_steps |= {p.step for p in sa.points}
        sb_steps |= {p.step for p in sb.points}
    rng = lambda s: [_num(min(s)), _num(max(s))] if s else None  # noqa: E731
    return {"a": rng(sa_steps), "b": rng(sb_steps), "common": len(sa_steps & sb_steps)}


def _own_broken(analysis) -> list:
    return [f for f in analysis.result.findings
            if _CONF.get(f.confidence, 0) >= 2 and not getattr(f, "risk", False)]


def broken(A, B, rows: list[dict[str, Any]]) -> tuple[str, str]:
    """('A' / 'B' / 'both' / '', why) : the run that looks broken (module docstring)."""
    from grpo_debug.tools.rundir.compare_text import times
    from grpo_debug.tools.rundir.runs_compare import GAPS

    bad = {n: [k for k, s in x.run.series.items() if s.first_nonfinite()] for n, x in (("A", A), ("B", B))}
    if bool(bad["A"]) != bool(bad["B"]):
        who = "A" if bad["A"] else "B"
        return who, f"{who} has non-finite values ({', '.join(bad[who][:3])}) and the other run none"
    own = {"A": _own_broken(A), "B": _own_broken(B)}
    if bool(own["A"]) != bool(own["B"]):
        who = "A" if own["A"] else "B"
        f = own[who][0]
        return who, f"{who} has a {f.confidence} finding ({f.symptom}) and the other run none"
    for r in rows:
        gap = GAPS.get(r["metric"])
        if not r["far"] or gap is None:
            continue
        other = "A" if r["higher"] == "B" else "B"
        who = r["higher"] if gap[1] == "high" else other if gap[1] == "both" else ""
        if who:
            word = "higher" if who == r["higher"] else "lower"
            return who, f"{r['metric']} is {times(r['factor'])} {word} in {who} than in {'A' if who == 'B' else 'B'}"
    for r in rows:  # a late blow-up: the maxima apart, in the direction that is bad for the series
        gap = GAPS.get(r["metric"])
        if r.get("peak_far") and gap is not None and gap[1] == "high":
            who = r["peak_higher"]
            return who, f"{r['metric']} peaks {times(r['peak_factor'])} higher in {who} (max)"
    if own["A"] and own["B"]:
        return "both", "both runs have medium/high findings"
    return "", ""
