"""Generic detectors over the run model's series (issue 11, part 4), each relative to the run's own baseline.

Every detector takes a :class:`~grpo_debug.tools.run.model.Run` and parameters and returns a
:class:`~grpo_debug.tools.engine.detectors.Hit` (evidence lines, a sentence naming where the finding starts,
the series names) or None. A rule names one in a ``detector`` signal; ``metric:`` selects a canonical series
(``metric: grad_norm``), ``keys:`` a regex over series names and raw keys (for keys the alias table lacks).

| detector        | module         | finds                                                          |
|-----------------|----------------|----------------------------------------------------------------|
| late_climb      | late_climb.py  | a sustained climb after a stable stretch, at its first step    |
| robust_spike    | spikes.py      | isolated values far above the trailing robust baseline         |
| collapse        | collapse.py    | a fall toward zero that stays (entropy collapse)               |
| flat_zero       | flat_zero.py   | a series that is (or becomes and stays) exactly zero (reward)  |
| plateau         | plateau.py     | a series that stops moving after it moved                      |
| first_nonfinite | nonfinite.py   | the first NaN/inf step of each series                          |
| mismatch_jump   | mismatch.py    | rollout-vs-train log-prob mismatch above the framework's bound |
| step1_mismatch  | step1.py       | KL/ratio/log-probs disagree at step 1 (one update per rollout)  |
| garbled_samples | garbled.py     | rollout text samples that are token salad or degenerate repeats |

Shared statistics live in ``baseline.py`` (median, MAD, selection of series, evidence lines).
"""
from __future__ import annotations

from typing import Callable

from grpo_debug.tools.engine.series.collapse import collapse
from grpo_debug.tools.engine.series.flat_zero import flat_zero
from grpo_debug.tools.engine.series.garbled import garbled_samples
from grpo_debug.tools.engine.series.late_climb import late_climb
from grpo_debug.tools.engine.series.mismatch import mismatch_jump
from grpo_debug.tools.engine.series.nonfinite import first_nonfinite
from grpo_debug.tools.engine.series.plateau import plateau
from grpo_debug.tools.engine.series.spikes import robust_spike
from grpo_debug.tools.engine.series.step1 import step1_mismatch

RUN_DETECTORS: dict[str, Callable] = {
    "late_climb": late_climb, "robust_spike": robust_spike, "collapse": collapse, "flat_zero": flat_zero,
    "plateau": plateau, "first_nonfinite": first_nonfinite, "mismatch_jump": mismatch_jump,
    "step1_mismatch": step1_mismatch, "garbled_samples": garbled_samples,
}
for _fn in RUN_DETECTORS.values():
    _fn.reads_run = True  # match.eval_signal passes ctx.run, not the MetricTable

__all__ = ["RUN_DETECTORS"]
