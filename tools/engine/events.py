"""Events in a log: Python tracebacks and the error lines of CUDA, NCCL, Ray, SGLang, vLLM, DeepSpeed.

The patterns are the stable substrings of each framework's error messages (the parts that do not change
between releases), matched inside normalised lines. Each event keeps the 1-based line numbers that
show it; OOM events also carry the numbers the message gives (tried / total / free, in GiB).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from grpo_debug.tools.engine.normalize import Line
from grpo_debug.tools.engine.prefilter import lines_matching

# kind -> regex (case-sensitive unless (?i) inside); order matters only for reading.
EVENT_PATTERNS: dict[str, str] = {
    "cuda_oom": r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError|CUDA [Ee]rror: out of memory|"
                r"Not enough memory\. Please try to increase --mem-fraction-static|"
                r"larger than the maximum number of tokens that can be stored in KV cache|"
                r"CUresult error: 2 \(out of memory\)|HIP out of memory|cudaErrorMemoryAllocation|"
                r"No available memory for the cache blocks|(?i:not enough (?:gpu )?memory .*kv cache)|"
                # vLLM V1's too-small pool: v1/core/kv_cache_utils.py (0.11.1), v1/core/kv_cache_planning.py (0.33.0)
                r"KV cache is needed, which is larger than the available KV cache memory|"
                r"(?i:kv cache .*(?:insufficient|not enough))",
    # Ray's memory monitor (raylet): "Task was killed due to the node running low on memory" up to 2.54.1, "N worker(s)
    # were killed due to ..." from 2.55.0; "exceeds the memory usage threshold" until 2.55, "Memory usage NB exceeded
    # threshold of NB" from 2.56.0 (strings of the ray wheels on PyPI); the closing advice line "Refer to the
    # documentation on how to address the out of memory issue: .../ray-oom-prevention.html" in every release
    "ray_host_oom": r"Task was killed due to the node running low on memory|"
                    r"worker\(s\) were killed due to the node running low on memory|killed due to memory pressure \(OOM\)|"
                    r"exceeds the memory usage threshold|Memory usage \d+B exceeded threshold of \d+B|"
                    r"Refer to the documentation on how to address the out of memory issue|"
                    r"exitcode\s*:\s*-9\b|Killed process \d+|oom-kill",
    "illegal_memory_access": r"(?i:illegal memory access)|Memory access fault|HSA_STATUS_ERROR_EXCEPTION|cudaErrorIllegalAddress",
    "nccl_timeout": r"Watchdog caught collective operation timeout|Process group watchdog thread terminated|"
                    r"ran for \d+ milliseconds before timing out",
    "shm_exhausted": r"failed to extend /dev/shm|/dev/shm/nccl-\S+ .*(?:No space|failed)|(?i:no space left on device.*shm)",
    "nccl_error": r"NCCL error|NCCL WARN|ncclInternalError|ncclUnhandledCudaError|ncclSystemError|DistBackendError",
    "ray_unschedulable": r"cannot be scheduled right now|pending placement groups?|Total available GPUs \d+ is less than|"
                         r"(?i:waiting for placement group)|Failed to schedule placement group|No available node types can fulfill",
    "ray_actor_died": r"ActorDiedError|The actor died unexpectedly|RayActorError|ActorUnavailableError|"
                      r"The actor is temporarily unavailable|A worker died or was killed|Owner's node has crashed|"
                      r"Worker exit type: SYSTEM_ERROR",
    "engine_crash": r"\b\w+ hit an exception|EngineCore failed to start|EngineDeadError|Engine core initialization failed",
    "sigquit": r"Received sigquit from a child|SIGQUIT received",
    "port_in_use": r"EADDRINUSE|(?i:address already in use)|failed to listen on any local network address|"
                   r"(?i:port \d+ is (?:already )?in use)",
    "connection_refused": r"Max retries exceeded with url|NewConnectionError|Connection refused|ConnectionRefusedError",
    # vLLM's compile cache: the assertion up to 0.9.0, the RuntimeError that replaced it (0.10.2 checked)
    "compile_cache_error": r"failed to get the hash of the compiled graph|vLLM failed to compile the model|"
                           r"BackendCompilerFailed|InductorError|corrupt local cache entry",
    # model\\'s: an OpenAI-style JSON error body pasted with its apostrophe escaped, read raw when streamed
    "context_length": r"(?i:maximum context length|longer than the maximum model length|exceeds the model\\?'?s max|"
                      r"context length exceeded|is longer than the model\\?'?s context)",
    "nan_reported": r"Unexpected result (?:nan|inf)|grad_norm is not finite|returned nan values|found (?:NaN|Inf) in|"
                    r"(?i:loss is nan|nan loss detected|detected (?:nan|inf))",
    "loss_scale_overflow": r"OVERFLOW! Rank|overflow! Skipping step|Grad overflow on iteration|Overflow detected\. Skipping step",
    "loss_scale_min": r"Current loss scale already at minimum",
    "watchdog_timeout": r"watchdog timeout \(self\.watchdog_timeout=|couldn't get a response from detokenizer",
    "cuda_graph_capture": r"Capture cuda graph failed|(?i:cuda graph capture failed)",
    "checkpoint_error": r"(?i:(?:no|missing|not found|could not find|does not exist|cannot find)[^\n]{0,80}latest_checkpointed_iteration|latest_checkpointed_iteration[^\n]{0,120}?(?:not found|does not exist|missing))|could not find the metadata file|will not load any checkpoints|No such file or directory: \S*(?:model_optim_rng|iter_\d+|mp_rank_\d+|\.safetensors|pytorch_model|checkpoint)|Missing key\(s\) in state_dict|Unexpected key\(s\) in state_dict|"
                        r"size mismatch for|Error\(s\) in loading state_dict|does not appear to have a file named",
    "segfault": r"Segmentation fault|SIGSEGV|Signal: 11\b|Fatal Python error: Segmentation",
    # SIGFPE: Python's faulthandler ("Fatal Python error: Floating point exception"), UCX's handler ("Caught signal 8
    # (Floating point exception: integer divide by zero)"), the shell ("Floating point exception (core dumped)")
    "sigfpe": r"Fatal Python error: Floating point exception|Caught signal 8 \(Floating point exception|"
              r"Floating point exception \(core dumped\)",
    "job_failed": r"Job '[^']+' failed|Job entrypoint command failed",
    # vLLM V1 EngineCore: a utility call from the client (collective_rpc, sleep, wake_up, ...) raised
    # (vllm/v1/engine/core.py: logger.exception("Invocation of %s method failed", method_name); 0.10.2 checked)
    "engine_rpc_failed": r"Invocation of \w+ method failed",
    # not errors, but markers that rules combine with a silent stop (collective_hang)
    # update_weights as a metric key (verl's ``timing_s/update_weights:1.2``, on every step line) is a timing,
    # not a weight-sync message: a key followed by its value is left out
    "weight_sync": r"(?i:init(?:ialize|ializing)? (?:the )?process group for .*weight|weight[ _-]?sync|"
                   r"update_weights?\b(?![\"']?\s*[:=]\s*[-+\d.])|init_weight_update_group|broadcast(?:ing)? weights)",
    "hang_note": r"(?i:^#.*(?:no (?:further )?(?:output|progress|log)|hangs?\b|hung\b|stuck|frozen|freezes))",
}
_COMPILED = {k: re.compile(v) for k, v in EVENT_PATTERNS.items()}
_EVENT_PREFILTER = [(v, "(?i" in v) for v in EVENT_PATTERNS.values()]


def _kinds_per_line(lines: list[Line], min_bytes: int | None = None) -> dict[int, list[str]]:
    """Line index -> event kinds whose pattern matches it. One multi-pattern pass over the joined texts
    (hyperscan / RE2 / re, prefilter.py) finds the candidates; the exact pattern confirms each line.
    ``min_bytes``: prefilter.lines_matching's (None: its default)."""
    kinds = list(EVENT_PATTERNS)
    texts = [ln.text for ln in lines]
    hits = lines_matching(_EVENT_PREFILTER, texts, **({} if min_bytes is None else {"min_bytes": min_bytes}))
    out: dict[int, list[str]] = {}
    for k, kind in enumerate(kinds):
        rx = _COMPILED[kind]
        cand = hits.get(k)
        idxs = sorted(cand) if cand is not None else range(len(lines))  # not prefilterable: scan all
        for i in idxs:
            if rx.search(texts[i]):
                out.setdefault(i, []).append(kind)
    return out


