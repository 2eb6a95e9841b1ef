"""The NaN/Inf guide (seed tool 2): check a config, diagnose symptoms or a log, avoid, GPU."""
from __future__ import annotations

from grpo_debug.skills.loader import RuleBase, default_rules
from grpo_debug.tools.families.overview import check_diagnose_avoid_gpu
from grpo_debug.tools.models import FamilyReport


def nan_guide(operation: str, text: str | None = None, path: str | None = None, gpu: str | None = None,
              rules: RuleBase | None = None) -> FamilyReport:
    """NaN debugging guide (seed tool 2): check a config for NaN risks, diagnose from symptoms or a log,
    avoidance recommendations, per-GPU NaN risks."""
    return check_diagnose_avoid_gpu("nan_guide", operation, text, path, gpu, rules or default_rules())
