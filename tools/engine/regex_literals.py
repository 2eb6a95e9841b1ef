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
# lowercase, every digit written as 0, every blank but the newline as a space, and the rare bytes (at most
# RARE_PERCENT of log bytes: the rare letters, control and non-ASCII bytes; punctuation stays itself) as one
# MARK byte.
MARK = 0
RARE_PERCENT = 0.66


def _alphabet() -> bytes:
    t = bytearray(bytes(range(256)).lower())
    for b in range(256):
        if _FREQ[t[b]] <= RARE_PERCENT and (t[b] >= 0x80 or chr(t[b]).isalpha() or t[b] < 0x20) and t[b] != 10:
            t[b] = MARK
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
    for w, f in _COMMON:
        if f > e and lit in w:
            e = f
    return e


_COMMON = sorted(((w.encode().translate(ALPHABET), f) for w, f in COMMON_WORDS.items()), key=lambda wf: -wf[1])
Cover = frozenset  # of (literal bytes, caseless)


def _lit_cost(lit: bytes) -> float:
    """Search cost of one literal for the pure-Python prefilter: one more literal to look for, plus its expected
    false hits (a short literal of common bytes hits every line)."""
    return 1.0 + 1e4 * selectivity(lit.translate(ALPHABET)) + 0.5 / len(lit)


def _cost(cover: Cover) -> float:
    return sum(_lit_cost(lit) for lit, *_ in cover)


_WORD = frozenset(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")


def _literal(run: bytes, ci: bool, word_end: bool = False) -> tuple[bytes, bool, bool]:
    s = bytes(run)
    if len(s) > _MAX_RUN:  # keep the middle: the start is often a common word ("CUDA ", "The ")
        mid = (len(s) - _MAX_RUN) // 2
        s, word_end = s[mid: mid + _MAX_RUN], False
    return (s.lower() if ci else s), ci, word_end


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


class _Runs:
    """The literal runs of a sequence being read: every match holds one of ``cur`` (all forks of the run)."""

    def __init__(self, ci: bool, options: list) -> None:
        self.ci, self.options, self.cur = ci, options, [b""]

    def extend(self, alts: list[bytes]) -> None:
        if len(self.cur) * len(alts) > _MAX_ALTS:
            self.flush()
            self.cur = list(alts)
        else:
            self.cur = [x + y for x in self.cur for y in alts]

    def flush(self, restart: list[bytes] | None = None, word_end: bool = False) -> None:
        forks = sorted(set(self.cur))
        if all(len(r) >= MIN_LITERAL for r in forks):
            self.options.append(Cover(_literal(r, self.ci, word_end) for r in forks))
        if len(forks) > 1:  # what every fork starts or ends with is a cover of one literal
            pre, suf = os.path.commonprefix(forks), os.path.commonprefix([r[::-1] for r in forks])[::-1]
            for lit, we in ((pre, False), (suf, word_end)):
                if len(lit) >= MIN_LITERAL:
                    self.options.append(Cover([_literal(lit, self.ci, we)]))
        self.cur = restart if restart is not None else [b""]

    def boundary(self) -> None:
        """A ``\\b`` after runs that end in a word character: the next character is not one (a literal that
        says so finds fewer false hits: ``inf`` is not in ``info``)."""
        if all(r and r[-1] in _WORD for r in self.cur):
            self.flush(word_end=True)


def _seq_cover(items, ci: bool) -> Cover | None:
    """Best cover of a sequence of parse items (None when no item has one)."""
    options: list[Cover] = []
    runs = _Runs(ci, options)
    for op, av in items:
        if op is _c.AT and av is _c.AT_BOUNDARY:
            runs.boundary()
            continue
        if op in _ZERO_WIDTH:
            continue  # zero width: its neighbours are adjacent in the text
        if op is _c.SUBPATTERN:
            sub_ci = (ci or bool(av[-3] & re.I)) and not (av[-2] & re.I)
            alts = _seq_alts(av[-1], ci) if sub_ci == ci else None
        else:
            alts = _alts(op, av, ci)
        if alts is not None:
            runs.extend(alts)
            continue
        if op in _REPEATS and av[0] >= 1 and (one := _seq_alts(av[2], ci)) is not None and len(one) == 1:
            unit = one[0] * min(av[0], _MAX_RUN)  # x{6,}: the run goes on with its lo copies
            runs.extend([unit])
            if av[1] != av[0]:  # a variable count: what follows is adjacent to the last lo copies only
                runs.flush(restart=[unit])
            continue
        runs.flush()
        if op is _c.SUBPATTERN:
            sub = _seq_cover(av[-1], sub_ci)
        elif op in _REPEATS:
            sub = _seq_cover(av[2], ci) if av[0] >= 1 else None
        elif op is _c.BRANCH:
            covers = [_seq_cover(b, ci) for b in av[1]]
            sub = Cover().union(*covers) if all(c is not None for c in covers) else None
        elif op is _ATOMIC:
            sub = _seq_cover(av, ci)
        else:
            sub = None
        if sub is not None:
            options.append(sub)
    runs.flush()
    return min(options, key=_cost) if options else None


def required_literals(pattern: str, caseless: bool = False) -> list[tuple[bytes, bool, bool]] | None:
    """A cover of ``pattern``: (literal, caseless, word_end) triples, every match of the pattern (searched with
    ``re.I`` when ``caseless``) contains one of them in its text (lowercased when the triple says caseless;
    followed by a character that is not an ASCII letter, digit or ``_`` when it says word_end). Literals are
    in the prefilter alphabet's terms for ``\\d`` (``0``) and ``\\s`` (a space).
    Literals are UTF-8 bytes, at least MIN_LITERAL of them. None when the pattern has no such cover or does
    not parse. Example: ``r"CUDA out of memory|torch\\.OutOfMemoryError"`` -> the two literals, case-sensitive."""
    try:
        tree = _p.parse(pattern, re.I if caseless else 0)
    except (re.error, OverflowError, RecursionError):
        return None
    ci = bool(tree.state.flags & re.I)
    try:
        cover = _seq_cover(list(tree), ci)
    except RecursionError:
        return None
    return sorted(cover) if cover else None