_OOM_NUMS = re.compile(
    r"Tried to allocate ([\d.]+) ?([KMG]i?B).*?total capacit?y of ([\d.]+) ?([KMG]i?B) of which ([\d.]+) ?([KMG]i?B|bytes) is free",
)
_TB_START = re.compile(r"Traceback \(most recent call last\):")
_TB_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
_EXC_LINE = re.compile(
    r"^\s*(?P<type>(?:[a-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failed|Failure)|Exception)"
    r"(?:\([\w.]+\))?)(?::\s?(?P<msg>.*))?$"
)
_PYSPY_FRAME = re.compile(r"^\s+([\w<>]+) \(([^()]+\.py):(\d+)\)\s*$")
_BLOCKING_FUNCS = re.compile(
    r"init_process_group|_create_c10d_store|rendezvous|all_reduce|all_gather|broadcast|barrier|"
    r"_wait_for|wait_for_workers|recv|init_weight_update_group|update_weights?"
)
_JSON_DECODE = re.compile(r"JSONDecodeError")
_COMPILE_CONTEXT = re.compile(r"_inductor|inductor|torch_compile|_dynamo|autotune|compile", re.I)

EVENT_KINDS = frozenset(EVENT_PATTERNS) | {"traceback", "exception", "assertion", "hang_stack",
                                           "error"}  # error: a classified record (engine/errors_classify.py)

