"""One pass of many regexes over much text: the multi-pattern prefilter behind large-log streaming and the
one-pass event and rule-regex matching.

Engines, fastest first: hyperscan (SIMD multi-pattern, x86 only), google-re2 (linear time, has arm64 wheels),
and a pure-Python engine (prefilter_python.py: required literals with C-speed searches, the real pattern on
the lines that hold one). The environment variable ``GRPO_DEBUG_PREFILTER_ENGINE`` (``hyperscan``, ``re2`` or
``python``) forces one (benchmarks, tests); naming one that is not installed is a :class:`PrefilterEngineError`
that says what is.

``_Engine(patterns)`` takes (Python regex, caseless) pairs and offers:

- ``line_hits(buf, limit)``: the sorted line-start offsets of the lines of ``buf`` where a pattern matches,
  with the set of pattern ids matching each line. Exact for every engine: hyperscan and RE2 run each pattern
  rewritten for bytes (regex_dialect.py); a pattern whose rewrite is relaxed (look-arounds dropped, ...) is
  confirmed with Python on the lines where it hit. One linear pass for RE2 (one alternation of all patterns,
  then an ``re2.Set`` on each line it stops at), one scan for hyperscan;
- ``scan(buf, limit)``: (pattern id, end offset) pairs; for hyperscan every match of the bytes form (a
  superset, end = the match's end), for the others one per matching line and pattern (end = the end of the
  line, past its newline when it has one); at most ``limit`` pairs;
- ``kind`` (``hyperscan``, ``re2`` or ``re`` for the pure-Python engine) and ``unprefiltered``: the
  patterns no engine form can take (a back-reference with no required literal, a pattern that does not
  compile); their lines are not in the hits, the caller scans for them itself.

Text semantics are those of ASCII bytes: a letter, digit or space outside ASCII is not seen as a word,
digit or space character by ``\\w``, ``\\d``, ``\\s``, ``\\b`` (hyperscan and RE2 without Unicode mode).
"""
from __future__ import annotations

import os
import re
import threading
from typing import Iterator

from grpo_debug.tools.errors import InputError

ENGINE_ENV = "GRPO_DEBUG_PREFILTER_ENGINE"
ENGINES = ("hyperscan", "re2", "python")


class PrefilterEngineError(InputError):
    """``GRPO_DEBUG_PREFILTER_ENGINE`` names an engine that is unknown or not installed."""


def _relax(p: str) -> str | None:
    """A Python-syntax form of ``p`` for grep-like tools (bench/bench_triage.py translates it to POSIX ERE):
    look-around assertions removed, inline flag groups made plain groups, top-level alternatives that use
    back-references dropped; None when every alternative does. The engines use regex_dialect.to_engine."""
    from grpo_debug.tools.engine.regex_literals import top_level_branches

    branches = [b for b in top_level_branches(p) if not re.search(r"\\[1-9]", b)]
    if not branches:
        return None
    p = "|".join(branches)
    p = re.sub(r"\(\?<?[=!][^()]*\)", "", p)          # look-ahead / look-behind without nested groups
    return p.replace("(?i:", "(?:")


def installed_engines() -> list[str]:
    """The engines this Python can run, fastest first (``python`` always)."""
    out = []
    for name, module in (("hyperscan", "hyperscan"), ("re2", "re2")):
        try:
            __import__(module)
            out.append(name)
        except Exception:  # noqa: BLE001 - not installed or a platform without wheels
            pass
    return out + ["python"]


def requested_engine() -> str | None:
    """The engine ``GRPO_DEBUG_PREFILTER_ENGINE`` asks for (None when unset or empty). Raises
    PrefilterEngineError for a name that is not an engine or an engine that is not installed."""
    val = os.environ.get(ENGINE_ENV, "").strip().lower()
    if not val:
        return None
    val = {"re": "python", "google-re2": "re2"}.get(val, val)
    have = installed_engines()
    if val not in ENGINES:
        raise PrefilterEngineError(f"{ENGINE_ENV}={os.environ[ENGINE_ENV]!r} is not an engine: use one of "
                                   f"{', '.join(ENGINES)} (installed: {', '.join(have)})")
    if val not in have:
        raise PrefilterEngineError(f"{ENGINE_ENV}={os.environ[ENGINE_ENV]!r} asks for {val}, which is not installed "
                                   f"here (installed: {', '.join(have)}; pip install 'grpo-debug[fast]' brings "
                                   "hyperscan on x86-64 and google-re2)")
    return val


