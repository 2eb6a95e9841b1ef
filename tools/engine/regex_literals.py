"""Required literals of a regex: a small set of byte strings such that every match of the pattern contains at
least one of them (a "cover"). The pure-Python prefilter (prefilter_python.py) finds these with C-speed literal
searches over a whole chunk and runs the real pattern only on the lines that hold one.

A cover is read from the parse tree of Python's own regex parser (``re._parser``; ``sre_parse`` before 3.11):
a run of literal characters is a cover of a sequence, so is the cover of one of its mandatory parts (a group,
a repeat with a minimum of one or more); an alternation is covered by the union of its branches' covers, and
has none when one branch has none. Literals are UTF-8 bytes; literals of a caseless part are lowercased (to
be searched in the lowercased text: ASCII case folding, which is what ``bytes.lower`` does), and a non-ASCII
letter with other case forms ends a caseless run. Among the covers of a sequence the cheapest is kept
(``_lit_cost``: fewer literals, rare bytes, few expected false hits; byte frequencies of real logs). Zero-width items (``^``, ``$``, ``\\b``, look-arounds) do not end a run: the
characters on both sides are adjacent in the text. A pattern with no cover (``\\d+\\.\\d+``, ``(\\w+)\\s+\\1``)
gets ``None``: the caller must scan for it another way (prefilter_python.py says how).
"""
from __future__ import annotations

import functools
import os
import re

try:  # Python 3.11+
    import re._constants as _c
    import re._parser as _p
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _p  # type: ignore[no-redef]

MIN_LITERAL = 2       # shorter literals match nearly every line: no cover
_MAX_RUN = 32         # longer literals add nothing to selectivity and cost more per search
_REPEATS = (_c.MAX_REPEAT, _c.MIN_REPEAT) + ((_c.POSSESSIVE_REPEAT,) if hasattr(_c, "POSSESSIVE_REPEAT") else ())
_ZERO_WIDTH = (_c.AT, _c.ASSERT, _c.ASSERT_NOT)
_ATOMIC = getattr(_c, "ATOMIC_GROUP", object())

# Percent of the bytes of lowercased console logs that are this byte (measured on verl/SGLang-style logs of
# bench/gen_log.py and bench/gen_real_log.py, 40 MB); any other byte: DEFAULT_FREQ.
LOG_FREQ = {
    " ": 9.94, "e": 5.68, "0": 5.36, "t": 5.1, "1": 3.83, "r": 3.72, "n": 3.52, "p": 3.38, "i": 3.37, "o": 3.14,
    ".": 2.81, ":": 2.76, "s": 2.65, "2": 2.57, "d": 2.54, "3": 2.39, "g": 2.25, "a": 2.21, "6": 2.1, "u": 1.99,
    "[": 1.74, "m": 1.73, ",": 1.59, "h": 1.43, "4": 1.37, "/": 1.34, "l": 1.32, "-": 1.31, "k": 1.3, "\x1b": 1.26,
    "c": 1.26, "=": 1.18, "5": 1.14, "7": 1.06, "#": 0.88, "(": 0.86, ")": 0.85, "8": 0.78, "_": 0.74, "9": 0.72,
    "\n": 0.71, "q": 0.63, "f": 0.59, "b": 0.51, "v": 0.48, "]": 0.48, "w": 0.46, "y": 0.32, '"': 0.29, "|": 0.16,
    "'": 0.1, "{": 0.05, "}": 0.05, "%": 0.05, "x": 0.1, "z": 0.05, "j": 0.02, "!": 0.02, "<": 0.02, ">": 0.02,
}
DEFAULT_FREQ = 0.005
_FREQ = [LOG_FREQ.get(chr(b), DEFAULT_FREQ) for b in range(256)]

# The prefilter alphabet (prefilter_python.py translates each chunk with ALPHABET before searching): ASCII
# lowercase, every digit written as 0, every blank but the newline as a space, the control bytes as CTRL (SEP
# for \\x1c-\\x1f, which ``\\s`` matches) and every non-ASCII byte as NONASCII (a translated line without it was
# ASCII); punctuation, the newline and ESC stay themselves. On ASCII text the bytes each alphabet byte stands for
# are alike for ``\\w``, ``\\d``, ``\\s`` and ``\\b``, and differ only in case or digit (translation_invariant
# relies on it: a caseless pattern of letters, ``\\d``, ``\\b`` gives a line's answer to every line translated
# alike). Routine chatter translates to few distinct lines (timestamps, counters, ids become zeros).
NONASCII, CTRL, SEP = 1, 2, 3


