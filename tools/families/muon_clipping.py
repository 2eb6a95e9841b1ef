"""Muon vs global grad-norm clipping (seed tool 3): check, diagnose, avoid (config patch), GPU."""
from __future__ import annotations

from grpo_debug.skills.loader import RuleBase, default_rules
from grpo_debug.tools.families.overview import checklist_report, symptom_table_report
from grpo_debug.tools.families.common import (avoid_report, check_report, diagnose_report, gpu_report,
                                              resolve_operation)
from grpo_debug.tools.models import FamilyReport


def muon_clipping(operation: str, text: str | None = None, path: str | None = None, gpu: str | None = None,
                  rules: RuleBase | None = None) -> FamilyReport:
    """Muon clipping avoidance (seed tool 3): Muon under global grad-norm clipping / ChainedOptimizer."""
    rb = rules or default_rules()
    op = resolve_operation("muon_clipping", operation)
    if not text and not path and op in ("check", "diagnose"):  # no input: the whole view
        return checklist_report("muon_clipping", rb) if op == "check" else symptom_table_report("muon_clipping", rb)
    return {"check": lambda: check_report("muon_clipping", text, path, rb),
            "diagnose": lambda: diagnose_report("muon_clipping", text, path, rb),
            "avoid": lambda: avoid_report("muon_clipping", text, path, rb), "gpu": lambda: gpu_report("muon_clipping", gpu, rb)}[op]()