def _engine_forms(patterns: list[tuple[str, bool]]):
    """(engine id, EngineForm) of the patterns an engine can take; the patterns none can (see ``unprefiltered``);
    and the parts: engine id -> (pattern id, alternative). A relaxed pattern (its hits are confirmed with Python)
    goes to the engine as its top-level alternatives, each under an id of its own past ``len(patterns)``, so a
    line is confirmed only for the relaxed alternatives that hit it, not for the whole pattern (verl's metric
    lines hit the weight-sync pattern's ``update_weights`` alternative only)."""
    from grpo_debug.tools.engine.prefilter_python import has_backref
    from grpo_debug.tools.engine.regex_dialect import to_engine
    from grpo_debug.tools.engine.regex_literals import required_literals, top_level_branches

    forms, left, parts = [], [], {}
    for i, (p, ci) in enumerate(patterns):
        form = to_engine(p, ci)
        if form is None or (has_backref(p) and required_literals(p, ci) is None):
            left.append(p)  # a back-reference with no literal: its superset matches nearly every line
            continue
        alts = top_level_branches(p, re.I if ci else 0) if form.relaxed else [p]
        alt_forms = [to_engine(a, ci) for a in alts] if len(alts) > 1 else []
        if not alt_forms or any(f is None for f in alt_forms):
            forms.append((i, form))
            continue
        for a, f in zip(alts, alt_forms):
            eid = len(patterns) + len(parts)
            parts[eid] = (i, a)
            forms.append((eid, f))
    return forms, left, parts


def _alternatives(pattern: str, flags: int) -> list[re.Pattern]:
    """``pattern``'s top-level alternatives compiled one by one (regex_literals.top_level_branches; the whole
    pattern when it cannot be cut): a line matches ``pattern`` exactly where one of them matches it."""
    from grpo_debug.tools.engine.regex_literals import top_level_branches

    return [re.compile(b, flags) for b in top_level_branches(pattern, flags)]


class _Exact:
    """Confirmation of the relaxed patterns with Python, on the lines where their engine form hit, and the
    engine ids of alternatives mapped back to their pattern's id (``_engine_forms``)."""

    def __init__(self, patterns: list[tuple[str, bool]], relaxed: set[int], parts: dict[int, tuple[int, str]]):
        from grpo_debug.tools.engine.prefilter_python import _lowered

        def text(i: int) -> tuple[str, bool]:
            return (parts[i][1], patterns[parts[i][0]][1]) if i in parts else patterns[i]
        self.parent = {e: i for e, (i, _) in parts.items()}
        self.rx = {i: _alternatives(text(i)[0], re.I if text(i)[1] else 0) for i in relaxed}
        # a caseless pattern runs lowercased over a lowercased ASCII line: same matches, and re's literal search
        # works again; each top-level alternative is searched on its own, so each keeps its literal prefix (verl's
        # 2.5 kB metric lines under the weight-sync pattern: 126 us a line caseless, 12 lowercased, 6 per alternative)
        self.low = {i: _alternatives(lw.pattern, 0) for i in relaxed if (lw := _lowered(*text(i))) is not None}

    def _ok(self, i: int, line: str, low: list) -> bool:
        alts = self.low.get(i)
        if alts is None or not line.isascii():
            return any(rx.search(line) for rx in self.rx[i])
        if not low:
            low.append(line.lower())
        return any(rx.search(low[0]) for rx in alts)

    def lines(self, buf: bytes, starts: dict[int, set[int]], limit: int | None) -> tuple[list[int], list[set[int]]]:
        out_s, out_i = [], []
        find, n, parent = buf.find, len(buf), self.parent
        for ls in sorted(starts):
            ids = starts[ls]
            if self.rx and not self.rx.keys().isdisjoint(ids):
                le = find(b"\n", ls)
                line, low = buf[ls: n if le < 0 else le].decode("utf-8", "replace"), []
                ids = {i for i in ids if i not in self.rx or self._ok(i, line, low)}
            if parent and not parent.keys().isdisjoint(ids):
                ids = {parent.get(i, i) for i in ids}
            if ids:
                out_s.append(ls)
                out_i.append(ids)
                if limit is not None and len(out_s) >= limit:
                    break
        return out_s, out_i