def _alphabet() -> bytes:
    t = bytearray(bytes(range(256)).lower())
    for b in range(256):
        if b >= 0x80:
            t[b] = NONASCII
        elif b < 0x20 and b not in b"\n\x1b":
            t[b] = CTRL
    for b in b"\x1c\x1d\x1e\x1f":
        t[b] = SEP
    for b in b"0123456789":
        t[b] = ord("0")
    for b in b"\t\r\x0b\x0c":
        t[b] = ord(" ")
    return bytes(t)


ALPHABET = _alphabet()
_AFREQ = [0.0] * 256  # frequency (fraction) of each byte of the translated text
for _b in range(256):
    _AFREQ[ALPHABET[_b]] += _FREQ[_b] / 100


def byte_freq(b: int) -> float:
    """Fraction of the bytes of a translated log (ALPHABET) that are byte ``b``."""
    return _AFREQ[b]


# Occurrences per byte of the commonest words of RL training logs (verl/SGLang/vLLM logs of the bench generators
# and the corpus cases): a literal inside one of them is at least that frequent, whatever its letters say.
COMMON_WORDS = {
    "token": 4.1e-3, "info": 3.5e-3, "throughput": 3.1e-3, "running": 2.5e-3, "usage": 2.4e-3, "cache": 2.2e-3,
    "httpserver": 3.6e-3, "reqs": 2e-3, "http": 1.6e-3, "post": 1.6e-3, "batch": 1.6e-3, "generation": 1.5e-3,
    "python": 1.5e-3, "cuda": 1.4e-3, "fsdp": 1.4e-3, "queue": 1.4e-3, "true": 1.3e-3, "engine": 1.2e-3,
    "line": 1.1e-3, "workerdict": 1.1e-3, "file": 1.1e-3, "packages": 1.1e-3, "torch": 1.1e-3, "graph": 1.1e-3,
    "decode": 1.1e-3, "rate": 1.1e-3, "prompt": 1e-3, "waiting": 1e-3, "prefix": 9.7e-4, "generate": 9.7e-4,
    "error": 9.6e-4, "loggers": 9.5e-4, "completions": 8.7e-4, "training": 8.5e-4, "rank": 8.4e-4, "site": 8.2e-4,
    "distributed": 7.5e-4, "model": 7.4e-4, "rollout": 6.8e-4, "loading": 6.8e-4, "critic": 6.6e-4,
    "validation": 6.4e-4, "request": 6.2e-4, "memory": 6.2e-4, "futurewarning": 6.1e-4, "weights": 6e-4,
    "progress": 5.9e-4, "deprecated": 5.9e-4, "actor": 5.8e-4, "taskrunner": 5.8e-4, "self": 5.7e-4,
    "took": 5.7e-4, "state_dict": 5.7e-4, "being": 5.7e-4, "step": 5.6e-4, "agentloopworker": 5.4e-4,
    "vllm": 5.3e-4, "finished": 5.2e-4, "model_runner": 5.1e-4, "mean": 4.7e-4, "verl": 4.5e-4, "worker": 4.1e-4,
    "trainer": 3.7e-4, "local": 3.7e-4, "version": 3.5e-4, "rewards": 3.4e-4, "workspace": 3.3e-4, "size": 3.1e-4,
    "this": 3.1e-4, "with": 3.1e-4, "megatron": 3.1e-4, "prefill": 3e-4, "when": 2.9e-4, "after": 2.9e-4,
    "checkpoint": 2.8e-4, "layers": 2.7e-4, "loss": 2.6e-4, "last": 2.5e-4, "number": 2.5e-4, "cluster": 2.4e-4,
    "global_seqlen": 2.3e-4, "args": 2.3e-4, "failed": 2.3e-4, "output": 2.1e-4, "please": 2e-4, "repeated": 2e-4,
    "across": 2e-4, "timing_s": 1.9e-4, "sglang": 1.8e-4, "server": 1.6e-4, "traceback": 1.6e-4,
    "iteration": 1e-4, "warning": 1e-4, "process": 1e-4, "update": 1e-4, "response": 1.7e-4, "length": 1.7e-4,
}


