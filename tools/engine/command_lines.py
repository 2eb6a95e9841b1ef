"""Which lines of an input are (part of) a launch command, and the shell words of one command line.

Shared by facts.py (which reads every flag, override and environment assignment of a command as a setting) and
metrics.py (which must never read ``--learning_rate 1e-6`` on a command line as a metric value).

A line is a command line when:

- it starts with a launcher (``python``/``python3`` ``-m``, ``torchrun``, ``accelerate launch``, ``deepspeed``,
  ``swift``, ``ray``, ``vllm``, ``sglang``, ``bash``, ``uv run``, ``srun``, ``nohup``, ...), after any number of
  ``NAME=value`` environment assignments and an optional shell prompt ``$ `` / ``set -x`` trace ``+ ``;
- it ends with a ``\\`` continuation (a ``# comment`` after it is dropped as bash would not, but people write it);
- it starts with a ``--flag`` word (a continuation line or a bash array element), or the line before it continued;
- a log record quotes a launcher followed by its flags (``Running command: torchrun --nproc_per_node 8 ...``).

Stateless per line (``is_command_line(text, continued)``) so a streamed log, read chunk by chunk, can ask it too.
:func:`setting_lines` adds the configs printed into a log (engine/printed_config.py): the lines metric readers skip.
"""
from __future__ import annotations

import re
import shlex

from grpo_debug.tools.engine.printed_config import settings_print_lines

_ENV_WORD = r"[A-Za-z_]\w*=(?:\"[^\"]*\"|'[^']*'|[^\s\"'])*"  # segments start with distinct characters: linear
LAUNCHERS = ("python", "python3", "torchrun", "deepspeed", "accelerate", "swift", "ray", "vllm", "sglang",
             "bash", "sh", "uv", "srun", "nohup", "mpirun", "horovodrun", "trl", "tune", "llamafactory-cli",
             "megatron", "openrlhf")
LAUNCH_START = re.compile(
    r"^(?:[$+]\s+)?(?:export\s+)?(?:" + _ENV_WORD + r"\s+)*"
    r"(?:(?:nohup|time|exec|uv\s+run|srun(?:\s+-{1,2}[\w-]+(?:[= ][^\s-]\S*)?)*)\s+)*"
    r"(?:[\w./-]*/)?(?:python[\d.]*|torchrun|deepspeed|accelerate|swift|ray|vllm|sglang|bash|sh|mpirun|horovodrun|"
    r"trl|tune|llamafactory-cli|openrlhf\.\w+|python[\d.]*\s+-m)(?=\s|$)")
# a launch command quoted inside a log record ("INFO ... Running command: torchrun --nproc_per_node 8 ...")
_LAUNCH_INSIDE = re.compile(r"(?:^|[\s:'\"`])(?:[\w./-]*/)?(?:torchrun|deepspeed|accelerate\s+launch|"
                            r"python[\d.]*(?:\s+-[uOB])*\s+(?:-m\s+[\w.]+|\S+\.py)|swift\s+\w+|ray\s+job\s+submit|"
                            r"vllm\s+serve|sglang\.launch_server)\s+(?:\S+\s+)?--[A-Za-z]")
ENV_ASSIGN = re.compile(r"^([A-Za-z_]\w*)=(.*)$", re.S)
_ENV_CONTINUED = re.compile(r"^(?:" + _ENV_WORD + r"\s+)*" + _ENV_WORD + r"\s*\\\s*(?:#.*)?$")  # CUDA_VISIBLE_DEVICES=0,1 NPROC_PER_NODE=6 \\
ASSIGNS_ONLY = re.compile(r"^(?!.*\\\s*(?:#.*)?$)(?:export\s+)?(?:" + _ENV_WORD + r"\s+)*" + _ENV_WORD + r"\s*(?:#.*)?$")
_FLAG_START = re.compile(r"^--[A-Za-z]")
_TRAILING = re.compile(r"\s*\\\s*(?:#.*)?$|^\\$")


