"""The error classifier: every traceback and error line of an input, read as a record and given a class.

A record is one Python exception (type, message, frames with their source lines, chained causes) or one
error line without a Python exception (a kernel OOM-killer line, a Slurm cancellation, an NCCL watchdog
line). Readable forms:

- plain tracebacks (``Traceback (most recent call last):`` ... ``Type: message``), chained by
  "The above exception was the direct cause of the following exception" and "During handling of the above
  exception, another exception occurred" (CPython traceback.py);
- Ray remote errors: ``ray.exceptions.RayTaskError(OutOfMemoryError): ray::Worker.f() (pid=.., ip=..)``
  (ray/exceptions.py RayTaskError) -- the inner type in parentheses is the one classified;
- loguru ``backtrace`` tracebacks (``│``/``└`` variable annotations under each frame, an
  ``An error has been caught in function`` header) and rich boxed tracebacks (``╭─ Traceback``,
  ``│ path:line in func │``);
- every line behind a logger prefix (vLLM ``ERROR 09-05 10:48:28 [file.py:N]``, Python logging, loguru
  levels); JSON-lines logs are unwrapped to their message field by :mod:`normalize`.

Classes live in :mod:`error_classes` (the first matching class wins). The ``decisive frame`` is the deepest
frame outside the standard library, torch internals and HTTP/async plumbing: the framework code that
raised or called into the failure. :func:`error_events` turns classified records into ``error`` events
whose text starts with ``[class] Type: message`` so rules can match the class and the message.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from grpo_debug.tools.engine.error_classes import BY_NAME, CLASSES, UNKNOWN, ErrorClass
from grpo_debug.tools.engine.error_classes_crash import CRASH_LINE_HINTS
from grpo_debug.tools.engine.normalize import Line

_TB_START = re.compile(r"Traceback \(most recent call last\)")
_CHAIN = re.compile(r"The above exception was the direct cause of the following exception|"
                    r"During handling of the above exception, another exception occurred")
_FRAME = re.compile(r'^\s*(?:File "(?P<file>[^"]+)", line (?P<no>\d+)(?:, in (?P<func>\S+))?'
                    r'|(?P<file2>\S+\.py)", line (?P<no2>\d+), in (?P<func2>\S+))')
_RICH_FRAME = re.compile(r"^\s*(?P<file>(?:/|~|\w:\\|\.{0,2}/)?[\w./\\~-]+\.py):(?P<no>\d+) in (?P<func>[\w<>.]+)\s*$")
_EXC = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failed|Failure|Timeout|"
    r"Unavailable|Died|Crashed|Killed|KeyboardInterrupt)|Exception|KeyError|StopIteration))"
    r"(?:\((?P<inner>[\w.]+)\))?(?::\s?(?P<msg>.*))?$")
_LOGGER_PREFIX = re.compile(
    r"^(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]+\]\s?"  # vLLM
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?: [\w-]+)*\]\s"                                   # SGLang
    r"|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\s*(?:-\s*[\w.]+\s*-\s*)?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s*[-:|]?\s"
    r"|\d\d:\d\d:\d\d\s+(?:DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL)\s"                               # loguru short
    # AReaL / ReaLHF realhf/base/logging.py LOG_FORMAT "%(asctime)s.%(msecs)03d %(name)s %(levelname)s: %(message)s"
    # (DATE_FORMAT "%Y%m%d-%H:%M:%S"; names such as "controller", "master worker", "realhf.system.model_function_call"),
    # also pasted without its date: "controller CRITICAL: Ray does not have enough resources ..."
    r"|(?:\d{8}-\d\d:\d\d:\d\d\.\d{3}\s+)?[\w.-]+(?: [\w.-]+){0,3} (?:DEBUG|INFO|WARNING|ERROR|CRITICAL): "
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.-]+:"                   # logging.BASIC_FORMAT "%(levelname)s:%(name)s:"
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[.,]\d+\]\[[\w.-]+\]\[(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\] - "  # Hydra job_logging
    r")")
_BOX = re.compile(r"^[\s│┃|]*(?:[╭╰└┌├]─.*)?$")
_BOX_EDGES = re.compile(r"^\s*[│┃]\s?|\s?[│┃]\s*$")
_ANNOT = re.compile(r"^[│└├┌─\s]+[└├]")  # loguru variable annotations under a frame (no \s* before a class holding \s: linear)
_RAY_TASK = re.compile(r"ray::[\w.<>]+\(\)")
# frames that are not the decisive one: the standard library, torch internals, HTTP/async plumbing, Ray
_PLUMBING = re.compile(r"/lib/python3[\d.]*/(?!site-packages)|/torch/(?:nn/modules|_dynamo|_inductor|"
                       r"_functorch|autograd|utils/_contextlib|distributed/|_ops\.py|_tensor\.py|cuda/)|/httpx/|"
                       r"/httpcore/|/anyio/|"
                       r"/asyncio/|/concurrent/futures/|/ray/_private/|/ray/util/|/ray/actor\.py|/ray/remote_function|"
                       r"/site-packages/(?:requests|urllib3|aiohttp|tenacity|click|typer|hydra|omegaconf)/|^<")
_ERROR_LEVEL = re.compile(r"(?:^|\s)(?:ERROR|FATAL|CRITICAL)(?:\s|:|\]|$)")


@dataclass
class Frame:
    file: str
    line: int
    func: str
    code: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {self.func}"


@dataclass
class ErrorRecord:
    """One error. ``line`` is the decisive input line (the exception line, else the first error line)."""

    exc_type: str
    message: str
    line: int
    lines: list[int]
    frames: list[Frame] = field(default_factory=list)
    causes: list["ErrorRecord"] = field(default_factory=list)
    wrapper: str = ""
    context: str = ""
    cls: ErrorClass = UNKNOWN

    @property
    def short_type(self) -> str:
        return self.exc_type.rsplit(".", 1)[-1]

    @property
    def head(self) -> str:
        if self.exc_type:
            return f"{self.exc_type}: {self.message}".rstrip(": ")
        return self.message

    @property
    def decisive_frame(self) -> Frame | None:
        """The deepest frame outside the standard library, torch internals and HTTP/async plumbing."""
        for f in reversed(self.frames):
            if not _PLUMBING.search(f.file.replace("\\", "/")):
                return f
        return self.frames[-1] if self.frames else None


def clean(text: str) -> str:
    """A line without its logger prefix and box-drawing edges (the text a traceback line had)."""
    t = _LOGGER_PREFIX.sub("", text, count=1)
    if "│" in t or "┃" in t:
        t = _BOX_EDGES.sub("", t)
    return t


def _exc_match(t: str) -> re.Match | None:
    if not t or t[0] in " \t" or len(t) > 4000:
        return None
    m = _EXC.match(t.rstrip())
    if m is None and not t.isascii():
        m = _prose_exc(t)
    if m is None and ("Error" in t or "Exception" in t) and any(q in t for q in _QUOTES):
        m = _quoted_exc(t)
    return m


# an exception name inside a line of non-English prose ("是用zero2进行pt时，出现ValueError: ..."): Python's \w also
# matches CJK letters, so the name's left edge is "not an ASCII word character or a dot"
_PROSE_EXC_AT = re.compile(r"(?<![A-Za-z0-9_.])(?:[A-Za-z_]\w*\.)*[A-Z][A-Za-z0-9_]*(?:Error|Exception)(?:\([\w.]+\))?:\s")


def _prose_exc(t: str) -> re.Match | None:
    """The exception line that starts in the middle of a line whose lead-in is prose in a non-Latin script: the
    text before the name must hold a letter outside ASCII (a user's sentence, not an English log prefix) and the
    name must carry a message (``Type: message``)."""
    for m in _PROSE_EXC_AT.finditer(t):
        lead = t[: m.start()]
        if any(c.isalpha() and not c.isascii() for c in lead):
            return _EXC.match(t[m.start():].rstrip())
    return None


_QUOTES = {"`": "`", '"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019"}


def _quoted_exc(t: str) -> re.Match | None:
    """An exception a report quotes inside prose: the name right after an opening quote or backtick and carrying a
    message (``The error is `RuntimeError: captures_underway.empty() INTERNAL ASSERT FAILED at ...` ``,
    ``reports an error: "ValueError: Please make sure to ..."``); the message ends at the closing quote."""
    for m in _PROSE_EXC_AT.finditer(t):
        lead = t[: m.start()].rstrip(" ")
        close = _QUOTES.get(lead[-1:]) if lead else None
        if close is None:
            continue
        body = t[m.start():]
        end = body.find(close, m.end() - m.start())
        return _EXC.match((body[:end] if end > 0 else body).rstrip(" .;,"))
    return None


def _frame_of(t: str) -> Frame | None:
    m = _FRAME.match(t)
    if m:
        return Frame(m.group("file") or m.group("file2"), int(m.group("no") or m.group("no2")),
                     m.group("func") or m.group("func2") or "?")
    m = _RICH_FRAME.match(t)
    return Frame(m.group("file"), int(m.group("no")), m.group("func")) if m else None


def _collect_frames(texts: list[str], lines: list[Line], start: int, end: int) -> tuple[list[Frame], list[int]]:
    """Frames (with the source line under each) between indices start..end (exclusive)."""
    frames: list[Frame] = []
    used: list[int] = []
    for i in range(start, end):
        t = texts[i]
        f = _frame_of(t)
        if f is not None:
            frames.append(f)
            used.append(lines[i].no)
        elif frames and t.strip() and not _ANNOT.match(t) and not frames[-1].code and t.startswith((" ", "\t")):
            code = t.strip()
            if not set(code) <= set("^~ "):
                frames[-1].code = code[:200]
                used.append(lines[i].no)
    return frames, used


def _in_traceback(t: str) -> bool:
    return bool(_frame_of(t)) or t.startswith((" ", "\t")) or not t.strip() or bool(_BOX.match(t))


def _block_start(texts: list[str], idx: int, floor: int) -> int:
    """Index where the traceback of the exception at ``idx`` starts: the nearest Traceback header, Ray task line
    or loguru header above it (not crossing ``floor``), else the first of the contiguous frame lines above it."""
    for j in range(idx - 1, max(floor, idx - 400) - 1, -1):
        t = texts[j]
        if _TB_START.search(t) or _RAY_TASK.search(t) or "An error has been caught in function" in t:
            return _lead_in(texts, j)
        if _exc_match(t) or _CHAIN.search(t):
            break
    j = idx
    while j - 1 >= max(floor, 0) and idx - j < 400 and _in_traceback(texts[j - 1]):
        j -= 1
    return j if any(_frame_of(texts[k]) for k in range(j, idx)) else idx


def _block_end(texts: list[str], start: int) -> int:
    """End (exclusive) of the frames that follow a header line with no exception line after them."""
    j, gap = start + 1, 0
    while j < len(texts) and j - start < 400 and not _exc_match(texts[j]):
        gap = 0 if _in_traceback(texts[j]) else gap + 1
        if gap > 2:
            return j - gap + 1
        j += 1
    return j


def _is_wrapper(m: re.Match) -> bool:
    return bool(m.group("inner")) or "ray::" in (m.group("msg") or "")


_RANK_RAW = re.compile(r"^\s*\[(?:rank|Rank )?(\d+)\]:")
_TAG = re.compile(r"^\[([A-Z][\w-]{0,11})\]\s")


def streams(lines: list[Line]) -> list[list[Line]]:
    """The input split into the streams interleaved in it (``[rank3]:`` prefixes, Ray/vLLM process prefixes,
    ``[A]``/``[B]`` run tags), each in line order, so one rank's traceback is read without another's lines.
    Lines with no stream mark go with the stream of the line before them. One stream when there are fewer than
    two marked ones."""
    keys: list[str | None] = []
    for ln in lines:
        m = _RANK_RAW.match(ln.raw)
        t = _TAG.match(ln.text)
        keys.append(f"rank{m.group(1)}" if m else (t.group(1) if t else ln.source))
    marked = {k for k in keys if k}
    if len(marked) < 2:
        return [lines]
    out: dict[str | None, list[Line]] = {}
    last = None
    for ln, k in zip(lines, keys):
        last = k or last
        out.setdefault(last, []).append(_untagged(ln) if k and _TAG.match(ln.text) else ln)
    return list(out.values())


def _untagged(ln: Line) -> Line:
    return Line(ln.no, _TAG.sub("", ln.text, count=1), ln.raw, ln.source, ln.repeated, ln.cut)


def records(lines: list[Line]) -> list[ErrorRecord]:
    """Every exception (with frames and chained causes) and every classifiable error line, in line order,
    read per interleaved stream (:func:`streams`)."""
    parts = streams(lines)
    if len(parts) > 1:
        return sorted((r for part in parts for r in _stream_records(part)), key=lambda r: r.line)
    return _stream_records(lines)


def _stream_records(lines: list[Line]) -> list[ErrorRecord]:
    texts = [clean(ln.text) for ln in lines]
    out: list[ErrorRecord] = []
    prev_exc, wrapper = -1, None
    covered: set[int] = set()
    for i, t in enumerate(texts):
        m = _exc_match(t)
        if not m or (m.group("msg") is None and not _is_bare_exception(texts, i)):
            continue
        if wrapper is None and _is_wrapper(m):
            wrapper = (i, m)  # a Ray wrapper: its frames and the inner exception follow
            continue
        start = wrapper[0] if wrapper else _block_start(texts, i, prev_exc + 1)
        rec = _record(texts, lines, start, i, m, wrapper[1] if wrapper else None)
        wrapper = None
        k = _absorb_detail(texts, lines, i, rec)
        if out and prev_exc >= 0 and any(_CHAIN.search(texts[k]) for k in range(prev_exc + 1, max(start, prev_exc + 1))):
            rec.causes.append(out.pop())
        covered.update(range(start, k + 1))
        out.append(rec)
        prev_exc = k
    if wrapper is not None:  # a wrapper whose inner exception line was cut off
        end = _block_end(texts, wrapper[0])
        out.append(_record(texts, lines, wrapper[0], wrapper[0], wrapper[1], None, end))
        covered.update(range(wrapper[0], end))
    out += _truncated_tracebacks(texts, lines, covered)
    pos = {ln.no: i for i, ln in enumerate(lines)}
    out += _error_lines(texts, lines, covered | {pos[n] for r in out for n in r.lines if n in pos})
    out.sort(key=lambda r: r.line)
    return out


def _record(texts: list[str], lines: list[Line], start: int, i: int, m: re.Match, wrap: re.Match | None,
            end: int | None = None) -> ErrorRecord:
    frames, used = _collect_frames(texts, lines, start, end if end is not None else i)
    exc_type, inner = m.group("type"), m.group("inner")
    wrapper = wrap.group("type") + (f"({wrap.group('inner')})" if wrap.group("inner") else "") if wrap else ""
    if inner and not wrap:
        exc_type, wrapper = inner, f"{m.group('type')}({inner})"
    return ErrorRecord(exc_type, (m.group("msg") or "").strip(), lines[i].no,
                       sorted({lines[start].no, *used, lines[i].no}), frames, wrapper=wrapper,
                       context=_context(texts, start))


def _absorb_detail(texts: list[str], lines: list[Line], i: int, rec: ErrorRecord) -> int:
    """Indented lines right after an exception line that continue its message (pydantic's per-field lines,
    multi-line messages) join the record; returns the index of the last line taken."""
    k = i
    while k + 1 < len(texts) and k - i < 12 and texts[k + 1].startswith((" ", "\t")) and texts[k + 1].strip() \
            and not _frame_of(texts[k + 1]) and not _CHAIN.search(texts[k + 1]):
        k += 1
        rec.message += " " + texts[k].strip()
        rec.lines.append(lines[k].no)
    return k


def _lead_in(texts: list[str], j: int) -> int:
    """A loguru 'An error has been caught' header or an error-level line right above a traceback header
    belongs to it."""
    for d in (1, 2):
        if j - d >= 0 and ("An error has been caught in function" in texts[j - d] or _ERROR_LEVEL.search(texts[j - d])):
            return j - d
    return j


def _idx(lines: list[Line], nos: list[int]) -> list[int]:
    pos = {ln.no: i for i, ln in enumerate(lines)}
    return [pos[n] for n in nos if n in pos]


def _is_bare_exception(texts: list[str], i: int) -> bool:
    """A type alone on its line (``httpx.ReadTimeout``) counts only right after frames of a traceback."""
    return i > 0 and any(_frame_of(texts[j]) for j in range(max(0, i - 6), i))


def _context(texts: list[str], start: int) -> str:
    return "\n".join(texts[max(0, start - 6):start])


def _truncated_tracebacks(texts: list[str], lines: list[Line], covered: set[int]) -> list[ErrorRecord]:
    """Frames with no exception line after them (a paste cut short): one record each, type unknown."""
    out: list[ErrorRecord] = []
    i, n = 0, len(texts)
    while i < n:
        if i in covered or not (_TB_START.search(texts[i]) or _frame_of(texts[i])):
            i += 1
            continue
        j = _block_end(texts, i)
        i = _lead_in(texts, i) if _TB_START.search(texts[i]) else i
        while j > i and j - 1 in covered:
            j -= 1
        frames, used = _collect_frames(texts, lines, i, j)
        if frames:
            out.append(ErrorRecord("", "", lines[i].no, sorted({lines[i].no, *used}), frames,
                                   context=_context(texts, i)))
        i = max(j, i + 1)
    return out


_LINE_CLASSES = [c for c in CLASSES if c.line_level and c.text]
# words one of which every line-level class's text contains: lines without any skip the class regexes
# (tests/test_errors_classify.py checks every class example against it)
LINE_HINT = (  # lower-case substrings; `in` checks are linear and cheap, unlike a case-insensitive alternation
    "generations per prompt", "curesult error", "max_num_batched_tokens", "max_model_len", "desired gpus", "alloc_req_slots",
    "out of memory", "outofmemory", "memoryallocation", "kv cache", "cache blocks", "mem-fraction-static",
    "errno 12", "bad_alloc", "cannot allocate memory", "killed", "oom", "sigkill", "exitcode", "exit code",
    "exit status", "exited with", "memory pressure", "time limit", "watchdog", "before timing out",
    "timed out waiting", "diststoreerror", "wait timeout", "socket timeout", "likely a timeout", "tcpstore",
    "context length", "maximum model length", "prompt is too long", "exceeds the model", "server error",
    "error code: 5", "status_code=5", "status: 5", "status 5", " 500 ", " 502 ", " 503 ", " 504 ", "eaddrinuse",
    "already in use", "actor died", "worker died", "actordied", "node has crashed", "illegal memory access",
    "illegaladdress", "micro_batch_per_gpu", "appear to have a file", "no such file", "checkpoint", "state_dict",
    "size mismatch", "backendcompilerfailed", "inductorerror", "compiled graph", "corrupt local cache",
    "server launch failed", "failed to launch", "failed to start", "connection refused", "max retries",
    "connecterror", "connection error", "newconnectionerror", "cuda error", "cudaerror", "hip out", "nccl",
    *CRASH_LINE_HINTS)


def has_line_hint(t: str) -> bool:
    low = t.lower()
    return any(n in low for n in LINE_HINT)


def _error_lines(texts: list[str], lines: list[Line], covered: set[int]) -> list[ErrorRecord]:
    """Lines that name an error without a Python exception line (a class's text matches them)."""
    out: list[ErrorRecord] = []
    for i, t in enumerate(texts):
        if i in covered or not t.strip() or len(t) > 4000 or not has_line_hint(t):
            continue
        for c in _LINE_CLASSES:
            if re.search(c.text, t):
                out.append(ErrorRecord("", t.strip()[:500], lines[i].no, [lines[i].no], context=_context(texts, i), cls=c))
                break
    return out


def _holds(c: ErrorClass, rec: ErrorRecord, text: str, frames: str) -> bool:
    if c.types and not re.search(c.types, rec.short_type):
        return False
    if c.text and not re.search(c.text, text):
        return False
    if c.frames and not re.search(c.frames, frames):
        return False
    if c.context and not re.search(c.context, rec.context + "\n" + text):
        return False
    return bool(c.types or c.text or c.frames)


def classify(rec: ErrorRecord) -> ErrorClass:
    """The first class of :data:`CLASSES` whose tests hold for the record or one of its chained causes."""
    if rec.cls is not UNKNOWN and not rec.exc_type:
        return rec.cls
    chain = [rec, *rec.causes]
    for c in CLASSES:
        for r in chain:
            text = "\n".join(x.head for x in chain) if r is rec else r.head
            frames = "\n".join(f"{f} {f.code}" for f in r.frames)
            if _holds(c, r, text, frames):
                return c
    return UNKNOWN


def classify_all(lines: list[Line]) -> list[ErrorRecord]:
    """Records of ``lines`` with their class set."""
    recs = records(lines)
    for r in recs:
        r.cls = classify(r)
    return recs


def describe(rec: ErrorRecord) -> str:
    """One line naming the record: class, exception, message and decisive frame."""
    df = rec.decisive_frame
    what = rec.head or (f"a traceback cut before its exception line (last frame {rec.frames[-1]})" if rec.frames else "")
    s = f"{what[:300]}"
    if df is not None:
        s += f" (at {df.file.rsplit('/', 2)[-1] if '/' in df.file else df.file}:{df.line} in {df.func})"
    return s


_CARETS = re.compile(r"^\s*[~^][\s~^]*$")  # CPython 3.11+ position markers under a quoted source line
_RICH_ROW = re.compile(r"^(?:❱\s*)?\d+\s*│")  # a rich traceback's numbered code row (box edges cut)


def quoted_source_lines(lines: list[Line]) -> set[int]:
    """Numbers of the lines a traceback quotes rather than says: each frame line (``File "...", line N, in f``,
    rich ``path.py:N in f``), the source line printed under it with its ``^^^``/``~~~`` markers and loguru variable
    annotations, and rich's numbered code rows. Their ``k=v`` text is code, not settings (``dim=-1``); a line of
    another process interleaved after a frame is not taken. One pass; a line with neither ``File "``, ``.py:`` nor a
    box edge costs a few substring checks."""
    out: set[int] = set()
    state, src = 0, None  # 1: the source line may follow; 2: only markers/annotations may follow
    for ln in lines:
        t = ln.text
        boxed = "│" in t or "┃" in t
        if 'File "' in t or (".py:" in t and " in " in t) or boxed:
            c = clean(t)
            if _frame_of(c[2:] if c.startswith("> ") else c) is not None:  # loguru marks the failing frame '> File'
                out.add(ln.no)
                state, src = 1, ln.source
                continue
            if boxed and _RICH_ROW.match(c.strip()):
                out.add(ln.no)
                continue
        if state and ln.source == src and t[:1] in (" ", "\t") and t.strip():
            if state == 1 or _CARETS.match(t) or _ANNOT.match(t):
                out.add(ln.no)
                state = 2
                continue
        state = 0
    return out


_CANCELLED_AT = re.compile(r"CANCELLED AT (\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)")
_STAMP = re.compile(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)|(?<![\d:])(\d\d:\d\d:\d\d)(?![\d:])")


def silence_before(lines: list[Line], rec: ErrorRecord, pos: dict[int, int] | None = None) -> tuple[float, int] | None:
    """(seconds, line) between the last timestamped line before a Slurm cancellation and the cancellation time
    (``CANCELLED AT 2025-01-01T10:00:00``): a long silence means the job hung before the time limit hit."""
    from datetime import datetime

    m = _CANCELLED_AT.search(rec.message)
    at = (pos or {ln.no: i for i, ln in enumerate(lines)}).get(rec.line)
    if not m or at is None:
        return None
    try:
        end = datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}")
        for ln in reversed(lines[max(0, at - 5000):at]):
            st = _STAMP.search(ln.raw[:200])
            if not st:
                continue
            if st.group(1):
                gap = (end - datetime.fromisoformat(f"{st.group(1)}T{st.group(2)}")).total_seconds()
            else:
                h, mi, se = map(int, st.group(3).split(":"))
                gap = (end.hour * 3600 + end.minute * 60 + end.second - (h * 3600 + mi * 60 + se)) % 86400
            return (gap, ln.no) if gap >= 0 else None
    except ValueError:  # a date that does not exist (month 13): no silence figure
        return None
    return None


def error_events(lines: list[Line]):
    """Classified records as ``error`` events (tools/engine/events.Event): text ``[class] Type: message``, then one
    ``file:line in func code`` line per frame (the last 12), then ``process: <prefix>`` when the exception line
    carries a Ray / vLLM process prefix (``vLLMHttpServer pid=1``), so rules can tell where it was raised."""
    from grpo_debug.tools.engine.events import Event

    out = []
    pos = {ln.no: i for i, ln in enumerate(lines)}
    for r in classify_all(lines):
        df = r.decisive_frame
        fields = {"class": r.cls.name, "symptom": r.cls.symptom, "exc_type": r.exc_type, "message": r.message,
                  "decisive_frame": str(df) if df else None, "frames": [str(f) for f in r.frames[-12:]],
                  "causes": [c.head for c in r.causes], "wrapper": r.wrapper, "exc_line": r.line,
                  "error_level": r.line in pos and bool(_ERROR_LEVEL.search(lines[pos[r.line]].text))}
        if r.cls.name == "slurm_time_limit" and (sil := silence_before(lines, r, pos)) is not None:
            fields["silence_s"], fields["last_line"] = sil
            r.message += f" (after {sil[0] / 60:.0f} min without output; last line before it: {sil[1]})"
            r.lines = sorted({*r.lines, sil[1]})
            fields["message"] = r.message
        text = f"[{r.cls.name}] {r.head}\n" + "\n".join(f"{f} {f.code}" for f in r.frames[-12:])
        process = lines[pos[r.line]].source if r.line in pos else None
        if process:  # the Ray / vLLM process prefix of the exception line: which process raised it
            fields["process"] = process
            text += f"\nprocess: {process}"
        out.append(Event("error", r.lines, text, fields))
    return out


__all__ = ["BY_NAME", "CLASSES", "ErrorRecord", "Frame", "classify", "classify_all", "clean", "describe",
           "error_events", "quoted_source_lines", "records"]