@functools.lru_cache(maxsize=65536)
def selectivity(lit: bytes) -> float:
    """Expected occurrences per byte of text of a literal of the prefilter alphabet: the product of its bytes'
    frequencies, or more when it is part of a common log word (COMMON_WORDS)."""
    e = 1.0
    for b in lit:
        e *= _AFREQ[b]
    return max(e, _common_parts().get(lit, 0.0))


@functools.lru_cache(maxsize=1)
def _common_parts() -> dict[bytes, float]:
    """Every substring of a COMMON_WORDS word (in the prefilter alphabet) -> the highest frequency of a word
    holding it."""
    out: dict[bytes, float] = {}
    for w, f in COMMON_WORDS.items():
        t = w.encode().translate(ALPHABET)
        for i in range(len(t)):
            for j in range(i + 1, len(t) + 1):
                if out.get(t[i:j], 0.0) < f:
                    out[t[i:j]] = f
    return out


Cover = frozenset  # of (literal bytes, caseless)


def _lit_cost(lit: bytes) -> float:
    """Search cost of one literal for the pure-Python prefilter: one more literal to look for, plus its expected
    false hits (a short literal of common bytes hits every line)."""
    return 1.0 + 1e4 * selectivity(lit.translate(ALPHABET)) + 0.5 / len(lit)


def _cost(cover: Cover) -> float:
    return sum(_lit_cost(lit) for lit, *_ in cover)


_WORD = frozenset(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")


UNBOUNDED = 1 << 30  # an offset bound meaning "no bound"


def _literal(run: bytes, ci: bool, word_end: bool, lo: int, hi: int) -> tuple[bytes, bool, bool, int, int]:
    """(literal, caseless, word_end, lo, hi): a run cut to _MAX_RUN bytes, and where it starts in a match."""
    s = bytes(run)
    if len(s) > _MAX_RUN:  # keep the middle: the start is often a common word ("CUDA ", "The ")
        mid = (len(s) - _MAX_RUN) // 2
        s, word_end, lo, hi = s[mid: mid + _MAX_RUN], False, lo + mid, hi + mid
    return (s.lower() if ci else s), ci, word_end, lo, min(hi, UNBOUNDED)


def _char_bytes(code: int, ci: bool) -> bytes | None:
    """The UTF-8 bytes of a literal character when a byte search can stand for it (ASCII, or a non-ASCII
    character that has no other case when the search is caseless), else None."""
    if code < 128:
        return bytes([code])
    ch = chr(code)
    if ci and (ch.lower() != ch or ch.upper() != ch):
        return None
    return ch.encode("utf-8")


def _class_byte(op, av) -> bytes | None:
    """``\\d`` / ``[0-9]`` and ``\\s``: the one byte of the prefilter alphabet they are written as."""
    if op is _c.IN and len(av) == 1:
        kind, val = av[0]
        if (kind is _c.CATEGORY and val is _c.CATEGORY_DIGIT) or (kind is _c.RANGE and val == (48, 57)):
            return b"0"
        if kind is _c.CATEGORY and val is _c.CATEGORY_SPACE:
            return b" "
    return None


def _alts(op, av, ci: bool) -> list[bytes] | None:
    """The few byte strings one item can match, when it is that simple: a literal, ``\\d``/``\\s``, a class
    of up to 4 literals (``[Ee]``, ``[: ]``), a group or alternation of plain literals (``(?:it/s|s/it)``,
    ``(?:cuda\\.)?`` -> ``cuda.`` or nothing). None otherwise."""
    if op is _c.LITERAL:
        b = _char_bytes(av, ci)
        return None if b is None else [b]
    if (b := _class_byte(op, av)) is not None:
        return [b]
    if op is _c.IN and 0 < len(av) <= 4 and all(k is _c.LITERAL for k, _ in av):
        out = [_char_bytes(v, ci) for _, v in av]
        return None if None in out else sorted(set(out))
    if op is _c.SUBPATTERN and not av[-3] and not av[-2]:
        return _seq_alts(av[-1], ci)
    if op is _c.BRANCH:
        out = []
        for br in av[1]:
            sub = _seq_alts(br, ci)
            if sub is None:
                return None
            out += sub
        return sorted(set(out)) if len(out) <= _MAX_ALTS else None
    if op in _REPEATS and av[0] == 0 and av[1] == 1:
        sub = _seq_alts(av[2], ci)
        return None if sub is None or len(sub) >= _MAX_ALTS else sorted(set(sub + [b""]))
    return None


def _seq_alts(items, ci: bool) -> list[bytes] | None:
    """The byte strings a sequence of simple items can match (None when one item is not simple or too many)."""
    out = [b""]
    for op, av in items:
        if op in _ZERO_WIDTH:
            continue
        a = _alts(op, av, ci)
        if a is None or len(out) * len(a) > _MAX_ALTS:
            return None
        out = [x + y for x in out for y in a]
    return out


_MAX_ALTS = 16  # strings a run may fork into (``(?:a|b)(?:c|d)`` -> 4)


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], min(a[1] + b[1], UNBOUNDED)


