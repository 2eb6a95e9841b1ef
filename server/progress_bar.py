"""The CLI's progress bar for triage of a large file: rich, on stderr, only when stderr is a terminal.

The engine calls ``progress(done, total, phase)`` as chunks are processed (tools/engine/large_logs.py): in the
``reading`` phase the bar shows bytes of the file processed (not merely read) with the time left; in the
``analysing`` phase (rules, detectors, ranking over what was kept) it pulses, since that work has no byte count.
A file read whole (below the streaming threshold) shows the pulsing ``analysing`` bar from the start.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

MIN_BYTES = 8 * 2**20  # smaller files answer in a few seconds: no bar


def triage_bar(path: str | None):
    """(progress callback, bar) for ``triage(path=...)``; (None, None) without a terminal or for a small file.
    The caller stops the bar (``bar.stop()``) when triage returns or raises."""
    if path is None or not sys.stderr.isatty():
        return None, None
    try:
        size = os.path.getsize(path)
    except OSError:
        return None, None
    if size <= MIN_BYTES:
        return None, None
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from grpo_debug.tools.inputs import STREAM_THRESHOLD, is_compressed

    streamed = size > STREAM_THRESHOLD or is_compressed(Path(path))
    bar = Progress(TextColumn("{task.description:<9}"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                   console=Console(stderr=True), transient=True)
    task = bar.add_task("reading" if streamed else "analysing", total=size if streamed else None)
    bar.start()

    def progress(done: int, total: int | None, phase: str = "reading") -> None:
        if phase == "reading":
            bar.update(task, completed=done, total=total or size)
        else:  # rules and detectors: no byte count, the bar pulses
            bar.update(task, description=phase, total=None)
    return progress, bar
