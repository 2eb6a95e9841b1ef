"""The words of a run comparison: ``summary`` (the answer's first paragraph: the broken run, the levels apart,
where the runs diverge or why nothing can be dated, the config facts that differ, findings one run lacks) and
``render`` (the CLI's text). Both read a redacted ``compare.CompareResult``; every list is cut to a few items so
the summary stays under about 1.5 kB.
"""
from __future__ import annotations

from typing import Any


def _g(x: Any) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def times(f: float) -> str:
    """A factor as said: '210x', '1.88x', '3722x' (no exponent)."""
    return f"{f:.3g}x" if f < 1000 else f"{f:.0f}x"


def _steps(r: list | None) -> str:
    return "no steps" if not r else f"step {_g(r[0])}" if r[0] == r[1] else f"steps {_g(r[0])}-{_g(r[1])}"


def _zero_words(rows: list[dict[str, Any]]) -> str:
    """'score_mean median 0 in B (A 0.41)' for the rows whose median is zero in one run only."""
    out = []
    for r in rows:
        if r.get("note") == "zero":
            who, other = ("A", "b") if r["a"].get("median") == 0 else ("B", "a")
            out.append(f"{r['metric']} median 0 in {who} ({other.upper()} {_g(r[other].get('median'))})")
    return "; ".join(out[:2])


def _level_words(rows: list[dict[str, Any]]) -> str:
    far = [r for r in rows if r.get("far")]
    peaks = "; ".join(f"{r['metric']} max A {_g(r['a']['max'])} vs B {_g(r['b']['max'])} ({times(r['peak_factor'])} "
                      f"higher in {r['peak_higher']})" for r in rows if r.get("peak_far"))
    zero = "; ".join(x for x in (_zero_words(rows), f"peaks apart: {peaks}" if peaks else "") if x)
    if far:
        return "levels apart: " + "; ".join(
            f"{r['metric']} median A {_g(r['a'].get('median'))} vs B {_g(r['b'].get('median'))} ({times(r['factor'])} "
            f"higher in {r['higher']})" for r in far[:3]) + (f"; {zero}" if zero else "")
    if zero:
        return zero
    top = next((r for r in rows if r.get("factor") is not None), None)
    if top is None:
        return "no level to compare" if not rows else "levels: no factor applies (a median is zero or signs differ)"
    return f"no series level differs by 10x or more (largest: {top['metric']} {times(top['factor'])})"


def _divergence_words(res, n_series: int, ov: dict[str, Any]) -> str:
    fd, how = res.first_divergence, res.aligned
    where = f"A {_steps(ov.get('a'))}, B {_steps(ov.get('b'))}"
    if how == "none":
        return "no metric series that both runs log: no level or divergence to compare"
    if how == "few":
        return (f"only {ov['common']} common step{'s' if ov['common'] > 1 else ''} ({where}): too few to date a "
                "divergence (3 needed); compared by levels")
    lead = "" if how == "step" else (f"the steps do not overlap ({where}): compared by "
                                     f"{'position (the i-th point of each run)' if how == 'position' else 'relative progress'}, ")
    if fd:
        at = f"step {_g(fd['step'])}" if how == "step" else f"A's step {_g(fd['step'])}"
        seen = f", past the noise from step {_g(fd['detected'])}" if fd.get("detected") is not None else ""
        return (f"{lead}first divergence: {fd['metric']} at {at} (A {_g(fd['a'])}, B {_g(fd['b'])}, noise "
                f"{_g(fd['noise'])}{seen})")
    span = f"over {ov['common']} common steps" if how == "step" else "at any aligned point"
    return f"{lead}no series diverges beyond noise {span} ({n_series} shared series)"