def _width(state, op, av) -> tuple[int, int]:
    """(fewest, most) characters one parse item matches (most: UNBOUNDED when it has no bound)."""
    try:
        lo, hi = _p.SubPattern(state, [(op, av)]).getwidth()
    except Exception:  # noqa: BLE001 - a construct getwidth does not know: no bound
        return 0, UNBOUNDED
    return min(lo, UNBOUNDED), min(hi, UNBOUNDED)


def _shift(cover: Cover, at: tuple[int, int]) -> Cover:
    """A sub-item's cover with its literals' offsets made relative to the enclosing sequence."""
    return Cover((lit, ci, we, lo + at[0], min(hi + at[1], UNBOUNDED)) for lit, ci, we, lo, hi in cover)


class _Runs:
    """The literal runs of a sequence being read: every match holds one of ``cur`` (all forks of the run),
    which start ``at`` (fewest, most) characters after the start of the sequence's match."""

    def __init__(self, ci: bool, options: list) -> None:
        self.ci, self.options, self.cur, self.at = ci, options, [b""], (0, 0)

    def extend(self, alts: list[bytes], at: tuple[int, int]) -> None:
        if self.cur == [b""]:
            self.at = at
        if len(self.cur) * len(alts) > _MAX_ALTS:
            self.flush()
            self.cur, self.at = list(alts), at
        else:
            self.cur = [x + y for x in self.cur for y in alts]

    def flush(self, restart: list[bytes] | None = None, word_end: bool = False,
              restart_at: tuple[int, int] = (0, 0)) -> None:
        forks, (lo, hi) = sorted(set(self.cur)), self.at
        if all(len(r) >= MIN_LITERAL for r in forks):
            self.options.append(Cover(_literal(r, self.ci, word_end, lo, hi) for r in forks))
        if len(forks) > 1:  # what every fork starts or ends with is a cover of one literal
            pre, suf = os.path.commonprefix(forks), os.path.commonprefix([r[::-1] for r in forks])[::-1]
            if len(pre) >= MIN_LITERAL:
                self.options.append(Cover([_literal(pre, self.ci, False, lo, hi)]))
            if len(suf) >= MIN_LITERAL:  # it starts where each fork's own end part starts
                offs = [len(r) - len(suf) for r in forks]
                self.options.append(Cover([_literal(suf, self.ci, word_end, lo + min(offs), hi + max(offs))]))
        self.cur, self.at = (restart, restart_at) if restart is not None else ([b""], (0, 0))

    def boundary(self) -> None:
        """A ``\\b`` after runs that end in a word character: the next character is not one (a literal that
        says so finds fewer false hits: ``inf`` is not in ``info``)."""
        if all(r and r[-1] in _WORD for r in self.cur):
            self.flush(word_end=True)


def _sub_cover(op, av, ci: bool, sub_ci: bool, state) -> Cover | None:
    """The cover of a group, repeat (at least once), alternation or atomic group, offsets from its start."""
    if op is _c.SUBPATTERN:
        return _seq_cover(av[-1], sub_ci, state)
    if op in _REPEATS:
        return _seq_cover(av[2], ci, state) if av[0] >= 1 else None  # the first copy holds one
    if op is _c.BRANCH:
        covers = [_seq_cover(b, ci, state) for b in av[1]]
        return Cover().union(*covers) if all(c is not None for c in covers) else None
    if op is _ATOMIC:
        return _seq_cover(av, ci, state)
    return None


