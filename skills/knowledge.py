"""Schemas and loaders for the knowledge that is not a rule: the GPU spec table and the derivations
(proofs) behind rules. Both are data files in this folder, validated by pydantic:

- ``gpus.yaml``: one :class:`GpuSpec` per GPU (memory, precisions, compute capability, interconnect),
  each with sources; the seed's ``rtx4090`` stays a valid id.
- ``derivations/*.yaml``: one :class:`Derivation` per proof (statement, steps, result, per-framework
  behaviour, the rules it justifies, sources).
- ``triggers.yaml``: the seed's trigger phrases, each routed to a tool (:class:`Trigger`).
- ``families.yaml``: which rules each seed tool family looks at (:class:`FamilySelector`).
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import Field

from grpo_debug.skills.provenance import Source, _Strict


def load_yaml(text: str):
    """Parse YAML with PyYAML's safe loader (libyaml's when built with it); yaml is imported on first use."""
    import yaml  # keeps the MCP server's start-up lean

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader


class GpuSpec(_Strict):
    id: str = Field(pattern=r"^[a-z0-9_]+$", description="Stable id, e.g. rtx4090, a100_80gb, h100_sxm.")
    name: str
    aliases: list[str] = Field(default_factory=list, description="Lower-case names users type (4090, h100).")
    vendor: Literal["nvidia", "amd"]
    arch: str
    compute_capability: str = Field(description="CUDA compute capability (8.9) or AMD gfx target (gfx942).")
    memory_gb: float = Field(gt=0, description="Device memory as the vendor states it, in GB.")
    memory_type: str
    bf16: bool
    fp8: bool
    tf32: bool
    interconnect: str = Field(description="GPU-to-GPU link, e.g. 'NVLink 4, 900 GB/s' or 'PCIe 4.0 x16, no NVLink'.")
    consumer: bool = Field(False, description="GeForce-class card (no ECC by default, P2P often disabled).")
    notes: list[str] = Field(default_factory=list)
    sources: list[Source] = Field(min_length=1)


class FrameworkBehaviour(_Strict):
    framework: str
    behaviour: str
    sources: list[Source] = Field(min_length=1)


class Derivation(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    topic: str = Field(description="Pattern class or symptom code it belongs to.")
    statement: str
    steps: list[str] = Field(min_length=1)
    result: str
    per_framework: list[FrameworkBehaviour] = Field(default_factory=list)
    rules: list[str] = Field(default_factory=list, description="Rule ids this derivation justifies.")
    sources: list[Source] = Field(min_length=1)


def _root() -> Path:
    return Path(str(resources.files("grpo_debug.skills")))


@lru_cache(maxsize=1)
def gpu_specs() -> dict[str, GpuSpec]:
    data = load_yaml((_root() / "gpus.yaml").read_text(encoding="utf-8"))
    specs = [GpuSpec.model_validate(x) for x in data]
    return {s.id: s for s in specs}


def find_gpu(name: str) -> GpuSpec | None:
    """Resolve a GPU by id, alias or name, case- and space-insensitive ('RTX 4090', 'rtx4090', '4090')."""
    key = name.lower().replace(" ", "").replace("-", "").replace("_", "")
    for s in gpu_specs().values():
        names = [s.id, s.name, *s.aliases]
        if any(key == n.lower().replace(" ", "").replace("-", "").replace("_", "") for n in names):
            return s
    return None


@lru_cache(maxsize=1)
def derivations() -> dict[str, Derivation]:
    out = {}
    folder = _root() / "derivations"
    for f in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        d = Derivation.model_validate(load_yaml(f.read_text(encoding="utf-8")))
        out[d.id] = d
    return out


class Trigger(_Strict):
    """A seed trigger phrase routed to a tool (skills/triggers.yaml)."""

    phrase: str
    words: list[str] = Field(default_factory=list)
    tool: str
    operation: str = ""
    prompt: str | None = None


@lru_cache(maxsize=1)
def triggers() -> list[Trigger]:
    data = load_yaml((_root() / "triggers.yaml").read_text(encoding="utf-8"))
    return [Trigger.model_validate(x) for x in data]


class FamilySelector(_Strict):
    """Which rules a seed tool family looks at, and the GPU-derived risks it reports (skills/families.yaml)."""

    all: bool = False
    symptoms: list[str] = Field(default_factory=list)
    pattern_classes: list[str] = Field(default_factory=list)
    words: str | None = Field(None, description="Regex over a rule's id, title, what, tags, seed refs, pattern class.")
    gpu_risks: list[Literal["pcie_only", "small_memory"]] = Field(default_factory=list)


@lru_cache(maxsize=1)
def family_selectors() -> dict[str, FamilySelector]:
    data = load_yaml((_root() / "families.yaml").read_text(encoding="utf-8"))
    return {name: FamilySelector.model_validate(x) for name, x in data.items()}
