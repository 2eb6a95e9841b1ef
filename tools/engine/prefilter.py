"""One pass of many regexes over much text: the multi-pattern prefilter behind large-log streaming and
the one-pass event and rule-regex matching.

Engines, fastest first: hyperscan (SIMD multi-pattern), google-re2 (linear time), Python ``re`` (slow on
alternations; used only when neither is installed). Patterns an engine cannot compile (look-behind,
back-references) are relaxed; if one still fails it is listed in ``unprefiltered``. Hits are candidates:
callers confirm each with the exact Python pattern.
"""
from __future__ import annotations

import itertools
import re
import threading
from typing import Iterator

def _top_level_branches(p: str) -> list[str]:
    out, depth, cur, i = [], 0, "", 0
    while i < len(p):
        c = p[i]
        if c == "\\" and i + 1 < len(p):
            cur += p[i:i + 2]
            i += 2
            continue
        depth += c == "("
        depth -= c == ")"
        if c == "|" and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    return out + [cur]


_NEEDS_RELAX = re.compile(r"\(\?<?[=!]|\\[1-9]|\(\?i:|\\u[0-9a-fA-F]{4}")


def _relax(p: str) -> str | None:
    """Drop constructs hyperscan/RE2 reject so the prefilter over-approximates the Python pattern (the exact
    pattern is re-checked on each kept line): look-around assertions are removed, inline flag groups become
    plain groups, and top-level alternatives that use back-references are dropped (no safe relaxation)."""
    branches = [b for b in _top_level_branches(p) if not re.search(r"\\[1-9]", b)]
    if not branches:
        return None  # nothing safe to prefilter with: the caller scans every line for this pattern
    p = "|".join(branches)
    p = re.sub(r"\(\?<?[=!][^()]*\)", "", p)          # look-ahead / look-behind without nested groups
    return p.replace("(?i:", "(?:")


class _Engine:
    def __init__(self, patterns: list[tuple[str, bool]]):
        # an inline (?i: group is compiled as a caseless pattern (relaxing drops the inline flag)
        patterns = [(p, ci or "(?i" in p) for p, ci in patterns]
        self.patterns = patterns
        self.kind = "re"
        self.unprefiltered: list[str] = []
        self._hs = self._re2 = self._py = None
        try:
            self._init_hyperscan()
            self.kind = "hyperscan"
            return
        except Exception:  # noqa: BLE001 - not installed or a platform without wheels
            pass
        try:
            self._init_re2()
            self.kind = "re2"
            return
        except Exception:  # noqa: BLE001
            pass
        self._py = []
        for i, (p, ci) in enumerate(patterns):
            try:
                self._py.append((i, re.compile(p, re.M | (re.I if ci else 0))))
            except re.error:
                self.unprefiltered.append(p)

    def _init_hyperscan(self) -> None:
        import hyperscan

        def compile_db(items: list[tuple[int, str, int]]):
            db = hyperscan.Database()
            db.compile(expressions=[e.encode() for _, e, _ in items], ids=[i for i, _, _ in items],
                       elements=len(items), flags=[f for _, _, f in items])
            return db

        items = []
        for i, (p, ci) in enumerate(self.patterns):
            q = _relax(p) if _NEEDS_RELAX.search(p) else p
            if q is None:
                self.unprefiltered.append(p)
            else:  # MULTILINE: ^ and $ anchor at every line of the joined buffer
                items.append((i, q, hyperscan.HS_FLAG_MULTILINE | (hyperscan.HS_FLAG_CASELESS if ci else 0)))
        try:
            self._hs = compile_db(items)  # the common case: every pattern compiles as it is
            return
        except Exception:  # noqa: BLE001 - some pattern needs relaxing: probe them one by one
            pass
        ok = []
        for i, p, f in items:
            for cand in (c for c in (p, _relax(p)) if c is not None):
                try:
                    compile_db([(i, cand, f)])
                    ok.append((i, cand, f))
                    break
                except Exception:  # noqa: BLE001
                    continue
            else:
                self.unprefiltered.append(self.patterns[i][0])  # the original text: callers look it up
        self._hs = compile_db(ok)

    def _init_re2(self) -> None:
        import re2

        comp = []
        for i, (p, ci) in enumerate(self.patterns):
            for cand in (c for c in (p, _relax(p)) if c is not None):
                try:
                    comp.append((i, re2.compile(("(?im)" if ci else "(?m)") + cand)))
                    break
                except Exception:  # noqa: BLE001
                    continue
            else:
                self.unprefiltered.append(p)
        self._re2 = comp

    def scan(self, buf: bytes, limit: int | None = None) -> Iterator[tuple[int, int]]:
        """(pattern index, match end offset) for every match in ``buf``; at most ``limit`` of them (the scan
        stops there: a chunk where every line matches costs no more than ``limit`` callbacks)."""
        if self._hs is not None:
            hits: list[tuple[int, int]] = []

            def on(pid: int, frm: int, to: int, flags: int, ctx: object) -> bool:
                hits.append((pid, to))
                return limit is not None and len(hits) >= limit  # True stops the scan
            try:
                self._hs.scan(buf, match_event_handler=on)
            except Exception as e:  # noqa: BLE001 - hyperscan reports a stopped scan as an error
                if limit is None or len(hits) < limit:
                    raise e
            return iter(hits)
        if self._re2 is not None:
            text = buf.decode("latin-1")  # 1 byte -> 1 char: offsets stay byte offsets
            it = ((i, m.end()) for i, r in self._re2 for m in r.finditer(text))
        else:
            text = buf.decode("latin-1")  # 1 byte -> 1 char: offsets stay byte offsets
            it = ((i, m.end()) for i, r in self._py for m in r.finditer(text))
        return it if limit is None else itertools.islice(it, limit)


_MATCHERS: dict[tuple[tuple[str, bool], ...], "_Engine"] = {}
_MATCHERS_LOCK = threading.Lock()  # a hyperscan database has one scratch space: one scan at a time


PREFILTER_MIN_BYTES = 256 * 2**10  # below this, compiling a multi-pattern database costs more than it saves


def lines_matching(patterns: list[tuple[str, bool]], texts: list[str],
                   min_bytes: int = PREFILTER_MIN_BYTES) -> dict[int, set[int]]:
    """Pattern index -> indices of ``texts`` where the (prefilter form of the) pattern matches, in one pass
    of the fastest engine over the joined texts. Callers confirm each hit with the exact Python pattern;
    patterns the engine cannot take are absent (the caller then scans those itself), and so is everything
    when the texts are smaller than ``min_bytes``."""
    import bisect

    if sum(len(t) for t in texts) < min_bytes:
        return {}
    key = tuple(patterns)
    enc = [t.encode("utf-8", "replace") for t in texts]
    offsets, pos = [], 0
    for b in enc:
        offsets.append(pos)
        pos += len(b) + 1
    data = b"\n".join(enc)
    with _MATCHERS_LOCK:
        eng = _MATCHERS.get(key)
        if eng is None:
            eng = _MATCHERS[key] = _Engine(list(patterns))
        found = list(eng.scan(data))
    out: dict[int, set[int]] = {i: set() for i, (p, _) in enumerate(patterns) if p not in eng.unprefiltered}
    for pid, end in found:
        out.setdefault(pid, set()).add(bisect.bisect_right(offsets, max(0, end - 1)) - 1)
    return out