class _Hyperscan:
    kind = "hyperscan"

    def __init__(self, patterns: list[tuple[str, bool]]):
        import hyperscan

        forms, self.unprefiltered, parts = _engine_forms(patterns)
        self._parent = {e: i for e, (i, _) in parts.items()}
        items = [(i, f.pattern, hyperscan.HS_FLAG_MULTILINE | (hyperscan.HS_FLAG_CASELESS if f.caseless else 0))
                 for i, f in forms]

        def compile_db(its):
            db = hyperscan.Database()
            db.compile(expressions=[e for _, e, _ in its], ids=[i for i, _, _ in its], elements=len(its),
                       flags=[f for _, _, f in its])
            return db
        from grpo_debug.tools.engine.hs_cache import load_or_compile

        try:
            self._db = load_or_compile(items, compile_db)
        except Exception:  # noqa: BLE001 - one pattern is too large or unsupported: probe them one by one
            ok, failed = [], set()
            for it in items:
                try:
                    compile_db([it])
                    ok.append(it)
                except Exception:  # noqa: BLE001
                    failed.add(self._parent.get(it[0], it[0]))
            # a pattern with one alternative the engine cannot take is left out whole: its other alternatives'
            # hits would look like the whole pattern's, and the caller scans for an unprefiltered pattern itself
            ok = [it for it in ok if self._parent.get(it[0], it[0]) not in failed]
            self.unprefiltered += [patterns[i][0] for i in sorted(failed)]
            self._db = compile_db(ok) if ok else None
        self.unprefiltered = list(dict.fromkeys(self.unprefiltered))
        self._exact = _Exact(patterns, {i for i, f in forms if f.relaxed}, parts)

    def scan(self, buf: bytes, limit: int | None = None) -> Iterator[tuple[int, int]]:
        hits: list[tuple[int, int]] = []
        if self._db is None:
            return iter(hits)
        parent = self._parent

        def on(pid: int, frm: int, to: int, flags: int, ctx: object) -> bool:
            hits.append((parent.get(pid, pid), to))
            return limit is not None and len(hits) >= limit  # True stops the scan
        try:
            self._db.scan(buf, match_event_handler=on)
        except Exception as e:  # noqa: BLE001 - hyperscan reports a stopped scan as an error
            if limit is None or len(hits) < limit:
                raise e
        return iter(hits)

    def line_hits(self, buf: bytes, limit: int | None = None) -> tuple[list[int], list[set[int]]]:
        return self.line_hits_stopped(buf, limit)[:2]

    def line_hits_stopped(self, buf: bytes, limit: int | None = None) -> tuple[list[int], list[set[int]], bool]:
        starts: dict[int, set[int]] = {}
        if self._db is None:
            return [], [], False
        rfind = buf.rfind

        def on(pid: int, frm: int, to: int, flags: int, ctx: object) -> bool:
            ls = rfind(b"\n", 0, max(0, to - 1)) + 1 if to else 0
            got = starts.get(ls)
            if got is None:
                if limit is not None and len(starts) >= limit:
                    return True  # a line past the limit: stop (True stops the scan); hits come in end order
                starts[ls] = {pid}
            else:
                got.add(pid)
            return False
        stopped = False
        try:
            self._db.scan(buf, match_event_handler=on)
        except Exception as e:  # noqa: BLE001 - hyperscan reports a stopped scan as an error
            if limit is None or len(starts) < limit:
                raise e
            stopped = True
        return (*self._exact.lines(buf, starts, None), stopped)