_UNIT = {"B": 1 / 2**30, "bytes": 1 / 2**30, "KB": 1e3 / 2**30, "KiB": 1 / 2**20, "MB": 1e6 / 2**30,
         "MiB": 1 / 2**10, "GB": 1e9 / 2**30, "GiB": 1.0}


@dataclass
class Event:
    """One event. ``lines`` are 1-based input line numbers; ``text`` is their normalised text joined."""

    kind: str
    lines: list[int]
    text: str
    fields: dict = field(default_factory=dict)

    @property
    def line(self) -> int:
        return self.lines[0]


def _gib(num: str, unit: str) -> float:
    return round(float(num) * _UNIT.get(unit, 1.0), 3)


def _tracebacks(lines: list[Line]) -> list[Event]:
    """Group tracebacks: frames, the exception line, chained causes and Ray remote frames."""
    out: list[Event] = []
    i, n = 0, len(lines)
    while i < n:
        if not _TB_START.search(lines[i].text):
            i += 1
            continue
        start = i
        frames: list[str] = []
        used = [lines[i].no]
        exc_type = msg = None
        exc_line = None
        j = i + 1
        gap = 0
        while j < n and j - start < 400:
            t = lines[j].text
            fm = _TB_FRAME.match(t)
            if fm:
                frames.append(f"{fm.group(1)}:{fm.group(2)} in {fm.group(3)}")
                used.append(lines[j].no)
                gap = 0
            elif (em := _EXC_LINE.match(t)) and not t.startswith((" ", "\t")):
                exc_type, msg, exc_line = em.group("type"), (em.group("msg") or "").strip(), lines[j].no
                used.append(lines[j].no)
                # Ray remote tracebacks continue with frames of the remote side
                k = j + 1
                if k < n and (_TB_FRAME.match(lines[k].text) or _TB_START.search(lines[k].text)):
                    j = k
                    continue
                break
            elif _TB_START.search(t) or "During handling of the above exception" in t or "direct cause of the following" in t:
                used.append(lines[j].no)
            elif t.startswith((" ", "\t")) or not t.strip():
                gap += 0 if t.strip() else 1
            else:
                gap += 1
                if gap > 3:
                    break
            j += 1
        fields = {"exc_type": exc_type, "message": msg, "frames": frames[-12:], "exc_line": exc_line}
        text = "\n".join(lines[k].text for k in range(start, min(j + 1, n)))
        out.append(Event("traceback", sorted(set(used)), text, fields))
        i = max(j, i + 1)
    return out


_PORT_IN_MSG = re.compile(r"port[:= ]\s*(\d{2,5})\b|:(\d{4,5})\b")


def _relate_ports(events: list[Event], lines: list[Line]) -> None:
    """For bind/connect failures, the other lines naming the same port (who else picked it)."""
    for e in events:
        if e.kind not in ("port_in_use", "connection_refused"):
            continue
        m = _PORT_IN_MSG.search(e.text)
        if not m:
            continue
        port = m.group(1) or m.group(2)
        rx = re.compile(rf"(?<![\d.]){port}(?!\d)")
        e.fields["port"] = int(port)
        e.fields["related"] = [ln.no for ln in lines if ln.no not in e.lines and rx.search(ln.text)][:6]


