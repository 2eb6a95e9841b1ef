"""SkyRL console metrics: ``Step N:`` then the metrics dict pretty-printed over several lines, floats as strings.

Source: NovaSky-AI/SkyRL skyrl/train/utils/tracking.py ``ConsoleLogger.log``::

    data_as_str = pprint.pformat(ConsoleLogger.stringify_floats(data))   # floats -> f"{obj:.4f}"
    logger.info(f"Step {step}: \\n{data_as_str}")                          # loguru

so a record is a loguru line ending in ``Step 12:`` followed by ``{'policy/grad_norm': '0.1234',`` ... ``}``.
Each key is filed at the line that prints it. At most ``MAX_LINES`` lines are read for one dict.
"""
from __future__ import annotations

import re

from grpo_debug.tools.engine.values import numeric, parse_dict_text

MAX_LINES = 2000
_HEAD = re.compile(r"\bStep (\d+):\s*$")
_KEY = re.compile(r"""^\s*(?:\{\s*)?['"]([^'"]+)['"]\s*:""")  # no \s*\{?\s* (quadratic on blank lines)


def skyrl_block(lines, i: int, table, state: dict) -> int:
    """Read one ``Step N:`` + dict record starting at ``lines[i]``; the number of lines read, or 0."""
    t = lines[i].text
    if not t.endswith(":") or "Step " not in t or i + 1 >= len(lines):
        return 0
    m = _HEAD.search(t)
    if m is None or not lines[i + 1].text.lstrip().startswith("{"):
        return 0
    depth, end, body = 0, None, []
    for j in range(i + 1, min(len(lines), i + 1 + MAX_LINES)):
        s = lines[j].text
        body.append(s)
        depth += s.count("{") - s.count("}")
        if depth <= 0:
            end = j
            break
    if end is None:
        return 0
    d = parse_dict_text("\n".join(body))
    vals = numeric(d) if d else {}
    if not vals:
        return 0
    step = float(m.group(1))
    line_of: dict[str, int] = {}
    for j in range(i + 1, end + 1):
        k = _KEY.match(lines[j].text)
        if k:
            line_of.setdefault(k.group(1), lines[j].no)
    for k, v in vals.items():
        line = line_of.get(k) or line_of.get(k.split("/", 1)[0]) or lines[i].no  # a nested dict: its parent key's line
        table.add("skyrl", step, line, {k: v})
    table.lines.update(ln.no for ln in lines[i:end + 1])
    return end - i + 1
