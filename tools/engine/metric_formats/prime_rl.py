"""prime-rl step lines: ``Step N | <time> | Name value | Name value ...`` (loguru, trainer and orchestrator).

Source: PrimeIntellect-ai/prime-rl src/prime_rl/trainer/rl/train.py::

    step_message = f"Step {progress.step} | {format_time(step_time):>7} | Loss {...:.4f} | Entropy {...:.4f}"
    ... f" | Mismatch KL {...:.4f}" ... f" | Grad. Norm {grad_norm:.4f}" ... f" | LR {current_lr:.2e} | Throughput
    {throughput:.0f} tokens/s | MFU {mfu:.1f}% | Peak Mem. {peak_memory:.1f} GiB"

and src/prime_rl/orchestrator/orchestrator.py ``f"Step {step} | {...} | Reward {...:.4f} | Trainable {n}/{m}
({rate:.1%}) | ... | Truncation {...:.1%}"``; earlier releases print ``Name: value`` (``SUCCESS Step 2 | Time:
946.26s | Reward: 0.0648 | Throughput: 1177.3 tokens/s``, https://github.com/PrimeIntellect-ai/prime-rl/issues/1119).
A field is ``Name[:] value[unit]``; a percentage is filed as a fraction
(``Truncation 12.5%`` -> 0.125); fields that are not one name and one number (``Trainable 3/4 (75.0%)``, the step
time) are skipped. ``Micro Step i/n | ...`` lines are not steps.
"""
from __future__ import annotations

import re

from grpo_debug.tools.engine.values import to_float

_HEAD = re.compile(r"(?<!Micro )\bStep (\d+) \| ")
_FIELD = re.compile(r"^([A-Za-z][A-Za-z .\-]{0,40}?):? (-?[\d.]+(?:e[-+]?\d+)?|nan|inf|-inf)(%|\s?[A-Za-z/.]{1,16})?$")


def prime_rl_line(ln, table, state: dict) -> bool:
    t = ln.text
    if "Step " not in t or " | " not in t:
        return False
    m = _HEAD.search(t)
    if not m:
        return False
    vals = {}
    for part in t[m.end():].split(" | "):
        f = _FIELD.match(part.strip())
        if not f:
            continue
        v = to_float(f.group(2))
        if v is None:
            continue
        vals[f.group(1).strip()] = v / 100 if f.group(3) == "%" else v
    if len(vals) < 1:
        return False
    table.add("prime_rl", float(m.group(1)), ln.no, vals)
    return True
