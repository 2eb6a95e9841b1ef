"""Compare two runs: config facts that differ, the first step where a metric diverges, findings one run lacks.

    from grpo_debug.tools.rundir.compare import compare_runs, split_two_runs
    res = compare_runs(a_path="runs/ref", b_path="runs/new")     # or a_text/b_text; each a file, folder or paste
    res = compare_runs(a_text=paste)                             # one paste holding two runs (split_two_runs)

Divergence (per canonical series both runs have, on the steps both logged; the last value of a repeated step):

    noise_r = max(1.4826 x median_t |r(t) - r(t-1)|,  0.01 x median_t |r(t)|,  1e-12)   for r in (A, B)
    d(t)    = |A(t) - B(t)| / max(noise_A, noise_B)

A series diverges at the first step t0 from which d(t) > K (K = 4) holds for ``SUSTAIN`` (3) common steps in a
row, or one run is non-finite where the other is finite for as many steps. The step-to-step noise is the
median absolute change between consecutive steps (scaled like a MAD to a normal sigma): it measures how much each
run moves on its own from one step to the next, so K x noise is "further apart than either run jitters", and the
sustain rule keeps one noisy step from counting. The 1 % floor keeps a constant series (an lr) from making a tiny
difference significant. The runs' first diverging step is the earliest over all series.

A paste holding two runs is split (``split_two_runs``) on ``[A]``/``[B]`` line prefixes (unprefixed lines go to
both), else where the step numbering starts again at the first run's first step (``step:1`` twice); a blank,
``#``/``---``/``===`` or "run B" line just before the second sequence starts run B.
"""
from __future__ import annotations

import math
import re
import statistics
from typing import Any

from pydantic import BaseModel, Field

K = 4.0
SUSTAIN = 3
MAX_CONFIG = 40
_AB = re.compile(r"^\s*\[(A|B)\]\s?", re.I)
_SEP = re.compile(r"^\s*$|^\s*(#|---|===)|\brun\s*(b|2|new)\b|\bnew run\b", re.I)


class CompareResult(BaseModel):
    """compare / compare_runs: what differs between run A and run B."""

    summary: str
    a: str = Field(description="Run A's input.")
    b: str = Field(description="Run B's input.")
    config_diff: list[dict[str, Any]] = Field(default_factory=list, description="{key, a, b}; null = not set.")
    first_divergence: dict[str, Any] | None = Field(None, description="{metric, step, a, b, noise}: the earliest.")
    divergence: list[dict[str, Any]] = Field(default_factory=list, description="Per common series.")
    only_in_a: list[str] = Field(default_factory=list, description="Findings of A that B lacks.")
    only_in_b: list[str] = Field(default_factory=list, description="Findings of B that A lacks.")
    method: str = ""
    truncated: bool = Field(False, description="Long values or lists were cut to bound the answer (see summary).")


def split_two_runs(text: str) -> tuple[str, str] | None:
    """(run A text, run B text) of a paste holding two runs, or None (see the module docstring)."""
    lines = text.splitlines()
    if any(_AB.match(ln) for ln in lines):
        a, b = [], []
        for ln in lines:
            m = _AB.match(ln)
            if m is None:
                a.append(ln), b.append(ln)
            else:
                (a if m.group(1).upper() == "A" else b).append(ln[m.end():])
        return ("\n".join(a), "\n".join(b)) if any(x.strip() for x in a) and any(x.strip() for x in b) else None
    return _split_restart(text, lines)


def _split_restart(text: str, lines: list[str]) -> tuple[str, str] | None:
    from grpo_debug.tools.engine.metrics import extract_metrics
    from grpo_debug.tools.engine.normalize import normalize

    recs = sorted(extract_metrics(normalize(text)).records, key=lambda r: r.line)
    if len(recs) < 4:
        return None
    first, top = recs[0].step, recs[0].step
    for i, r in enumerate(recs[1:], 1):
        if r.step == first and top > first:
            last_a = recs[i - 1].line
            cut = r.line  # 1-based line of B's first record
            for no in range(r.line - 1, last_a, -1):
                if _SEP.search(lines[no - 1]):
                    cut = no
                    break
            return "\n".join(lines[:cut - 1]), "\n".join(lines[cut - 1:])
        top = max(top, r.step)
    return None


