"""The debugging flows: one per MCP prompt, the same text in SKILL.md (skills/flows.yaml holds the data).

Every flow starts from the evidence (``FIRST``: triage the user's log, config or launch script), then takes
the steps of its trigger, then the common close (``LAST``: the rule page, the exact change, the next check).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field

from grpo_debug.skills.provenance import _Strict

FLOWS_PATH = Path(__file__).with_name("flows.yaml")

FIRST = ("Start from the evidence: call `triage` on the log, config or launch script (`text`, or `path` for a "
         "file the server may read). Read `summary` and the top finding, and check that its `evidence` lines "
         "(1-based lines of the input) say what it claims. With no log at hand, ask for the first error, the "
         "launch command and the per-step metric lines.")
LAST = ("For the top cause call `explain_rule` (mechanism, fix safety, sources and whether they are verified); "
        "propose the exact change (key or flag and value) and the next check that confirms it, and say when a "
        "cause rests on unverified sources.")


class Flow(_Strict):
    """One trigger's flow: what the user reports, and the steps after triage."""

    title: str
    then: list[str] = Field(min_length=1)


@lru_cache(maxsize=1)
def flows() -> dict[str, Flow]:
    """The flows by prompt name (skills/flows.yaml)."""
    from grpo_debug.skills.knowledge import load_yaml

    data = load_yaml(FLOWS_PATH.read_text(encoding="utf-8"))
    return {name: Flow.model_validate(v) for name, v in data.items()}


def flow_steps(name: str) -> list[str]:
    """The numbered steps of one flow, first to last (the prompt's text and SKILL.md's list)."""
    return [FIRST, *flows()[name].then, LAST]