def summary(res, n_series: int, why: str, ov: dict[str, Any], how: str = "") -> str:
    """The summary of a comparison (module docstring); ``why``: the broken run's reason
    (compare_levels.broken); ``ov``: the steps' overlap (compare_levels.overlap); ``how``: how the input was split."""
    from grpo_debug.tools.redact import redact

    parts = []
    if how:
        picked = [r for r in res.runs if r.get("role")]
        names = ", ".join(f"{r['name']} as {r['role']}" for r in sorted(picked, key=lambda r: r["role"]))
        parts.append(f"{how}; compared {names}" if len(res.runs) > 2 else how)
    parts.append(f"{res.broken} looks broken: {redact(why)}" if res.broken in ("A", "B") else
                 "both runs look broken (each has medium/high findings)" if res.broken == "both" else
                 "neither run looks broken by its own findings, values or levels")
    if res.aligned != "none":
        parts.append(_level_words(res.levels))
    parts.append(_divergence_words(res, n_series, ov))
    real = [d for d in res.config_diff if not d.get("identifier")]
    ids = [d["key"] for d in res.config_diff if d.get("identifier")]
    if real:
        parts.append(f"{len(real)} config fact(s) differ: " + ", ".join(
            f"{d['key']} {_g(d['a'])!s:.40} -> {_g(d['b'])!s:.40}" for d in real[:4]))
    else:
        parts.append("no config fact differs" + (f" but identifiers ({', '.join(ids[:3])})" if ids else ""))
    if res.only_in_a:
        parts.append("only in A: " + "; ".join(x[:160] for x in res.only_in_a[:2]))
    if res.only_in_b:
        parts.append("only in B: " + "; ".join(x[:160] for x in res.only_in_b[:2]))
    text = ". ".join(parts) + "."
    return text[:1].upper() + text[1:]


def _cited(d: dict[str, Any]) -> str:
    lines, files = d.get("lines") or {}, d.get("files") or {}
    at = [f"{k.upper()} {files[k] + ' ' if k in files else ''}line {lines[k]}" for k in ("a", "b") if k in lines]
    return f" at {', '.join(at)}" if at else ""


def render(res) -> str:
    """The comparison as text for a person (the CLI): runs, summary, levels, config facts, divergence, findings."""
    out = [f"A: {res.a}", f"B: {res.b}"]
    if len(res.runs) > 2:
        out += ["", "Runs (broken first):"]
        out += [f"  {r['name']} ({r['where']}): own verdict {r.get('verdict') or '?'}"
                f"{', looks broken' if r.get('broken') else ''}{', compared as ' + r['role'] if r.get('role') else ''}"
                for r in res.runs]
    out += ["", res.summary]
    if res.levels:
        out += ["", "Levels (median, min..max, points; A | B):"]
        for r in res.levels:
            a, b = r["a"], r["b"]
            f = times(r["factor"]) if r.get("factor") is not None else r.get("note", "-")
            out.append(f"  {r['metric']}: {_g(a.get('median'))} ({_g(a.get('min'))}..{_g(a.get('max'))}, {a['n']}) | "
                       f"{_g(b.get('median'))} ({_g(b.get('min'))}..{_g(b.get('max'))}, {b['n']})  {f}"
                       f"{'  FAR' if r.get('far') else ''}")
    if res.config_diff:
        out += ["", "Config facts that differ (A -> B):"]
        out += [f"  {d['key']}: {d['a']!r} -> {d['b']!r}" for d in res.config_diff]
    if res.divergence:
        out += ["", f"Series that diverge (first {'step' if res.aligned == 'step' else 'point, by ' + res.aligned}):"]
        out += [f"  {d['metric']}: step {_g(d['step'])} (A {_g(d['a'])}, B {_g(d['b'])}, noise {_g(d['noise'])}"
                f"{', log' if d.get('space') else ''}){_cited(d)}" for d in res.divergence]
    for name, items in (("A", res.only_in_a), ("B", res.only_in_b)):
        if items:
            out += ["", f"Findings only in {name}:"] + [f"  {x}" for x in items]
    out += ["", f"Method: {res.method}"]
    return "\n".join(out)
