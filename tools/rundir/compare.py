"""Compare two runs: what differs (levels, the first diverging step, config facts, findings) and which looks broken.

    from grpo_debug.tools.rundir.compare import compare_runs
    res = compare_runs(a_path="runs/ref", b_path="runs/new")     # or a_text/b_text; each a file, folder or paste
    res = compare_runs(a_text=paste)                             # one paste (or file, folder) holding the runs

Which runs (compare_inputs.py): two inputs, or one input split by ``runs_split`` ([A]/[B] labels, header lines,
a second launch line, the step numbering starting again; a folder's logs); with more than two runs the most
broken one is compared with the first healthy one and ``runs`` lists them all.

Levels and the broken run (compare_levels.py): per shared canonical series, first/last/min/max/median of each
run and the factor between the medians (``far`` at 10x); the run that looks broken (non-finite values, its own
medium/high findings, a far level in the series' bad direction).

Divergence (per shared series, aligned on the steps both runs logged when there are at least ``SUSTAIN`` of
them, else by position or relative progress when the steps do not overlap at all; the last value of a repeated
step):

    noise_r = max(1.4826 x median_t |r(t) - r(t-1)|,  0.01 x median_t |r(t)|,  1e-12)   for r in (A, B)
    d(t)    = |A(t) - B(t)| / max(noise_A, noise_B)

and the same on the values' logarithms when every finite value of both runs is positive (a norm, a length, an
lr: their noise is relative, so a run 200x higher is not 200x noisier there; on the values alone the noisier
run's own jitter hides a constant gap of any size); a point is far when either says so,

A series diverges at the first point t0 from which d(t) > K (K = 4) holds for ``SUSTAIN`` (3) aligned points in
a row, or one run is non-finite where the other is finite for as many. The step-to-step noise is the median
absolute change between consecutive points (scaled like a MAD to a normal sigma): how much each run moves on its
own, so K x noise is "further apart than either run jitters", and the sustain rule keeps one noisy step from
counting. The 1 % floor keeps a constant series (an lr) from making a tiny difference significant. The point
reported is where the gap starts, fitted back from that detection (``onset_index``: the hinge / level-shift fit
of engine/onset.py over B/A, or B - A), ``detected`` the detection when they differ: a gap that grows slowly is
dated where it starts, not where it got past the noise (noise that the growing run's own steps inflate). With
one or two common steps nothing is dated (the levels speak). The runs' first diverging point is the earliest.

The answer is deterministic (no sampling, every list in a fixed order) and small: levels at most 6 rows,
divergence the diverging series only (at most 10), config facts at most 20 (``bound_compare`` cuts further).
"""
from __future__ import annotations

import math
import statistics
from typing import Any

from pydantic import BaseModel, Field

K = 4.0
SUSTAIN = 3
MAX_CONFIG = 20
MAX_DIVERGE = 10
COMPARE_BYTES = 6000  # the MCP answer's bound (bound_compare): a few kB, the summary and the rows that matter


class CompareResult(BaseModel):
    """compare / compare_runs: what differs between run A and run B."""

    summary: str
    a: str = Field(description="Run A's input.")
    b: str = Field(description="Run B's input.")
    broken: str = Field("", description="The run that looks broken: A, B, both, or empty.")
    levels: list[dict[str, Any]] = Field(default_factory=list, description="{metric, a, b, factor, far}.")
    aligned: str = Field("", description="step, position, progress, few (1-2 common steps) or none.")
    config_diff: list[dict[str, Any]] = Field(default_factory=list, description="{key, a, b}; null = not set.")
    first_divergence: dict[str, Any] | None = Field(None, description="{metric, step, a, b, noise}: the earliest.")
    divergence: list[dict[str, Any]] = Field(default_factory=list, description="The diverging series.")
    only_in_a: list[str] = Field(default_factory=list, description="Findings of A that B lacks.")
    only_in_b: list[str] = Field(default_factory=list, description="Findings of B that A lacks.")
    runs: list[dict[str, Any]] = Field(default_factory=list, description="Every run of a split input.")
    method: str = ""
    truncated: bool = Field(False, description="Long values or lists were cut to bound the answer (see summary).")


