"""Provenance and applicability records shared by rules, derivations and the GPU table.

Kept apart from skills/schema.py (the rule model with its signal union) so that modules which only need
a source record (the GPU table, rule pages) stay cheap to import at server start-up.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

VerificationStatus = Literal["verified", "partial", "unverified", "not_found"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Source(_Strict):
    """Where a claim comes from (a public address: URL, pinned repo@commit or tag) and whether it was checked."""

    ref: str = Field(description="URL, or seed document id like 'seed:004 (grpo-debug skill)'.")
    status: VerificationStatus
    note: str = ""


class AppliesTo(_Strict):
    frameworks: list[str] = Field(default_factory=list)
    versions: str = ""
    hardware: str = ""
