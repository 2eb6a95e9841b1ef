"""NeMo-RL console results: a ``===== Step N/M =====`` header, then emoji-headed blocks of ``  • Name: value``
bullets (``📊 Training Results:``, ``⏱️  Timing:``).

Source: NVIDIA-NeMo/RL nemo_rl/algorithms/grpo.py: ``print(f"\\n{'=' * 25} Step {current_step + 1}/{max_num_steps}
{'=' * 25}")``; ``print("\\n📊 Training Results:")``, ``print(f"  • Loss: {metrics['loss']:.4f}")``,
``  • Generation KL Error:``, ``  • Avg Reward:``, ``  • Mean Generation Length:``; ``print("\\n⏱️  Timing:")``,
``  • Total step time: {total_time:.2f}s``, ``  • {k}: {v:.2f}s ({percent:.1f}%)``. Bullets under a Timing
header are filed as ``timing/<name>`` (seconds); the others under their printed name.
"""
from __future__ import annotations

import re

from grpo_debug.tools.engine.values import to_float

_STEP = re.compile(r"^=+ Step (\d+)/\d+ =+$")
_BULLET = re.compile(r"^\s*•\s+([^:]{1,80}):\s*(\S+)")


def nemo_rl_line(ln, table, state: dict) -> bool:
    t = ln.text
    if "Step " in t and t.startswith("="):
        m = _STEP.match(t.strip())
        if m:
            state["nemo_step"] = float(m.group(1))
            state.pop("nemo_block", None)
            table.lines.add(ln.no)
            return True
        return False
    if t.endswith(":") and ("Results" in t or "Timing" in t):
        state["nemo_block"] = "timing" if "Timing" in t else "results"
        return False
    if "•" not in t or "nemo_step" not in state:
        return False
    m = _BULLET.match(t)
    if not m:
        return False
    v = to_float(m.group(2).rstrip("s,")) if m.group(2) not in ("nan", "inf") else to_float(m.group(2))
    if v is None:
        return False
    name = m.group(1).strip()
    key = f"timing/{name}" if state.get("nemo_block") == "timing" else name
    table.add("nemo_rl", state["nemo_step"], ln.no, {key: v})
    return True
