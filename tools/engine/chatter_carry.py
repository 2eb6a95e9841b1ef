"""Routine chatter learned in one log of a folder, not scanned for again in the next (tools/rundir/merge.py).

A streamed scan (large_logs._Scanner) stops scanning for a pattern's chatter alternatives once it has matched
thousands of lines past its quota (line_quota.split_noisy). In one big file that happens in the first 4 MiB chunk
and every later chunk is scanned without them; a folder of 60 rank logs of 1.4 MB is 60 scans of one chunk each,
so each log offered its few thousand chatter lines to the quotas again (290k lines, a third of the folder's scan
time). Within :func:`carry_chatter`, each scan starts with the demotions earlier scans made (the alternatives
kept as patterns of their own, as ``_demote`` leaves them), as if the logs were one file. Such a pattern's note
says it was learned from an earlier log.
"""
from __future__ import annotations

import contextlib
import contextvars

# (pattern, ignore_case) demoted -> (its alternatives still scanned for, its chatter alternatives); insertion order
_LEARNED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("grpo_debug_chatter", default=None)
FROM_EARLIER = 0  # the ``demoted`` line of a pattern demoted before the log's first line: learned from another log


@contextlib.contextmanager
def carry_chatter():
    """Within the block, the streamed scans share what they learn about chatter (module docstring); inside an
    outer block, the outer one's (a folder of runs, each run's logs merged: tools/rundir/runs.py)."""
    if _LEARNED.get() is not None:
        yield
        return
    token = _LEARNED.set({})
    try:
        yield
    finally:
        _LEARNED.reset(token)


def apply_learned(sc) -> bool:
    """Demote in scanner ``sc`` (a fresh large_logs._Scanner) the patterns earlier scans of the block demoted;
    True when any was (the caller rebuilds its engine)."""
    learned = _LEARNED.get()
    if not learned:
        return False
    changed = False
    for (pat, ci), (keep, chatter) in learned.items():
        p = next((i for i in sc.active if sc.patterns[i] == (pat, ci)), None)
        if p is None:
            continue
        sc.active.remove(p)
        sc.demoted[p] = FROM_EARLIER
        sc.chatter[p] = list(chatter)
        sc.keep_alternatives(p, keep, ci)
        changed = True
    return changed


def record(pattern: tuple[str, bool], keep: list[str], chatter: list[str]) -> None:
    """Remember that ``pattern`` was demoted (``keep``: its alternatives still scanned for, ``chatter``: those no
    longer scanned for) for the next scans of the block; nothing outside :func:`carry_chatter`."""
    learned = _LEARNED.get()
    if learned is not None:
        learned.setdefault(pattern, (list(keep), list(chatter)))
