"""The pure-Python multi-pattern prefilter (neither hyperscan nor google-re2 installed): required literals found
with C-speed searches over a whole chunk, the real patterns run only on the lines that hold one.

Each pattern gets a cover (regex_literals.py): literals of which every match contains one (``word_end``: and
is followed by a non-word byte, from a ``\\b``). The chunk is translated once (``bytes.translate``, C speed)
into the prefilter alphabet (regex_literals.ALPHABET: ASCII lowercase, digits as ``0``, blanks as a space,
rare letters and non-ASCII bytes as one marker byte), so caseless and case-sensitive literals are searched
alike (a wrong-case hit is dropped when its line is confirmed). Then the literals are searched with few passes
of ``re``, whose literal-prefix search runs at memchr speed:

- pivot passes: a pivot byte followed by a trie of what comes after it in each literal it stands for
  (``c(?:eed()|uda()|...)``); each hit's leaf literals are then looked for in the hit's line. Pivots are
  picked greedily while they save passes (``_pick_pivots``: a pass costs ~0.45 ns a byte, each occurrence of
  the pivot byte ~8 ns plus ~3 ns per trie branch);
- plain passes, one per literal no pivot takes (short literals of common bytes: ``nan``, ``tp0``); a literal
  that holds a shorter rare one is folded into it first (the shorter one's hits include its own);
- a pattern without a cover is run over the whole chunk (``re.finditer``, listed in ``full``); one whose only
  way is a back-reference with no literal (``(\\w+)(?:\\s+\\1){8,}``) is listed in ``unprefiltered`` instead
  (a whole-chunk scan for it costs ~60 ns a byte), and the caller scans for it itself.

Every hit is mapped to its line; each candidate line is confirmed with the exact Python patterns of the
literals it holds, on the line decoded as UTF-8 (as callers see it): first from just before the pattern's
first literal hit (a match found there is a match of the line), and on an ASCII line a wholly caseless
pattern runs lowercased over the lowercased line (``_lowered``: ``re`` has no fast search under ``re.I``).
So ``line_hits`` is exact: the lines where a pattern matches, with every pattern that matches each of them.
Speed (bench/bench_prefilter.py): about 2.3x a plain one-regex line loop on bench/gen_log.py's log, more where
a rule regex matches most lines (SGLang rank prefixes), each such line being confirmed.
"""
from __future__ import annotations

import re

from grpo_debug.tools.engine.regex_literals import ALPHABET, byte_freq, required_literals, selectivity

_TAIL = 12           # bytes after the pivot kept in an anchor
_MIN_TAIL = 3        # at least this many
_STRONG = 5e-6       # an anchor expected at most this often per byte of text is selective enough for a pivot
_FOLD = 1e-6        # a literal is folded into a shorter one it holds only when that one is this rare
_PASS_NS = 0.45      # cost of one pass of a literal search, ns per byte
_ATTEMPT_NS = 8.0    # cost of one occurrence of a pivot byte (the trie is tried there), ns ...
_PER_ANCHOR_NS = 3.0  # ... plus this per anchor in its trie (re tries the alternatives one by one)
_HINT = 24            # a confirmation first searches from this many bytes before the line's first hit
_WORD_END = rb"(?![0-9a-z_])"  # in the prefilter alphabet: the next byte is not a word byte


_CASE_UNSAFE = re.compile(r"\\[A-Zxu0-7]|\(\?-i|\(\?[a-zA-Z]*[aLu]|[A-Z]-[^A-Z\]]|[^A-Z\\]-[A-Z]")


def _lowered(p: str, caseless: bool) -> re.Pattern | None:
    """A caseless pattern as a case-sensitive one over lowercased text: the same matches on an ASCII line
    (``re.I`` folds ASCII letters only there), and ``re`` can use its literal-prefix search again. None when
    the pattern is not wholly caseless or lowercasing its text could change what it means (an escape such as
    ``\\S``/``\\x4A``, a range across cases, a scoped flag)."""
    whole = caseless or bool(re.match(r"\(\?[a-z]*i[a-z]*\)", p))
    if not whole or _CASE_UNSAFE.search(p):
        return None
    try:
        return re.compile(re.sub(r"\(\?i:", "(?:", p.lower()).replace("(?i)", ""))
    except re.error:
        return None


def has_backref(p: str) -> bool:
    """Whether a Python regex uses a back-reference (``\\1``, ``(?P=name)``)."""
    return bool(re.search(r"\\[1-9]|\(\?P=", p))


def _lits_below(node: dict) -> set:
    out = set(node.get(None, ()))
    for k, sub in node.items():
        if k is not None:
            out |= _lits_below(sub)
    return out


