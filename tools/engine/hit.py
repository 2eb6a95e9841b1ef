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