class _RE2:
    kind = "re2"

    def __init__(self, patterns: list[tuple[str, bool]]):
        import re2

        forms, self.unprefiltered, parts = _engine_forms(patterns)
        opts = re2.Options()
        opts.encoding = re2.Options.Encoding.LATIN1
        opts.never_capture = True
        opts.max_mem = 256 * 2**20
        ok, failed = [], set()
        for i, f in forms:
            text = (b"(?i:" if f.caseless else b"(?:") + f.pattern + b")"
            try:
                re2.compile(text, opts)
                ok.append((i, text, f.relaxed))
            except Exception:  # noqa: BLE001 - a construct RE2 lacks
                failed.add(parts[i][0] if i in parts else i)
        ok = [o for o in ok if (parts[o[0]][0] if o[0] in parts else o[0]) not in failed]  # (see _Hyperscan)
        self.unprefiltered += [patterns[i][0] for i in sorted(failed)]
        self._ids = [i for i, _, _ in ok]
        self._all = re2.compile(b"(?m)" + b"|".join(t for _, t, _ in ok), opts)._regexp if ok else None
        self._set = re2.Set.SearchSet(opts)
        for _, text, _ in ok:
            self._set.Add(text)
        if ok:
            self._set.Compile()
        self._anchor = re2._Anchor.UNANCHORED
        self.unprefiltered = list(dict.fromkeys(self.unprefiltered))
        self._exact = _Exact(patterns, {i for i, _, relaxed in ok if relaxed}, parts)

    def line_hits(self, buf: bytes, limit: int | None = None) -> tuple[list[int], list[set[int]]]:
        """One pass of the alternation of all patterns; at each line it stops at, the set says which match."""
        return self.line_hits_stopped(buf, limit)[:2]

    def line_hits_stopped(self, buf: bytes, limit: int | None = None) -> tuple[list[int], list[set[int]], bool]:
        starts: dict[int, set[int]] = {}
        stopped = False
        if self._all is None:
            return [], [], False
        match, anchor, smatch, ids = self._all.Match, self._anchor, self._set._set.Match, self._ids
        find, rfind, n, pos = buf.find, buf.rfind, len(buf), 0
        while pos < n:
            s = match(anchor, buf, pos, n)[0][0]
            if s < 0:
                break
            ls = rfind(b"\n", 0, s) + 1
            le = find(b"\n", s)
            le = n if le < 0 else le
            got = smatch(buf[ls:le])
            if got:
                starts[ls] = {ids[k] for k in got}
                if limit is not None and len(starts) >= limit:
                    stopped = le + 1 < n
                    break
            pos = le + 1
        return (*self._exact.lines(buf, starts, limit), stopped)

    def scan(self, buf: bytes, limit: int | None = None) -> Iterator[tuple[int, int]]:
        return _scan_from_lines(self, buf, limit)


def _scan_from_lines(eng, buf: bytes, limit: int | None) -> Iterator[tuple[int, int]]:
    """(pattern id, end of the line past its newline) for each matching line and pattern; at most ``limit``."""
    starts, ids = eng.line_hits(buf, limit)
    out: list[tuple[int, int]] = []
    find, n = buf.find, len(buf)
    for ls, pids in zip(starts, ids):
        le = find(b"\n", ls)
        end = n if le < 0 else le + 1
        out += [(pid, end) for pid in sorted(pids)]
    return iter(out if limit is None else out[:limit])


_LOCAL = threading.local()
ENGINE_CACHE = 8


def cached_engine(patterns: list[tuple[str, bool]]) -> "_Engine":
    """An ``_Engine`` over ``patterns``, built once per thread and reused (building one translates every regex:
    about 0.15 s for the rule base, paid per file of a folder of rank logs before). At most ENGINE_CACHE engines
    per thread, least recently used dropped."""
    cache = getattr(_LOCAL, "engines", None)
    if cache is None:
        cache = _LOCAL.engines = {}
    key = (tuple(patterns), os.environ.get(ENGINE_ENV, ""))
    eng = cache.pop(key, None)
    if eng is None:
        eng = _Engine(list(patterns))
        while len(cache) >= ENGINE_CACHE:
            cache.pop(next(iter(cache)))
    cache[key] = eng
    return eng