def split_two_runs(text: str) -> tuple[str, str] | None:
    """(run A text, run B text): the first two runs ``runs_split.split_text`` finds in a paste (with ``force``
    when it finds one), or None."""
    from grpo_debug.tools.rundir.runs_split import split_text

    segs = split_text(text) or split_text(text, force=True)
    return (segs[0].text, segs[1].text) if segs and len(segs) >= 2 else None


def _facts(run) -> dict[str, tuple[Any, str]]:
    out = {}
    for f in run.facts:
        out[f.name] = (f.value, f.raw_key)
    return out


def config_diff(ra, rb) -> list[dict[str, Any]]:
    """Facts set differently (or in one run only): facts both runs set first, canonical names first; per-run
    identifiers (experiment/run names, output folders, the seed, ranks, ports: ``runs_compare.IDENT``) last,
    marked ``identifier`` (they differ between any two runs and explain nothing)."""
    from grpo_debug.tools.rundir.runs_compare import IDENT

    fa, fb = _facts(ra), _facts(rb)
    ident = {k for k in set(fa) | set(fb) if IDENT.search(k) or any(IDENT.search(f.get(k, (None, ""))[1] or "")
                                                                    for f in (fa, fb))}
    rows = []
    for k in sorted(set(fa) | set(fb), key=lambda k: (k in ident, k not in fa or k not in fb, "." in k, k)):
        va, vb = fa.get(k, (None, ""))[0], fb.get(k, (None, ""))[0]
        if k in fa and k in fb and str(va) == str(vb):
            continue
        rows.append({"key": k, "a": va, "b": vb} | ({"identifier": True} if k in ident else {}))
    return rows[:MAX_CONFIG]


def step_noise(vals: list[float]) -> float:
    """1.4826 x median |r(t) - r(t-1)| over finite neighbours, floored at 1 % of median |r| and 1e-12."""
    fin = [v for v in vals if math.isfinite(v)]
    diffs = [abs(b - a) for a, b in zip(fin, fin[1:])]
    mad = 1.4826 * statistics.median(diffs) if diffs else 0.0
    scale = statistics.median([abs(v) for v in fin]) if fin else 0.0
    return max(mad, 0.01 * scale, 1e-12)


def first_far(pts: list[tuple[float, float, float]], k: float = K, sustain: int = SUSTAIN) -> dict[str, Any] | None:
    """{step, a, b, noise[, space, detected]} of the first of ``sustain`` aligned points in a row further apart
    than ``k`` x the larger step-to-step noise (``pts``: (x, value of A, value of B)) on the values or, when every
    finite value is positive, on their logarithms (``space: log`` when only that says so; ``noise`` then in log
    units), or None (module docstring)."""
    if len(pts) < sustain:
        return None
    log = all(v > 0 for p in pts for v in p[1:] if math.isfinite(v))
    spaces = [pts] + ([[(t, *(math.log(v) if math.isfinite(v) else v for v in (x, y))) for t, x, y in pts]]
                      if log else [])
    noises = [max(step_noise([p[1] for p in q]), step_noise([p[2] for p in q])) for q in spaces]
    run = 0
    for i in range(len(pts)):
        hits = [_far(q[i][1], q[i][2], k * n) for q, n in zip(spaces, noises)]
        run = run + 1 if any(hits) else 0
        if run >= sustain:
            det = i - sustain + 1
            start = onset_index(pts, det)
            t0, x0, y0 = pts[start]
            raw = _far(pts[det][1], pts[det][2], k * noises[0])
            out = {"step": t0, "a": _num(x0), "b": _num(y0), "noise": float(f"{noises[0 if raw else 1]:.4g}")}
            if not raw:
                out["space"] = "log"
            if start < det:
                out["detected"] = pts[det][0]
            return out
    return None


