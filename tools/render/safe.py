"""Terminal safety: the one place where text from an input (a log line, a file name, a config value) is made
harmless before it reaches a terminal or a JSON consumer.

A log can carry escape sequences aimed at whoever reads it: OSC 52 (write the clipboard), OSC 0/2 (window
title), OSC 8 (hyperlinks), DCS (device control), RIS (reset), 8-bit C1 controls (CSI U+009B, OSC U+009D) and
bidi overrides that reorder what is shown. :func:`terminal_safe` turns every C0 control but newline and tab,
DEL, every C1 control and the bidi/line-separator characters into visible ``\\xHH`` / ``\\uHHHH`` text, so
no sequence can start; the rest of the sequence is then plain printable text. With ``keep_sgr`` our own
colour codes (SGR, ``ESC [ ... m``) survive. :func:`json_safe` does the same for JSON text with ``\\u``
escapes (JSON leaves C1 and U+2028/U+2029 raw; they only ever occur inside strings there).
"""
from __future__ import annotations

import argparse
import re

_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff"
_CTRL = re.compile(f"[{_UNSAFE}]")
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")
_SGR = re.compile(r"(\x1b\[[0-9;]{0,32}m)")


def _visible(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def terminal_safe(s: str, *, keep_sgr: bool = False) -> str:
    """``s`` with every control and escape character shown as text (``\\x1b``); newlines and tabs kept."""
    if not _CTRL.search(s):
        return s
    if keep_sgr:
        parts = _SGR.split(s)
        return "".join(p if i % 2 else _CTRL.sub(_visible, p) for i, p in enumerate(parts))
    return _CTRL.sub(_visible, s)


def json_safe(s: str) -> str:
    """JSON text with DEL, C1 controls and bidi/line-separator characters as ``\\u`` escapes (still valid JSON,
    same values once parsed)."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", s)


class SafeArgumentParser(argparse.ArgumentParser):
    """argparse whose messages (which echo arguments, e.g. a file name) never write control characters raw."""

    def _print_message(self, message: str, file=None) -> None:
        super()._print_message(terminal_safe(message) if message else message, file)
