"""Normalise raw log text into lines the extractors can read, keeping 1-based input line numbers.

Applied per physical line, outermost wrapping first: outer
timestamps (Docker/k8s RFC3339, journald, CI viewers, paste-tool line numbers), ANSI colour codes (also
the ESC-less ``[36m`` leftovers of pastes), Ray / vLLM multiprocess prefixes ``(Name pid=N, ip=X)``
(possibly nested), a line pasted as inline code (one backtick each side), the ``[repeated Nx across cluster]`` dedup suffix and its explanatory tail. CRLF and
tqdm carriage returns: a physical line rewritten with ``\\r`` keeps only its last non-empty segment, but
a log line glued after a bar is kept (the text after the last ``\\r``).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

MAX_LINE_CHARS = 20_000  # a longer line is cut; coverage says so

# ESC sequences; the ESC-less "[36m" leftovers of pastes; and the caret notation of ``cat -v`` / less / some terminals'
# copy ("^[[31m": the "[[31m" part, the "^" before it is cut with it in strip_ansi)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|(?<![\w\]])\[(?=[0-9;]*[0-9]m)[0-9;]+m|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]"
                   r"|(?<=\^)\[\[[0-9;]*[A-Za-z]")
_OUTER_TS = re.compile(
    r"^(?:"
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s+"          # RFC3339 (docker/k8s)
    r"|\[\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z?\]\s+"                           # CI viewer
    r"|[A-Z][a-z]{2}\s+\d{1,2} \d{2}:\d{2}:\d{2} \S+ [\w.-]+(?:\[\d+\])?:\s+"            # journald
    r"|\[\d{1,7}\]\s+(?=[{(\[]|step|\s*iteration)"                                       # paste line numbers
    r")"
)
_RAY_PREFIX = re.compile(
    r"^\s*\((?P<name>[A-Za-z_][\w.<>:-]*(?: (?!pid=)[\w=-]+)?)(?:,?\s*pid=(?P<pid>\d+))?(?:,\s*ip=(?P<ip>[\w.:-]+))?\)\s?"
)
_AUTOSCALER = re.compile(r"^\s*\((?:autoscaler|scheduler) \+[\dhms]+\)\s?")
_RAYLET = re.compile(r"^\s*\(raylet(?:, ip=[\w.:-]+)?\)\s?")
_REPEATED = re.compile(r"(?<!\s)\s*\[repeated (\d+)x across cluster\](?:\s*\(Ray deduplicates logs by default\..*)?\s*$")
_INLINE_CODE = re.compile(r"^\s*`([^`].*[^`\s])`\s*$")  # one backtick each side, not a ``` fence
_RANK_PREFIX = re.compile(r"^\[(?:rank|Rank )?\d+\]:\s?")
_LAUNCHER_PREFIX = re.compile(r"^\[([a-z][\w-]*)\]\s")  # e.g. "[actor_llm_3] " from process launchers


@dataclass(slots=True)
class Line:
    """One input line after normalisation. ``no`` is 1-based in the original input."""

    no: int
    text: str
    raw: str
    source: str | None = None
    repeated: int = 1
    cut: bool = False


def strip_ansi(s: str) -> str:
    """``s`` without ANSI escapes; the regex is tried only where one can start (an ESC or a '['), so a long
    metric line costs a few finds, not a regex scan of every character."""
    if "\x1b" not in s and "[" not in s:
        return s
    out, pos, i, match, find = [], 0, 0, _ANSI.match, s.find
    while True:
        e, b = find("\x1b", i), find("[", i)
        if e < 0 and b < 0:
            break
        j = e if b < 0 or 0 <= e < b else b
        m = match(s, j)
        if m and m.end() > j:
            out.append(s[pos:j - 1 if s[j - 1:j + 2] == "^[[" else j])
            pos = i = m.end()
        else:
            i = j + 1
    return "".join(out) + s[pos:] if out else s


_JSON_MESSAGE_KEYS = ("message", "msg", "log", "text")
_ERROR_TYPE = re.compile(r"^[A-Z]\w*(?:Error|Exception)$")


def json_message(s: str) -> str | None:
    """The message of a JSON-lines log record (Ray structured logs, Docker json-file, loguru serialize):
    one JSON object per line whose ``message``/``msg``/``log``/``text`` field is a string. None otherwise.

    An OpenAI-compatible server's error body is read the same way, in both shapes its servers return:
    ``{"object":"error","message":...,"type":"BadRequestError","param":null,"code":400}`` (SGLang
    python/sglang/srt/entrypoints/openai/protocol.py ``ErrorResponse``; vLLM before ``ErrorInfo``) and
    ``{"error":{"message":...,"type":...,"param":null,"code":400}}`` (vLLM vllm/entrypoints/openai/protocol.py
    ``ErrorResponse(error=ErrorInfo)``); an exception-like ``type`` is put before the message
    (``BadRequestError: The input ...``) so the error classifier reads it as an exception line. A body pasted
    with the apostrophes escaped (``model\\'s``, not valid JSON) is read with them unescaped."""
    st = s.strip()
    if len(st) < 12 or not (st.startswith('{"') and st.endswith("}")):
        return None
    obj = _json_object(st)
    if obj is None and "\\'" in st:
        obj = _json_object(st.replace("\\'", "'"))
    if obj is None:
        return None
    err = obj.get("error")
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        obj = err
    elif obj.get("object") != "error":
        return next((v for k in _JSON_MESSAGE_KEYS if isinstance(v := obj.get(k), str)), None)
    msg, typ = obj.get("message"), obj.get("type")
    if not isinstance(msg, str):
        return None
    return f"{typ}: {msg}" if isinstance(typ, str) and _ERROR_TYPE.match(typ) else msg


def _json_object(st: str) -> dict | None:
    try:
        obj = json.loads(st)
    except (ValueError, RecursionError):  # a hostile line nests deeper than the decoder's recursion limit
        return None
    return obj if isinstance(obj, dict) else None


def normalize_line(raw: str, no: int) -> Line:
    """Normalise one physical line (without its newline). Never raises."""
    cut = False
    s = raw
    if len(s) > MAX_LINE_CHARS:
        s, cut = s[:MAX_LINE_CHARS], True
    elif s.endswith("}") and (msg := json_message(s)) is not None:
        s = msg
    if "\r" in s:
        parts = [p for p in s.split("\r") if p.strip()]
        s = parts[-1] if parts else ""
    s = strip_ansi(s)
    if "`" in s and (m := _INLINE_CODE.match(s)):  # a log line pasted as inline code (issue threads, chat)
        s = m.group(1)
    s = _OUTER_TS.sub("", s, count=1)
    source = None
    for _ in range(3):  # nested prefixes: (EngineCore_0 pid=1) (VllmWorker TP1 pid=2) ...
        m = _RAY_PREFIX.match(s)
        if m and (m.group("pid") or m.group("ip")):
            source = source or m.group(0).strip().strip("()")
            s = s[m.end():]
            continue
        m = _AUTOSCALER.match(s) or _RAYLET.match(s)
        if m:
            source = source or m.group(0).strip().strip("()")
            s = s[m.end():]
            continue
        break
    s = _RANK_PREFIX.sub("", s, count=1)
    m = _LAUNCHER_PREFIX.match(s)
    if m:
        source = source or m.group(1)
        s = s[m.end():]
    repeated = 1
    m = _REPEATED.search(s) if "[repeated " in s else None
    if m:
        repeated = int(m.group(1))
        s = s[: m.start()]
    return Line(no=no, text=s.rstrip(), raw=raw, source=source, repeated=repeated, cut=cut)


def split_lines(text: str) -> list[str]:
    """Split on \\n (and \\r\\n); a lone \\r stays inside its line (tqdm rewrites)."""
    return text.replace("\r\n", "\n").split("\n")


def normalize(text: str) -> list[Line]:
    """Normalise every line of ``text``. Line numbers are 1-based and match the input."""
    lines = split_lines(text)
    if lines and lines[-1] == "":
        lines.pop()
    return [normalize_line(raw, i + 1) for i, raw in enumerate(lines)]
