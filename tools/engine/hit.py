"""The result of a detector: evidence line numbers, a sentence naming where the finding starts, the series names.

Shared by engine/detectors.py (MetricTable detectors) and engine/series/ (run-model detectors)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Hit:
    """``lines``: 1-based input lines (empty for a metric store run); ``message``: one sentence with the step and
    line where the finding starts; ``keys``: series names (canonical or raw) the finding reads."""

    lines: list[int]
    message: str
    keys: list[str]


# said of a series whose first point in the input is already non-finite (both non-finite detectors): an excerpt
# such as a log's tail can start after the run went NaN, so "first" is only the first seen
ALREADY_NONFINITE = " in this input, which starts with it: the run may have gone non-finite earlier"
