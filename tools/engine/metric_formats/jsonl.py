"""JSON metric records printed one per line: verl's file logger and ROLL's metrics lines.

- verl FileLogger (verl/utils/tracking.py, ``FileLogger.log``): ``{"step": N, "data": {...}}`` per line
  (orjson writes NaN/inf as ``null``: a null is read as NaN, as tools/readers/textstores.py does for the file);
- ROLL (alibaba/ROLL roll/utils/tracking.py ``StdoutTracker.log``):
  ``logger.info(f"metrics_tag: {json.dumps({'step': step, 'metrics': values})}")``, and the pipelines'
  ``logger.info(json.dumps(metrics))`` (roll/pipeline/rlvr/rlvr_pipeline.py) whose step is the dict's
  ``system/step`` (roll/pipeline/base_pipeline.py sets ``metrics["system/step"] = global_step``), else an ordinal
  on the ``log_record`` axis.
  ROLL lines carry the prefix ``[%(asctime)s] [%(filename)s (%(lineno)d)] [%(levelname)s] [%(WORKER_NAME)s
  %(RANK)s / %(WORLD_SIZE)s][PID n]`` (roll/utils/logging.py ``get_logger``), read here up to the message.
"""
from __future__ import annotations

import json
import math
import re

from grpo_debug.tools.engine.values import numeric

_ROLL_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] \[[^\]\[]{1,200}\] \[[A-Z]+\] \[[^\]\[]{1,100}\]\[PID \d+\] ")


def _nulls_as_nan(d: dict, depth: int = 0) -> dict:
    return {k: (math.nan if v is None else _nulls_as_nan(v, depth + 1) if isinstance(v, dict) and depth < 4 else v)
            for k, v in d.items()}


def _load(s: str) -> dict | None:
    try:
        d = json.loads(s)
    except (ValueError, RecursionError):
        return None
    return d if isinstance(d, dict) else None


def json_step_line(ln, table, state: dict) -> bool:
    """A verl ``{"step": N, "data": {...}}`` line."""
    t = ln.text
    if not t.startswith('{"') or '"data"' not in t or not t.endswith("}"):
        return False
    d = _load(t)
    if not d or not isinstance(d.get("data"), dict) or not isinstance(d.get("step"), (int, float)):
        return False
    vals = numeric(_nulls_as_nan(d["data"]))
    if not vals:
        return False
    table.add("verl_jsonl", float(d["step"]), ln.no, vals)
    return True


def roll_line(ln, table, state: dict) -> bool:
    """A ROLL ``metrics_tag: {...}`` line or a JSON metrics dict after the ROLL prefix."""
    t = ln.text
    if not t.startswith("[") or "[PID " not in t or not t.endswith("}"):
        return False
    m = _ROLL_PREFIX.match(t)
    if not m:
        return False
    msg = t[m.end():]
    if msg.startswith("metrics_tag: "):
        d = _load(msg[len("metrics_tag: "):])
        if not d or not isinstance(d.get("metrics"), dict):
            return False
        step, vals = d.get("step"), numeric(d["metrics"])
    elif msg.startswith('{"'):
        d = _load(msg)
        vals = numeric(d) if d else {}
        step = vals.get("system/step")
    else:
        return False
    if not vals:
        return False
    if isinstance(step, bool) or not isinstance(step, (int, float)) or not math.isfinite(step):
        state["roll"] = state.get("roll", 0) + 1  # no step in the record: its ordinal, on an axis that says so
        step = state["roll"]
        for k in vals:
            table.axes.setdefault(k, "log_record")
    table.add("roll", float(step), ln.no, vals)
    return True
