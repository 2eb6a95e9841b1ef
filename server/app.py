"""The MCP server: registration only, thin wrappers over grpo_debug.tools and grpo_debug.skills.

Tools: ``triage`` and ``explain_rule``. Resources: ``rule://{rule_id}`` (a rule as markdown),
``symptoms://codes`` (the symptom vocabulary as JSON) and ``skill://grpo-debug/SKILL.md`` when a
SKILL.md is shipped. Prompt: ``triage_log``. Nothing here imports torch, ray or pynvml.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from grpo_debug.skills.loader import default_rules
from grpo_debug.skills.symptoms import SYMPTOMS
from grpo_debug.tools.models import TriageResult
from grpo_debug.tools.render import render_rule_markdown
from grpo_debug.tools.rules_view import RulePage, UnknownRuleError, find_rule, rule_page
from grpo_debug.tools.families import FamilyError, FamilyReport, run_family
from grpo_debug.tools.probe_view import ProbeResult, run_probe
from grpo_debug.tools.suggest import Suggestion, suggest
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


def compact_schema(schema: dict | None, *, descriptions: bool) -> dict | None:
    """A JSON schema without the per-property ``title`` keywords (and, for output schemas, without
    ``description``): same validation, a fraction of the bytes in every agent's context. A property
    *named* title/description (whose value is a schema object) is kept."""
    if schema is None:
        return None

    def walk(x):
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()
                    if not (k == "title" and isinstance(v, str))
                    and not (k in ("description", "default") and not descriptions and not isinstance(v, dict))}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x
    return walk(schema)


def shallow_schema(schema: dict | None, depth: int = 1) -> dict | None:
    """An output schema resolved to ``depth`` levels of nesting; deeper objects become
    ``{"type": "object"}``. It accepts every value the full schema accepts (the server still validates
    results against the full pydantic model), at a fraction of the size."""
    if schema is None:
        return None
    defs = schema.get("$defs", {})

    def resolve(x):
        while isinstance(x, dict) and "$ref" in x:
            x = defs.get(x["$ref"].rsplit("/", 1)[-1], {"type": "object"})
        return x

    def walk(x, d):
        x = resolve(x)
        if not isinstance(x, dict):
            return x
        if "anyOf" in x:
            return {**{k: v for k, v in x.items() if k != "anyOf"}, "anyOf": [walk(v, d) for v in x["anyOf"]]}
        if x.get("type") == "object" or "properties" in x:
            if d >= depth:
                return {"type": "object"}
            out = {k: v for k, v in x.items() if k not in ("properties", "$defs", "additionalProperties")}
            if "properties" in x:
                out["properties"] = {k: walk(v, d + 1) for k, v in x["properties"].items()}
            if isinstance(x.get("additionalProperties"), dict):
                out["additionalProperties"] = walk(x["additionalProperties"], d + 1)
            return out
        if x.get("type") == "array" and "items" in x:
            return {**x, "items": walk(x["items"], d)}
        return x
    return walk({k: v for k, v in schema.items() if k != "$defs"}, 0)


class GrpoDebugServer(MCPServer):
    """MCPServer whose tools/list publishes compact schemas (the tool list sits in every agent's context)."""

    async def list_tools(self):
        tools = await super().list_tools()
        return [t.model_copy(update={"input_schema": compact_schema(t.input_schema, descriptions=True),
                                     "output_schema": compact_schema(shallow_schema(t.output_schema), descriptions=False)})
                for t in tools]


def build_server() -> MCPServer:
    server = GrpoDebugServer("grpo-debug", title="grpo-debug", version=_version(), instructions=INSTRUCTIONS,
                             log_level="WARNING")

    @server.tool(
        name="triage",
        title="Triage an RL training log",
        description=(
            "Diagnose a GRPO/PPO run from its log, config (YAML/JSON) or launch script: give `text` or `path`. "
            "Returns findings (symptom, evidence lines, causes with rule ids, the fix naming the exact key or "
            "flag), metric summaries and coverage."
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

    @server.tool(name="check_config", title="Check a training config or launch script",
                 description="Check a config (verl YAML, DeepSpeed JSON, TRL/HF args) or launch script (slime, Megatron, "
                             "OpenRLHF, verl overrides): what the settings will cause and the exact line edits. "
                             "Give `text` or `path`.", annotations=READ_ONLY)
    def check_config_tool(
        text: Annotated[str | None, Field(description="The config or launch script as text.")] = None,
        path: Annotated[str | None, Field(description="A config or script file to read instead.")] = None,
    ) -> TriageResult:
        from grpo_debug.tools.check import ConfigParseError, check_config

        text, path = _opt(text), _opt(path)
        if (text is None) == (path is None):
            raise ToolError("give exactly one of `text` (the config pasted) or `path` (a file on the server's machine)")
        try:
            return check_config(text=text, path=path)
        except (InputError, ConfigParseError) as e:
            raise ToolError(str(e)) from None

    @server.tool(name="probe_host", title="Probe this host",
                 description="Facts of the machine the server runs on: versions, env vars, limits, GPUs (NVML), with "
                             "rules over them; optional numerics (torch subprocess), checkpoint folder, tokenizer stop ids, "
                             "memory estimate, Ray cluster fan-out. Read-only.", annotations=READ_ONLY)
    def probe_host_tool(
        numerics: Annotated[bool, Field(description="Run the torch numerics probes (CPU; a GPU only if free).")] = False,
        checkpoint: Annotated[str | None, Field(description="A Megatron/DeepSpeed/HF checkpoint folder to inspect.")] = None,
        tokenizer: Annotated[str | None, Field(description="Tokenizer folder or tokenizer.json (with `stop`).")] = None,
        stop: Annotated[list[str] | None, Field(description="Stop strings to turn into stop_token_ids.")] = None,
        estimate: Annotated[dict | None, Field(description="Memory estimator arguments, e.g. {params_b: 7, zero_stage: 3, "
                                                           "dp: 8, seq_len: 4096, gpu: 'h100_sxm'}.")] = None,
        ray_address: Annotated[str | None, Field(description="Probe every node of this Ray cluster (host:port).")] = None,
    ) -> ProbeResult:
        if tokenizer and not stop:
            raise ToolError("`tokenizer` needs `stop`: the stop strings to look up")
        try:
            return run_probe(numerics=numerics, checkpoint=_opt(checkpoint), tokenizer=_opt(tokenizer), stop=stop,
                             estimate=estimate, ray_address=_opt(ray_address))
        except TypeError as e:  # an unknown estimator argument
            raise ToolError(f"estimate: {e}") from None

    def _family_tool(family: str, ops: tuple[str, ...], description: str, title: str) -> None:
        def tool(operation, text=None, path=None, gpu=None):
            try:
                return run_family(family, operation, text=_opt(text), path=_opt(path), gpu=_opt(gpu))
            except (FamilyError, InputError) as e:
                raise ToolError(str(e)) from None

        # real annotation objects (this module uses postponed annotations, which cannot see `ops`)
        tool.__annotations__ = {
            "operation": Annotated[Literal[ops + ("rtx4090",)], Field(  # type: ignore[valid-type]
                description=f"One of {', '.join(ops)}; rtx4090 = gpu for the RTX 4090.")],
            "text": Annotated[str | None, Field(description="Input for the operation: symptom words, a log, a config, "
                                                            "a Python snippet, a bug number or a rule id.")],
            "path": Annotated[str | None, Field(description="A file to read instead of text.")],
            "gpu": Annotated[str | None, Field(description="GPU id or name: rtx4090, a100_80gb, h100_sxm, mi300x, ...")],
            "return": FamilyReport,
        }
        tool.__name__ = family
        server.tool(name=family, title=title, description=description, annotations=READ_ONLY)(tool)

    _family_tool("playbook", ("playbook", "symptoms", "fixes", "gpu"),
                 "GRPO debug playbook: the 7 bug pattern classes (playbook), symptom -> causes -> fix (symptoms), "
                 "fix reference per bug, filter with text (fixes), per-GPU report (gpu).", "GRPO debug playbook")
    _family_tool("nan_guide", ("check", "diagnose", "avoid", "gpu"),
                 "NaN/Inf: check a config for NaN risks, diagnose from symptom words or a log, avoidance "
                 "recommendations for a described setup, per-GPU NaN risks.", "GRPO NaN guide")
    _family_tool("muon_clipping", ("check", "diagnose", "avoid", "gpu"),
                 "Muon optimizer vs global grad-norm clipping (Megatron ChainedOptimizer, DeepSpeed): check a config, "
                 "diagnose a plateau, get the avoiding config patch.", "Muon clipping avoidance")
    _family_tool("stream_safety", ("map", "analyze", "compare", "gpu"),
                 "CUDA stream safety: map record_stream/overlap_comm patterns across frameworks, analyze a config or "
                 "Python snippet for side-stream hazards, compare frameworks.", "CUDA stream safety")
    _family_tool("knowledge_map", ("theory", "bug", "decision", "proof", "cross", "gpu"),
                 "Why a rule holds: mechanism with math (theory), bug -> pattern -> decision chain (bug), a MUST DO/NOT "
                 "justified (decision), derivations (proof), one pattern across frameworks (cross).", "Knowledge map")

    @server.tool(name="suggest", title="Which tool for this question",
                 description="Route a free-text question or symptom description to the tools, operations, rules "
                             "and prompts to try. Use when unsure where to start.", annotations=READ_ONLY)
    def suggest_tool(text: Annotated[str, Field(description="The question, symptom words or a pasted log.")]) -> Suggestion:
        return suggest(text)

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

    _register_trigger_prompts(server)
    return server


def _register_trigger_prompts(server: MCPServer) -> None:
    """One guided flow per seed trigger group (skills/triggers.yaml `prompt`), e.g. debug_nan."""
    from grpo_debug.skills.knowledge import triggers

    groups: dict[str, list] = {}
    for t in triggers():
        if t.prompt:
            groups.setdefault(t.prompt, []).append(t)
    for name, ts in groups.items():
        first = ts[0]
        phrases = ", ".join(t.phrase for t in ts)
        step1 = (f"Call `{first.tool}`" + (f" with operation `{first.operation}`" if first.operation else "")
                 + " on the details below (a log or config goes in `text`, or give `path`).")

        def make(name=name, phrases=phrases, step1=step1):
            def prompt(details: str = "") -> str:
                return (f"The user reports: {phrases}. Diagnose it with grpo-debug.\n"
                        f"1. {step1}\n"
                        "2. If a log or config is available, also call `triage` on it; trust findings whose evidence "
                        "lines you can read in the input.\n"
                        "3. For the top cause call `explain_rule` (mechanism, fix safety, sources and whether they are "
                        "verified) and `knowledge_map` with operation `theory` for the math behind it.\n"
                        "4. Propose the exact change (key/flag and value) and the next check that would confirm it; say "
                        "when a cause rests on unverified sources.\n\n"
                        f"Details from the user:\n{details}")
            prompt.__name__ = name
            return prompt

        server.prompt(name=name, title=name.replace("_", " ").capitalize(),
                      description=f"Guided flow for: {phrases}.")(make())
