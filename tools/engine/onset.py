"""Onset: where a change in a metric series starts, estimated backwards from the point where a detector saw it.

A detector fires where a change has become significant (a climb 4 sigma above its baseline, a value over a
bound, a NaN). The answer an expert gives is where it *started*: the first step of a slow climb, the step a
level shifted, the first step of a fall. :func:`change_start` finds it with a two-segment least-squares fit.

Method (segmented / "hinge" regression with an unknown break point, fitted by exhaustive search over the break:
Hudson, "Fitting segmented curves whose join points have to be estimated", JASA 61:1097, 1966; the mean-shift
variant is the least-squares change point of Hinkley, "Inference about the change-point in a sequence of random
variables", Biometrika 57:1, 1970, the offline counterpart of Page's CUSUM, Biometrika 41:100, 1954):

1. Start-up is not a baseline (:func:`startup_end`): leading exact zeros (a reward of 0 for the first steps, a
   metric not computed yet) and leading warm-up points more than 5 robust sigma (1.4826 x MAD of the next 20
   points) away from what follows are skipped, at most a quarter of the points before the detection.
2. The fit window runs from the first baseline point ``a`` to ``b`` = the detection index ``d`` + 5, then is
   refitted to ``d`` plus as many points as the first fit put between its onset and ``d`` (within the finite
   points): enough of the change to fix its shape, not so much that a later plateau bends it.
3. For every break ``k`` in ``(a + min_base, d]`` two models are fitted to ``y[a..b]`` by ordinary least squares:
   - a hinge (a climb or fall that starts at ``k``): ``y_i = b0 + b1 * max(0, x_i - x_{k-1})``;
   - a step (a level shift at ``k``): ``y_i = m1`` for ``i < k``, ``m2`` for ``i >= k``.
   Each costs O(1) from prefix sums of x, x^2, y, y^2, xy, so the search is O(n).
4. A series that is ever <= 0 is fitted on its values (additive noise). A positive one (a norm, a length, an
   entropy: multiplicative noise) is fitted twice, on the values weighted by 1 / level^2 (level: the running
   median of 5; a ramp) and on their logarithms (an exponential climb is a hinge in log space); both leave
   relative residuals, compared by their sum of squares with each residual capped at 2.5 robust sigma (so a few
   heavy-tailed points do not pick the space). The onset is point ``k`` of the winner: the first point of the
   new segment, moved forward by at most one point while that point is still within 1.25 sigma of the baseline
   (a noisy baseline point just before a climb pulls the break one point early).

Measured (tests/test_onset.py noise: resampled from a real healthy grad-norm series, about +-25 %, AR(1) 0.3,
0.5 % outliers; 30 seeds each): an exponential climb of 0.5 %/step from step 3093 of 6000: 30/30 within 145
steps (errors -5..+26); 2.5 %/step over 300 steps: 30/30 within 15 (-4..+8); a linear ramp of 2 %/step: 29/30
within 15 (-18..+8); a 3x level shift: 30/30 exact. The TensorBoard example of issue 23 (climb from 3093) is
dated 3095 (3107 before, with the CUSUM of series/late_climb.py).

:func:`excursion` tells an isolated spike that recovered from a change that stays.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass

WARMUP_Z = 5.0
WARMUP_WINDOW = 20


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def sigma(xs: list[float], med: float, rel_floor: float = 0.05, abs_floor: float = 1e-12) -> float:
    """1.4826 x MAD, at least ``rel_floor`` x |median| (the same estimator as series/baseline.py, which this
    module cannot import: the series detectors import it)."""
    return max(median([abs(x - med) for x in xs]) * 1.4826, rel_floor * abs(med), abs_floor)


@dataclass
class Fit:
    """``index``: the onset (first point of the new segment); ``model``: 'hinge' or 'step'; ``space``: 'raw' or
    'log'."""

    index: int
    model: str
    space: str


def startup_end(vals: list[float], limit: int | None = None, eps: float = 1e-9) -> int:
    """Index of the first point after the start-up segment of ``vals`` (0 when there is none): leading exact
    zeros followed by non-zero values, then leading points more than 5 robust sigma from the median of the 20
    points after them. Looks at most at ``limit`` points (default: all) and skips at most a quarter of them."""
    n = len(vals) if limit is None else min(limit, len(vals))
    i = 0
    while i < n and abs(vals[i]) <= eps:
        i += 1
    if i >= n:  # zero up to the limit: that is the series, not a start-up
        return 0
    cap = i + max(0, (n - i) // 4)
    while i < cap:
        nxt = vals[i + 1:i + 1 + WARMUP_WINDOW]
        if len(nxt) < 5:
            break
        med = median(nxt)
        if abs(vals[i] - med) <= WARMUP_Z * sigma(nxt, med):
            break
        i += 1
    return i


def _prefix(xs: list[float], ys: list[float], ws: list[float]) -> list[list[float]]:
    """Weighted prefix sums [Sw, Swx, Swxx, Swy, Swyy, Swxy] (index i = sums over the first i points)."""
    out = [[0.0] * 6]
    for x, y, w in zip(xs, ys, ws):
        p = out[-1]
        out.append([p[0] + w, p[1] + w * x, p[2] + w * x * x, p[3] + w * y, p[4] + w * y * y, p[5] + w * x * y])
    return out


def _between(ps: list[list[float]], i: int, j: int) -> list[float]:
    """Sums over points i..j-1."""
    return [b - a for a, b in zip(ps[i], ps[j])]


def _sse_const(s: list[float]) -> float:
    n, _, _, sy, syy, _ = s
    return max(0.0, syy - sy * sy / n) if n else 0.0


def _sse_hinge(whole: list[float], post: list[float], x0: float) -> float:
    """SSE of y = b0 + b1 * h with h = x - x0 on the post points and 0 before (OLS, intercept over all)."""
    n, _, _, sy, syy, _ = whole
    m, sx, sxx, py, _, sxy = post
    sh = sx - m * x0
    shh = sxx - 2 * x0 * sx + m * x0 * x0
    shy = sxy - x0 * py
    vh = shh - sh * sh / n
    if vh <= 1e-300:
        return _sse_const(whole)
    return max(0.0, syy - sy * sy / n - (shy - sh * sy / n) ** 2 / vh)


def _best(xs: list[float], ys: list[float], ws: list[float], lo: int, hi: int) -> tuple[float, int, str, float]:
    """(weighted SSE, break index, model, SST) of the best hinge or step with its break in [lo, hi] (indices into
    ys; weights ``ws``)."""
    ps = _prefix(xs, ys, ws)
    n = len(ys)
    whole = ps[n]
    sst = _sse_const(whole)
    best = (math.inf, hi, "hinge")
    for k in range(lo, hi + 1):
        post = _between(ps, k, n)
        step = _sse_const(_between(ps, 0, k)) + _sse_const(post)
        hinge = _sse_hinge(whole, post, xs[k - 1])
        if hinge < best[0]:
            best = (hinge, k, "hinge")
        if step < best[0]:
            best = (step, k, "step")
    return best[0], best[1], best[2], sst


def change_start(steps: list[float], vals: list[float], det: int, *, base: int | None = None, min_base: int = 3,
                 extend: float = 1.0, min_post: int = 5) -> Fit | None:
    """The onset of the change detected at index ``det`` of the finite series (``steps``, ``vals``, same length):
    the hinge/step fit of the module docstring over [a, b], ``a`` = ``base`` or :func:`startup_end`. None when
    fewer than ``min_base`` baseline points come before ``det`` (nothing to fit against)."""
    n = len(vals)
    if not 0 <= det < n:
        raise ValueError(f"detection index {det} outside the series (0..{n - 1})")
    a = startup_end(vals, det) if base is None else base
    if det - a < min_base:
        return None
    fit = _fit(steps, vals, a, min(n - 1, det + min_post), min_base, det)
    if extend > 0:  # refit over as much of the change after the detection as before it (its shape, not its end)
        fit = _fit(steps, vals, a, min(n - 1, det + max(min_post, int((det - fit.index) * extend))), min_base, det)
    return fit


def _fit(steps: list[float], vals: list[float], a: int, b: int, min_base: int, det: int) -> Fit:
    """The best hinge/step over the window [a, b] with its break in [a + min_base, det], raw or log space."""
    xs, raw = steps[a:b + 1], vals[a:b + 1]
    lo, hi = min_base, det - a
    if min(raw) <= 0:  # additive noise around a level that may be 0: plain least squares on the values
        sse, k, model, _ = _best(xs, raw, [1.0] * len(raw), lo, hi)
        return Fit(a + k, model, "raw")
    # multiplicative noise (a norm, a length, an entropy): the values weighted by 1 / level^2 (a ramp) and their
    # logarithms (an exponential); both leave relative residuals, so their SSEs compare directly
    level = [median(raw[max(0, i - 2):i + 3]) for i in range(len(raw))]
    fits = []
    for space, ys, ws in (("raw", raw, [1.0 / (v * v) for v in level]),
                          ("log", [math.log(v) for v in raw], [1.0] * len(raw))):
        sse, k, model, _ = _best(xs, ys, ws, lo, hi)
        fits.append((_residuals(xs, ys, ws, k, model), Fit(a + k, model, space)))
    cap = max(2.5 * 1.4826 * min(median(r) for r, _ in fits), 1e-12)  # residuals past it count as it: heavy tails
    # do not decide
    return min(fits, key=lambda t: sum(min(r, cap) ** 2 for r in t[0]))[1]


def _residuals(xs: list[float], ys: list[float], ws: list[float], k: int, model: str) -> list[float]:
    """Absolute weighted residuals of the (weighted least-squares) ``model`` with its break at ``k``."""
    if model == "step":
        fitted = []
        for part in (range(0, k), range(k, len(ys))):
            sw = sum(ws[i] for i in part)
            m = sum(ws[i] * ys[i] for i in part) / sw if sw else 0.0
            fitted += [m] * len(part)
    else:
        h = [max(0.0, x - xs[k - 1]) if i >= k else 0.0 for i, x in enumerate(xs)]
        sw = sum(ws)
        mh, my = sum(w * v for w, v in zip(ws, h)) / sw, sum(w * v for w, v in zip(ws, ys)) / sw
        vh = sum(w * (v - mh) ** 2 for w, v in zip(ws, h))
        b1 = sum(w * (v - mh) * (y - my) for w, v, y in zip(ws, h, ys)) / vh if vh > 0 else 0.0
        fitted = [my + b1 * (v - mh) for v in h]
    return [abs(y - f) * math.sqrt(w) for y, f, w in zip(ys, fitted, ws)]


def band(vals: list[float], end: int, start: int = 0, window: int = 50) -> tuple[float, float]:
    """(median, robust sigma) of the up to ``window`` points before index ``end`` (from ``start``)."""
    pre = vals[max(start, end - window):end]
    if not pre:
        return vals[end], 0.0
    med = median(pre)
    return med, sigma(pre, med)


def excursion(vals: list[float], det: int, z: float = 4.0, max_len: int = 3, settle: int = 5) -> int | None:
    """The length (points) of an isolated excursion at ``det`` that came back, or None when the series does not
    recover. Recovered: within ``max_len`` points from ``det`` the series is back inside median +- ``z`` sigma of
    the points before ``det``, and at least 80 % of the next ``settle`` points (at least 2 of them must exist)
    stay inside."""
    med, sd = band(vals, det, startup_end(vals, det))
    if sd <= 0:
        return None
    inside = [abs(v - med) <= z * sd for v in vals]
    for j in range(det + 1, min(len(vals), det + 1 + max_len)):
        if inside[j]:
            after = inside[j:j + settle]
            if len(after) >= 2 and sum(after) >= 0.8 * len(after):
                return j - det
            return None
    return None


def first_outside(vals: list[float], cand: list[int], z: float = 3.0) -> int | None:
    """The first index of ``cand`` (ascending) whose value lies outside median +- ``z`` sigma of the points
    before the first candidate (the detection point among a detector's evidence points), else ``cand[0]``."""
    if not cand:
        return None
    med, sd = band(vals, cand[0], startup_end(vals, cand[0]), window=200)
    return next((i for i in cand if sd > 0 and abs(vals[i] - med) > z * sd), cand[0])


@dataclass
class Onset:
    """Where a change starts in a list of points: ``index`` into it, ``detected`` (the index the detector gave),
    ``kind``: 'climb' (a hinge fit), 'shift' (a level shift), 'nonfinite' (the first NaN/inf, no climb before
    it), 'spike' (an isolated excursion that recovered: ``recovered`` True), 'point' (too little baseline to
    fit: the detection point itself)."""

    index: int
    detected: int
    kind: str
    recovered: bool = False


def _climb_before(vals: list[float], z: float = 4.0, min_base: int = 5) -> int | None:
    """For the finite values before a NaN: the index of the first point of the final run of points above
    median + ``z`` sigma of the first half of the baseline (a climb that led to the NaN), or None."""
    a = startup_end(vals)
    j = len(vals) - 1
    if j - a < 2 * min_base:
        return None
    base = vals[a:a + max(min_base, (j - a) // 2)]
    med = median(base)
    thr = med + z * sigma(base, med)
    if vals[j] <= thr or (j > 0 and vals[j - 1] <= thr):
        return None
    i = j
    while i - 1 > a and vals[i - 1] > thr:
        i -= 1
    return i


def locate(points, det: int, spike_ok: bool = False) -> Onset:
    """The onset of the change detected at ``points[det]`` (objects with ``step`` and ``value``; NaN/inf kept).

    A non-finite detection point: the start of the climb that led to it when the finite values before it climb
    (:func:`change_start` from the climb's first point above median + 4 sigma), else the first non-finite point
    of the series. A finite one: an isolated excursion that recovered (``spike_ok``: detectors of spikes) is its
    own onset; otherwise :func:`change_start` over the finite points."""
    if not 0 <= det < len(points):
        raise ValueError(f"detection index {det} outside the series (0..{len(points) - 1})")
    fin = [i for i, p in enumerate(points) if math.isfinite(p.value)]
    if not math.isfinite(points[det].value):
        first_bad = next(i for i, p in enumerate(points) if not math.isfinite(p.value))
        pre = [i for i in fin if i < first_bad]
        vals = [points[i].value for i in pre]
        c = _climb_before(vals) if vals else None
        fit = change_start([points[i].step for i in pre], vals, c) if c is not None else None
        if fit is None:
            return Onset(first_bad, det, "nonfinite")
        return Onset(pre[_trim(vals, fit.index, c)], det, "climb" if fit.model == "hinge" else "shift")
    pos = fin.index(det)
    vals = [points[i].value for i in fin]
    if spike_ok and excursion(vals, pos) is not None:
        return Onset(det, det, "spike", True)
    fit = change_start([points[i].step for i in fin], vals, pos)
    if fit is None:
        return Onset(det, det, "point")
    k = _first_departure(vals, fit.index, pos)
    k = _trim(vals, k, pos) if k == fit.index else k
    return Onset(fin[k], det, "climb" if fit.model == "hinge" else "shift")


def _first_departure(vals: list[float], k: int, det: int, z: float = 3.0, drift: float = 1.0, window: int = 200,
                     min_base: int = 10) -> int:
    """The fitted break ``k`` moved to the first point of the contiguous run of points beyond ``z`` robust sigma of
    the baseline (the ``window`` points before ``k``) that reaches the detection ``det``, on the side the change
    goes, when the data say the change starts there:

    - the run starts before ``k`` (a change that opens with a jump and then accelerates: the hinge's knee falls
      where the curve steepens, after points that already left the noise): back to the run's first point;
    - the run starts after ``k`` with a jump (its first point past ``2 z`` sigma) and the points between stay level
      (their median within ``drift`` sigma of the baseline: a least-squares hinge fitted to a convex ramp puts its
      knee early): forward to the run's start;
    - otherwise (the points between drift: a slow climb whose first steps are inside the noise) ``k`` stays."""
    lo = max(0, k - window)
    pre = vals[lo:k]
    if len(pre) < min_base or not lo + min_base < k <= det:
        return k
    med = median(pre)
    sd = sigma(pre, med)
    up = vals[det] >= med

    def dev(v: float) -> float:
        return v - med if up else med - v

    if dev(vals[det]) <= z * sd:  # the detection point itself is inside the band: no run to snap to
        return k
    j = det
    while j - 1 > lo + min_base and dev(vals[j - 1]) > z * sd:
        j -= 1
    if j > k:  # forward only to a jump (a slow climb crosses the band gradually, its first points just past it)
        return j if dev(vals[j]) > 2 * z * sd and dev(median(vals[k:j])) <= drift * sd else k
    return j


def _trim(vals: list[float], k: int, det: int, trim: float = 1.25, most: int = 1) -> int:
    """``k`` moved forward (up to ``det``, at most ``most`` points) past points still within ``trim`` robust sigma
    of the baseline before ``k``, on the side the change goes: a noisy baseline point just before a climb can pull
    the fitted break one point early (more would date a slow climb late: its first points are within the noise)."""
    pre = vals[max(0, k - 200):k]
    if len(pre) < 3:
        return k
    med = median(pre)
    sd = sigma(pre, med)
    up = vals[det] >= med
    end = min(det, k + most)
    while k < end and (vals[k] - med if up else med - vals[k]) <= trim * sd:
        k += 1
    return k


SPIKE_DETECTORS = {"spike", "robust_spike"}


def for_hit(run, hit, detector: str = "") -> None:
    """Give a detector's ``hit`` (engine/hit.py) the point where its change starts, in place, when the detector
    did not: the first series of ``hit.keys`` the run model has (``run.series_of``), the detection point the
    first of the hit's evidence points outside the series' baseline band (:func:`first_outside`), then
    :func:`locate` back from it; a spike detector's excursion that recovered sets ``hit.recovered``. Nothing
    changes when no series or no evidence point of it is found."""
    if hit.onset is not None or not hit.keys:
        return
    for key in hit.keys:
        s = run.series_of(key)
        if s is None:
            continue
        lines = set(hit.lines)
        cand = [i for i, p in enumerate(s.points) if p.line is not None and p.line in lines]
        if not cand:
            continue
        bad = next((i for i in cand if not math.isfinite(s.points[i].value)), None)
        if bad is not None:
            det = bad
        else:
            fin = [i for i, p in enumerate(s.points) if math.isfinite(p.value)]
            pos = {i: j for j, i in enumerate(fin)}
            j = first_outside([s.points[i].value for i in fin], [pos[i] for i in cand if i in pos])
            det = fin[j] if j is not None else cand[0]
        o = locate(s.points, det, spike_ok=detector in SPIKE_DETECTORS)
        hit.onset, hit.onset_kind, hit.recovered = s.points[o.index], o.kind, o.recovered
        hit.onset_series, hit.onset_detected = s.name, s.points[det]
        return


def attach(hit, points, index: int, kind: str, series: str, recovered: bool = False, detected=None):
    """``hit`` with its onset set to ``points[index]`` (for detectors that locate their own onset); returns it."""
    hit.onset, hit.onset_kind, hit.onset_series, hit.recovered = points[index], kind, series, recovered
    hit.onset_detected = detected
    return hit


_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
                   r"|(?<!\d)\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?")


def line_time(raw: str) -> str | None:
    """The wall-clock timestamp a log line starts with (in its first 80 characters: ISO 8601 / RFC 3339,
    ``2026-11-30 12:00:00,123``, vLLM's ``11-30 12:00:00``), as written; None when it has none."""
    m = _TIME.search(raw[:80])
    return m.group(0) if m else None


def _num(v: float) -> int | float:
    return int(v) if float(v).is_integer() else v


def finding_onset(hits, by_no=None):
    """(the :class:`~grpo_debug.tools.models.Onset` of a finding, recovered) for the rule hits of one symptom
    (``match.RuleHit``, most likely first): the onset of the first detector signal that has one, the top hit's
    first; ``by_no``: line number -> Line (its raw text gives ``time``). ``recovered`` is True when every
    detector, event, regex and check signal of the hits is a spike detector's isolated spike that came back:
    such a finding is said as that and is never medium or high (triage caps it at low)."""
    from grpo_debug.tools.models import Onset

    found = next((r.hit for h in hits for r in h.results if r.hit is not None and r.hit.onset is not None), None)
    strong = [r for h in hits for r in h.results if r.kind in ("detector", "event", "regex", "check")]
    recovered = bool(strong) and all(r.hit is not None and r.hit.recovered for r in strong)
    if found is None:
        return None, recovered
    p, det = found.onset, found.onset_detected
    ln = by_no.get(p.line) if by_no is not None and p.line is not None else None
    return Onset(step=_num(p.step), line=p.line, time=line_time(ln.raw) if ln is not None else None,
                 series=found.onset_series or None, kind=found.onset_kind,
                 detected_step=_num(det.step) if det is not None else None), recovered