def _far(x: float, y: float, bound: float) -> bool:
    if math.isfinite(x) and math.isfinite(y):
        return abs(x - y) > bound
    return math.isfinite(x) != math.isfinite(y)


def onset_index(pts: list[tuple[float, float, float]], det: int) -> int:
    """Where the gap between the runs starts, at or before the detection index ``det``: ``engine.onset.locate``
    (a hinge / level-shift fit back from ``det`` against the gap's own baseline) over B/A when every value is
    positive (a multiplicative gap, fitted in log space too), else over B - A. ``det`` when there is too
    little before it to fit."""
    from types import SimpleNamespace

    from grpo_debug.tools.engine.onset import locate

    ratio = all(math.isfinite(v) and v > 0 for p in pts for v in p[1:])
    gap = [SimpleNamespace(step=t, value=(y / x) if ratio else (y - x)) for t, x, y in pts]
    try:
        return min(det, locate(gap, det).index)
    except (ValueError, ZeroDivisionError):
        return det


def diverge(sa, sb, k: float = K, sustain: int = SUSTAIN) -> dict[str, Any] | None:
    """The first point where series A and B diverge (module docstring), or None; ``by`` says how the points were
    aligned when not by step (the steps do not overlap)."""
    from grpo_debug.tools.rundir.compare_levels import align

    how, pts = align(sa, sb, sustain)
    if how == "few":
        return None
    d = first_far(pts, k, sustain)
    if d is None:
        return None
    out = {"metric": sa.name, **d, "axis": sa.axis}
    if how != "step":
        out["by"] = how  # step: A's step at that position
    return out


def _num(v: float):
    return float(f"{v:.6g}") if math.isfinite(v) else str(v)


def _findings(analysis) -> dict[str, str]:
    out = {}
    for f in analysis.result.findings:
        out.setdefault(f.symptom, f"{f.symptom} ({f.confidence}): {f.title}"[:200])
    return out


def place(analysis, no: int) -> tuple[int, str | None]:
    """(line, file) of line ``no`` of an analysed input in the input's own numbering: a run split from a paste
    (``analysis.place``, compare_inputs), a folder's merged line (its file's line), else ``no`` itself."""
    fn = getattr(analysis, "place", None)
    if fn is not None:
        return fn(no)
    m = getattr(analysis, "merged", None)
    loc = m.locate(no) if m is not None and hasattr(m, "locate") else None
    return (loc[1], loc[0]) if loc else (no, None)


def _cite(A, B, sa, sb, d: dict[str, Any]) -> dict[str, Any]:
    """``d`` with ``lines`` {a, b} (and ``files`` when they are a folder's): where each run logged the divergence's
    first point (by step, or B's point at the same position; none for B by relative progress)."""
    t0 = d["step"]
    pa = next((p for p in reversed(sa.points) if p.step == t0), None)  # the last value of a repeated step
    pb = None
    if d.get("by") is None:
        pb = next((p for p in reversed(sb.points) if p.step == t0), None)
    elif d["by"] == "position":
        ua = sorted({p.step for p in sa.points})
        ub = sorted({p.step for p in sb.points})
        i = ua.index(t0) if t0 in ua else len(ub)
        pb = next((p for p in reversed(sb.points) if p.step == ub[i]), None) if i < len(ub) else None
    lines, files = {}, {}
    for key, an, p in (("a", A, pa), ("b", B, pb)):
        if p is not None and p.line is not None:
            lines[key], src = place(an, p.line)
            if src:
                files[key] = src
    return d | ({"lines": lines} if lines else {}) | ({"files": files} if files else {})