def _seq_cover(items, ci: bool, state) -> Cover | None:
    """Best cover of a sequence of parse items (None when no item has one): (literal, caseless, word_end, lo,
    hi) tuples, lo..hi the characters from the start of the sequence's match to the literal (a literal of a
    variable-width part: hi UNBOUNDED)."""
    options: list[Cover] = []
    runs = _Runs(ci, options)
    pos = (0, 0)
    for op, av in items:
        at, pos = pos, _add(pos, _width(state, op, av))
        if op is _c.AT and av is _c.AT_BOUNDARY:
            runs.boundary()
            continue
        if op in _ZERO_WIDTH:
            continue  # zero width: its neighbours are adjacent in the text
        sub_ci = ci
        if op is _c.SUBPATTERN:
            sub_ci = (ci or bool(av[-3] & re.I)) and not (av[-2] & re.I)
            alts = _seq_alts(av[-1], ci) if sub_ci == ci else None
        else:
            alts = _alts(op, av, ci)
        if alts is not None:
            runs.extend(alts, at)
            continue
        if op in _REPEATS and av[0] >= 1 and (one := _seq_alts(av[2], ci)) is not None and len(one) == 1:
            unit = one[0] * min(av[0], _MAX_RUN)  # x{6,}: the run goes on with its lo copies
            runs.extend([unit], at)
            if av[1] != av[0] or av[0] > _MAX_RUN:  # what follows is adjacent to the last copies only
                runs.flush(restart=[unit], restart_at=(at[0], UNBOUNDED))
            continue
        runs.flush()
        sub = _sub_cover(op, av, ci, sub_ci, state)
        if sub is not None:
            options.append(_shift(sub, at))
    runs.flush()
    return min(options, key=_cost) if options else None


def _parse(pattern: str, caseless: bool):
    try:
        return _p.parse(pattern, re.I if caseless else 0)
    except (re.error, OverflowError, RecursionError):
        return None


def _cover(pattern: str, caseless: bool, tree=None) -> Cover | None:
    tree = tree if tree is not None else _parse(pattern, caseless)
    if tree is None:
        return None
    try:
        return _seq_cover(list(tree), bool(tree.state.flags & re.I), tree.state)
    except RecursionError:
        return None


def required_literals(pattern: str, caseless: bool = False) -> list[tuple[bytes, bool, bool]] | None:
    """A cover of ``pattern``: (literal, caseless, word_end) triples, every match of the pattern (searched with
    ``re.I`` when ``caseless``) contains one of them in its text (lowercased when the triple says caseless;
    followed by a character that is not an ASCII letter, digit or ``_`` when it says word_end). Literals are
    in the prefilter alphabet's terms for ``\\d`` (``0``) and ``\\s`` (a space).
    Literals are UTF-8 bytes, at least MIN_LITERAL of them. None when the pattern has no such cover or does
    not parse. Example: ``r"CUDA out of memory|torch\\.OutOfMemoryError"`` -> the two literals, case-sensitive."""
    cover = _cover(pattern, caseless)
    return sorted({lit[:3] for lit in cover}) if cover else None


def literal_spans(pattern: str, caseless: bool = False) -> list[tuple[bytes, bool, bool, int, int]] | None:
    """The cover of :func:`required_literals` with where each literal can start: (literal, caseless, word_end,
    lo, hi), every match of ``pattern`` holds one of the literals starting lo to hi characters after the match's
    start (hi is UNBOUNDED when the part before it has no bound, ``.*x``). Offsets are exact for ASCII text (a
    literal's own non-ASCII characters count as their UTF-8 bytes). None as for required_literals.
    Example: ``r"\\w(?:Error|Exit)\\b"`` -> ``(b"Error", False, True, 1, 1)``, ``(b"Exit", False, True, 1, 1)``."""
    cover = _cover(pattern, caseless)
    return sorted(cover) if cover else None


