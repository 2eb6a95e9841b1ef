"""Which candidate lines of a streamed log are kept as text: per-pattern quotas, and routine chatter set aside.

Each prefilter pattern keeps its first ``QUOTA`` and its last ``QUOTA`` lines (``ERROR_QUOTA`` for error,
exception and traceback patterns); a line is kept when any of its patterns still has room. A line pushed out of
every last-lines ring is dropped and counted, per pattern, with its line range (:class:`Dropped`).

A pattern that keeps matching long after its quota is full is routine chatter (a rule's ``\\bTP\\d+\\]`` context
regex matches every rank-prefixed SGLang decode line): :func:`split_noisy` finds which of its top-level
alternatives match the chatter, and the scanner stops scanning for those (the others, e.g. ``Scheduler hit an
exception`` in the same regex, stay). The notes say from which line a pattern was no longer scanned for.
"""
from __future__ import annotations

import contextlib
import contextvars
import re
from collections import deque
from dataclasses import dataclass

from grpo_debug.tools.engine.events import EVENT_PATTERNS

QUOTA = 500            # first and last lines kept of each pattern
ERROR_QUOTA = 2000     # ... of error, exception and traceback patterns
TRACEBACK_QUOTA = 20_000  # traceback frame lines kept at the start and at the end
MAX_KEPT = 200_000     # lines kept by the first-lines quotas in all (the last-lines rings are bounded by quota)
NOISY_LINES = 5000     # lines a pattern matches, past its quota, before it counts as chatter (x10 for errors)
HEAD, TRACE = -1, -2   # pseudo pattern ids: the file's head, a traceback's frames
MIN_SHARE_QUOTA = 50   # a pattern's quota in one of many logs sharing a budget (keep_lines) is never below this
# (head lines, tail lines, share) of the log being scanned: a run folder of N logs gives each 1/N of the budget
_KEEP: contextvars.ContextVar[tuple[int, int, int]] = contextvars.ContextVar("grpo_debug_keep", default=(3000, 1000, 1))


@contextlib.contextmanager
def keep_lines(head: int, tail: int, share: int = 1):
    """Within the block, a scan keeps the first ``head`` and last ``tail`` lines of each log as text, and each
    pattern's quota divided by ``share`` (at least MIN_SHARE_QUOTA): a folder of ``share`` rank logs costs what the
    same bytes cost as one log (issue 21: 60 rank logs took 45 s and 755 MB, one file of their bytes 5 s)."""
    token = _KEEP.set((head, tail, max(1, share)))
    try:
        yield
    finally:
        _KEEP.reset(token)
_ERRORISH = re.compile(r"Error|Exception|Traceback|Exit|Interrupt|Killed|[Ff]atal|FAILED|timeout|OutOfMemory")


@dataclass
class Dropped:
    """Lines of one pattern that were not kept: how many, and the first and last of their line numbers."""

    count: int = 0
    first: int = 0
    last: int = 0


def is_errorish(pattern: str) -> bool:
    """An event pattern or one that names an error, exception, traceback or timeout."""
    return pattern in EVENT_PATTERNS.values() or bool(_ERRORISH.search(pattern))


class Keeper:
    """Per-pattern quotas over the candidate lines that are not metric lines (module docstring)."""

    def __init__(self, patterns: list[tuple[str, bool]]):
        self.quota: dict[int, int] = {TRACE: TRACEBACK_QUOTA}
        self.errorish: set[int] = set()
        self.first: dict[int, int] = {}
        self.rings: dict[int, deque] = {}
        self.matched: dict[int, int] = {}
        self.dropped: dict[int, Dropped] = {}
        self.kept: list[tuple[int, bytes]] = []
        self.full = False  # MAX_KEPT reached: only the last-lines rings take lines
        for i, (p, _) in enumerate(patterns):
            self.add_pattern(i, p)

    def add_pattern(self, pid: int, pattern: str) -> None:
        """Give pattern ``pid`` its quota (larger for error patterns)."""
        share = _KEEP.get()[2]
        err = is_errorish(pattern)
        if err:
            self.errorish.add(pid)
        q = ERROR_QUOTA if err else QUOTA
        self.quota[pid] = q if share == 1 else max(MIN_SHARE_QUOTA, q // share)

    def noisy(self, pid: int) -> bool:
        """Has ``pid`` matched so many lines past its quota that it is chatter?"""
        q = self.quota[pid]
        share = _KEEP.get()[2]
        noisy = max(MIN_SHARE_QUOTA * 4, NOISY_LINES // share)
        return self.first.get(pid, 0) >= q and self.matched.get(pid, 0) >= noisy * (10 if pid in self.errorish else 1)

    def offer(self, no: int, raw: bytes, pids) -> None:
        """Keep line ``no`` if one of its patterns ``pids`` has room among its first lines, else put it in each
        pattern's last-lines ring (a line pushed out of every ring is dropped and counted)."""
        if HEAD in pids:
            self.kept.append((no, raw))
            return
        first, quota, matched = self.first, self.quota, self.matched
        room = False
        for p in pids:
            matched[p] = matched.get(p, 0) + 1
            if first.get(p, 0) < quota[p]:
                first[p] = first.get(p, 0) + 1
                room = True
        if room and not self.full:
            self.kept.append((no, raw))
            self.full = len(self.kept) >= MAX_KEPT
            return
        rec = [no, raw, len(pids), pids]
        for p in pids:
            ring = self.rings.get(p)
            if ring is None:
                ring = self.rings[p] = deque()
            if len(ring) >= quota[p]:
                old = ring.popleft()
                old[2] -= 1
                if old[2] == 0:
                    self._drop(old)
            ring.append(rec)

    def _drop(self, rec: list) -> None:
        no = rec[0]
        for p in rec[3]:
            d = self.dropped.get(p)
            if d is None:
                d = self.dropped[p] = Dropped(0, no, no)
            d.count += 1
            d.last = no

    def lines(self) -> list[tuple[int, bytes]]:
        """Every kept line, the last-lines rings included, in line order."""
        out = {no: raw for no, raw in self.kept}
        for ring in self.rings.values():
            for rec in ring:
                out[rec[0]] = rec[1]
        return sorted(out.items())


def split_noisy(pattern: str, caseless: bool, sample: list[bytes]) -> list[str] | None:
    """The top-level alternatives of ``pattern`` that do not match most of ``sample`` (lines it matched as
    chatter), to go on scanning for; None when every alternative matches the chatter (stop scanning for it all)."""
    from grpo_debug.tools.engine.regex_literals import top_level_branches

    branches = top_level_branches(pattern, re.I if caseless else 0)
    if len(branches) < 2 or not sample:
        return None
    texts = [s.decode("utf-8", "replace") for s in sample]
    keep = []
    for b in branches:
        try:
            rx = re.compile(b, re.M | (re.I if caseless else 0))
        except re.error:  # not a pattern on its own (a group of another branch): keep scanning for it
            keep.append(b)
            continue
        if sum(1 for t in texts if rx.search(t)) * 2 < len(texts):
            keep.append(b)
    return keep if len(keep) < len(branches) and keep else None
