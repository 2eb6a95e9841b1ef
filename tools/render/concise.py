"""Pure helpers of the concise triage views (the MCP answer, server/concise.py, and the CLI's text,
tools/render/triage.py): the summary without what the top finding says again, the series the findings involve,
signals in words (no raw regexes), clipping on word boundaries. No rich, no I/O."""
from __future__ import annotations

import re

from grpo_debug.tools.models import TriageResult

_REGEX_SIGNAL = re.compile(r"^log (?:line )?matches /.*/$", re.S)
_QUOTED_REGEX = re.compile(r"`[^`\n]*[\\|^$*+?\[\]{}][^`\n]*`")
_SUMMARY_PARTS = re.compile(r" (Signals|Evidence|Fix|Also|Note): ")


def clip(s: str | None, n: int) -> str:
    """``s`` cut to at most ``n`` characters at a word boundary, with an ellipsis when cut ('' for None)."""
    s = (s or "").strip()
    if len(s) <= n:
        return s
    cut = s[: n - 1]
    sp = cut.rfind(" ")
    return (cut[:sp] if sp > n // 2 else cut).rstrip(" ,;:") + "\u2026"


def one_line(s: str | None, n: int) -> str:
    """``s`` on one line (whitespace runs folded) and clipped to ``n`` characters."""
    return clip(" ".join((s or "").split()), n)


def no_regex(s: str) -> str:
    """A note without the raw regexes it quotes (`\\bTP\\d+\\]` becomes 'a pattern'): an agent cannot act on them."""
    return _QUOTED_REGEX.sub("a pattern", s)


def signal_words(matched: list[str], n: int = 5, chars: int = 240) -> list[str]:
    """The signals that fired, in words, at most ``n``: a raw regex becomes 'a log line matches the rule's
    pattern' (explain_rule shows the pattern); repeats dropped; each on one line of at most ``chars``."""
    out: list[str] = []
    for m in matched:
        m = "a log line matches the rule's pattern" if _REGEX_SIGNAL.match(m or "") else " ".join((m or "").split())
        m = m if len(m) <= chars else m[: chars - 1] + "\u2026"
        if m and m not in out:
            out.append(m)
    return out[:n]


def short_summary(res: TriageResult) -> str:
    """The summary without what the top finding already says (its signals, evidence and fix): the headline,
    'Also: ...' (symptoms only) and the notes on the input."""
    s = res.summary or ""
    parts = _SUMMARY_PARTS.split(s)
    if len(parts) < 3 or not res.findings:
        return clip(s, 1_200)
    head, named = parts[0], dict(zip(parts[1::2], parts[2::2]))
    out = head
    if len(res.findings) > 1:
        out += " Also: " + ", ".join(f.symptom for f in res.findings[1:4]) + "."
    note = named.get("Note", "").rstrip(".")
    if note and not all(any(x.strip() in sk for sk in res.coverage.skipped) for x in note.split("; ")):
        out += " Note: " + one_line(no_regex(note), 400)  # said here unless it is coverage.skipped's own words
    return out


def involved_series(res: TriageResult, n: int) -> list[str]:
    """The metric series the findings observed, first finding first: a series named in a finding's title, signals
    or onset (by its full key, or by its last path part when that holds an underscore, as detectors write
    'grad_norm climbs ...'), or by its full key in the fix or the summary; never from evidence lines, which print
    every key of a step. At most ``n``."""
    out: list[str] = []

    def named(key: str, seen: str, fix: str) -> bool:
        tail = key.rsplit("/", 1)[-1]
        return key in seen or key in fix or ("_" in tail and re.search(rf"(?<![\w/]){re.escape(tail)}\b", seen) is not None)

    for f in res.findings:
        seen = " ".join([f.title, str(getattr(f, "onset", "") or "")] + [m for c in f.causes for m in c.matched])
        out += [key for key in res.metrics if key not in out and named(key, seen, f.fix)]
    head = short_summary(res)  # the whole summary quotes an evidence line
    out += [key for key in res.metrics if key not in out and key in head]
    return out[:n]
