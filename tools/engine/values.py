"""Metric values as printed: numbers, numeric strings, ``np.float64(x)``, nan/inf; printed dicts (repr or JSON).

Shared by engine/metrics.py and the console format units of engine/metric_formats/.
"""
from __future__ import annotations

import ast
import json
import re

_NP_WRAP = re.compile(r"np\.(?:float|int)\d*\(([^()]*)\)")
_BARE_NAN = re.compile(r"(?<!['\"\w])(-?)(nan|inf|NaN|Infinity|-Infinity)(?!['\"\w])")


def to_float(v: object) -> float | None:
    """A metric value as float: numbers, numeric strings ('0.0123', 'nan', 'inf'), bools excluded."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        s = v.strip().strip("'\"")
        m = _NP_WRAP.fullmatch(s)
        if m:
            s = m.group(1)
        try:
            return float(s)
        except ValueError:
            return None
    return None


def parse_dict_text(s: str) -> dict | None:
    """Parse a printed dict (Python repr or JSON), tolerating nan/inf and np.float64(...)."""
    s = _NP_WRAP.sub(r"\1", s)
    try:
        d = json.loads(s)
        return d if isinstance(d, dict) else None
    except RecursionError:  # nested deeper than the decoder's recursion limit: not a metrics dict
        return None
    except ValueError:
        pass
    t = _BARE_NAN.sub(lambda m: f"'{m.group(1)}{m.group(2)}'", s)
    try:
        d = ast.literal_eval(t)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return d if isinstance(d, dict) else None


def numeric(d: dict, prefix: str = "", depth: int = 0, out: dict | None = None) -> dict[str, float]:
    """The numbers of a (nested) dict, keys joined with '/' (``{'a': {'b': '0.5'}}`` -> ``{'a/b': 0.5}``); values
    that are not numbers are left out; nesting deeper than 4 is not read. A JSON ``null`` is not a number here
    (a store reader may read it as NaN; a console dict prints NaN as nan)."""
    out = {} if out is None else out
    for k, v in d.items():
        key = f"{prefix}/{k}" if prefix else str(k)
        if isinstance(v, dict):
            if depth < 4:
                numeric(v, key, depth + 1, out)
            continue
        f = to_float(v)
        if f is not None:
            out[key] = f
    return out
