"""The result of a detector: evidence line numbers, a sentence naming where the finding starts, the series names.

Shared by engine/detectors.py (MetricTable detectors) and engine/series/ (run-model detectors)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Hit:
    """``lines``: 1-based input lines (empty for a metric store run); ``message``: one sentence with the step and
    line where the finding starts; ``keys``: series names (canonical or raw) the finding reads; ``onset``: see
    below (None: not located yet; match.eval_signal asks engine/onset.for_hit)."""

    lines: list[int]
    message: str
    keys: list[str]
    # where the change starts (engine/onset.py): a run-model Point, how it was found ('climb', 'shift',
    # 'nonfinite', 'spike', 'point', 'exact'), its series; ``recovered``: an isolated spike that came back
    onset: Any = None
    onset_kind: str = ""
    onset_series: str = ""
    recovered: bool = False
    onset_detected: Any = None  # the Point the detector saw the change at, when known


# said of a series whose first point in the input is already non-finite (both non-finite detectors): an excerpt
# such as a log's tail can start after the run went NaN, so "first" is only the first seen
ALREADY_NONFINITE = " in this input, which starts with it: the run may have gone non-finite earlier"
