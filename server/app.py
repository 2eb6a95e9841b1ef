"""The MCP server: registration only, a few lines per tool over grpo_debug.tools and grpo_debug.skills.

Tools: ``triage``, ``check_config``, ``probe_host``, the five families, ``suggest`` and ``explain_rule``.
Resources: ``rule://{rule_id}`` (a rule as markdown), ``symptoms://codes`` (the symptom vocabulary as JSON)
and ``skill://grpo-debug/SKILL.md`` when a SKILL.md is shipped. Prompts: ``triage_log`` and one per seed
trigger group. Answer limits live in budget.py, schemas in schemas.py, HTTP in http.py, path confinement in
paths.py. Nothing here imports torch, ray or pynvml.
"""
from __future__ import annotations

import contextvars
import json
import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Iterable, Iterator, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import (Completion, EmptyResult, ResourceTemplateReference, SetLevelRequestParams,
                       ToolAnnotations)
from pydantic import Field

from grpo_debug.server import examples_dir, find_skill_md, version
from grpo_debug.server.budget import (MAX_ANSWER_BYTES, MAX_TEXT_BYTES, _check_text, bound_family,  # noqa: F401
                                      bound_probe, bound_triage)
from grpo_debug.server.clip import ShortErrors
from grpo_debug.server.http import MIN_TOKEN_CHARS, TOKEN_ENV, is_loopback, run_http  # noqa: F401  (re-exported)
from grpo_debug.server.limits import (TIMEOUT_ENV, Busy, Cancelled, DeadlineExceeded, HeavyPool, Limits,
                                      WorkerMemoryError)
from grpo_debug.server.prompts import register_trigger_prompts as _register_trigger_prompts
from grpo_debug.server.prompts import register_triage_prompt as _register_triage_prompt
from grpo_debug.server.redact_answers import redact_answer, redacted_message
from grpo_debug.server.paths import CLIENT_ROOTS, PathNotAllowed, client_roots, default_roots, resolve_path
from grpo_debug.server.concise import Detail, answer
from grpo_debug.server.schemas import OptStr, TriageAnswer, argument_errors, compact_schema, shallow_schema
from grpo_debug.skills.symptoms import SYMPTOMS
from grpo_debug.tools.errors import FamilyError, InputError
from grpo_debug.tools.families import FAMILY_SPECS, FamilySpec
from grpo_debug.tools.models import FamilyReport, ProbeResult, Suggestion, TriageResult
from grpo_debug.tools.rule_page import RulePage, UnknownRuleError, find_rule, rule_page

# The engine (rule loading, triage, families, probes, rich rendering) is imported on first use, inside
# the tool wrappers below: the MCP handshake and tools/list then cost little more than the SDK's own start.


def default_rules():
    from grpo_debug.skills.loader import default_rules as _d

    return _d()


def render_rule_markdown(rule):
    from grpo_debug.tools.render.rule import render_rule_markdown as _r

    return _r(rule)


def triage(**kw):
    from grpo_debug.tools.rundir import triage_any as _t  # a run folder or metric-store file too

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
RAY_ADDRESS_ENV = "GRPO_DEBUG_RAY_ADDRESS"  # the server owner's Ray cluster for probe_host(cluster=true)
log = logging.getLogger("grpo_debug.server")


def _opt(s: str | None) -> str | None:
    return s if s else None  # an empty string counts as not given


@contextmanager
def _guard(tool: str) -> Iterator[None]:
    """Turn an unexpected exception into a ToolError that says what failed (the SDK would otherwise answer
    only 'Error executing tool X'); the traceback goes to the server log."""
    try:
        yield
    except (ToolError, Cancelled, MemoryError, KeyboardInterrupt, SystemExit, GeneratorExit):
        raise  # a MemoryError is the worker's to answer (server/workers.py: 'the input needed more than N MB')
    except BaseException as e:  # noqa: BLE001 - a native library's panic (pyo3 PanicException) included
        log.exception("tool %s failed", tool)
        msg = str(e).replace("\n", " ")
        raise ToolError(f"internal error in {tool}: {type(e).__name__}: {msg[:300]} (the input was accepted; "
                        "please report this with the input)") from None