_DEAD_PID = re.compile(r"^\s*pid:\s*(\d+)\s*$")  # the "pid: N" line of Ray's ActorDiedError block
_SOURCE_PID = re.compile(r"\bpid=(\d+)")
_ERRORISH = re.compile(r"Error|Exception|Fatal|Traceback|SIG[A-Z]+|[Ss]ignal \d|exception|fault|[Aa]bort")


def _relate_dead_actors(events: list[Event], lines: list[Line]) -> None:
    """For an actor death, the dead actor's own first error lines: Ray reports the death (ActorDiedError with a
    ``pid: N`` line in its block; not the ``ray::X.run() (pid=...)`` header, which names the caller) but not its
    cause, which the actor printed earlier under its ``(Name pid=N)`` prefix (ray-actor-died rule: 'the first
    error printed by that actor's pid ... is the real failure'). One pass over the lines, whatever the deaths."""
    deaths = [e for e in events if e.kind == "ray_actor_died"]
    if not deaths:
        return
    index = {ln.no: i for i, ln in enumerate(lines)}
    errors: dict[str, list[int]] = {}  # pid -> indices of its error lines, in order
    for i, ln in enumerate(lines):
        if ln.source and (m := _SOURCE_PID.search(ln.source)) and _ERRORISH.search(ln.text):
            errors.setdefault(m.group(1), []).append(i)
    for e in deaths:
        i = index.get(e.line)
        if i is None:
            continue
        pid = next((m.group(1) for ln in lines[i: i + 12] if (m := _DEAD_PID.match(ln.text))), None)
        own = [j for j in errors.get(pid, ()) if j < i] if pid else []
        if own:
            e.fields["pid"] = int(pid)
            e.fields["related"] = [lines[j].no for j in own[:2]]


def extract_events(lines: list[Line], min_bytes: int | None = None) -> list[Event]:
    """All events of the log, in line order (tracebacks first at equal lines). ``min_bytes``: below this many
    bytes of text the lines are scanned pattern by pattern (prefilter.lines_matching; None: its default; the kept
    lines of a folder's streamed logs: 0, the database being compiled once for them all)."""
    events = _tracebacks(lines)
    tb_exc_lines = {e.fields.get("exc_line") for e in events}
    pyspy: list[Line] = []
    kinds_at = _kinds_per_line(lines, min_bytes)
    order = list(EVENT_PATTERNS)
    for idx, ln in enumerate(lines):
        t = ln.text
        if not t:
            continue
        for kind in sorted(kinds_at.get(idx, ()), key=order.index):
            if True:
                fields = {}
                if kind == "cuda_oom":
                    m = _OOM_NUMS.search(t)
                    if m:
                        fields = {"tried_gib": _gib(m.group(1), m.group(2)), "total_gib": _gib(m.group(3), m.group(4)),
                                  "free_gib": _gib(m.group(5), m.group(6))}
                if kind == "cuda_oom" and "Task was killed" in t:
                    continue
                events.append(Event(kind, [ln.no], t, fields))
        if _JSON_DECODE.search(t):
            window = " ".join(x.text for x in lines[max(0, idx - 30): idx + 30])
            if _COMPILE_CONTEXT.search(window):
                events.append(Event("compile_cache_error", [ln.no], t))
        em = _EXC_LINE.match(t)
        if em and not t.startswith((" ", "\t")) and (ln.no in tb_exc_lines or em.group("msg") is not None):
            if "." in em.group("type") or ln.no in tb_exc_lines or em.group("type").endswith(("Error", "Exception")):
                events.append(Event("exception", [ln.no], t, {"exc_type": em.group("type"),
                                                              "message": (em.group("msg") or "").strip()}))
                if "AssertionError" in em.group("type"):
                    events.append(Event("assertion", [ln.no], t, {"message": (em.group("msg") or "").strip()}))
        pm = _PYSPY_FRAME.match(ln.raw if ln.raw.startswith((" ", "\t")) else t)
        if pm and _BLOCKING_FUNCS.search(pm.group(1)):
            pyspy.append(ln)
    _relate_ports(events, lines)
    _relate_dead_actors(events, lines)
    if pyspy:
        events.append(Event("hang_stack", [x.no for x in pyspy], "\n".join(x.text.strip() for x in pyspy)))
    events.sort(key=lambda e: (e.line, e.kind != "traceback"))
    return events
