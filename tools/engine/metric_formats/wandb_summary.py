"""The summary W&B prints when a run finishes: ``wandb: Run summary:`` then ``wandb:   key value`` lines.

Source: the footer the wandb SDK prints at ``run.finish()``, as users paste it (e.g.
https://github.com/gensyn-ai/rl-swarm/issues/355: ``wandb:     train/loss 0.1516`` rows under ``wandb: Run
summary:``; https://github.com/LAION-AI/Open-Assistant/issues/2140: the ``wandb: Run history:`` rows before it are
sparklines ``▁▂▅``, not numbers, and are skipped): one row per key, keys right-aligned. A summary value is the key's last logged value: it is filed at
the largest step seen so far in the input (0 when none), on its own line.
"""
from __future__ import annotations

import re

from grpo_debug.tools.engine.values import to_float

_ROW = re.compile(r"^wandb:\s+(\S+)\s+(\S+)\s*$")
MAX_ROWS = 5000


def wandb_summary(lines, i: int, table, state: dict) -> int:
    t = lines[i].text
    if not t.startswith("wandb:") or "Run summary" not in t:
        return 0
    step = max((r.step for r in table.records), default=0.0)
    j = i + 1
    while j < len(lines) and j - i < MAX_ROWS:
        m = _ROW.match(lines[j].text)
        if not m:
            break
        v = to_float(m.group(2))
        if v is not None:
            table.add("wandb_summary", step, lines[j].no, {m.group(1): v})
        j += 1
    if j == i + 1:
        return 0
    table.lines.update(ln.no for ln in lines[i:j])
    return j - i
