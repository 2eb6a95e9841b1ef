"""The NaN/Inf guide (seed tool 2): check a config, diagnose symptoms or a log, avoid, GPU."""
from __future__ import annotations

from grpo_debug.skills.loader import RuleBase, default_rules
from grpo_debug.tools.families.overview import checklist_report, symptom_table_report
from grpo_debug.tools.families.common import (avoid_report, check_report, diagnose_report, gpu_report,
                                              resolve_operation)
from grpo_debug.tools.models import FamilyReport


def nan_guide(operation: str, text: str | None = None, path: str | None = None, gpu: str | None = None,
              rules: RuleBase | None = None) -> FamilyReport:
    """NaN debugging guide (seed tool 2): check a config for NaN risks, diagnose from symptoms or a log,
    avoidance recommendations, per-GPU NaN risks."""
    rb = rules or default_rules()
    op = resolve_operation("nan_guide", operation)
    if not text and not path and op in ("check", "diagnose"):  # no input: the whole view
        return checklist_report("nan_guide", rb) if op == "check" else symptom_table_report("nan_guide", rb)
    return {"check": lambda: check_report("nan_guide", text, path, rb),
            "diagnose": lambda: diagnose_report("nan_guide", text, path, rb),
            "avoid": lambda: avoid_report("nan_guide", text, path, rb), "gpu": lambda: gpu_report("nan_guide", gpu, rb)}[op]()
