"""Alias table: framework-specific spellings of metrics and config keys -> canonical ids.

The data lives in ``skills/aliases.yaml`` (one entry per canonical id, each alias with the framework,
the raw key as the framework writes it, and where it was seen). This module loads and validates it
(pydantic, strict, unknown fields rejected) and offers two pure lookups:

- :func:`canonical_metric` ``(raw_key, framework=None) -> str | None``
- :func:`canonical_config` ``(raw_key, framework=None) -> str | None``

Matching is exact after :func:`normalise_key`:

- surrounding whitespace is stripped and the key is case-folded (``Grad Norm`` == ``grad norm``);
- runs of internal whitespace collapse to one space (Megatron console fields such as ``grad norm``);
- leading dashes are dropped (``--max_norm`` == ``max_norm``), so a CLI flag matches the same key
  seen in an args dump;
- every other separator is significant: ``-`` vs ``_``, ``/`` vs ``.`` are NOT unified, because
  frameworks differ exactly there (OpenRLHF renamed ``--max_norm`` style flags; verl logs
  ``actor/grad_norm`` while its config uses dotted paths). List each real spelling as its own alias.

With ``framework`` given, only that framework's aliases are consulted. Without it, every framework is
consulted and the canonical id is returned only when all matching aliases agree; an ambiguous key
returns ``None``.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ALIASES_PATH = Path(__file__).with_name("aliases.yaml")

CANONICAL_METRICS: tuple[str, ...] = (
    "grad_norm", "loss", "kl", "kl_loss", "entropy", "reward_mean", "reward_std", "score_mean",
    "zero_std_frac", "response_length_mean", "response_length_max", "response_length_clip_ratio",
    "logprob_mismatch", "pg_clipfrac", "ppo_kl", "lr", "loss_scale", "throughput", "step_time", "vf_loss",
    "cpu_memory_used_gb", "nan_iterations", "skipped_iterations",
)
CANONICAL_CONFIG: tuple[str, ...] = (
    "world_size", "n_gpus_per_node", "nnodes", "tp", "pp", "cp", "ep", "train_batch_size",
    "ppo_mini_batch_size", "micro_batch_size", "gradient_accumulation_steps", "n_samples_per_prompt",
    "max_prompt_length", "max_response_length", "max_model_len", "max_num_batched_tokens", "dtype",
    "optimizer", "lr", "grad_clip", "gpu_memory_utilization", "colocate", "rollout_engine", "kl_coef",
    "entropy_coeff", "temperature",
)
FRAMEWORKS: tuple[str, ...] = (
    "verl", "trl", "hf_trainer", "openrlhf", "slime", "megatron", "deepspeed", "skyrl", "areal",
    "nemo_rl", "roll", "prime_rl",
)

_WS = re.compile(r"\s+")


def normalise_key(raw_key: str) -> str:
    """Case-fold, strip, collapse whitespace, drop leading dashes. See the module docstring."""
    return _WS.sub(" ", raw_key.strip()).casefold().lstrip("-").strip()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Alias(_Strict):
    framework: Literal[FRAMEWORKS]  # type: ignore[valid-type]
    key: str = Field(min_length=1)
    source: str = Field(min_length=3)
    status: Literal["verified", "unverified"]
    since: Optional[str] = None  # first release with this spelling (inclusive)
    until: Optional[str] = None  # last release with this spelling (inclusive)
    note: Optional[str] = None

    @field_validator("key")
    @classmethod
    def _key_not_blank(cls, v: str) -> str:
        if not normalise_key(v):
            raise ValueError("alias key is blank after normalisation")
        return v


class MetricAlias(_Alias):
    axis: Literal["step", "iteration", "epoch", "sample", "time"] = "step"
    # what the value measures when a canonical id covers several quantities (logprob_mismatch:
    # abs_diff, ppl_ratio, kl, ...): thresholds differ, so consumers must check this
    measures: Optional[str] = None


class ConfigAlias(_Alias):
    kind: Literal["config_key", "cli_flag", "env_var", "console_field"]


class MetricEntry(_Strict):
    description: str = Field(min_length=3)
    unit: Optional[str] = None
    aliases: list[MetricAlias] = Field(default_factory=list)


class ConfigEntry(_Strict):
    description: str = Field(min_length=3)
    unit: Optional[str] = None
    aliases: list[ConfigAlias] = Field(default_factory=list)


class FrameworkMarker(_Strict):
    pattern: str = Field(min_length=2)
    source: str = Field(min_length=3)
    status: Literal["verified", "unverified"] = "verified"


class AliasTable(_Strict):
    metrics: dict[str, MetricEntry]
    config: dict[str, ConfigEntry]
    framework_markers: dict[str, list[FrameworkMarker]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> "AliasTable":
        bad = set(self.metrics) - set(CANONICAL_METRICS)
        if bad:
            raise ValueError(f"unknown canonical metric ids: {sorted(bad)}")
        bad = set(self.config) - set(CANONICAL_CONFIG)
        if bad:
            raise ValueError(f"unknown canonical config ids: {sorted(bad)}")
        bad = set(self.framework_markers) - set(FRAMEWORKS)
        if bad:
            raise ValueError(f"unknown frameworks in framework_markers: {sorted(bad)}")
        for section, entries in (("metrics", self.metrics), ("config", self.config)):
            seen: dict[tuple[str, str], str] = {}
            for cid, entry in entries.items():
                for a in entry.aliases:
                    k = (a.framework, normalise_key(a.key))
                    if k in seen and seen[k] != cid:
                        raise ValueError(
                            f"{section}: {a.framework} key {a.key!r} maps to both {seen[k]} and {cid}")
                    seen[k] = cid
        return self

    def index(self, section: Literal["metrics", "config"]) -> dict[tuple[str, str], str]:
        entries = self.metrics if section == "metrics" else self.config
        return {(a.framework, normalise_key(a.key)): cid for cid, e in entries.items() for a in e.aliases}


@lru_cache(maxsize=1)
def load_aliases(path: Optional[str] = None) -> AliasTable:
    """Load and validate the alias table (cached). ``path`` defaults to ``skills/aliases.yaml``."""
    from grpo_debug.skills.knowledge import load_yaml  # PyYAML's safe loader, libyaml's when built (0.09 s less)

    p = Path(path) if path else ALIASES_PATH
    data = load_yaml(p.read_text(encoding="utf-8"))
    return AliasTable.model_validate(data)


@lru_cache(maxsize=2)
def _index(section: str) -> tuple[dict[tuple[str, str], str], dict[str, frozenset[str]]]:
    idx = load_aliases().index(section)  # type: ignore[arg-type]
    by_key: dict[str, set[str]] = {}
    for (_fw, k), cid in idx.items():
        by_key.setdefault(k, set()).add(cid)
    return idx, {k: frozenset(v) for k, v in by_key.items()}


def _lookup(section: str, raw_key: str, framework: Optional[str]) -> Optional[str]:
    if not isinstance(raw_key, str):
        return None
    k = normalise_key(raw_key)
    if not k:
        return None
    idx, by_key = _index(section)
    if framework is not None:
        return idx.get((framework, k))
    cids = by_key.get(k)
    if cids and len(cids) == 1:
        return next(iter(cids))
    return None


def canonical_metric(raw_key: str, framework: Optional[str] = None) -> Optional[str]:
    """Canonical metric id for ``raw_key`` (as logged by ``framework``), or ``None``."""
    return _lookup("metrics", raw_key, framework)


def canonical_config(raw_key: str, framework: Optional[str] = None) -> Optional[str]:
    """Canonical config id for ``raw_key`` (a config path or CLI flag of ``framework``), or ``None``."""
    return _lookup("config", raw_key, framework)
