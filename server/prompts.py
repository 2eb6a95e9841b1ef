"""MCP prompts of the server: ``triage_log`` (the triage flow step by step) and one guided flow per seed trigger
group (skills/flows.yaml). Registered by server/app.py's ``build_server``."""
from __future__ import annotations

import re
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field


def register_triage_prompt(server: MCPServer) -> None:
    """The ``triage_log`` prompt: the triage flow step by step."""
    @server.prompt(name="triage_log", title="Triage a training log",
                   description="Diagnose a GRPO/PPO training log step by step with the triage tool.")
    def triage_log(log: Annotated[str, Field(description="The training log (or config / launch script).")]) -> str:
        runs = [len(r) for r in re.findall(r"`{3,}", log)]  # one linear pass, not a growing search
        fence = "`" * max(3, max(runs, default=0) + 1)
        return (
            "Diagnose this RL post-training log with grpo-debug.\n\n"
            "1. Call the `triage` tool with `text` set to the log below (or `path` if it is a file on the "
            "server's machine).\n"
            "2. Read `summary` and the top finding: its `symptom`, `confidence` and `title`.\n"
            "3. Verify the evidence: each `evidence[].line` is a 1-based line of the log; check that those "
            "lines say what the finding claims. If they do not, move to the next finding.\n"
            "4. For the first cause, call `explain_rule` with its `rule_id` to see the mechanism and how "
            "well its sources are verified.\n"
            "5. Apply the `fix` (and `patch`, if any) as a concrete change to the named option, key or flag; "
            "say what you changed and why, then run the `next_checks`.\n"
            "If there are no findings, report `coverage` (what was not understood) and ask for the first "
            "error, the launch command and the per-step metric lines.\n\n"
            f"{fence}\n{log}\n{fence}\n"
        )


def register_trigger_prompts(server: MCPServer) -> None:
    """One guided flow per seed trigger group (skills/flows.yaml, the same steps as SKILL.md), e.g. debug_nan:
    triage on the evidence first, then the trigger's own steps, then the rule page and the exact change."""
    from grpo_debug.skills.flows import flow_steps, flows
    from grpo_debug.skills.knowledge import triggers

    phrases: dict[str, list[str]] = {}
    for t in triggers():
        if t.prompt:
            phrases.setdefault(t.prompt, []).append(t.phrase)
    for name, flow in flows().items():
        said = ", ".join(phrases.get(name, [])) or flow.title

        def make(name=name, said=said):
            def prompt(details: str = "") -> str:
                steps = "\n".join(f"{i}. {s}" for i, s in enumerate(flow_steps(name), 1))
                return (f"The user reports: {said}. Diagnose it with grpo-debug.\n{steps}\n\n"
                        f"Details from the user:\n{details}")
            prompt.__name__ = name
            return prompt

        server.prompt(name=name, title=name.replace("_", " ").capitalize(),
                      description=f"Guided flow for: {said}.")(make())
