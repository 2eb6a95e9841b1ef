"""The seed skill's five tool families as views over one rule base and one engine.

``playbook``, ``nan_guide``, ``muon_clipping``, ``stream_safety`` and ``knowledge_map`` each take an
``operation`` (the seed's sub-commands) and optional input (``text``: symptom words, a log, a config, a
Python snippet, a bug id; ``path``: a file), plus a ``gpu`` from the spec table. No family holds a fact
of its own: every item is built from rules (skills/rules), derivations (skills/derivations), the GPU
table (skills/gpus.yaml) or the triage engine's findings on the input. A family is only a *selector*
over the rule base (skills/families.yaml) plus a layout, one module per family.

This module is the catalogue: names, operations (one ``Literal`` each), titles and help texts. The CLI's
argparse choices and the MCP tools' enums are built from it, and it imports no engine, so that the MCP
server can list its tools without loading the rule base.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from grpo_debug.tools.errors import FamilyError  # noqa: F401  (re-exported)

if TYPE_CHECKING:
    from grpo_debug.tools.models import FamilyReport

PlaybookOp = Literal["playbook", "symptoms", "fixes", "gpu"]
NanGuideOp = Literal["check", "diagnose", "avoid", "gpu"]
MuonClippingOp = Literal["check", "diagnose", "avoid", "gpu"]
StreamSafetyOp = Literal["map", "analyze", "compare", "gpu"]
KnowledgeMapOp = Literal["theory", "bug", "decision", "proof", "cross", "gpu"]

#: The seed's sub-command ``rtx4090`` is ``gpu`` with the GPU defaulting to the RTX 4090.
SEED_OPERATION_ALIASES = {"rtx4090": "gpu"}
SEED_GPU = "rtx4090"


@dataclass(frozen=True)
class FamilySpec:
    """One family: its operations and the words the CLI and the MCP tool list show for it."""

    name: str
    operations: tuple[str, ...]
    title: str
    description: str  # the MCP tool's description
    help: str         # the CLI sub-command's help line
    text_help: str = ""  # what ``text`` is for each operation (the MCP tool's ``text`` description)

    @property
    def choices(self) -> tuple[str, ...]:
        """The operations a caller may name: the family's own plus the seed's aliases."""
        return self.operations + tuple(SEED_OPERATION_ALIASES)


_NO_TEXT = " Empty: the whole view."
_CHECK = "check: a config, script or log. diagnose: symptom words (a named framework's causes first) or a log. "
_AVOID = "avoid: a config (patch) or setup words (filter). gpu: unused."

FAMILY_SPECS: dict[str, FamilySpec] = {s.name: s for s in (
    FamilySpec("playbook", get_args(PlaybookOp), "GRPO debug playbook",
               "The 7 bug pattern classes, symptom -> causes -> fix, fix reference per bug, per-GPU report.",
               "GRPO debug playbook: pattern classes, symptom map, fixes, GPU report",
               "playbook, symptoms, fixes: a filter (symptom words, metric, rule id); only matches. gpu: unused." + _NO_TEXT),
    FamilySpec("nan_guide", get_args(NanGuideOp), "GRPO NaN guide",
               "NaN/Inf: check a config for NaN risks, diagnose symptom words or a log, avoidance advice, "
               "per-GPU NaN risks.",
               "NaN/Inf guide: check a config, diagnose symptoms or a log, avoid, GPU",
               _CHECK + _AVOID + _NO_TEXT),
    FamilySpec("muon_clipping", get_args(MuonClippingOp), "Muon clipping avoidance",
               "Muon optimizer vs global grad-norm clipping (Megatron ChainedOptimizer, DeepSpeed): check, "
               "diagnose a plateau, the avoiding patch.",
               "Muon vs global clipping: check, diagnose, avoid (config patch), GPU",
               _CHECK + _AVOID + _NO_TEXT),
    FamilySpec("stream_safety", get_args(StreamSafetyOp), "CUDA stream safety",
               "CUDA stream safety: record_stream/overlap_comm patterns across frameworks (map, compare), side-stream "
               "hazards in a config or Python snippet (analyze).",
               "CUDA stream safety: map, analyze a config or Python snippet, compare, GPU",
               "map: a filter. compare: framework names or a filter. analyze: a config, script or Python snippet. "
               "gpu: unused." + _NO_TEXT),
    FamilySpec("knowledge_map", get_args(KnowledgeMapOp), "Knowledge map",
               "Why a rule holds: mechanism (theory), bug -> pattern -> decision (bug), a MUST DO/NOT justified "
               "(decision), derivations (proof), one pattern across frameworks (cross).",
               "theory, bug chain, decision, proof, cross-framework, GPU",
               "theory, bug, decision, proof, cross: a topic (words, rule id, bug #8061, pattern class, MUST DO 2); "
               "only matches. gpu: unused." + _NO_TEXT),
)}

OPERATIONS: dict[str, tuple[str, ...]] = {name: s.operations for name, s in FAMILY_SPECS.items()}
#: The operations whose ``text`` is a filter over the rule base (words), not an input to analyse; ``diagnose``
#: and ``avoid`` read a log or config as their input, words as a filter.
FILTER_OPERATIONS: dict[str, tuple[str, ...]] = {
    "playbook": ("playbook", "symptoms", "fixes"), "nan_guide": ("diagnose", "avoid"),
    "muon_clipping": ("diagnose", "avoid"), "stream_safety": ("map", "compare"),
    "knowledge_map": ("theory", "bug", "decision", "proof", "cross")}


def family_function(family: str):
    """The family's entry function (``tools/families/<family>.py``), imported on first use."""
    if family not in FAMILY_SPECS:
        raise FamilyError(f"unknown family {family!r}; use one of {', '.join(FAMILY_SPECS)}")
    return getattr(importlib.import_module(f"grpo_debug.tools.families.{family}"), family)


def run_family(family: str, operation: str, text: str | None = None, path: str | None = None,
               gpu: str | None = None) -> FamilyReport:
    """Dispatch to a family. Raises FamilyError (unknown family/operation/GPU, missing input) and
    InputError (unreadable path)."""
    fn = family_function(family)
    if operation in SEED_OPERATION_ALIASES and not gpu:
        gpu = SEED_GPU
    rep = fn(operation, text=text, path=path, gpu=gpu)
    if text and not path and operation in FILTER_OPERATIONS.get(family, ()):
        from grpo_debug.tools.families.filtering import bound_filtered

        rep = bound_filtered(rep, text)  # a filtered answer: a few kB whatever the filter matched
    return rep