def _facts(run) -> dict[str, tuple[Any, str]]:
    out = {}
    for f in run.facts:
        out[f.name] = (f.value, f.raw_key)
    return out


def config_diff(ra, rb) -> list[dict[str, Any]]:
    """Facts set differently (or in one run only), canonical names first."""
    fa, fb = _facts(ra), _facts(rb)
    rows = []
    for k in sorted(set(fa) | set(fb), key=lambda k: (k not in fa or k not in fb, "." in k, k)):
        va, vb = fa.get(k, (None, ""))[0], fb.get(k, (None, ""))[0]
        if k in fa and k in fb and str(va) == str(vb):
            continue
        rows.append({"key": k, "a": va, "b": vb})
    return rows[:MAX_CONFIG]


def _by_step(s) -> dict[float, float]:
    return {p.step: p.value for p in s.points}


def step_noise(vals: list[float]) -> float:
    """1.4826 x median |r(t) - r(t-1)| over finite neighbours, floored at 1 % of median |r| and 1e-12."""
    fin = [v for v in vals if math.isfinite(v)]
    diffs = [abs(b - a) for a, b in zip(fin, fin[1:])]
    mad = 1.4826 * statistics.median(diffs) if diffs else 0.0
    scale = statistics.median([abs(v) for v in fin]) if fin else 0.0
    return max(mad, 0.01 * scale, 1e-12)


def diverge(sa, sb, k: float = K, sustain: int = SUSTAIN) -> dict[str, Any] | None:
    """The first step where series A and B diverge (module docstring), or None."""
    a, b = _by_step(sa), _by_step(sb)
    steps = sorted(set(a) & set(b))
    if len(steps) < sustain:
        return None
    na, nb = step_noise([a[t] for t in steps]), step_noise([b[t] for t in steps])
    noise = max(na, nb)
    run = 0
    for i, t in enumerate(steps):
        x, y = a[t], b[t]
        if math.isfinite(x) and math.isfinite(y):
            far = abs(x - y) > k * noise
        else:
            far = math.isfinite(x) != math.isfinite(y)
        run = run + 1 if far else 0
        if run >= sustain:
            t0 = steps[i - sustain + 1]
            return {"metric": sa.name, "step": t0, "a": _num(a[t0]), "b": _num(b[t0]), "noise": round(noise, 6),
                    "axis": sa.axis}
    return None


def _num(v: float):
    return v if math.isfinite(v) else str(v)


def _findings(analysis) -> dict[str, str]:
    out = {}
    for f in analysis.result.findings:
        out.setdefault(f.symptom, f"{f.symptom}: {f.title}")
    return out


def compare_analyses(A, B) -> CompareResult:
    """Compare two analysed inputs (tools/rundir/analyze.Analysis)."""
    ra, rb = A.run, B.run
    diffs = config_diff(ra, rb)
    div = []
    for name, sa in ra.series.items():
        sb = rb.series_of(name)
        if sb is None or not (sa.canonical or sb.canonical or name in rb.series):
            continue
        d = diverge(sa, sb)
        div.append(d or {"metric": name, "step": None})
    hits = sorted((d for d in div if d.get("step") is not None), key=lambda d: d["step"])
    fa, fb = _findings(A), _findings(B)
    res = CompareResult(summary="", a=A.label, b=B.label, config_diff=diffs, divergence=div[:30],
                        first_divergence=hits[0] if hits else None,
                        only_in_a=[v for k, v in fa.items() if k not in fb], only_in_b=[v for k, v in fb.items() if k not in fa],
                        method=f"diverged: |A-B| > {K:g} x max step-to-step noise (1.4826 x median |r(t)-r(t-1)|, "
                               f"floor 1% of median |r|) for {SUSTAIN} common steps in a row")
    res = redact_compare(res)  # before the summary, which quotes config values
    res.summary = _summary(res, len(div))
    return res


