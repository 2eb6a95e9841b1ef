"""The MCP server: registration only, thin wrappers over grpo_debug.tools and grpo_debug.skills.

Tools: ``triage`` and ``explain_rule``. Resources: ``rule://{rule_id}`` (a rule as markdown),
``symptoms://codes`` (the symptom vocabulary as JSON) and ``skill://grpo-debug/SKILL.md`` when a
SKILL.md is shipped. Prompt: ``triage_log``. Nothing here imports torch, ray or pynvml.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from grpo_debug.skills.loader import default_rules
from grpo_debug.skills.symptoms import SYMPTOMS
from grpo_debug.tools.models import TriageResult
from grpo_debug.tools.render import render_rule_markdown
from grpo_debug.tools.rules_view import RulePage, UnknownRuleError, find_rule, rule_page
from grpo_debug.tools.triage import InputError, triage

INSTRUCTIONS = (
    "grpo-debug diagnoses RL post-training runs of LLMs (GRPO/PPO on verl, slime, OpenRLHF, TRL, "
    "Megatron-LM, DeepSpeed, SGLang/vLLM rollouts, Ray). Give `triage` a log, config or launch script "
    "(as text or a path); read the top finding, check its evidence lines, then apply its fix. "
    "`explain_rule` or rule://{rule_id} gives the full mechanism and sources of a cause."
)

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("grpo-debug")
    except PackageNotFoundError:
        return "0"


def find_skill_md() -> Path | None:
    """SKILL.md shipped with the package (or at the top of a source/editable checkout), if any."""
    from importlib.resources import files

    candidates = []
    for pkg in ("grpo_debug.server", "grpo_debug.skills"):
        try:
            candidates.append(Path(str(files(pkg).joinpath("SKILL.md"))))
        except (ModuleNotFoundError, TypeError):
            pass
    candidates.append(Path(__file__).resolve().parent.parent / "SKILL.md")
    return next((p for p in candidates if p.is_file()), None)


def _opt(s: str | None) -> str | None:
    return s if s else None  # an empty string counts as not given


def build_server() -> MCPServer:
    server = MCPServer("grpo-debug", title="grpo-debug", version=_version(), instructions=INSTRUCTIONS)

    @server.tool(
        name="triage",
        title="Triage an RL training log",
        description=(
            "Diagnose a GRPO/PPO post-training run from its console log, config (YAML/JSON) or launch "
            "script. Give exactly one of `text` (pasted content) or `path` (a file on this machine). "
            "Returns findings, most likely first: symptom code, evidence lines (1-based), causes with "
            "rule ids, the fix naming the exact option, next checks; plus metric series summaries and "
            "coverage (what was read or not understood)."
        ),
        annotations=READ_ONLY,
    )
    def triage_tool(
        text: Annotated[str | None, Field(
            description="The log, config or launch script as text. Omit when giving `path`.")] = None,
        path: Annotated[str | None, Field(
            description="Path of a log/config/script file readable by the server. Omit when giving `text`.")] = None,
        max_findings: Annotated[int, Field(ge=1, le=100, description="At most this many findings.")] = 10,
    ) -> TriageResult:
        text, path = _opt(text), _opt(path)
        if text is None and path is None:
            raise ToolError("give the input: `text` (the log pasted as a string) or `path` (a file on the "
                            "server's machine); neither was given")
        if text is not None and path is not None:
            raise ToolError("give exactly one of `text` or `path`, not both")
        try:
            return triage(text=text, path=path, max_findings=max_findings)
        except InputError as e:
            raise ToolError(str(e)) from e

    @server.tool(
        name="explain_rule",
        title="Explain a diagnosis rule",
        description=(
            "The full page of one rule named in a triage cause (`rule_id`): what it detects, the "
            "mechanism, fix steps and config patch, where it applies, and its sources marked verified or not."
        ),
        annotations=READ_ONLY,
    )
    def explain_rule(
        rule_id: Annotated[str, Field(description="Rule id, e.g. from findings[].causes[].rule_id.")],
    ) -> RulePage:
        try:
            return rule_page(find_rule(default_rules(), rule_id))
        except UnknownRuleError as e:
            raise ToolError(str(e)) from None

    @server.resource("rule://{rule_id}", name="rule", title="Diagnosis rule",
                     description="One rule of the knowledge base as a markdown page.", mime_type="text/markdown")
    def rule_resource(rule_id: str) -> str:
        try:
            return render_rule_markdown(find_rule(default_rules(), rule_id))
        except UnknownRuleError as e:
            raise ResourceNotFoundError(str(e)) from None

    @server.resource("symptoms://codes", name="symptom-codes", title="Symptom codes",
                     description="The symptom codes a finding can name, each with its meaning and rule ids.",
                     mime_type="application/json")
    def symptom_codes() -> str:
        rules = default_rules()
        return json.dumps({code: {"description": desc, "rules": sorted(r.id for r in rules.by_symptom(code))}
                           for code, desc in SYMPTOMS.items()}, indent=2)

    skill = find_skill_md()
    if skill is not None:
        @server.resource("skill://grpo-debug/SKILL.md", name="skill", title="grpo-debug Agent Skill",
                         description="The Agent Skill: when and how to use grpo-debug.", mime_type="text/markdown")
        def skill_md() -> str:
            return skill.read_text(encoding="utf-8")

    @server.prompt(name="triage_log", title="Triage a training log",
                   description="Diagnose a GRPO/PPO training log step by step with the triage tool.")
    def triage_log(log: Annotated[str, Field(description="The training log (or config / launch script).")]) -> str:
        fence = "```"
        while fence in log:
            fence += "`"
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

    return server
