"""The pure-Python multi-pattern prefilter (neither hyperscan nor google-re2 installed): required literals found
with C-speed searches over a whole chunk, the real patterns run only where one of them is.

Each pattern is cut into its top-level alternatives (regex_literals.top_level_branches; "units"), and each unit
gets a cover (regex_literals.literal_spans): literals of which every match contains one, with how far from the
match's start each can be (``word_end``: the literal is followed by a non-word byte, from a ``\\b``). The chunk
is translated once (``bytes.translate``, C speed) into the prefilter alphabet (regex_literals.ALPHABET: ASCII
lowercase, digits as ``0``, blanks as a space, control and non-ASCII bytes as marker bytes), so
caseless and case-sensitive literals are searched alike. Routine chatter translates to few distinct lines
(timestamps, counters and ids become zeros): a chunk whose translated lines repeat is searched once per
distinct line (``bytes.split`` + ``dict.fromkeys``, C speed) and the lines holding a literal are found back
with ``itertools.compress``. The literals are searched with few passes of ``re``, whose literal-prefix search
runs at memchr speed:

- pivot passes: a pivot byte followed by a trie of what comes after it in each literal it stands for
  (``c(?:eed()|uda()|...)``); each hit's leaf literals are then looked for in the hit's line. Pivots are
  picked greedily while they save passes (``_pick_pivots``: a pass costs ~0.45 ns a byte, each occurrence of
  the pivot byte ~8 ns plus ~3 ns per trie branch);
- plain passes, one per literal no pivot takes (short literals of common bytes: ``nan``, ``tp0``); a literal
  that holds a shorter rare one is folded into it first (the shorter one's hits include its own);
- a unit without a cover is run over the whole chunk (``re.finditer``, listed in ``full``); a pattern whose only
  way is a back-reference with no literal (``(\\w+)(?:\\s+\\1){8,}``) is listed in ``unprefiltered`` instead
  (a whole-chunk scan for it costs ~60 ns a byte), and the caller scans for it itself.

Each candidate unit is confirmed on the line with the exact Python pattern (the line decoded as callers see it),
planned once per distinct translated line (``_plan``): on an ASCII line, ``match`` at each offset where a match
can start (a literal occurrence less its offset in a match: ``\\w(?:Error|Exit)\\b`` is tried one character
before each ``error``), else ``search`` from the first offset where one can start (a caseless pattern
lowercased over the lowercased line: ``re`` has no fast search under ``re.I``). A unit that reads lines only
through the alphabet (regex_literals.translation_invariant: caseless ``\\bTP\\d+\\]``) is confirmed once per
distinct translated ASCII line without tab, CR, VT or FF, its answer reused for the others. So ``line_hits`` is
exact: the lines where a pattern matches, with every pattern that matches each of them.
Speed (bench/bench_prefilter.py, 150 MB, against a plain one-regex line loop over the same file): 0.6x on
bench/gen_log.py's log, 1.6-1.8x on bench/gen_real_log.py's with a rule regex matching 70% of its lines (SGLang
rank prefixes), 0.9x without it (as streaming runs it). The floor is the chunk's translate, split and hashing,
~1.6 ns a byte (the loop: ~5). What costs more: distinct lines holding literals, each planned and confirmed
(~50 us for a 2 kB verl metric line: ~3x the loop on a log of 8 ranks' metric lines), and logs whose lines
are all distinct and full of the patterns' words (prose: ~6x, as before the dedupe).
"""
from __future__ import annotations

import functools
import re
from itertools import accumulate, compress, count

from grpo_debug.tools.engine.regex_literals import (ALPHABET, NONASCII, UNBOUNDED, analyse_alternative, byte_freq,
                                                    required_literals, searchable_in_chunk, selectivity,
                                                    top_level_branches)

