"""Fast path for verl's per-step metric lines in a streamed log: one compiled template per key layout.

verl's console logger (``verl/utils/tracking.py`` ``LocalLogger``; ``verl/utils/logger/aggregate_logger.py``
``concat_dict_to_str``: ``f"step:{step} - " + " - ".join(f"{k}:{v}")``) prints one line per step with the same
keys in the same order, usually 40-120 of them, each behind the same Ray prefix (``(TaskRunner pid=N)`` with
ANSI colours). The general path decodes each such line, normalises it (engine/normalize.py) and splits it into
``key:value`` items (engine/metrics.py ``_verl_pairs``): about 40 us a line of 60 values, most of a metric-dense
log's triage time (issue 15).

Here a line is parsed as bytes by the template of an earlier line with the same keys: ``step:(\\d+) - k1:(v) -
k2:(v) ...`` (one ``fullmatch``, the values converted by ``float`` in C), when its prefix before ``step:`` is one
normalisation strips whole. A template is learned only from a line the general path parsed as verl, and only if
it reproduces that line exactly, so the fast path gives the same step, keys and values as the general path for
every line it takes (tests/test_verl_lines.py checks both paths on the same lines). Any line it does not take
(new keys, a value that is not a plain number, ``\\r``, trailing blanks, non-ASCII, an unknown prefix) goes to
the general path.
"""
from __future__ import annotations

import re

from grpo_debug.tools.engine.normalize import MAX_LINE_CHARS, normalize_line

MAX_TEMPLATES = 8      # key layouts tried per line (most recently used first): training, validation, ... lines
MAX_KEYS = 1000        # a layout with more keys is left to the general path
MAX_PREFIXES = 4096    # prefix verdicts cached (a timestamped prefix differs on every line: then computed each time)
_VALUE = rb"([\w.+-]+)"  # a plain number as Python's float() reads it (digits, sign, point, exponent, nan, inf, _)
_PROBE = "step:0 - k:0"


class VerlTemplates:
    """Templates of verl metric lines seen so far (:meth:`learn`) and the parser that uses them (:meth:`parse`)."""

    def __init__(self) -> None:
        self.templates: list[tuple[re.Pattern, tuple[str, ...]]] = []
        self.prefixes: dict[bytes, bool] = {}

    def _prefix_ok(self, prefix: bytes) -> bool:
        """Whether normalisation strips exactly ``prefix`` from a line that goes on with ``step:`` (Ray and rank
        prefixes, ANSI colours, outer timestamps: every step of normalize_line that can change a line's start is
        anchored there, and none reads past ``step:``)."""
        ok = self.prefixes.get(prefix)
        if ok is None:
            try:
                text = prefix.decode("ascii")
            except UnicodeDecodeError:
                ok = False
            else:
                ok = "\r" not in text and normalize_line(text + _PROBE, 0).text == _PROBE
            if len(self.prefixes) < MAX_PREFIXES:
                self.prefixes[prefix] = ok
        return ok

    def parse(self, raw: bytes) -> tuple[float, tuple[str, ...], list[float]] | None:
        """(step, keys, values in key order) of ``raw`` (one line, no newline) if a template takes it, else None.
        Never raises."""
        p = raw.find(b"step:")
        if p < 0 or len(raw) > MAX_LINE_CHARS or (p and not self._prefix_ok(raw[:p])):
            return None
        for i, (rx, keys) in enumerate(self.templates):
            m = rx.fullmatch(raw, p)
            if m is None:
                continue
            try:
                vals = list(map(float, m.groups()))
            except ValueError:  # "1.2.3": the general path reads such a line item by item
                return None
            if i:
                self.templates.insert(0, self.templates.pop(i))
            return vals[0], keys, vals[1:]
        return None

    def learn(self, raw: bytes, keys: tuple[str, ...]) -> bool:
        """Add the template of ``keys`` if it reproduces ``raw``, a line the general path read as verl with these
        keys (in order); whether it was added."""
        if not keys or len(keys) > MAX_KEYS or any(ks == keys for _, ks in self.templates):
            return False
        p = raw.find(b"step:")
        if p < 0 or (p and not self._prefix_ok(raw[:p])):
            return False
        try:
            body = b" - ".join(re.escape(k.encode("ascii")) + b":" + _VALUE for k in keys)
        except UnicodeEncodeError:
            return False
        rx = re.compile(rb"step:(\d+) - " + body)
        if rx.fullmatch(raw, p) is None:
            return False
        self.templates.insert(0, (rx, keys))
        del self.templates[MAX_TEMPLATES:]
        return True