def strip_comment(s: str) -> str:
    """``s`` without a shell comment: a ``#`` at the line start or after a blank, outside quotes (``NuminaMath-TIR#1000``
    keeps its ``#``, as bash does)."""
    if "#" not in s:
        return s
    quote = ""
    for i, c in enumerate(s):
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or s[i - 1] in " \t"):
            return s[:i].rstrip()
    return s


def split_continuation(s: str) -> tuple[str, bool]:
    """(the line without its trailing ``\\`` and any comment after it, whether the command continues)."""
    m = _TRAILING.search(s)
    if m:
        return s[:m.start()], True
    return s, False


def continues(s: str) -> bool:
    """The stripped line ends with a ``\\`` continuation (optionally followed by a ``# comment``)."""
    return bool(s) and ("\\" in s[-80:]) and _TRAILING.search(s) is not None


def starts_command(s: str) -> bool:
    """The stripped line starts a launch command: a launcher word after env assignments, or env assignments
    continued with ``\\`` onto the launcher's line."""
    return LAUNCH_START.match(s) is not None or _ENV_CONTINUED.match(s) is not None


def is_command_line(text: str, continued: bool = False) -> bool:
    """Whether ``text`` is (part of) a launch command; ``continued``: the line before it ended with ``\\``.
    Cheap: a line with no ``--``, no ``=`` and no ``\\`` is decided by three ``in`` checks."""
    if continued:
        return bool(text.strip())
    if "\\" not in text and "--" not in text and "=" not in text:
        return False
    s = text.strip()
    if not s:
        return False
    if s[-1] == "\\" or _FLAG_START.match(s):
        return True
    if "\\" in s[-80:] and continues(s):
        return True
    return LAUNCH_START.match(s) is not None or ("--" in s and _LAUNCH_INSIDE.search(s) is not None)


SEPARATOR = "\x00"  # between the words of two commands of one line (``cd verl && python3 -m ...``)


def _segments(s: str) -> list[str]:
    """``s`` split at its unquoted ``&&``, ``||`` and ``;``, each part cut at its first pipe, background ``&`` or
    redirection (``|``, ``&``, ``>``, ``>>``, ``2>&1``, ``&>``, ``<``): what follows those is another program's
    words or a file name. Quoted text (``--rollout-stop '</answer>'``) is kept."""
    out: list[str] = []
    quote, start, cut = "", 0, None
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == ";" or s[i:i + 2] in ("&&", "||"):
            out.append(s[start:cut if cut is not None else i])
            i += 1 if c == ";" else 2
            start, cut = i, None
            continue
        elif cut is None and (c in "|<>" or c == "&"):
            j = i
            while j > start and s[j - 1].isdigit():
                j -= 1  # the fd of 2>&1
            cut = j if j == start or s[j - 1] in " \t" else i
        i += 1
    out.append(s[start:cut if cut is not None else n])
    return out


def words(s: str) -> list[str]:
    """The shell words of one command line (quotes removed as the shell does), the commands of a ``&&`` / ``;``
    list separated by SEPARATOR, each without what follows its pipe or redirection (_segments); on an unbalanced
    quote, the blank-separated words."""
    out: list[str] = []
    for k, part in enumerate(_segments(strip_comment(s))):
        if k:
            out.append(SEPARATOR)
        try:
            out.extend(shlex.split(part))
        except ValueError:
            out.extend(part.split())
    return out


def setting_lines(lines: list) -> set[int]:
    """Line numbers (``Line.no``) of ``lines`` that hold settings, not metric values: every line of a launch
    command (a line after a ``\\`` continuation counts only when it is the next line of the input) and every line
    of a config printed into the log (printed_config.settings_print_lines)."""
    out = settings_print_lines(lines)
    cont = -1
    for ln in lines:
        t = ln.text
        if ln.no != cont + 1 and "\\" not in t and "--" not in t and "=" not in t:
            continue  # (is_command_line's first test, inlined: this loop runs over every line of a log)
        if is_command_line(t, ln.no == cont + 1):
            out.add(ln.no)
            cont = ln.no if t.rstrip()[-1:] == "\\" or continues(t.strip()) else -1
    return out
