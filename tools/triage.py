"""Triage entry point (stub: the engine is being written)."""
from __future__ import annotations

from grpo_debug.tools.models import Coverage, TriageResult


class InputError(ValueError):
    """The input cannot be read at all (missing path, a directory, permission); names it and the fix."""


def triage(text: str | None = None, path: str | None = None, *, max_findings: int = 10) -> TriageResult:
    """Triage a training log, config or launch script given as text or a path."""
    return TriageResult(summary="stub", coverage=Coverage(input=path or "<text>"))
