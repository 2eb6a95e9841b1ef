"""A Python regex rewritten for the byte-oriented multi-pattern engines (hyperscan, RE2 in Latin-1 mode).

The pattern is read with Python's own parser (``re._parser``; ``sre_parse`` before 3.11) and printed back in
the common syntax of both engines, over bytes: every pattern character becomes its UTF-8 bytes, so the engines
scan the raw log without decoding it. What they cannot express is relaxed so that the printed pattern matches
everywhere the Python one does (a superset; the caller confirms relaxed patterns with Python):

- look-around assertions are dropped (they only restrict a match);
- a back-reference ``\\1`` becomes a copy of the group it refers to (the group's text is one of its matches);
- conditional groups ``(?(1)a|b)`` become ``(?:a|b)``; atomic groups and possessive repeats plain ones;
- a caseless non-ASCII letter becomes the alternation of its case forms;
- a class with non-ASCII members, a negated class and ``.`` also accept any whole UTF-8 sequence (one pattern
  character can be several bytes).

Word classes and ``\\b`` stay ASCII (the engines' own): a non-ASCII letter counts as a non-word character,
as it does for hyperscan and RE2 without Unicode mode. ``to_engine`` returns None when the pattern does not
parse or uses a construct with no safe relaxation.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

try:  # Python 3.11+
    import re._constants as _c
    import re._parser as _p
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _p  # type: ignore[no-redef]

_MB = r"[\xc0-\xff][\x80-\xbf]{1,3}"  # one multi-byte UTF-8 character
_CATS = {
    _c.CATEGORY_DIGIT: r"\d", _c.CATEGORY_NOT_DIGIT: r"\D", _c.CATEGORY_SPACE: r"\s",
    _c.CATEGORY_NOT_SPACE: r"\S", _c.CATEGORY_WORD: r"\w", _c.CATEGORY_NOT_WORD: r"\W",
}
_IN_CATS = {_c.CATEGORY_DIGIT: r"0-9", _c.CATEGORY_SPACE: r"\t\n\x0b\x0c\r ", _c.CATEGORY_WORD: r"0-9A-Za-z_"}
_NEG_CATS = (_c.CATEGORY_NOT_DIGIT, _c.CATEGORY_NOT_SPACE, _c.CATEGORY_NOT_WORD)
_ATS = {
    _c.AT_BEGINNING: "^", _c.AT_BEGINNING_STRING: r"\A", _c.AT_END: "$", _c.AT_END_STRING: r"\z",
    _c.AT_BOUNDARY: r"\b", _c.AT_NON_BOUNDARY: r"\B",
}
_REPEATS = (_c.MAX_REPEAT, _c.MIN_REPEAT) + ((_c.POSSESSIVE_REPEAT,) if hasattr(_c, "POSSESSIVE_REPEAT") else ())
_ATOMIC = getattr(_c, "ATOMIC_GROUP", object())


@dataclass
class EngineForm:
    """``pattern``: the printed pattern (bytes, one byte per character as Latin-1); ``relaxed``: it may match
    where the Python pattern does not (the caller confirms its hits); ``caseless``: compile it caseless."""

    pattern: bytes
    relaxed: bool
    caseless: bool


class _Unsupported(Exception):
    pass


def _byte_esc(b: int) -> str:
    ch = chr(b)
    return ch if ch.isalnum() and b < 128 else f"\\x{b:02x}"


def _char(code: int, ci: bool, st: dict) -> str:
    """One literal character as bytes text."""
    if code < 128:
        return _byte_esc(code)
    ch = chr(code)
    forms = {ch, ch.lower(), ch.upper()} if ci else {ch}
    if len(forms) > 1:
        st["relaxed"] = True
    alts = sorted("".join(_byte_esc(b) for b in f.encode("utf-8")) for f in forms if len(f) == 1)
    return "(?:" + "|".join(alts) + ")"


def _in(items, st: dict) -> tuple[str, str | None]:
    """A character class: (its form for one character, or a byte class accepting every byte of every
    character it accepts when one character can be several bytes, else None)."""
    neg = bool(items) and items[0][0] is _c.NEGATE
    parts, wide = [], False
    for op, av in items[1:] if neg else items:
        if op is _c.LITERAL and av < 128:
            parts.append(_byte_esc(av))
        elif op is _c.LITERAL:
            wide = True
        elif op is _c.RANGE:
            lo, hi = av
            wide = wide or hi >= 128
            if lo < 128:
                parts.append(f"{_byte_esc(lo)}-{_byte_esc(min(hi, 127))}")
        elif op is _c.CATEGORY and av in _IN_CATS:
            parts.append(_IN_CATS[av])
        elif op is _c.CATEGORY and av in _NEG_CATS:  # \D \S \W inside a class: any character (a superset)
            st["relaxed"] = True
            return f"(?:[\\x00-\\xff]|{_MB})", "[\\x00-\\xff]"
        else:
            raise _Unsupported(f"class item {op} {av}")
    body = "".join(parts)
    if wide:  # non-ASCII members: let any multi-byte character in
        st["relaxed"] = True
    if neg:  # any ASCII byte but the members, or a whole multi-byte character
        return f"(?:[^{body}\\x80-\\xff]|{_MB})", f"[^{body}]"
    if not body and not wide:
        raise _Unsupported("empty class")
    if wide:
        return (f"(?:[{body}]|{_MB})" if body else f"(?:{_MB})"), f"[{body}\\x80-\\xff]"
    return f"[{body}]", None


def _one_char(op, av, dotall: bool, st: dict) -> tuple[str, str | None] | None:
    """(single form, byte class or None) of an item that matches one character, else None."""
    if op is _c.ANY:
        return ("[\\x00-\\xff]", None) if dotall else (f"(?:[^\\n]|{_MB})", "[^\\n]")
    if op is _c.NOT_LITERAL:
        return _in([(_c.NEGATE, None), (_c.LITERAL, av)], st)
    if op is _c.IN:
        if len(av) == 1 and av[0][0] is _c.CATEGORY and av[0][1] in _CATS:
            cat = av[0][1]
            return (_CATS[cat], None) if cat not in _NEG_CATS else (f"(?:{_CATS[cat]}|{_MB})", _CATS[cat])
        return _in(av, st)
    return None


def _seq(items, ci: bool, dotall: bool, st: dict) -> str:
    return "".join(_item(op, av, ci, dotall, st) for op, av in items)


def _repeat(lo: int, hi: int) -> str:
    if hi == _c.MAXREPEAT:
        return "*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}"
    if lo == 0 and hi == 1:
        return "?"
    return f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"


def _item(op, av, ci: bool, dotall: bool, st: dict) -> str:  # noqa: C901 - one branch per parse-tree op
    if op is _c.LITERAL:
        return _char(av, ci, st)
    one = _one_char(op, av, dotall, st)
    if one is not None:
        return one[0]
    if op is _c.AT:
        if av not in _ATS:
            raise _Unsupported(f"anchor {av}")
        return _ATS[av]
    if op is _c.BRANCH:
        return "(?:" + "|".join(_seq(b, ci, dotall, st) for b in av[1]) + ")"
    if op is _c.SUBPATTERN:
        group, add, rem, body = av[-4], av[-3], av[-2], av[-1]
        sub_ci = (ci or bool(add & re.I)) and not (rem & re.I)
        sub_dot = (dotall or bool(add & re.S)) and not (rem & re.S)
        inner = _seq(body, sub_ci, sub_dot, st)
        if group is not None:
            st["groups"][group] = (body, sub_ci, sub_dot)
        if sub_ci != ci:
            return f"(?{'i' if sub_ci else '-i'}:{inner})"
        return f"(?:{inner})"
    if op in _REPEATS:
        lo, hi, body = av
        items = list(body)
        one = _one_char(*items[0], dotall, st) if len(items) == 1 else None
        if one is not None and one[1] is not None:  # x{lo,hi} of 1..4-byte characters: lo..4*hi bytes
            st["relaxed"] = True
            if hi != _c.MAXREPEAT:
                hi = 4 * hi if 4 * hi <= 1000 else _c.MAXREPEAT
            return one[1] + _repeat(lo, hi)
        return f"(?:{_seq(body, ci, dotall, st)}){_repeat(lo, hi)}"
    if op in (_c.ASSERT, _c.ASSERT_NOT):
        st["relaxed"] = True
        return ""
    if op is _c.GROUPREF:
        if av not in st["groups"]:
            raise _Unsupported("forward reference")
        body, g_ci, g_dot = st["groups"][av]
        st["relaxed"] = True
        return "(?:" + _seq(body, g_ci, g_dot, st) + ")"
    if op is _c.GROUPREF_EXISTS:
        _group, yes, no = av
        st["relaxed"] = True
        return "(?:" + _seq(yes, ci, dotall, st) + "|" + (_seq(no, ci, dotall, st) if no else "") + ")"
    if op is _ATOMIC:
        return "(?:" + _seq(av, ci, dotall, st) + ")"
    raise _Unsupported(f"op {op}")


def to_engine(pattern: str, caseless: bool = False) -> EngineForm | None:
    """The engine form of a Python regex (see the module docstring), or None when it cannot be printed."""
    try:
        tree = _p.parse(pattern, re.I if caseless else 0)
        ci = bool(tree.state.flags & re.I)
        st: dict = {"relaxed": False, "groups": {}}
        text = _seq(list(tree), ci, bool(tree.state.flags & re.S), st)
    except (re.error, _Unsupported, OverflowError, RecursionError, ValueError):
        return None
    return EngineForm(text.encode("latin-1"), st["relaxed"], ci)