def _split_alts(body: str) -> tuple[list[str], int]:
    """(the alternatives of ``body`` at depth 0, the index just past the group that opens it when it opens with
    one, else -1)."""
    out, depth, cur, i, first_end = [], 0, [], 0, -1
    cls = -1  # index in cur of the "[" of the class being read, -1 outside a class
    while i < len(body):
        c = body[i]
        if c == "\\":
            cur.append(body[i:i + 2])
            i += 2
            continue
        if cls >= 0:  # a "]" first in the class (after an optional "^") is a literal
            if c == "]" and len(cur) > cls + 1 + (cur[cls + 1:cls + 2] == ["^"]):
                cls = -1
        elif c == "[":
            cls = len(cur)
        elif c in "()":
            depth += 1 if c == "(" else -1
            if depth == 0 and first_end < 0 and body[0] == "(":
                first_end = i + 1
        elif c == "|" and depth == 0:
            out.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    return out + ["".join(cur)], first_end


_GROUP_OPEN = re.compile(r"\((?:\?[aiLmsux]*(?:-[imsx]+)?:|\?P<\w+>|(?!\?))")


def top_level_branches(pattern: str, flags: int = 0) -> list[str]:
    """The top-level alternatives of ``pattern`` as patterns of their own (a leading global flag group such as
    ``(?i)`` copied onto each, and a group around the whole pattern kept around each: ``(?i:a|b)`` ->
    ``(?i:a)``, ``(?i:b)``): a line matches ``pattern`` exactly where it matches one of them. ``[pattern]``
    when it cannot be cut safely: one alternative, a back-reference or conditional (group numbers would
    change), verbose mode or a comment, or an alternative that does not compile alone (with ``flags``)."""
    if re.search(r"\\[1-9]|\(\?P=|\(\?\(|\(\?#", pattern):
        return [pattern]
    glob = re.match(r"\(\?[aiLmsux]+\)", pattern)
    head = glob.group(0) if glob else ""
    if "x" in head:
        return [pattern]
    body, tail = pattern[len(head):], ""
    parts, first_end = _split_alts(body)
    while len(parts) == 1 and first_end == len(body) and (m := _GROUP_OPEN.match(body)):
        head, tail, body = head + m.group(0), ")" + tail, body[m.end():-1]  # a group around it all
        parts, first_end = _split_alts(body)
    if len(parts) < 2:
        return [pattern]
    out = [head + b + tail for b in parts]
    try:
        for b in out:
            re.compile(b, flags)
    except re.error:
        return [pattern]
    return out


def _ascii_classes() -> list[str]:
    """The ASCII characters a line can hold (no newline; tab, CR, VT, FF aside: callers check a line has
    none), grouped by the alphabet byte each is translated to."""
    groups: dict[int, str] = {}
    for b in range(128):
        if b not in b"\n\t\r\x0b\x0c":
            groups[ALPHABET[b]] = groups.get(ALPHABET[b], "") + chr(b)
    return [g for g in groups.values() if len(g) > 1]


_CLASSES = _ascii_classes()
_ATOMS = (_c.LITERAL, _c.NOT_LITERAL, _c.IN, _c.ANY)
_ATOM_CACHE: dict[tuple, bool] = {}


def _atom_invariant(op, av, flags: int) -> bool:
    """Whether one character item matches all or none of the characters of each alphabet class (Python's own
    matcher decides: the item is compiled alone)."""
    key = (op, repr(av), flags)
    got = _ATOM_CACHE.get(key)
    if got is None:
        try:
            import re._compiler as _comp  # noqa: PLC0415 - Python 3.11+
        except ImportError:  # pragma: no cover - Python 3.10
            import sre_compile as _comp  # type: ignore[no-redef]
        state = _p.State()
        state.flags = flags
        try:
            rx = _comp.compile(_p.SubPattern(state, [(op, av)]), flags)
            got = all(len({bool(rx.fullmatch(ch)) for ch in cls}) == 1 for cls in _CLASSES)
        except Exception:  # noqa: BLE001 - an item that cannot be compiled alone: say no
            got = False
        _ATOM_CACHE[key] = got
    return got


