"""Muon vs global grad-norm clipping (seed tool 3): check, diagnose, avoid (config patch), GPU."""
from __future__ import annotations

from grpo_debug.skills.loader import RuleBase, default_rules
from grpo_debug.tools.families.common import _avoid, _check, _diagnose, _gpu, _op
from grpo_debug.tools.models import FamilyReport


def muon_clipping(operation: str, text: str | None = None, path: str | None = None, gpu: str | None = None,
                  rules: RuleBase | None = None) -> FamilyReport:
    """Muon clipping avoidance (seed tool 3): Muon under global grad-norm clipping / ChainedOptimizer."""
    rb = rules or default_rules()
    op = _op("muon_clipping", operation)
    return {"check": lambda: _check("muon_clipping", text, path, rb),
            "diagnose": lambda: _diagnose("muon_clipping", text, path, rb),
            "avoid": lambda: _avoid("muon_clipping", text, path, rb), "gpu": lambda: _gpu("muon_clipping", gpu, rb)}[op]()
