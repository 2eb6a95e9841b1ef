"""Lines that are layout, not content: understood as formatting or progress, never "not understood".

- punctuation only (no letter or digit): a printed dict's lone ``{`` / ``},`` / ``]``, rules ``-----`` / ``=====``,
  box edges ``╰────╯``, ``...``;
- a tqdm progress bar, recognised by the statistics tqdm writes at its end, ``[elapsed<remaining, rate]`` or
  ``[elapsed, rate]`` (tqdm/std.py ``format_meter``; its default bar format ends with
  ``[{elapsed}<{remaining}, {rate_fmt}{postfix}]``)::

      Training Progress:  10%|█         | 20/200 [01:02<09:18,  3.10s/it]
      Processed prompts: 100%|██████████| 512/512 [00:12<00:00, 41.2it/s, est. speed input: 2310.45 toks/s]
      Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:02<00:00,  1.71it/s]
      1234it [00:05, 246.81it/s]

  A bar with a log line glued after it on the same line (``...2.14s/it][2021-06-08 12:02:45,001] [INFO] ...``)
  is not layout: its tail is content.
"""
from __future__ import annotations

import re

_PUNCT = re.compile(r"^[\W_]+$")
_STATS = re.compile(r"\[(?:\d+:)?\d+:\d\d(?:<(?:(?:\d+:)?\d+:\d\d|\?))?,[^\[\]]*\]\s*$")  # [01:02<09:18, 3.10s/it]
_COUNT = re.compile(r"\d%|\d/\d|\dit\b")  # what comes before it: a percentage, "20/200", "1234it"


def is_layout(text: str) -> bool:
    """Whether a (normalised) line is formatting or progress output: punctuation only, or a tqdm bar. Linear: the
    stats bracket is matched once, at the last ``[``."""
    s = text.strip()
    if not s or _PUNCT.match(s):
        return True
    i = s.rfind("[")
    return i > 0 and s.endswith("]") and bool(_STATS.match(s, i)) and bool(_COUNT.search(s, max(0, i - 200), i))
