"""Muon vs global grad-norm clipping (seed tool 3): check, diagnose, avoid (config patch), GPU."""
from __future__ import annotations

from grpo_debug.skills.loader import RuleBase, default_rules
from grpo_debug.tools.families.overview import check_diagnose_avoid_gpu
from grpo_debug.tools.models import FamilyReport


def muon_clipping(operation: str, text: str | None = None, path: str | None = None, gpu: str | None = None,
                  rules: RuleBase | None = None) -> FamilyReport:
    """Muon clipping avoidance (seed tool 3): Muon under global grad-norm clipping / ChainedOptimizer."""
    return check_diagnose_avoid_gpu("muon_clipping", operation, text, path, gpu, rules or default_rules())