class _Trie:
    """A pivot's regex: the pivot byte, then a trie of anchor tails; every tail ends in an empty capture group
    whose number says which literals the hit stands for. A tail that extends a shorter one is folded into it
    (the shorter one's hits include the longer one's)."""

    def __init__(self) -> None:
        self.root: dict = {}

    def add(self, tail: bytes, lit) -> None:
        node = self.root
        for b in tail:
            if None in node:
                break  # a shorter tail ends here: fold into it
            node = node.setdefault(b, {})
        else:
            below = _lits_below(node)
            node.clear()  # longer tails below are folded into this one
            node[None] = below
        node.setdefault(None, set()).add(lit)

    def compile(self, pivot: int) -> tuple[re.Pattern, list[set]]:
        """(the regex, group number -> the literals its hit stands for)."""
        groups: list[set] = [set()]

        def emit(node: dict) -> bytes:
            if None in node:
                groups.append(_lits_below(node))
                return b"()"
            keys = sorted((k for k in node if k is not None), key=lambda k: -byte_freq(k))
            alts = [re.escape(bytes([k])) + emit(node[k]) for k in keys]
            return alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"

        return re.compile(re.escape(bytes([pivot])) + emit(self.root)), groups


def _options(lit: bytes) -> dict[int, tuple[float, int]]:
    """pivot byte -> (expected occurrences per byte, position) of the most selective anchor of ``lit`` there."""
    out: dict[int, tuple[float, int]] = {}
    for k in range(len(lit) - _MIN_TAIL):
        e = selectivity(lit[k: k + 1 + _TAIL])
        if e <= _STRONG and (lit[k] not in out or e < out[lit[k]][0]):
            out[lit[k]] = (e, k)
    return out


def _pick_pivots(keys: list[tuple[bytes, bool]]) -> tuple[dict[int, list[tuple[tuple[bytes, bool], int]]], list]:
    """(pivot -> its (literal key, position) anchors, the literal keys left to plain passes). Greedy: the pivot
    whose pass (a literal search plus the trie tried at each occurrence of its byte) saves the most plain
    passes (one per literal it takes), while it saves any."""
    opts = {key: _options(key[0]) for key in keys}
    left = {key for key in keys if opts[key]}
    pivots: dict[int, list[tuple[tuple[bytes, bool], int]]] = {}
    while left:
        count: dict[int, int] = {}
        for key in left:
            for c in opts[key]:
                count[c] = count.get(c, 0) + 1

        def cost(c: int) -> float:  # ns per byte of its pass; the trie's first level has at most ~25 branches
            return _PASS_NS + byte_freq(c) * (_ATTEMPT_NS + _PER_ANCHOR_NS * min(count[c], 25))
        c = max(count, key=lambda c: count[c] * _PASS_NS - cost(c))  # saves the most plain passes
        if cost(c) >= count[c] * _PASS_NS:  # no cheaper than a plain pass per literal
            break
        pivots[c] = [(key, opts[key][c][1]) for key in left if c in opts[key]]
        left -= {key for key, _ in pivots[c]}
    taken = {key for v in pivots.values() for key, _ in v}
    return pivots, [key for key in keys if key not in taken]


def _holds(big: tuple[bytes, bool], small: tuple[bytes, bool]) -> bool:
    """Whether every occurrence of literal ``big`` contains an occurrence of literal ``small`` (with its
    word_end: the byte after it in ``big`` is not a word byte, or it ends ``big`` and ``big`` has word_end)."""
    text, at = big[0], big[0].find(small[0])
    while at >= 0:
        end = at + len(small[0])
        if not small[1] or (end < len(text) and not re.match(_WORD_END, text[end:end + 1])) or \
                (end == len(text) and big[1]):
            return True
        at = text.find(small[0], at + 1)
    return False