def _with_roots(roots: tuple, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with the client's declared roots readable (in a worker process or thread)."""
    token = CLIENT_ROOTS.set(roots)
    try:
        return fn(*args, **kwargs)
    finally:
        CLIENT_ROOTS.reset(token)


async def _heavy(pool: HeavyPool, tool: str, fn, *args, progress=None, **kwargs):
    """Run a heavy tool's synchronous body ``fn(*args, **kwargs)`` in the pool (bounded concurrency, queue,
    deadline, cancellation; a worker process when ``fn`` is a module-level function and the arguments pickle),
    the client's roots travelling with it; ``progress`` reaches ``fn`` as its ``progress=`` keyword."""
    if not args and not kwargs and getattr(fn, "__name__", "") == "<lambda>":  # a closure: a thread, in context
        fn, args = contextvars.copy_context().run, (fn,)
    try:
        return await pool.run(_with_roots, CLIENT_ROOTS.get(), fn, *args, progress=progress, **kwargs)
    except Busy as e:
        raise ToolError(f"{tool}: {e}") from None
    except DeadlineExceeded as e:
        raise ToolError(f"{tool} {e} (the server's per-call deadline, ${TIMEOUT_ENV}); "
                        "give a smaller input, e.g. the part of the log around the first error") from None
    except WorkerMemoryError as e:
        raise ToolError(f"{tool}: {e}") from None


#: Where a `path` may point, in the tools' argument descriptions (kept short: tools/list stays under 16 kB).
WHERE = "under the server's cwd, --allow dirs or your client's roots"


class _Inputs:
    """What the path-taking tools may read: files under ``roots``, relative paths taken from ``base``."""

    def __init__(self, roots: list[Path], base: str) -> None:
        self.roots, self.base = roots, base

    def __getstate__(self) -> dict:
        return {"roots": self.roots, "base": self.base}  # sent to worker processes without the pool

    def confined(self, value: str, arg: str, kind: Literal["file", "dir", "any"] = "file") -> str:
        """``value`` resolved inside the allowed roots (the server's, plus the roots the client declared), or a
        ToolError naming the argument."""
        try:
            return str(resolve_path(value, [*self.roots, *CLIENT_ROOTS.get()], kind=kind, base=self.base))
        except PathNotAllowed as e:
            raise ToolError(f"`{arg}`: {e}") from None

    def text_or_path(self, text: str, path: str, *, required: bool,
                     kind: Literal["file", "dir", "any"] = "file") -> tuple[str | None, str | None]:
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
        return text, (self.confined(path, "path", kind) if path is not None else None)


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


class GrpoDebugServer(ShortErrors, MCPServer):
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

    #: Honour the roots a client declares (stdio and in-process clients run as the server's user); a server
    #: reached over HTTP does not, its readable folders are the owner's alone (--allow).
    trust_client_roots = True

    def streamable_http_app(self, *args, **kwargs):
        self.trust_client_roots = False
        return super().streamable_http_app(*args, **kwargs)

    async def call_tool(self, name, arguments, context=None):
        """Tools by name, with the client's declared roots readable for the call; arguments that fail the input
        schema are answered with the field and what it accepts (a bad enum value lists the allowed values)."""
        roots = await client_roots(context) if self.trust_client_roots and context is not None else ()
        token = CLIENT_ROOTS.set(roots)
        try:
            return redact_answer(await super().call_tool(name, arguments, context))  # secrets out, last step
        except ToolError as e:
            if type(e.__cause__).__name__ == "ValidationError" and hasattr(e.__cause__, "errors"):
                raise ToolError(f"{name}: {argument_errors(e.__cause__)}") from None
            if (msg := redacted_message(str(e))) is not None:
                raise ToolError(msg) from None
            raise
        finally:
            CLIENT_ROOTS.reset(token)

    async def list_tools(self):
        tools = await super().list_tools()
        return [t.model_copy(update={"input_schema": compact_schema(t.input_schema, descriptions=True),
                                     "output_schema": compact_schema(shallow_schema(t.output_schema), descriptions=False)})
                for t in tools]


def build_server(allowed_roots: Iterable[str | os.PathLike] | None = None, ray_address: str | None = None,
                 limits: Limits | None = None) -> MCPServer:
    """The MCP server. ``allowed_roots``: folders whose files the path-taking tools may read (default: the
    working directory plus $GRPO_DEBUG_ALLOW); the bundled example logs are always readable. ``limits``: the
    heavy-call pool, queue and per-call deadline (default: from the environment, see server/limits.py)."""
    roots = default_roots() if allowed_roots is None else [Path(os.path.abspath(r)) for r in allowed_roots]
    examples = examples_dir()
    if examples is not None and examples not in roots:
        roots.append(examples)
    inputs = _Inputs(roots, os.getcwd())  # relative paths are relative to the server's working directory
    server = GrpoDebugServer("grpo-debug", title="grpo-debug", version=version(), instructions=INSTRUCTIONS,
                             log_level="WARNING")
    server.allowed_roots = roots  # type: ignore[attr-defined]  (read by the CLI's start-up line and tests)
    inputs.pool = server.pool = HeavyPool(limits or Limits.from_env())  # type: ignore[attr-defined]
    _register_triage(server, inputs)
    _register_check_config(server, inputs)
    _register_probe_host(server, inputs, ray_address)
    for spec in FAMILY_SPECS.values():
        _register_family(server, inputs, spec)
    from grpo_debug.server.run_tools import register_run_tools

    register_run_tools(server, inputs, _guard, _heavy, READ_ONLY)  # plot, compare_runs (server/run_tools.py)
    _register_suggest(server, inputs)
    _register_explain_rule(server)
    _register_resources(server)
    from grpo_debug.server.watch_resource import register_watch_resource  # grpo-debug://watch/{+path}, subscriptions

    server.watch_hub = register_watch_resource(server, roots, inputs.base)  # type: ignore[attr-defined]
    _register_triage_prompt(server)
    server._prompts_ready = False  # trigger prompts: registered on the first prompts/list or prompts/get
    _register_completion_and_logging(server)
    return server


def _register_family(server: MCPServer, inputs: _Inputs, spec: FamilySpec) -> None:
    """One family tool (``tools/families``' catalogue): an ``operation`` enum plus text, path and gpu."""
    family = spec.name

    async def tool(operation, text="", path="", gpu=""):
        return await _heavy(inputs.pool, family, _family_job, inputs, family, operation, text, path, gpu)

    # real annotation objects (this module uses postponed annotations, which cannot see the operations)
    tool.__annotations__ = {
        "operation": Annotated[Literal[spec.choices], Field(  # type: ignore[valid-type]
            description="rtx4090 = gpu for the RTX 4090.")],
        "text": Annotated[OptStr, Field(description=spec.text_help)],  # what text is per operation (catalogue)
        "path": Annotated[OptStr, Field(description=f"A file to read instead of text, {WHERE}.")],
        "gpu": Annotated[OptStr, Field(description="GPU id or name: rtx4090, a100_80gb, h100_sxm, mi300x, ...")],
        "return": FamilyReport,
    }
    tool.__name__ = family
    server.tool(name=family, title=spec.title, description=spec.description, annotations=READ_ONLY)(tool)


def _family_job(inputs: _Inputs, family: str, operation, text, path, gpu) -> FamilyReport:
    """The body of one family tool (in a worker process)."""
    with _guard(family):
        text, path = inputs.text_or_path(text, path, required=False)
        try:
            return bound_family(run_family(family, operation, text=text, path=path, gpu=_opt(gpu)))
        except (FamilyError, InputError) as e:
            raise ToolError(str(e)) from None


_VERSIONS_DOC = "The run's versions, e.g. verl=0.9.0,deepspeed=0.19.5; `host` adds the server's installed ones."


def _check_versions(versions: str | None) -> str | None:
    """The ``versions`` argument validated (a ToolError names the bad item); None when empty."""
    from grpo_debug.tools.run.versions import parse_versions_arg

    if not versions:
        return None
    if len(versions) > 2000:
        raise ToolError("`versions`: longer than 2000 characters")
    try:
        parse_versions_arg(versions)
    except ValueError as e:
        raise ToolError(f"`versions`: {str(e).removeprefix('versions: ')}") from None
    return versions


#: Seconds between two progress notifications of one call (the first and the last are always sent).
PROGRESS_INTERVAL_S = 0.1


def _progress_reporter(ctx: Context, reading: str, analysing: str, interval: float = PROGRESS_INTERVAL_S):
    """A ``progress(done, total[, phase])`` callback for the engine's worker thread that sends
    ``ctx.report_progress`` on the event loop (a no-op unless the client sent a progressToken): bytes done of
    bytes total, at most one per ``interval`` seconds, only increasing, always the first and the one that
    reaches ``total``. That last one says ``analysing``: the rules and detectors still run, with no byte count
    (the engine's ``analysing`` phase, tools/engine/large_logs.py, adds no notification: progress must increase).
    Call on the event loop."""
    import threading
    import time

    import anyio.from_thread
    import anyio.lowlevel

    token = anyio.lowlevel.current_token()
    lock, state = threading.Lock(), {"done": -1.0, "at": float("-inf")}

    def progress(done: float, total: float | None = None, phase: str = "reading") -> None:
        now, last = time.monotonic(), phase != "reading" or (total is not None and done >= total)
        with lock:
            if done <= state["done"] or not (last or now - state["at"] >= interval):
                return
            state["done"], state["at"] = done, now
        try:
            anyio.from_thread.run(ctx.report_progress, float(done), float(total) if total else None,
                                  analysing if last else reading, token=token)
        except Exception:  # noqa: BLE001 - progress is best-effort; never fail a call for it
            pass

    return progress


#: The `detail` argument of triage and check_config (server/concise.py).
_DETAIL_DOC = "full: every finding and series"


def _register_triage(server: MCPServer, inputs: _Inputs) -> None:
    """The ``triage`` tool: a log, config or launch script in, findings out."""
    @server.tool(
        name="triage",
        title="Triage an RL training log",
        description=(
            "Diagnose a GRPO/PPO run from its log, config or launch script (`text` or `path`): the verdict, "
            "findings with evidence lines, rule ids and the fix naming the exact key."
        ),
        annotations=READ_ONLY,
    )
    async def triage_tool(
        ctx: Context,
        text: Annotated[OptStr, Field(
            description="The log, config or launch script as text.")] = "",
        path: Annotated[OptStr, Field(
            description=f"A log/config/script file, metric store or run folder {WHERE}.")] = "",
        max_findings: Annotated[int, Field(ge=1, le=100, description="At most this many findings.")] = 10,
        versions: Annotated[OptStr, Field(description=_VERSIONS_DOC)] = "",
        detail: Annotated[Detail, Field(description=_DETAIL_DOC)] = "concise",
    ) -> TriageAnswer:
        """Runs the (synchronous) engine in a worker thread, a path through the same streaming read as the CLI;
        large files report progress notifications (bytes done / bytes total, at most ~10 a second) to clients
        that sent a progress token. The answer is concise unless ``detail='full'`` (server/concise.py)."""
        progress = _progress_reporter(ctx, "reading the log", "log read; analysing it (rules, detectors, ranking)")
        return answer(await _heavy(inputs.pool, "triage", _triage_job, inputs, text, path, max_findings, versions,
                                   progress=progress), detail, "triage")


def _triage_job(inputs: _Inputs, text, path, max_findings, versions, progress=None) -> TriageResult:
    """The body of ``triage`` (in a worker process): confinement, then the engine, then the answer budget."""
    with _guard("triage"):
        text, path = inputs.text_or_path(text, path, required=True, kind="any")  # a run folder too
        versions = _check_versions(versions)
        try:
            return bound_triage(triage(text=text, path=path, max_findings=max_findings, progress=progress,
                                       versions=versions))
        except InputError as e:
            raise ToolError(f"`{'text' if text is not None else 'path'}`: {e}") from e


def _register_check_config(server: MCPServer, inputs: _Inputs) -> None:
    """The ``check_config`` tool: a config or launch script vetted before a run."""
    @server.tool(name="check_config", title="Check a training config or launch script",
                 description="Check a config (verl YAML, DeepSpeed JSON, TRL/HF args) or launch script before a run: "
                             "findings, line edits and a `diff` for `patch -p0 FILE`.",
                 annotations=READ_ONLY)
    async def check_config_tool(
        text: Annotated[OptStr, Field(description="The config or launch script as text.")] = "",
        path: Annotated[OptStr, Field(description=f"A config or script file to read instead, {WHERE}.")] = "",
        versions: Annotated[OptStr, Field(description=_VERSIONS_DOC)] = "",
        detail: Annotated[Detail, Field(description=_DETAIL_DOC)] = "concise",
    ) -> TriageAnswer:
        return answer(await _heavy(inputs.pool, "check_config", _check_job, inputs, text, path, versions),
                      detail, "check_config")


def _check_job(inputs: _Inputs, text, path, versions) -> TriageResult:
    """The body of ``check_config`` (in a worker process)."""
    from grpo_debug.tools.check_config import ConfigParseError, check_config

    with _guard("check_config"):
        text, path = inputs.text_or_path(text, path, required=True)
        versions = _check_versions(versions)
        try:
            return bound_triage(check_config(text=text, path=path, versions=versions))
        except (InputError, ConfigParseError) as e:
            raise ToolError(f"`{'text' if text is not None else 'path'}`: {e}") from None


def _register_probe_host(server: MCPServer, inputs: _Inputs, ray_address: str | None) -> None:
    """The ``probe_host`` tool: facts of the server's machine (and its owner's Ray cluster)."""
    @server.tool(name="probe_host", title="Probe this host",
                 description="Facts of the machine the server runs on: versions, env vars, limits, GPUs (NVML), with "
                             "rules over them; optional numerics (torch subprocess), checkpoint folder, tokenizer stop ids, "
                             "memory estimate, fan-out over the Ray cluster the server's owner configured. Read-only.",
                 annotations=READ_ONLY)
    async def probe_host_tool(
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
        return await _heavy(inputs.pool, "probe_host", _probe_job, inputs, numerics, checkpoint, tokenizer, stop,
                            estimate, ray_address if cluster else None)


def _probe_job(inputs: _Inputs, numerics, checkpoint, tokenizer, stop, estimate, ray_address) -> ProbeResult:
    """The body of ``probe_host`` (in a worker process); ``ray_address`` only when the client asked for it."""
    with _guard("probe_host"):
        checkpoint_p = inputs.confined(checkpoint, "checkpoint", "dir") if checkpoint else None
        tokenizer_p = inputs.confined(tokenizer, "tokenizer", "any") if tokenizer else None
        if stop is not None:
            if len(stop) > 100 or any(len(x) > 1000 for x in stop):
                raise ToolError("`stop`: at most 100 stop strings of at most 1000 characters each")
        if estimate is not None:
            estimate = _check_estimate(estimate, inputs.confined)
        try:
            return bound_probe(run_probe(numerics=numerics, checkpoint=checkpoint_p, tokenizer=tokenizer_p,
                                         stop=stop, estimate=estimate, ray_address=ray_address))
        except (TypeError, ValueError) as e:  # an unknown or ill-typed estimator argument
            raise ToolError(f"`estimate`: {e}") from None


#: Characters of a `suggest` text that are read (a question needs no more; 12 MiB took 103 s); the answer says so.
SUGGEST_MAX_CHARS = 64 * 1024


def _register_suggest(server: MCPServer, inputs: _Inputs) -> None:
    """The ``suggest`` tool: which tool, operation and rules fit a question (in the pool, with its deadline)."""
    @server.tool(name="suggest", title="Which tool for this question",
                 description="Route a free-text question or symptom description to the tools, operations, rules "
                             "and prompts to try. Use when unsure where to start.", annotations=READ_ONLY)
    async def suggest_tool(text: Annotated[str, Field(description="A question, symptom words, or log lines/metric values (routed by what they show).")]) -> Suggestion:
        with _guard("suggest"):
            _check_text(text)
        return await _heavy(inputs.pool, "suggest", _suggest_job, text[:SUGGEST_MAX_CHARS], len(text))


def _suggest_job(text: str, given: int) -> Suggestion:
    """The body of ``suggest`` over at most SUGGEST_MAX_CHARS characters; ``given``: the length the client sent."""
    with _guard("suggest"):
        out = suggest(text)
        if given > len(text):
            out.summary += (f" (only the first {len(text)} of the {given} characters given were read; for a whole "
                            "log use `triage`)")
        return out


def _register_explain_rule(server: MCPServer) -> None:
    """The ``explain_rule`` tool."""
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


def _register_resources(server: MCPServer) -> None:
    """Resources: ``rule://{rule_id}``, ``symptoms://codes`` and, when shipped, the SKILL.md."""
    @server.resource("rule://{rule_id}", name="rule", title="Diagnosis rule",
                     description="One rule of the knowledge base as a markdown page.", mime_type="text/markdown")
    def rule_resource(rule_id: str) -> str:
        if len(rule_id) > 200:
            raise ResourceNotFoundError(f"rule://{rule_id[:40]}... ({len(rule_id)} characters) is not a rule id: "
                                        "ids are short, e.g. from findings[].causes[].rule_id")
        try:
            return render_rule_markdown(find_rule(default_rules(), rule_id))
        except UnknownRuleError as e:
            msg = str(e)
            raise ResourceNotFoundError(msg if len(msg) <= 500 else msg[:500] + "...") from None

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