_TAIL = 12           # bytes after the pivot kept in an anchor
_MIN_TAIL = 3        # at least this many
_STRONG = 5e-6       # an anchor expected at most this often per byte of text is selective enough for a pivot
_FOLD = 1e-6        # a literal is folded into a shorter one it holds only when that one is this rare
_PASS_NS = 0.45      # cost of one pass of a literal search, ns per byte
_ATTEMPT_NS = 8.0    # cost of one occurrence of a pivot byte (the trie is tried there), ns ...
_PER_ANCHOR_NS = 3.0  # ... plus this per anchor in its trie (re tries the alternatives one by one)
_SPAN = 8             # a literal whose offset in a match varies more: search from the first offset instead of match
_MAX_TRIES = 24       # match offsets per unit and line before one search is cheaper
_DEDUPE_MIN = 1 << 16  # a chunk this large is split into lines and searched once per distinct translated line
_PLAN_BYTES = 8 << 20  # bytes of translated lines whose confirmation plans are kept between chunks (memory bound)
_MAX_DIRTY = 20_000   # lines with a tab/CR/VT/FF in a chunk before invariant units are confirmed on every line
_NONE: list = []      # the plan of a line where no candidate unit can match
# how a unit is confirmed: match at offsets (its literals' offsets vary by at most _SPAN), search from the first
# offset where a match can start (bounded offsets), search the line, or no cover (run over the whole chunk)
_MATCH, _FROM, _SEARCH, _FULL = 0, 1, 2, 3
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
        self.full: list[int] = []  # pattern ids with an alternative run over the whole chunk (no cover)
        self._units: list[tuple] = []  # (pattern id, regex, lowered regex or None, _MATCH/_FROM/_SEARCH/_FULL, invariant)
        self._plans: dict[bytes, list] = {}  # translated line -> its confirmation plan (kept between chunks)
        self._plan_bytes = 0
        lit_refs: dict[tuple[bytes, bool], list[tuple[int, bytes, int, int]]] = {}
        for i, (p, ci) in enumerate(patterns):
            alts = _analyse(p, bool(ci))
            if alts is None:
                self.unprefiltered.append(p)
                continue
            for rx, low, spans, invariant in alts:
                u = len(self._units)
                mode = _FULL if spans is None else _MATCH if all(hi - lo <= _SPAN for _, _, lo, hi in spans) else \
                    _FROM if all(hi < UNBOUNDED for _, _, _, hi in spans) else _SEARCH
                self._units.append((i, rx, low, mode, invariant))
                if spans is None:
                    self.full += [] if i in self.full else [i]
                for lit, word_end, lo, hi in spans or ():
                    lit_refs.setdefault((lit, word_end), []).append((u, lit, lo, hi))
        self._full_rx = [(u, re.compile(unit[1].pattern, re.M | unit[1].flags),
                          searchable_in_chunk(unit[1].pattern, bool(unit[1].flags & re.I)))
                         for u, unit in enumerate(self._units) if unit[3] == _FULL]
        self._build(lit_refs)

    def _build(self, lit_refs: dict[tuple[bytes, bool], list[tuple[int, bytes, int, int]]]) -> None:
        """The pivot passes and the plain passes; each hit stands for a searched literal (an index into
        ``_refs``: the (unit, literal, lo, hi) of it and of the longer literals folded into it)."""
        kept: list[tuple[bytes, bool]] = []
        refs: dict[tuple[bytes, bool], list] = {}
        for key in sorted(lit_refs, key=lambda k: (len(k[0]), k[1])):  # a literal holding a shorter one: folded
            into = next((q for q in kept if selectivity(q[0]) <= _FOLD and _holds(key, q)), None)
            if into is None:
                kept.append(key)
                refs[key] = list(lit_refs[key])
            else:
                refs[into] += lit_refs[key]
        index = {key: k for k, key in enumerate(kept)}
        # per searched literal: (it, [(unit, literal, lo, hi, where the searched literal is in that literal)])
        self._refs = [(key[0], [(u, lit, lo, hi, lit.find(key[0])) for u, lit, lo, hi in refs[key]]) for key in kept]
        pivots, plain = _pick_pivots(kept)
        self._passes: list[tuple[re.Pattern, list | None, int]] = []
        for c, anchors in sorted(pivots.items(), key=lambda kv: byte_freq(kv[0])):
            trie = _Trie()
            for key, k in anchors:
                trie.add(key[0][k + 1: k + 1 + _TAIL], key)
            rx, groups = trie.compile(c)
            leaves = [[(re.compile(re.escape(key[0]) + _WORD_END).search if key[1] else None, key[0], index[key])
                       for key in sorted(g)] for g in groups]
            self._passes.append((rx, leaves, -1))
        for key in sorted(plain):
            self._passes.append((re.compile(re.escape(key[0]) + (_WORD_END if key[1] else b"")), None, index[key]))

    def _candidates(self, t: bytes) -> dict[int, set[int]]:
        """Line start in ``t`` (translated text) -> the searched literals (``_refs`` indices) the line holds. A
        pivot hit stands for the literals of its trie leaf; each is looked for in the hit's line (``bytes.find``)."""
        cand: dict[int, set[int]] = {}
        find, rfind, n = t.find, t.rfind, len(t)
        for rx, leaf, ref in self._passes:
            search, pos, ls, le = rx.search, 0, -1, -1
            tried: set[int] = set()  # leaf literals already looked for in this line
            while (m := search(t, pos)) is not None:
                s = m.start()
                if s >= le:
                    ls = rfind(b"\n", 0, s) + 1
                    le = find(b"\n", s)
                    le = n if le < 0 else le
                    tried = set()
                cur = cand.get(ls)
                if cur is None:
                    cur = cand[ls] = set()
                if leaf is None:
                    cur.add(ref)
                    pos = le + 1
                    continue
                pos = s + 1
                for wsearch, lit, k in leaf[m.lastindex]:
                    if k not in tried:
                        tried.add(k)
                        if (find(lit, ls, le) >= 0) if wsearch is None else (wsearch(t, ls, le) is not None):
                            cur.add(k)
        return {ls: c for ls, c in cand.items() if c}

    def _lines(self, t: bytes) -> tuple[list[int], list[bytes], dict[bytes, set[int]]]:
        """(the start of each candidate line in order, its translated line, translated line -> the searched
        literals it holds). A chunk whose translated lines repeat (digits are 0, case is gone: routine chatter)
        is searched once per distinct line."""
        lines = t.split(b"\n") if len(t) >= _DEDUPE_MIN else None
        uniq = dict.fromkeys(lines) if lines is not None else {}
        if lines is None or len(uniq) * 2 > len(lines):
            cand = self._candidates(t)
            find, n, lss, tls, found = t.find, len(t), sorted(cand), [], {}
            for ls in lss:
                le = find(b"\n", ls)
                tl = t[ls: n if le < 0 else le]
                tls.append(tl)
                found[tl] = cand[ls]
            return lss, tls, found
        st = b"\n".join(uniq)
        find, n, found = st.find, len(st), {}
        for ls, got in self._candidates(st).items():
            le = find(b"\n", ls)
            found[st[ls: n if le < 0 else le]] = got
        offs = list(accumulate(map(len, lines), initial=0))
        idx = list(compress(count(), map(found.__contains__, lines)))
        return [offs[i] + i for i in idx], [lines[i] for i in idx], found

    def _plan(self, tl: bytes, refs: set[int]) -> list:
        """How to confirm the units of the searched literals ``refs`` found on a line translated as ``tl``:
        [entries of translation-invariant units, other entries, whether the line is ASCII, the invariant units'
        answer once known, whether there are only those on an ASCII line]. An entry is
        (pattern id, regex, lowered regex, positions, start): positions are the offsets to ``match`` at on an
        ASCII line (every match starts at one: a literal occurrence less its offset in a match), else None and
        ``search`` from start."""
        occs: dict[int, list[tuple[int, int, list[int]]]] = {}  # unit -> (lo, hi, where its literal is)
        where: dict[bytes, list[int]] = {}  # literal -> where it is in the line
        find, starts = tl.find, tl.startswith
        for k in refs:
            key, lits = self._refs[k]
            found = where.get(key)
            if found is None:
                found = where[key] = []
                h = find(key)
                while h >= 0:
                    found.append(h)
                    h = find(key, h + 1)
            for u, lit, lo, hi, j in lits:
                hs = where.get(lit)
                if hs is None:  # a longer literal folded into the searched one: where it holds it
                    hs = where[lit] = [h - j for h in found if h >= j and starts(lit, h - j)]
                if hs:  # (a unit whose literal came from a shorter one folded into it may be missing)
                    o = occs.get(u)
                    if o is None:
                        occs[u] = [(lo, hi, hs)]
                    else:
                        o.append((lo, hi, hs))
        inv, rest = [], []
        units = self._units
        for u, occ in occs.items():
            pid, rx, low, mode, invariant = units[u]
            poss, start = None, 0
            if mode == _MATCH:
                if len(occ) == 1 and len(occ[0][2]) == 1:  # one literal once: the usual case
                    lo, hi, (h,) = occ[0]
                    poss = list(range(max(0, h - hi), h - lo + 1))
                else:
                    poss = sorted({h - d for lo, hi, hs in occ for h in hs for d in range(lo, hi + 1) if d <= h})
                if len(poss) > _MAX_TRIES:
                    poss, start = None, poss[0]
            elif mode == _FROM:
                start = max(0, min(hs[0] - hi for _, hi, hs in occ))
            (inv if invariant else rest).append((pid, rx, low, poss, start))
        ascii_line = NONASCII not in tl
        return [inv, rest, ascii_line, None, bool(inv) and not rest and ascii_line] if inv or rest else _NONE

    def line_hits(self, buf: bytes, limit: int | None = None) -> tuple[list[int], list[set[int]]]:
        """(sorted line-start offsets of the lines of ``buf`` where a pattern matches, the ids of the patterns
        matching each line); at most ``limit`` lines (the first ones). See line_hits_stopped."""
        starts, ids, _stopped = self.line_hits_stopped(buf, limit)
        return starts, ids

    def line_hits_stopped(self, buf: bytes, limit: int | None = None) -> tuple[list[int], list[set[int]], bool]:
        """``line_hits`` and whether it stopped at ``limit`` lines before the last matching line of ``buf``.
        Each candidate unit is confirmed on the
        line with ``match`` at each offset where one of its matches can start (ASCII lines, literals at a bounded
        offset in a match), else with ``search`` from the first offset where a match can start; a translation-
        invariant unit once per distinct translated ASCII line without tab, CR, VT or FF."""
        lss, tls, found = self._lines(buf.translate(ALPHABET))
        extra = self._full_scan(buf) if self._full_rx else {}
        plans = self._plans
        if self._plan_bytes > _PLAN_BYTES:  # metric lines are all distinct: their plans are not kept forever
            plans.clear()
            self._plan_bytes = 0
        starts: list[int] = []
        ids: list[set[int]] = []
        stop = limit if limit is not None and not extra else None
        dirty = None  # line starts with a tab, CR, VT or FF (computed when first needed); False: too many
        get = plans.get
        for ls, tl in zip(lss, tls):
            plan = get(tl)
            if plan is None:
                plan = plans[tl] = self._plan(tl, found[tl])
                self._plan_bytes += len(tl)
            if plan is _NONE:
                continue
            if plan[2] and plan[0]:  # invariant units on an ASCII line: answered once per translated line
                if dirty is None:
                    dirty = _odd_blank_lines(buf)
                if dirty is not False and ls not in dirty:
                    known = plan[3]
                    if known is None:
                        known = plan[3] = _confirm(plan[0], buf[ls: ls + len(tl)])
                    if plan[4]:
                        if not known:
                            continue
                        got = set(known)
                    else:
                        got = known | _confirm(plan[1], buf[ls: ls + len(tl)], known)
                else:
                    got = _confirm(plan[0] + plan[1], buf[ls: ls + len(tl)])
            else:
                got = _confirm(plan[0] + plan[1] if plan[0] else plan[1], buf[ls: ls + len(tl)])
            if got:
                if stop is not None and len(starts) >= stop:
                    return starts, ids, True
                starts.append(ls)
                ids.append(got)
        if extra:
            starts, ids = self._merge(buf, starts, ids, extra)
            if limit is not None and len(starts) > limit:
                return starts[:limit], ids[:limit], True
        return starts, ids, False

    def _full_scan(self, buf: bytes) -> dict[int, set[int]]:
        """Line start -> the units without a cover that may match the line. A unit whose line matches are matches
        in the whole text (regex_literals.searchable_in_chunk) is searched over the whole chunk, from the next
        line on after each hit (a hit that runs on into the next line hides nothing); another one is searched
        line by line. Each is confirmed on its line afterwards (``_merge``)."""
        ascii_text = buf.isascii()
        src = buf.decode("ascii" if ascii_text else "utf-8", "replace")
        hits: dict[int, set[int]] = {}  # line start in src (characters) -> units
        find, rfind = src.find, src.rfind
        for u, rx, whole in self._full_rx:
            if whole:
                search, pos = rx.search, 0
                while (m := search(src, pos)) is not None:
                    s = m.start()
                    hits.setdefault(rfind("\n", 0, s) + 1, set()).add(u)
                    pos = find("\n", s) + 1
                    if pos == 0:
                        break
            else:
                cs = 0
                for ln in src.split("\n"):
                    if rx.search(ln):
                        hits.setdefault(cs, set()).add(u)
                    cs += len(ln) + 1
        if ascii_text or not hits:
            return hits
        out, line, prev = {}, 0, 0  # character offsets of line starts -> byte offsets, through line numbers
        offs = list(accumulate(map(len, buf.split(b"\n")), initial=0))
        for cs in sorted(hits):
            line += src.count("\n", prev, cs)
            prev = cs
            out[offs[line] + line] = hits[cs]
        return out

    def _merge(self, buf: bytes, starts: list[int], ids: list[set[int]], extra: dict[int, set[int]]):
        """The confirmed lines with those where a unit without a cover matches."""
        res = dict(zip(starts, ids))
        find, n = buf.find, len(buf)
        for ls, us in extra.items():
            le = find(b"\n", ls)
            line = buf[ls: n if le < 0 else le].decode("utf-8", "replace")
            got = {self._units[u][0] for u in us if self._units[u][1].search(line)}
            if got:
                res.setdefault(ls, set()).update(got)
        keys = sorted(res)
        return keys, [res[k] for k in keys]

    def stats(self) -> dict:
        """What the engine searches for (benchmarks, tests): pivot passes, plain literals, whole-chunk patterns."""
        return {"pivot_passes": [rx.pattern[:1] for rx, leaf, _ in self._passes if leaf is not None],
                "plain_literals": [rx.pattern for rx, leaf, _ in self._passes if leaf is None],
                "full_scan": [self.patterns[i][0] for i in self.full], "unprefiltered": list(self.unprefiltered)}


