"""Metric values as printed: numbers, numeric strings, ``np.float64(x)``, nan/inf; printed dicts (repr or JSON).

Shared by engine/metrics.py and the console format units of engine/metric_formats/.
"""
from __future__ import annotations

import ast
import json
import re

# a number printed inside its type: numpy >= 2 scalars' repr (``np.float64(-0.9131)``, ``np.float32(nan)``), a torch
# scalar tensor's repr (``tensor(0.5000)``, ``tensor(-inf, device='cuda:0', dtype=torch.bfloat16)``,
# ``tensor(1.2e-05, grad_fn=<MeanBackward0>)``, a one-element ``tensor([0.5000], device='cuda:0')``): the number is
# the first argument, kept as printed (a tensor of several numbers is no metric value: its dict is not read)
_NP_WRAP = re.compile(r"(?:np|numpy)\.(?:float|int|uint)\d*\(([^(),]*)\)"  # (no nested repeats: linear)
                      r"|(?<![\w.])tensor\((?:([^(),\[\]]*)|\[([^(),\[\]]*)\])(?:,[^()]*)?\)")
_NP_BOOL = re.compile(r"\b(?:np|numpy)\.(True|False)_\b")
_BARE_NAN = re.compile(r"(?<!['\"\w])(-?)(nan|inf|NaN|Infinity|-Infinity)(?!['\"\w])")


def _unwrap(m: re.Match) -> str:
    return next(g for g in m.groups() if g is not None).strip()


def to_float(v: object) -> float | None:
    """A metric value as float: numbers, numeric strings ('0.0123', '-1.2e-05', 'nan', '-inf'), a number printed in
    its type (``np.float64(-0.9131)``, ``tensor(0.5, device='cuda:0')``); bools excluded; None for anything else."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        s = v.strip().strip("'\"")
        m = _NP_WRAP.fullmatch(s)
        if m:
            s = _unwrap(m)
        try:
            return float(s)
        except ValueError:
            return None
    return None


def parse_dict_text(s: str) -> dict | None:
    """Parse a printed dict (Python repr or JSON), tolerating nan/inf and np.float64(...)."""
    s = _NP_BOOL.sub(r"\1", _NP_WRAP.sub(_unwrap, s))
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