def _summary(r: CompareResult, n_series: int) -> str:
    parts = []
    if r.config_diff:
        parts.append(f"{len(r.config_diff)} config fact(s) differ: " + ", ".join(
            f"{d['key']} {d['a']!r} -> {d['b']!r}" for d in r.config_diff[:4]))
    else:
        parts.append("no config fact differs")
    fd = r.first_divergence
    if fd:
        parts.append(f"first divergence: {fd['metric']} at step {fd['step']:g} (A {fd['a']}, B {fd['b']}, "
                     f"noise {fd['noise']:.3g})")
    else:
        parts.append(f"no series diverges beyond noise ({n_series} common series)" if n_series else "no common series")
    if r.only_in_a:
        parts.append("only in A: " + "; ".join(r.only_in_a[:3]))
    if r.only_in_b:
        parts.append("only in B: " + "; ".join(r.only_in_b[:3]))
    return ". ".join(parts) + "."


def compare_runs(a_text: str | None = None, a_path: str | None = None, b_text: str | None = None,
                 b_path: str | None = None) -> CompareResult:
    """Compare run A and run B (each a paste, a file, a store file or a folder). With only A given as text, the
    paste must hold both runs (split_two_runs). Raises InputError when the inputs do not make two runs."""
    from grpo_debug.tools.errors import InputError
    from grpo_debug.tools.rundir.analyze import analyze

    if b_text is None and b_path is None:
        if a_text is None:
            raise InputError("give two runs (a and b), or one paste holding both")
        pair = split_two_runs(a_text)
        if pair is None:
            raise InputError("one paste given but it does not hold two runs: prefix lines with [A]/[B], or paste "
                             "the two step sequences one after the other (each starting at step 1)")
        A, B = analyze(text=pair[0]), analyze(text=pair[1])
        A.label, B.label = "<text> run A", "<text> run B"
    else:
        A, B = analyze(text=a_text, path=a_path), analyze(text=b_text, path=b_path)
    return compare_analyses(A, B)


#: Longest string kept before redaction (a secret cut later at the answer's clip is already masked).
_PRE_CLIP = 4000


def redact_compare(res: CompareResult) -> CompareResult:
    """``res`` with every secret (tools/redact.py) redacted: config values, labels, findings, metric names.
    Strings above 4000 characters are cut first (redaction is linear but a 17 MB value is not worth it) and
    the answer says so in ``truncated``."""
    from grpo_debug.tools.redact import redact_mapping

    data = res.model_dump(mode="json")
    data, cut = _clip_all(data, _PRE_CLIP, 10_000)
    out = CompareResult.model_validate(redact_mapping(data))
    out.truncated = out.truncated or cut
    return out


def _clip_all(x: Any, n: int, items: int) -> tuple[Any, bool]:
    """Every string of a JSON-like value cut to ``n`` characters and every list to ``items`` items."""
    if isinstance(x, str):
        return (x[: n - 1] + "\u2026", True) if len(x) > n else (x, False)
    if isinstance(x, dict):
        pairs = [(k, _clip_all(v, n, items)) for k, v in x.items()]
        return {k: v for k, (v, _) in pairs}, any(c for _, (_, c) in pairs)
    if isinstance(x, list):
        vals = [_clip_all(v, n, items) for v in x[:items]]
        return [v for v, _ in vals], len(x) > items or any(c for _, c in vals)
    return x, False


def bound_compare(res: CompareResult, max_bytes: int, max_chars: int = 300, max_items: int = 30) -> CompareResult:
    """``res`` cut to an answer of at most ``max_bytes`` of JSON: strings to ``max_chars``, lists to
    ``max_items``, then divergence rows, config rows and findings from the end until it fits; ``truncated`` and
    the summary's end say so. The summary itself is kept (clipped to 4 x max_chars)."""
    data = res.model_dump(mode="json")
    summary = data.pop("summary")
    data, cut = _clip_all(data, max_chars, max_items)
    data["summary"] = summary if len(summary) <= 4 * max_chars else summary[: 4 * max_chars - 1] + "\u2026"
    cut |= data["summary"] != summary
    out = CompareResult.model_validate(data)
    for name in ("divergence", "config_diff", "only_in_b", "only_in_a"):
        seq = getattr(out, name)
        while seq and len(out.model_dump_json()) > max_bytes - 120:
            seq.pop()
            cut = True
    if cut:
        out.truncated = True
        out.summary += " (truncated: long values and lists were cut to bound the answer; compare with the CLI " \
                       "`grpo-debug compare` for all of it)"
    return out