class LiteralEngine:
    """The pure-Python engine (module docstring). ``patterns``: (Python regex, caseless) pairs."""

    kind = "re"

    def __init__(self, patterns: list[tuple[str, bool]]):
        self.patterns = patterns
        self.unprefiltered: list[str] = []
        self.full: list[int] = []  # pattern ids run over the whole chunk (no cover)
        self._rx: dict[int, re.Pattern] = {}
        self._lower: dict[int, re.Pattern | None] = {}  # caseless patterns as case-sensitive ones for lowercased ASCII
        lit_pids: dict[tuple[bytes, bool], set[int]] = {}
        for i, (p, ci) in enumerate(patterns):
            try:
                self._rx[i] = re.compile(p, re.I if ci else 0)
                self._lower[i] = _lowered(p, ci)
            except re.error:
                self.unprefiltered.append(p)
                continue
            cover = required_literals(p, ci)
            if cover is None and has_backref(p):
                self.unprefiltered.append(p)
            elif cover is None:
                self.full.append(i)
            for lit, _ci, word_end in cover or ():
                lit_pids.setdefault((lit.translate(ALPHABET), word_end), set()).add(i)
        self._full_rx = {i: re.compile(patterns[i][0], re.M | (re.I if patterns[i][1] else 0)) for i in self.full}
        self._build(lit_pids)

    def _build(self, lit_pids: dict[tuple[bytes, bool], set[int]]) -> None:
        """The pivot passes and the plain passes, each hit mapped to the pattern ids it stands for."""
        kept: list[tuple[bytes, bool]] = []
        stands: dict[tuple[bytes, bool], set[int]] = {}
        for key in sorted(lit_pids, key=lambda k: (len(k[0]), k[1])):  # a literal holding a shorter one: folded
            into = next((q for q in kept if selectivity(q[0]) <= _FOLD and _holds(key, q)), None)
            if into is None:
                kept.append(key)
                stands[key] = set(lit_pids[key])
            else:
                stands[into] |= lit_pids[key]
        pivots, plain = _pick_pivots(kept)
        self._passes: list[tuple[re.Pattern, list | None, set[int]]] = []
        for c, anchors in sorted(pivots.items(), key=lambda kv: byte_freq(kv[0])):
            trie = _Trie()
            for key, k in anchors:
                trie.add(key[0][k + 1: k + 1 + _TAIL], key)
            rx, groups = trie.compile(c)
            leaves = [[(re.compile(re.escape(key[0]) + _WORD_END).search if key[1] else None, key[0], stands[key])
                       for key in sorted(g)] for g in groups]
            self._passes.append((rx, leaves, set()))
        for key in sorted(plain):
            self._passes.append((re.compile(re.escape(key[0]) + (_WORD_END if key[1] else b"")), None, stands[key]))

    def _candidates(self, buf: bytes, t: bytes) -> dict[int, dict[int, int]]:
        """Line start -> {id of a pattern whose literal the line holds: offset of the first such hit} (before
        confirmation). A pivot hit stands for the literals of its trie leaf; each is looked for in the hit's
        line (``bytes.find``)."""
        cand: dict[int, dict[int, int]] = {}
        find, rfind, tfind, n = buf.find, buf.rfind, t.find, len(buf)
        for rx, leaf, pids in self._passes:
            search, pos, ls, le = rx.search, 0, -1, -1
            while (m := search(t, pos)) is not None:
                s = m.start()
                if s >= le:
                    ls = rfind(b"\n", 0, s) + 1
                    le = find(b"\n", s)
                    le = n if le < 0 else le
                if leaf is None:
                    got = pids
                    pos = le + 1
                else:
                    pos = s + 1
                    got = set()
                    for wsearch, lit, lp in leaf[m.lastindex]:
                        if (tfind(lit, ls, le) >= 0) if wsearch is None else (wsearch(t, ls, le) is not None):
                            got |= lp
                    if not got:
                        continue
                cur = cand.get(ls)
                if cur is None:
                    cand[ls] = dict.fromkeys(got, s)
                else:
                    for i in got:
                        if cur.get(i, n) > s:
                            cur[i] = s
        return cand

    def line_hits(self, buf: bytes, limit: int | None = None) -> tuple[list[int], list[set[int]]]:
        """(sorted line-start offsets of the lines of ``buf`` where a pattern matches, the ids of the patterns
        matching each line); at most ``limit`` lines (the first ones). Each candidate pattern is first tried
        from a little before the line's first literal hit (a match found there is a match of the line: ``^``
        and ``\\A`` cannot match past the line start), then over the whole line."""
        cand = self._candidates(buf, buf.translate(ALPHABET))
        text = buf.decode("ascii") if buf.isascii() else None
        if self.full:
            src = text if text is not None else buf.decode("latin-1")  # 1 byte -> 1 char: offsets are bytes
            for i, rx in self._full_rx.items():
                for m in rx.finditer(src):
                    cand.setdefault(buf.rfind(b"\n", 0, m.start()) + 1, {}).setdefault(i, m.start())
        find, n, rxs, low = buf.find, len(buf), self._rx, self._lower
        starts: list[int] = []
        ids: list[set[int]] = []
        for ls in sorted(cand):
            hints = cand[ls]
            le = find(b"\n", ls)
            raw = buf[ls: n if le < 0 else le]
            got = set()
            if text is not None or raw.isascii():  # byte offsets are character offsets
                line, lline, shift = raw.decode("ascii"), None, ls + _HINT
                for i, h in hints.items():
                    rx = low[i]
                    if rx is None:
                        rx, subject = rxs[i], line
                    else:
                        lline = lline if lline is not None else line.lower()
                        subject = lline
                    if (h > shift and rx.search(subject, h - shift)) or rx.search(subject):
                        got.add(i)
            else:
                line = raw.decode("utf-8", "replace")
                got = {i for i in hints if rxs[i].search(line)}
            if got:
                starts.append(ls)
                ids.append(got)
                if limit is not None and len(starts) >= limit:
                    break
        return starts, ids

    def stats(self) -> dict:
        """What the engine searches for (benchmarks, tests): pivot passes, plain literals, whole-chunk patterns."""
        return {"pivot_passes": [rx.pattern[:1] for rx, leaf, _ in self._passes if leaf is not None],
                "plain_literals": [rx.pattern for rx, leaf, _ in self._passes if leaf is None],
                "full_scan": [self.patterns[i][0] for i in self.full], "unprefiltered": list(self.unprefiltered)}