def _items_invariant(items, flags: int) -> bool:
    for op, av in items:
        if op in _ATOMS:
            if not _atom_invariant(op, av, flags):
                return False
        elif op is _c.AT:
            if av in (_c.AT_BOUNDARY, _c.AT_NON_BOUNDARY) and not _atom_invariant(
                    _c.IN, [(_c.CATEGORY, _c.CATEGORY_WORD)], flags):
                return False
        elif op is _c.SUBPATTERN:
            if not _items_invariant(av[-1], (flags | av[-3]) & ~av[-2]):
                return False
        elif op is _c.BRANCH:
            if not all(_items_invariant(b, flags) for b in av[1]):
                return False
        elif op in _REPEATS:
            if not _items_invariant(av[2], flags):
                return False
        elif op in (_c.ASSERT, _c.ASSERT_NOT):
            if not _items_invariant(av[1], flags):
                return False
        elif op is _ATOMIC:
            if not _items_invariant(av, flags):
                return False
        else:  # back-references, conditionals, anything else
            return False
    return True


def translation_invariant(pattern: str, caseless: bool = False, tree=None) -> bool:
    """Whether ``pattern`` gives the same answer on any two ASCII lines (without tab, CR, VT or FF) that
    ALPHABET translates alike: every character it tests it tests the same way for all characters of an
    alphabet class (case, digit and control-byte differences are invisible to it). A caseless
    ``\\bTP\\d+\\]`` is; a case-sensitive ``step``, ``[1-9]`` or a back-reference is not. False when
    unsure. ``tree``: the pattern already parsed (``_p.parse``), to parse it once."""
    try:
        tree = tree if tree is not None else _p.parse(pattern, re.I if caseless else 0)
        return _items_invariant(list(tree), tree.state.flags)
    except Exception:  # noqa: BLE001 - parse errors, recursion: say no
        return False


def analyse_alternative(pattern: str, caseless: bool) -> tuple[list | None, bool]:
    """(literal_spans, translation_invariant) of one pattern, parsed once."""
    tree = _parse(pattern, caseless)
    if tree is None:
        return None, False
    cover = _cover(pattern, caseless, tree)
    return (sorted(cover) if cover else None), translation_invariant(pattern, caseless, tree)


def _line_local(items) -> bool:
    for op, av in items:
        if op is _c.AT and av in (_c.AT_BEGINNING_STRING, _c.AT_END_STRING):
            return False
        if op in (_c.ASSERT, _c.ASSERT_NOT, _c.GROUPREF, getattr(_c, "GROUPREF_EXISTS", None)):
            return False
        if op is _c.SUBPATTERN and not _line_local(av[-1]):
            return False
        if op is _c.BRANCH and not all(_line_local(b) for b in av[1]):
            return False
        if op in _REPEATS and not _line_local(av[2]):
            return False
        if op is _ATOMIC and not _line_local(av):
            return False
    return True


def searchable_in_chunk(pattern: str, caseless: bool = False) -> bool:
    """Whether a match of ``pattern`` in a line is also a match of it (with ``re.M``) at the same place in a
    text of many lines: no ``\\A``, ``\\Z``, look-around or back-reference, whose answer depends on what is
    around the line. (``^``, ``$`` under ``re.M`` and ``\\b`` see a newline as they see a line's edge.)"""
    tree = _parse(pattern, caseless)
    try:
        return tree is not None and _line_local(list(tree))
    except RecursionError:
        return False


def candidate_branches(pattern: str, flags: int = 0) -> list[str]:
    """The top-level alternatives of ``pattern`` that carry no back-reference and compile alone (a leading global
    flag group copied onto each), for keeping candidate lines of a pattern no engine can take whole
    (``!{6,}|(\\b\\w+\\b)(?:\\s+\\1){8,}`` -> ``!{6,}``): a line they match is kept and the whole pattern is then
    matched on it with Python. Group numbers may differ in a branch, which is why it is a candidate filter only.
    [] when the pattern has one alternative or no branch qualifies."""
    glob = re.match(r"\(\?[aiLmsux]+\)", pattern)
    head = glob.group(0) if glob else ""
    if "x" in head:
        return []
    parts, _ = _split_alts(pattern[len(head):])
    if len(parts) < 2:
        return []
    out = []
    for b in parts:
        if re.search(r"\\[1-9]|\(\?P=|\(\?\(|\(\?#", b):
            continue
        try:
            re.compile(head + b, flags)
        except re.error:
            continue
        out.append(head + b)
    return out

