"""mismatch_jump: rollout-vs-train log-prob mismatch above the bound its framework publishes, at its first step.

Each framework reports its own statistic, so each has its own bound (key regex over the raw key, bound, source):

| statistic (raw key)                         | bound | source                                                   |
|---------------------------------------------|-------|----------------------------------------------------------|
| verl training/rollout_probs_diff_mean       | 0.01  | verl docs/faq/faq.rst: "should be below 0.005 ... higher than 0.01 indicates a precision issue from the inference engine" |
| slime train/train_rollout_logprob_abs_diff  | 0.1   | slime/utils/arguments.py --ci-train-rollout-logprob-abs-diff-threshold, default 0.1 (asserted in CI) |
| SkyRL minibatch_rollout_logprobs_abs_diff_mean, TRL sampling_logp_difference/mean, logprobs_diff | 0.1 | the same statistic as slime's (mean absolute token log-prob difference); slime's bound |
| NeMo-RL token_mult_prob_error               | 1.05  | NeMo-RL docs/guides/dtensor-tp-accuracy.md: "when this metric exceeds 1.05, we consider it indicative of a potential framework issue" |
| NeMo-RL gen_kl_error ("Generation KL Error")| 0.01  | NeMo-RL docs/guides/grpo.md: "Empirically, the mismatch is approximately 1e-3"; 10x that |
| prime-rl mismatch_kl/all/mean ("Mismatch KL") | none | prime-rl docs/training.md: "A sustained, growing mean is the early-warning sign": read with late_climb |

A statistic fires when at least ``min_points`` of its points exceed the bound, or its last point does, or it has
fewer than 3 points and one does (a pasted summary), or it is a table of variants (the ``row`` axis: one row per
backend or config, markdown.py) or values stated in prose (the ``mention`` axis, prose.py) and any one does. The reported start is the first point above.
Occasional single spikes that return are allowed (NeMo-RL's guide: "Occasional spikes are acceptable if ... it
quickly returns").
"""
from __future__ import annotations

import re

from grpo_debug.tools.engine.hit import Hit
from grpo_debug.tools.engine.series.baseline import at, fmt, lines_of
from grpo_debug.tools.run.model import Run, Series

# (raw-key regex, bound or None, short source)
BOUNDS: list[tuple[str, float | None, str]] = [
    (r"rollout_probs_diff_mean$", 0.01, "verl FAQ: above 0.01 is an inference-engine precision issue"),
    (r"train_rollout_logprob_abs_diff$", 0.1, "slime CI bound --ci-train-rollout-logprob-abs-diff-threshold 0.1"),
    (r"rollout_logprobs_abs_diff_mean$|sampling_logp_difference/mean$|(?:^|/)logprobs_diff(?:_mean)?$|"
     r"train.rollout logprob abs.diff", 0.1, "slime's CI bound for the same statistic (mean |log-prob diff|)"),
    (r"token_mult_prob_error$", 1.05, "NeMo-RL guide: above 1.05 indicates a framework issue"),
    (r"gen_kl_error$|^generation kl error$", 0.01, "NeMo-RL guide: typically about 1e-3; 10x that"),
    (r"mismatch_kl/all/mean$|^mismatch kl$", None, "prime-rl docs: a sustained, growing mean is the early warning"),
]
_COMPILED = [(re.compile(rx, re.I), b, src) for rx, b, src in BOUNDS]


def _bound_of(s: Series) -> tuple[float | None, str] | None:
    for rx, b, src in _COMPILED:
        if any(rx.search(k) for k in (s.name, *s.raw_keys)):
            return b, src
    return None


def mismatch_jump(run: Run, min_points: int = 2) -> Hit | None:
    """The first mismatch statistic above its framework's bound (or climbing late, when no bound is published)."""
    from grpo_debug.tools.engine.series.late_climb import late_climb

    for s in run.series.values():
        spec = _bound_of(s)
        if spec is None:
            continue
        bound, src = spec
        if bound is None:
            hit = late_climb(run, metric=s.name, factor=3.0)
            if hit:
                hit.message += f" ({src})"
                return hit
            continue
        fin = s.finite()
        over = [p for p in fin if p.value > bound]
        rows = s.axis in ("row", "mention")  # variants of a table / values stated in prose: not a time series
        if not over or not (rows or len(over) >= min_points or fin[-1].value > bound or len(fin) < 3):
            continue
        first = over[0]
        return Hit(lines_of(over[:6]), f"{s.name} is {fmt(first.value)} at {at(first, s.axis)}, above {bound:g} ({src}); "
                   f"{len(over)}/{len(fin)} points above, max {fmt(max(p.value for p in over))}", [s.name, *s.raw_keys[:1]])
    return None