def _alignment(ra, rb) -> tuple[str, dict[str, Any]]:
    """(how the runs' series line up, the steps' overlap): 'step' at SUSTAIN common steps or more, 'few' at one
    or two, 'position' / 'progress' when no step is common (compare_levels.align), 'none' without a shared
    series."""
    from grpo_debug.tools.rundir.compare_levels import align, overlap, shared

    ov = overlap(ra, rb)
    pairs = shared(ra, rb)
    if not pairs:
        return "none", ov
    if ov["common"] >= SUSTAIN:
        return "step", ov
    if ov["common"]:
        return "few", ov
    hows = [align(sa, sb, SUSTAIN)[0] for _k, sa, sb in pairs]
    return max(dict.fromkeys(hows), key=hows.count), ov


def compare_analyses(A, B, runs: list[dict[str, Any]] | None = None, how: str = "") -> CompareResult:
    """Compare two analysed inputs (tools/rundir/analyze.Analysis); ``runs``/``how``: the runs of a split input
    and how it was split (compare_inputs.Pair)."""
    from grpo_debug.tools.rundir.compare_levels import broken, levels, shared

    ra, rb = A.run, B.run
    div = [_cite(A, B, sa, sb, d) for _k, sa, sb in shared(ra, rb) if (d := diverge(sa, sb)) is not None]
    div.sort(key=lambda d: (d["step"], d["metric"]))
    rows = levels(ra, rb)
    who, why = broken(A, B, rows)
    aligned, ov = _alignment(ra, rb)
    fa, fb = _findings(A), _findings(B)
    res = CompareResult(summary="", a=A.label, b=B.label, broken=who, levels=rows, aligned=aligned,
                        config_diff=config_diff(ra, rb), divergence=div[:MAX_DIVERGE],
                        first_divergence=div[0] if div else None, runs=runs or [],
                        only_in_a=[v for k, v in fa.items() if k not in fb], only_in_b=[v for k, v in fb.items() if k not in fa],
                        method=f"diverged: |A-B| > {K:g} x max step-to-step noise (1.4826 x median |r(t)-r(t-1)|, "
                               f"floor 1% of median |r|) for {SUSTAIN} aligned points in a row, on values or (all positive) "
                               "their logs; onset fitted back; levels: medians, far at 10x")
    res = redact_compare(res)  # before the summary, which quotes config values
    from grpo_debug.tools.rundir.compare_text import summary

    res.summary = summary(res, len(shared(ra, rb)), why, ov, how)
    return res


def compare_runs(a_text: str | None = None, a_path: str | None = None, b_text: str | None = None,
                 b_path: str | None = None) -> CompareResult:
    """Compare run A and run B (each a paste, a file, a store file or a folder). With only A given, it must hold
    two runs or more (compare_inputs.load_pair). Raises InputError when the inputs do not make two runs (the
    message names what was seen and how to mark the runs) or a run is empty."""
    from grpo_debug.tools.rundir.compare_inputs import load_pair

    pair = load_pair(a_text, a_path, b_text, b_path)
    return compare_analyses(pair.A, pair.B, pair.runs, pair.how)


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
    ``max_items``, then divergence rows, runs, config rows, findings and level rows from the end until it fits; ``truncated`` and
    the summary's end say so. The summary itself is kept (clipped to 4 x max_chars)."""
    data = res.model_dump(mode="json")
    summary = data.pop("summary")
    data, cut = _clip_all(data, max_chars, max_items)
    data["summary"] = summary if len(summary) <= 4 * max_chars else summary[: 4 * max_chars - 1] + "\u2026"
    cut |= data["summary"] != summary
    out = CompareResult.model_validate(data)
    for name in ("divergence", "runs", "config_diff", "only_in_b", "only_in_a", "levels"):
        seq = getattr(out, name)
        while seq and len(out.model_dump_json()) > max_bytes - 120:
            seq.pop()
            cut = True
    if cut:
        out.truncated = True
        out.summary += " (truncated: long values and lists were cut to bound the answer; compare with the CLI " \
                       "`grpo-debug compare` for all of it)"
    return out