@functools.lru_cache(maxsize=4096)
def _analyse(p: str, ci: bool) -> tuple | None:
    """A pattern's units (top-level alternatives): (regex, lowered regex or None, literal spans in the prefilter
    alphabet as (literal, word_end, lo, hi) or None when it has no cover, translation-invariant); None when no
    engine can take the pattern (it does not compile, or its only way is a back-reference with no literal).
    Cached: large-log streaming rebuilds its engine when it sets chatter patterns aside."""
    try:
        re.compile(p, re.I if ci else 0)
    except re.error:
        return None
    if has_backref(p) and required_literals(p, ci) is None:
        return None
    out = []
    for alt in top_level_branches(p, re.I if ci else 0):
        spans, invariant = analyse_alternative(alt, ci)
        tspans = None if spans is None else tuple(sorted(
            {(lit.translate(ALPHABET), we, lo, hi) for lit, _ci, we, lo, hi in spans}))
        out.append((re.compile(alt, re.I if ci else 0), _lowered(alt, ci), tspans, invariant))
    return tuple(out)


def _odd_blank_lines(buf: bytes) -> set[int] | bool:
    """The starts of the lines of ``buf`` that hold a tab, CR, VT or FF (translated as a space), or False
    when there are more than _MAX_DIRTY of them."""
    out: set[int] = set()
    find, rfind = buf.find, buf.rfind
    for b in b"\t\r\x0b\x0c":
        i = find(b)
        while i >= 0:
            out.add(rfind(b"\n", 0, i) + 1)
            if len(out) > _MAX_DIRTY:
                return False
            e = find(b"\n", i)
            i = find(b, e) if e >= 0 else -1
    return out


def _confirm(plan: list[tuple], raw: bytes, skip: frozenset | set = frozenset()) -> set[int]:
    """The pattern ids of ``plan`` (not in ``skip``) that match the line ``raw`` (bytes, no newline)."""
    got: set[int] = set()
    if raw.isascii():
        line, lower = raw.decode("ascii"), None
        for pid, rx, low, poss, start in plan:
            if pid in got or pid in skip:
                continue
            if poss is not None:
                match = rx.match
                for p in poss:
                    if match(line, p) is not None:
                        got.add(pid)
                        break
            elif low is not None:
                if lower is None:
                    lower = line.lower()
                if low.search(lower, start) is not None:
                    got.add(pid)
            elif rx.search(line, start) is not None:
                got.add(pid)
    else:
        line = raw.decode("utf-8", "replace")
        for pid, rx, _low, _poss, _start in plan:
            if pid not in got and pid not in skip and rx.search(line) is not None:
                got.add(pid)
    return got
