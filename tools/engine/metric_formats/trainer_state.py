"""HF Trainer ``trainer_state.json`` pasted as text: the entries of its ``"log_history": [ ... ]`` array.

Source: transformers/trainer_callback.py ``TrainerState.save_to_json`` (``json.dumps(asdict(self), indent=2,
sort_keys=True)``): ``log_history`` is a list of dicts each with ``"step"`` (the optimizer step) and the logged
numbers (loss, grad_norm, learning_rate, epoch, reward, ...); Python's json writes NaN / Infinity literals.
Each entry is read on its own (a paste cut mid-array still yields its complete entries), each number at the line
that prints its key. Trainer.log writes ``{**logs, "step": self.state.global_step}`` into every entry; an entry
without a finite ``step`` is not read (no step is made up from the entry's position).
"""
from __future__ import annotations

import json
import math
import re

from grpo_debug.tools.engine.values import numeric

_START = re.compile(r'^\s*"log_history"\s*:\s*\[\s*$')
_KEY = re.compile(r'^\s*"([^"]+)"\s*:')
MAX_LINES = 400_000


def _entry(lines, a: int, b: int, table, prev: float) -> float:
    try:
        d = json.loads("\n".join(ln.text for ln in lines[a:b + 1]).rstrip().rstrip(","))
    except (ValueError, RecursionError):
        return prev
    if not isinstance(d, dict):
        return prev
    vals = numeric(d)
    step = vals.pop("step", None)
    if step is None or not math.isfinite(step):
        return prev  # a step only from the entry's own "step" (Trainer.log writes one into every entry)
    line_of = {m.group(1): ln.no for ln in lines[a:b + 1] if (m := _KEY.match(ln.text))}
    for k, v in vals.items():
        table.add("trainer_state", step, line_of.get(k, lines[a].no), {k: v})
    return step


def trainer_state_block(lines, i: int, table, state: dict) -> int:
    t = lines[i].text
    if "log_history" not in t or not _START.match(t):
        return 0
    depth, start, step, j = 0, None, 0.0, i + 1
    while j < len(lines) and j - i < MAX_LINES:
        s = lines[j].text
        if depth == 0 and s.strip().startswith("]"):
            break
        opened = s.count("{") - s.count("}")
        if depth == 0 and opened > 0:
            start = j
        depth += opened
        if depth <= 0 and start is not None:
            step = _entry(lines, start, j, table, step)
            start, depth = None, 0
        j += 1
    table.lines.update(ln.no for ln in lines[i:j + 1])
    return j - i + 1 if j > i + 1 else 0
