"""The MCP server: registration only, thin wrappers over grpo_debug.tools and grpo_debug.skills.

Tools: ``triage`` and ``explain_rule``. Resources: ``rule://{rule_id}`` (a rule as markdown),
``symptoms://codes`` (the symptom vocabulary as JSON) and ``skill://grpo-debug/SKILL.md`` when a
SKILL.md is shipped. Prompt: ``triage_log``. Nothing here imports torch, ray or pynvml.
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Iterable, Iterator, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import (Completion, EmptyResult, ResourceTemplateReference, SetLevelRequestParams,
                       ToolAnnotations)
from pydantic import BaseModel, BeforeValidator, Field

from grpo_debug.server.cli import _version
from grpo_debug.skills.symptoms import SYMPTOMS
from grpo_debug.tools.errors import FamilyError, InputError
from grpo_debug.tools.models import FamilyReport, Finding, ProbeResult, Suggestion, TriageResult
from grpo_debug.server.paths import PathNotAllowed, default_roots, resolve_path
from grpo_debug.tools.rule_page import RulePage, UnknownRuleError, find_rule, rule_page

# The engine (rule loading, triage, families, probes, rich rendering) is imported on first use, inside
# the tool wrappers below: the MCP handshake and tools/list then cost little more than the SDK's own start.


def default_rules():
    from grpo_debug.skills.loader import default_rules as _d

    return _d()


def render_rule_markdown(rule):
    from grpo_debug.tools.render.triage import render_rule_markdown as _r

    return _r(rule)


def triage(**kw):
    from grpo_debug.tools.triage import triage as _t

    return _t(**kw)


def run_family(*a, **kw):
    from grpo_debug.tools.families import run_family as _f

    return _f(*a, **kw)


def run_probe(**kw):
    from grpo_debug.tools.probe_report import run_probe as _p

    return _p(**kw)


def suggest(text):
    from grpo_debug.tools.suggest import suggest as _s

    return _s(text)

INSTRUCTIONS = (
    "grpo-debug diagnoses RL post-training runs of LLMs (GRPO/PPO on verl, slime, OpenRLHF, TRL, "
    "Megatron-LM, DeepSpeed, SGLang/vLLM rollouts, Ray). Give `triage` a log, config or launch script "
    "(as text or a path); read the top finding, check its evidence lines, then apply its fix. "
    "`explain_rule` or rule://{rule_id} gives the full mechanism and sources of a cause."
)

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
log = logging.getLogger("grpo_debug.server")

# ---- limits of the MCP surface (the CLI is the user's own shell and has none of these) -------------------
MAX_TEXT_BYTES = 16 * 2**20      # pasted text above this is refused, naming the limit
MAX_ANSWER_BYTES = 28_000        # compact JSON of one answer (the SDK adds an indented text copy: < ~36 kB)
MAX_EVIDENCE = 8                 # evidence lines per finding
MAX_EXCERPT_CHARS = 300          # one evidence / sample line
MAX_PROSE_CHARS = 1_500          # why / fix / body texts
MAX_ITEMS = 40                   # items of a family report
HTTP_MAX_BODY_BYTES = 24 * 2**20  # room for 16 MiB of text plus JSON escaping; above it the transport says 413


def _none_to_empty(v: Any) -> Any:
    return "" if v is None else v


# A string argument that may be omitted or null. Typed plain `str` (not `str | None`) on purpose: the SDK
# json-decodes string arguments whose annotation is not exactly `str`, which turned a pasted JSON config into
# a dict and failed validation.
OptStr = Annotated[str, BeforeValidator(_none_to_empty)]


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


def _examples_dir() -> Path | None:
    """The bundled example logs (package data, read-only): always readable by the path-taking tools."""
    from importlib.resources import files

    try:
        p = Path(str(files("grpo_debug.tools").joinpath("examples"))).resolve()
    except (ModuleNotFoundError, TypeError, OSError):
        return None
    return p if p.is_dir() else None


@contextmanager
def _guard(tool: str) -> Iterator[None]:
    """Turn an unexpected exception into a ToolError that says what failed (the SDK would otherwise answer
    only 'Error executing tool X'); the traceback goes to the server log."""
    try:
        yield
    except ToolError:
        raise
    except Exception as e:  # noqa: BLE001
        log.exception("tool %s failed", tool)
        msg = str(e).replace("\n", " ")
        raise ToolError(f"internal error in {tool}: {type(e).__name__}: {msg[:300]} (the input was accepted; "
                        "please report this with the input)") from None


def _check_text(text: str | None, arg: str = "text") -> None:
    """Refuse pasted text above MAX_TEXT_BYTES, naming the limit."""
    if text is None or len(text) * 4 <= MAX_TEXT_BYTES:  # a str char is at most 4 UTF-8 bytes
        return
    n = len(text) if len(text) > MAX_TEXT_BYTES else len(text.encode("utf-8", "surrogatepass"))
    if n > MAX_TEXT_BYTES:
        raise ToolError(f"`{arg}` is {n / 2**20:.1f} MiB; the limit for pasted text is "
                        f"{MAX_TEXT_BYTES // 2**20} MiB ({MAX_TEXT_BYTES} bytes). Save it to a file under an allowed "
                        "folder and give `path` instead (files are read up to 256 MiB), or paste the part around "
                        "the first error")


def _check_estimate(estimate: dict, confined) -> dict:
    """Validate the memory-estimator arguments (names and JSON scalar types); a config_json that is not JSON
    text is a path and goes through the same confinement as every other path."""
    import inspect

    from grpo_debug.probes.memory import estimate_memory

    params = inspect.signature(estimate_memory).parameters
    out = {}
    for k, v in estimate.items():
        if k not in params:
            raise ToolError(f"`estimate`: unknown argument {str(k)[:60]!r}; known: {', '.join(params)}")
        if v is not None and not isinstance(v, (str, int, float, bool)):
            raise ToolError(f"`estimate.{k}`: expected a number, string or boolean, got {type(v).__name__}")
        if isinstance(v, str) and len(v) > 1_000_000:
            raise ToolError(f"`estimate.{k}`: {len(v)} characters is too long")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not (-1e15 < v < 1e15):
            raise ToolError(f"`estimate.{k}`: {v!r} is out of range")
        if k == "config_json" and isinstance(v, str) and v.strip() and not v.lstrip().startswith("{"):
            v = confined(v, "estimate.config_json", "any")
        out[k] = v
    return out


# ---- bounding answers ------------------------------------------------------------------------------------

def _clip(s: str, n: int) -> tuple[str, bool]:
    if not isinstance(s, str) or len(s) <= n:
        return s, False
    return s[: n - 1] + "\u2026", True


def _clip_strings(x: Any, n: int) -> tuple[Any, bool]:
    """Every string inside a JSON-like value clipped to n characters (lists cut to 100 items)."""
    if isinstance(x, str):
        return _clip(x, n)
    if isinstance(x, dict):
        cut = False
        out = {}
        for k, v in x.items():
            out[k], c = _clip_strings(v, n)
            cut |= c
        return out, cut
    if isinstance(x, list):
        cut = len(x) > 100
        out = []
        for v in x[:100]:
            v, c = _clip_strings(v, n)
            out.append(v)
            cut |= c
        return out, cut
    return x, False


def _size(m: BaseModel | Any) -> int:
    if isinstance(m, BaseModel):
        return len(m.model_dump_json())
    return len(json.dumps(m, default=str))


def _bound_finding(f: Finding) -> bool:
    cut = len(f.evidence) > MAX_EVIDENCE or len(f.causes) > 4 or len(f.edits) > 10 or len(f.settings) > 10
    f.evidence = f.evidence[:MAX_EVIDENCE]
    for ev in f.evidence:
        ev.text, c = _clip(ev.text, MAX_EXCERPT_CHARS)
        cut |= c
    f.causes = f.causes[:4]
    for c_ in f.causes:
        c_.why, a = _clip(c_.why, MAX_PROSE_CHARS)
        c_.fix, b = _clip(c_.fix, MAX_PROSE_CHARS)
        c_.matched = [_clip(m, MAX_EXCERPT_CHARS)[0] for m in c_.matched[:6]]
        cut |= a or b
    f.fix, c = _clip(f.fix, MAX_PROSE_CHARS)
    cut |= c
    f.edits = f.edits[:10]
    for e in f.edits:
        e.old = _clip(e.old, MAX_EXCERPT_CHARS)[0] if e.old else e.old
        e.new = _clip(e.new, MAX_EXCERPT_CHARS)[0]
    f.settings = f.settings[:10]
    f.next_checks = [_clip(x, MAX_EXCERPT_CHARS)[0] for x in f.next_checks[:6]]
    f.sharpen = [_clip(x, MAX_EXCERPT_CHARS)[0] for x in f.sharpen[:6]]
    return cut


def _drop_to_budget(seq: list, total: int, keep: int = 1) -> tuple[int, int]:
    """Pop items off the end of seq until total (its owner's JSON size) fits; returns (new total, dropped)."""
    dropped = 0
    while total > MAX_ANSWER_BYTES and len(seq) > keep:
        total -= _size(seq.pop()) + 1
        dropped += 1
    return total, dropped


def bound_triage(res: TriageResult) -> TriageResult:
    """A TriageResult cut to the answer budget: evidence per finding, excerpt and prose lengths, then whole
    findings from the least likely end, then metric series; ``truncated`` says when anything was cut."""
    cut = any([_bound_finding(f) for f in res.findings])
    cov = res.coverage
    for ev in cov.not_understood_sample:
        ev.text = _clip(ev.text, MAX_EXCERPT_CHARS)[0]
    cov.skipped = [_clip(x, MAX_EXCERPT_CHARS)[0] for x in cov.skipped[:10]]
    cov.unknown_config_keys = [_clip(x, 200)[0] for x in cov.unknown_config_keys[:50]]
    cov.input = _clip(cov.input, 500)[0]
    res.summary = _clip(res.summary, 2 * MAX_PROSE_CHARS)[0]
    total = _size(res)
    if total > MAX_ANSWER_BYTES:
        total, n = _drop_to_budget(res.findings, total)
        cut |= n > 0
    if total > MAX_ANSWER_BYTES and res.metrics:
        keys = list(res.metrics)
        while total > MAX_ANSWER_BYTES and keys:
            k = keys.pop()
            total -= _size(res.metrics.pop(k)) + len(json.dumps(k)) + 2
            cut = True
    res.truncated = bool(res.truncated or cut)
    return res


def bound_family(rep: FamilyReport) -> FamilyReport:
    """A FamilyReport cut to the answer budget: at most MAX_ITEMS items with clipped bodies and fields, bounded
    findings, then items from the end until it fits; each cut is said in ``notes`` ('truncated: ...')."""
    omitted = max(0, len(rep.items) - MAX_ITEMS)
    rep.items = rep.items[:MAX_ITEMS]
    clipped = 0
    for it in rep.items:
        it.body, c = _clip(it.body, MAX_PROSE_CHARS)
        it.fields, d = _clip_strings(it.fields, MAX_PROSE_CHARS // 2)
        clipped += bool(c or d)
    fcut = any([_bound_finding(f) for f in rep.findings])
    total = _size(rep)
    if total > MAX_ANSWER_BYTES:
        total, n = _drop_to_budget(rep.items, total, keep=0)
        omitted += n
    if total > MAX_ANSWER_BYTES:
        total, n = _drop_to_budget(rep.findings, total, keep=1)
        fcut |= n > 0
    if omitted:
        rep.notes.append(f"truncated: {omitted} items omitted (narrow the request with `text` to see them)")
    if clipped:
        rep.notes.append(f"truncated: long text of {clipped} items shortened")
    if fcut:
        rep.notes.append("truncated: findings or their evidence were cut to bound the answer size")
    return rep


def bound_probe(res: ProbeResult) -> ProbeResult:
    """A ProbeResult cut to the answer budget (long strings in the host/checkpoint/tokenizer/cluster reports
    clipped, findings bounded); the summary says when anything was cut."""
    cut = any([_bound_finding(f) for f in res.findings])
    if _size(res) > MAX_ANSWER_BYTES:
        for name in ("host", "cluster", "checkpoint", "tokenizer", "memory", "facts"):
            val = getattr(res, name)
            if val:
                val, c = _clip_strings(val, 300)
                setattr(res, name, val)
                cut |= c
    if _size(res) > MAX_ANSWER_BYTES:
        for name in ("cluster", "host"):  # the raw reports; the flat facts and findings stay
            if getattr(res, name) and _size(res) > MAX_ANSWER_BYTES:
                setattr(res, name, {"truncated": True, "note": f"the {name} report was too large for one answer; "
                                                               "run `grpo-debug probe --format json` on the host"})
                cut = True
    if _size(res) > MAX_ANSWER_BYTES:
        _drop_to_budget(res.findings, _size(res))
        cut = True
    if cut:
        res.summary += " (truncated: some report text was cut to bound the answer size)"
    return res


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
    """MCPServer whose tools/list publishes compact schemas (the tool list sits in every agent's context)
    and whose trigger prompts are registered on the first prompts request (a lean start)."""

    _prompts_ready = True

    def _ensure_prompts(self) -> None:
        if not self._prompts_ready:
            self._prompts_ready = True
            _register_trigger_prompts(self)

    async def list_prompts(self):
        self._ensure_prompts()
        return await super().list_prompts()

    async def get_prompt(self, *args, **kwargs):
        self._ensure_prompts()
        return await super().get_prompt(*args, **kwargs)

    async def list_tools(self):
        tools = await super().list_tools()
        return [t.model_copy(update={"input_schema": compact_schema(t.input_schema, descriptions=True),
                                     "output_schema": compact_schema(shallow_schema(t.output_schema), descriptions=False)})
                for t in tools]


def build_server(allowed_roots: Iterable[str | os.PathLike] | None = None, ray_address: str | None = None) -> MCPServer:
    """The MCP server. ``allowed_roots``: folders whose files the path-taking tools may read (default: the
    working directory plus $GRPO_DEBUG_ALLOW); the bundled example logs are always readable."""
    roots = default_roots() if allowed_roots is None else [Path(os.path.abspath(r)) for r in allowed_roots]
    examples = _examples_dir()
    if examples is not None and examples not in roots:
        roots.append(examples)
    base = os.getcwd()  # relative paths are relative to the server's working directory

    def confined(value: str, arg: str, kind: Literal["file", "dir", "any"] = "file") -> str:
        try:
            return str(resolve_path(value, roots, kind=kind, base=base))
        except PathNotAllowed as e:
            raise ToolError(f"`{arg}`: {e}") from None

    def text_or_path(text: str, path: str, *, required: bool) -> tuple[str | None, str | None]:
        """The one input of a text-or-path tool: empty strings count as not given; both is an error, and so
        is neither when ``required``; pasted text is size-checked and a path confined to the allowed roots.
        Call inside ``_guard`` so that an unexpected error names the tool."""
        text, path = _opt(text), _opt(path)
        if text is not None and path is not None:
            raise ToolError("give exactly one of `text` (pasted) or `path` (a file on the server's machine), not both")
        if required and text is None and path is None:
            raise ToolError("give the input: `text` (pasted as a string) or `path` (a file on the server's "
                            "machine); neither was given")
        _check_text(text)
        return text, (confined(path, "path") if path is not None else None)

    server = GrpoDebugServer("grpo-debug", title="grpo-debug", version=_version(), instructions=INSTRUCTIONS,
                             log_level="WARNING")
    server.allowed_roots = roots  # type: ignore[attr-defined]  (read by the CLI's start-up line and tests)

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
    async def triage_tool(
        ctx: Context,
        text: Annotated[OptStr, Field(
            description="The log, config or launch script as text. Omit when giving `path`.")] = "",
        path: Annotated[OptStr, Field(
            description="Path of a log/config/script file readable by the server. Omit when giving `text`.")] = "",
        max_findings: Annotated[int, Field(ge=1, le=100, description="At most this many findings.")] = 10,
    ) -> TriageResult:
        """Runs the (synchronous) engine in a worker thread; large files report progress notifications
        (bytes read / bytes total) to clients that sent a progress token."""
        import anyio

        def progress(done: int, total: int | None) -> None:
            try:
                anyio.from_thread.run(ctx.report_progress, float(done), float(total) if total else None,
                                      "reading the log")
            except Exception:  # noqa: BLE001 - progress is best-effort; never fail a triage for it
                pass

        return await anyio.to_thread.run_sync(lambda: _triage_sync(text, path, max_findings, progress))

    def _triage_sync(text, path, max_findings, progress) -> TriageResult:
        with _guard("triage"):
            text, path = text_or_path(text, path, required=True)
            try:
                return bound_triage(triage(text=text, path=path, max_findings=max_findings, progress=progress))
            except InputError as e:
                raise ToolError(f"`{'text' if text is not None else 'path'}`: {e}") from e

    @server.tool(name="check_config", title="Check a training config or launch script",
                 description="Check a config (verl YAML, DeepSpeed JSON, TRL/HF args) or launch script (slime, Megatron, "
                             "OpenRLHF, verl overrides): what the settings will cause and the exact line edits. "
                             "Give `text` or `path`.", annotations=READ_ONLY)
    def check_config_tool(
        text: Annotated[OptStr, Field(description="The config or launch script as text.")] = "",
        path: Annotated[OptStr, Field(description="A config or script file to read instead.")] = "",
    ) -> TriageResult:
        from grpo_debug.tools.check_config import ConfigParseError, check_config

        with _guard("check_config"):
            text, path = text_or_path(text, path, required=True)
            try:
                return bound_triage(check_config(text=text, path=path))
            except (InputError, ConfigParseError) as e:
                raise ToolError(f"`{'text' if text is not None else 'path'}`: {e}") from None

    @server.tool(name="probe_host", title="Probe this host",
                 description="Facts of the machine the server runs on: versions, env vars, limits, GPUs (NVML), with "
                             "rules over them; optional numerics (torch subprocess), checkpoint folder, tokenizer stop ids, "
                             "memory estimate, fan-out over the Ray cluster the server's owner configured. Read-only.",
                 annotations=READ_ONLY)
    def probe_host_tool(
        numerics: Annotated[bool, Field(description="Run the torch numerics probes (CPU; a GPU only if free).")] = False,
        checkpoint: Annotated[OptStr, Field(description="A Megatron/DeepSpeed/HF checkpoint folder to inspect.")] = "",
        tokenizer: Annotated[OptStr, Field(description="Tokenizer folder or tokenizer.json (with `stop`).")] = "",
        stop: Annotated[list[str] | None, Field(description="Stop strings to turn into stop_token_ids.")] = None,
        estimate: Annotated[dict | None, Field(description="Memory estimator arguments, e.g. {params_b: 7, zero_stage: 3, "
                                                           "dp: 8, seq_len: 4096, gpu: 'h100_sxm'}.")] = None,
        cluster: Annotated[bool, Field(description="Probe every node of the Ray cluster set by the server's owner "
                                                   "(serve --ray-address); clients cannot name an address.")] = False,
    ) -> ProbeResult:
        if tokenizer and not stop:
            raise ToolError("`tokenizer` needs `stop`: the stop strings to look up")
        if cluster and not ray_address:
            raise ToolError("`cluster`: this server has no Ray cluster configured; its owner starts it with "
                            f"`grpo-debug serve --ray-address HEAD:6379` (or sets {RAY_ADDRESS_ENV})")
        with _guard("probe_host"):
            checkpoint_p = confined(checkpoint, "checkpoint", "dir") if checkpoint else None
            tokenizer_p = confined(tokenizer, "tokenizer", "any") if tokenizer else None
            if stop is not None:
                if len(stop) > 100 or any(len(x) > 1000 for x in stop):
                    raise ToolError("`stop`: at most 100 stop strings of at most 1000 characters each")
            if estimate is not None:
                estimate = _check_estimate(estimate, confined)
            try:
                return bound_probe(run_probe(numerics=numerics, checkpoint=checkpoint_p, tokenizer=tokenizer_p,
                                             stop=stop, estimate=estimate, ray_address=ray_address if cluster else None))
            except (TypeError, ValueError) as e:  # an unknown or ill-typed estimator argument
                raise ToolError(f"`estimate`: {e}") from None

    def _family_tool(family: str, ops: tuple[str, ...], description: str, title: str) -> None:
        def tool(operation, text="", path="", gpu=""):
            with _guard(family):
                text, path = text_or_path(text, path, required=False)
                try:
                    return bound_family(run_family(family, operation, text=text, path=path, gpu=_opt(gpu)))
                except (FamilyError, InputError) as e:
                    raise ToolError(str(e)) from None

        # real annotation objects (this module uses postponed annotations, which cannot see `ops`)
        tool.__annotations__ = {
            "operation": Annotated[Literal[ops + ("rtx4090",)], Field(  # type: ignore[valid-type]
                description=f"One of {', '.join(ops)}; rtx4090 = gpu for the RTX 4090.")],
            "text": Annotated[OptStr, Field(description="Input for the operation: symptom words, a log, a config, "
                                                        "a Python snippet, a bug number or a rule id.")],
            "path": Annotated[OptStr, Field(description="A file to read instead of text.")],
            "gpu": Annotated[OptStr, Field(description="GPU id or name: rtx4090, a100_80gb, h100_sxm, mi300x, ...")],
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
        with _guard("suggest"):
            _check_text(text)
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
        if len(rule_id) > 200:
            raise ToolError(f"`rule_id`: {len(rule_id)} characters is not a rule id (ids are short, e.g. from "
                            "findings[].causes[].rule_id)")
        with _guard("explain_rule"):
            try:
                return rule_page(find_rule(default_rules(), rule_id))
            except UnknownRuleError as e:
                raise ToolError(f"`rule_id`: {e.args[0] if e.args else e}") from None

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

    server._prompts_ready = False  # trigger prompts: registered on the first prompts/list or prompts/get
    _register_completion_and_logging(server)
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


def _register_completion_and_logging(server: MCPServer) -> None:
    """completion/complete (rule ids for rule://{rule_id}, by prefix) and logging/setLevel (accepted and
    recorded; this server sends no log notifications to clients, so the level filters nothing yet)."""

    @server.completion()
    async def complete(ref, argument, context):
        if isinstance(ref, ResourceTemplateReference) and ref.uri == "rule://{rule_id}" and argument.name == "rule_id":
            prefix = (argument.value or "").lower()
            ids = sorted(r.id for r in default_rules() if r.id.lower().startswith(prefix))
            return Completion(values=ids[:100], total=len(ids), has_more=len(ids) > 100)
        # prompt arguments (a log, the user's details) are free text: nothing to complete
        return Completion(values=[], total=0, has_more=False)

    async def set_level(ctx, params: SetLevelRequestParams) -> EmptyResult:
        server.client_log_level = params.level  # type: ignore[attr-defined]
        logging.getLogger("grpo_debug").debug("client asked for log level %s", params.level)
        return EmptyResult()

    server.client_log_level = "warning"  # type: ignore[attr-defined]
    server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)


# ---- HTTP ---------------------------------------------------------------------------------------------------

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
TOKEN_ENV = "GRPO_DEBUG_TOKEN"
RAY_ADDRESS_ENV = "GRPO_DEBUG_RAY_ADDRESS"  # the server owner's Ray cluster for probe_host(cluster=true)
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_form(name: str) -> str:
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


def transport_security_for(host: str, names: Iterable[str] = ()) -> Any:
    """Host/Origin validation for the bound address. Loopback: the SDK's own list (127.0.0.1, localhost, ::1,
    any port). Other addresses: the bound host, the machine's names for a wildcard bind, and ``names``
    (``--allow-host``); a request whose Host is none of these gets 421, an Origin none of these 403."""
    import socket

    from mcp.server.transport_security import TransportSecuritySettings

    allowed = list(LOOPBACK_NAMES) + [host.strip("[]")] + [n for n in names if n]
    if host in ("0.0.0.0", "::", ""):
        for fn in (socket.gethostname, socket.getfqdn):
            try:
                allowed.append(fn())
            except OSError:
                pass
        try:
            allowed += [ai[4][0] for ai in socket.getaddrinfo(socket.gethostname(), None)]
        except OSError:
            pass
    allowed = list(dict.fromkeys(a for a in allowed if a and a not in ("0.0.0.0", "::")))
    hosts, origins = [], []
    for a in allowed:
        h = _host_form(a)
        hosts += [h, f"{h}:*"]
        origins += [f"http://{h}", f"http://{h}:*", f"https://{h}", f"https://{h}:*"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>`` (401 otherwise,
    compared in constant time). Lifespan and other non-HTTP scopes pass through."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._token = token.encode("utf-8")

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        got = b""
        for k, v in scope.get("headers") or ():
            if k.lower() == b"authorization":
                got = v
                break
        scheme, _, cred = got.partition(b" ")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(cred.strip(), self._token):
            body = json.dumps({"error": "unauthorized", "message": "missing or wrong bearer token: send "
                               "'Authorization: Bearer <token>'"}).encode()
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="grpo-debug"'),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def http_app(server: MCPServer, *, host: str = "127.0.0.1", stateless: bool = False, token: str | None = None,
             allow_hosts: Iterable[str] = (), json_response: bool | None = None) -> Any:
    """The streamable-HTTP ASGI app at /mcp with Host/Origin validation and, with a token, bearer auth.
    ``stateless`` (replicas behind a load balancer): no sessions, plain JSON responses."""
    app = server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=stateless,
        json_response=stateless if json_response is None else json_response,
        transport_security=transport_security_for(host, allow_hosts), host=host,
        max_request_body_size=HTTP_MAX_BODY_BYTES)
    return BearerAuth(app, token) if token else app


def run_http(server: MCPServer, *, host: str, port: int, **kw: Any) -> None:
    import uvicorn

    app = http_app(server, host=host, **kw)
    uvicorn.run(app, host=host.strip("[]"), port=port, log_level="warning", timeout_graceful_shutdown=5)