class _Engine:
    """The multi-pattern prefilter over (Python regex, caseless) ``patterns`` (module docstring). An inline
    ``(?i`` makes a pattern caseless. ``kind`` forces an engine (else ``GRPO_DEBUG_PREFILTER_ENGINE``, else the
    fastest installed one)."""

    def __init__(self, patterns: list[tuple[str, bool]], kind: str | None = None):
        patterns = [(p, bool(ci) or "(?i" in p) for p, ci in patterns]
        self.patterns = patterns
        want = kind or requested_engine()
        order = [want] if want else installed_engines()
        self._impl = None
        for name in order:
            try:
                self._impl = self._make(name, patterns)
                break
            except ImportError:
                if name == want:
                    raise
        self.kind = self._impl.kind
        self.unprefiltered: list[str] = list(self._impl.unprefiltered)

    @staticmethod
    def _make(name: str, patterns: list[tuple[str, bool]]):
        if name == "hyperscan":
            return _Hyperscan(patterns)
        if name == "re2":
            return _RE2(patterns)
        from grpo_debug.tools.engine.prefilter_python import LiteralEngine
        return LiteralEngine(patterns)

    def line_hits(self, buf: bytes, limit: int | None = None) -> tuple[list[int], list[set[int]]]:
        """(sorted line-start offsets of the lines of ``buf`` where a pattern matches, the ids of the patterns
        that match each of them), at most ``limit`` lines (the first ones found). Exact (module docstring)."""
        return self._impl.line_hits(buf, limit)

    def line_hits_stopped(self, buf: bytes, limit: int | None = None) -> tuple[list[int], list[set[int]], bool]:
        """``line_hits`` and whether the search stopped at ``limit`` candidate lines before the end of ``buf`` (the
        lines past it were not looked at; fewer than ``limit`` may be returned when relaxed forms were confirmed)."""
        impl = self._impl
        if hasattr(impl, "line_hits_stopped"):
            return impl.line_hits_stopped(buf, limit)
        starts, ids = impl.line_hits(buf, limit)
        return starts, ids, limit is not None and len(starts) >= limit

    def scan(self, buf: bytes, limit: int | None = None) -> Iterator[tuple[int, int]]:
        """(pattern id, end offset) pairs (module docstring); at most ``limit`` of them."""
        if isinstance(self._impl, _Hyperscan):
            return self._impl.scan(buf, limit)
        return _scan_from_lines(self._impl, buf, limit)


_MATCHERS: dict[tuple, _Engine] = {}
_MATCHERS_LOCK = threading.Lock()  # a hyperscan database has one scratch space: one scan at a time


PREFILTER_MIN_BYTES = 256 * 2**10  # below this, compiling a multi-pattern database costs more than it saves


def lines_matching(patterns: list[tuple[str, bool]], texts: list[str],
                   min_bytes: int = PREFILTER_MIN_BYTES) -> dict[int, set[int]]:
    """Pattern index -> indices of ``texts`` where the pattern matches, in one pass of the fastest engine over
    the joined texts (exact up to the ASCII semantics of the module docstring; callers may confirm). Patterns
    the engine cannot take are absent (the caller then scans those itself), and so is everything when the texts
    are smaller than ``min_bytes``."""
    if sum(len(t) for t in texts) < min_bytes:
        return {}
    enc = [t.encode("utf-8", "replace").replace(b"\n", b" ") for t in texts]
    index, pos = {}, 0
    for k, b in enumerate(enc):
        index[pos] = k
        pos += len(b) + 1
    data = b"\n".join(enc)
    key = (tuple(patterns), os.environ.get(ENGINE_ENV, ""))
    with _MATCHERS_LOCK:
        eng = _MATCHERS.get(key)
        if eng is None:
            eng = _MATCHERS[key] = _Engine(list(patterns))
        starts, ids = eng.line_hits(data)
    out: dict[int, set[int]] = {i: set() for i, (p, _) in enumerate(patterns) if p not in eng.unprefiltered}
    for ls, pids in zip(starts, ids):
        for pid in pids:
            out.setdefault(pid, set()).add(index[ls])
    return out
