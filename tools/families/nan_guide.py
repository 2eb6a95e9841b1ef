"""The NaN/Inf guide (seed tool 2): check a config, diagnose symptoms or a log, avoid, GPU."""
from __future__ import annotations

from grpo_debug.skills.loader import RuleBase, default_rules
from grpo_debug.tools.families.common import _avoid, _check, _diagnose, _gpu, _op
from grpo_debug.tools.models import FamilyReport


def nan_guide(operation: str, text: str | None = None, path: str | None = None, gpu: str | None = None,
              rules: RuleBase | None = None) -> FamilyReport:
    """NaN debugging guide (seed tool 2): check a config for NaN risks, diagnose from symptoms or a log,
    avoidance recommendations, per-GPU NaN risks."""
    rb = rules or default_rules()
    op = _op("nan_guide", operation)
    return {"check": lambda: _check("nan_guide", text, path, rb), "diagnose": lambda: _diagnose("nan_guide", text, path, rb),
            "avoid": lambda: _avoid("nan_guide", text, path, rb), "gpu": lambda: _gpu("nan_guide", gpu, rb)}[op]()
