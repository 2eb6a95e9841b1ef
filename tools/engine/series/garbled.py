"""garbled_samples: rollout text that is token salad, read from the run's samples (printed or quoted).

A sample is garbled when its letters switch between writing systems many times: at least ``min_scripts`` scripts
with ``min_letters`` letters each, and at least ``min_switches`` changes of script from one letter to the next
(``Let compiled觉得觉得ikان>ä拒绝何为iel`` switches Latin/CJK/Arabic a dozen times in 30 characters). Natural text
in one language, and a sentence in one language that names a few English identifiers, switches a handful of
times at most; weights that were loaded wrongly (a broken weight sync, a bad conversion, an fp16 overflow) sample
tokens from the whole vocabulary, and a multilingual vocabulary mixes scripts on every token. Also garbled: a
sample whose tail is one short unit repeated ``min_repeats`` times (``!!!!!!!!``, ``the the the ...``), the
degenerate output of an fp16 overflow (vllm-project/vllm#2187-style ``!!!!`` outputs).

Scripts are told apart by Unicode block (Latin incl. Latin-1/Extended, CJK ideographs and kana, Hangul, Arabic,
Cyrillic, Hebrew, Greek, Thai, Devanagari).
"""
from __future__ import annotations

import re

from grpo_debug.tools.engine.hit import Hit
from grpo_debug.tools.run.model import Run

_BLOCKS = ((0x41, 0x24F, "latin"), (0x370, 0x3FF, "greek"), (0x400, 0x4FF, "cyrillic"), (0x590, 0x5FF, "hebrew"),
           (0x600, 0x6FF, "arabic"), (0x900, 0x97F, "devanagari"), (0xE00, 0xE7F, "thai"), (0x3040, 0x30FF, "kana"),
           (0x4E00, 0x9FFF, "cjk"), (0xAC00, 0xD7AF, "hangul"))
# the unit starts with a non-blank, so \s? and \1 never compete for one blank (that was exponential)
_REPEAT = re.compile(r"(\S.{0,11}?)(?:\s?\1){7,}$", re.S)


def _script(c: str) -> str | None:
    o = ord(c)
    if o < 0x41 or not c.isalpha():
        return None
    for lo, hi, name in _BLOCKS:
        if lo <= o <= hi:
            return "cjk" if name == "kana" else name
    return "other"


def salad(text: str, min_scripts: int = 3, min_letters: int = 2, min_switches: int = 6) -> tuple[int, int]:
    """(scripts with at least ``min_letters`` letters, script switches) of ``text``."""
    counts: dict[str, int] = {}
    switches, prev = 0, None
    for c in text:
        s = _script(c)
        if s is None:
            continue
        counts[s] = counts.get(s, 0) + 1
        if prev is not None and s != prev:
            switches += 1
        prev = s
    return sum(1 for n in counts.values() if n >= min_letters), switches


def garbled_samples(run: Run, min_scripts: int = 3, min_switches: int = 6, min_repeats: int = 8) -> Hit | None:
    """The garbled samples of the run; evidence: their lines (up to 8), the first one quoted in the message."""
    bad = []
    for smp in run.samples:
        if smp.role in ("prompt", "ground_truth", "score"):
            continue
        scripts, switches = salad(smp.text[:2000])
        tail = smp.text[-200:].rstrip()
        rep = _REPEAT.search(tail) if len(tail) >= min_repeats else None
        if (scripts >= min_scripts and switches >= min_switches) or (rep and len(rep.group(0)) >= min_repeats):
            bad.append((smp, scripts, switches))
    if not bad:
        return None
    smp, scripts, switches = bad[0]
    why = (f"{scripts} scripts, {switches} script switches" if scripts >= min_scripts and switches >= min_switches
           else "a unit repeated to the end")
    lines = list(dict.fromkeys(n for s, _, _ in bad for n in s.lines[:2]))[:8]
    return Hit(lines, f"{len(bad)} rollout text sample(s) look garbled ({why}), first at line {smp.lines[0]}: "
               f"{smp.text[:80]!r}", [])
