"""Launch commands read as config facts: every environment assignment before the launcher, every ``--flag`` and every
Hydra override of every line of the command (its ``\\`` continuation lines, a bash array ``ARGS=( ... )``), each at
its own line, from the words the shell would see (command_lines.words: quotes removed, comments dropped, ``&&`` /
``;`` lists split, pipes and redirections cut).

- ``--num-gpus-per-node 4`` -> ``num_gpus_per_node=4``; ``--k=v``; a flag without a value -> ``True``; several values
  of one kind (``--report_to tensorboard wandb``) -> a list; a script (``grpo.py``) is not a value
  (``--num_processes 7 src/open_r1/grpo.py``); a negative number is a value, ``-m module`` -> ``launch.module``;
- ``CUDA_VISIBLE_DEVICES=0,1 NPROC_PER_NODE=6 swift rlhf ...`` -> both as env facts;
- flags of ``ray start`` are also recorded under ``ray_start.``;
- ``a.b.c=v`` / ``+a.b=v`` / ``++a.b=v`` / ``+name=v`` overrides (Hydra's grammar through OmegaConf's dotlist).

A command is collected line by line (``_command_facts``) and read when it ends (no ``\\``, the array's ``)``, a blank
line outside an array, the end of the input).
"""
from __future__ import annotations

import re
from typing import Any

from grpo_debug.tools.engine.command_lines import (ASSIGNS_ONLY, ENV_ASSIGN, SEPARATOR, split_continuation,
                                                   starts_command, strip_comment, words)
from grpo_debug.tools.engine.fact_model import FactSet, expand_vars, parse_override_value, parse_scalar

_OVERRIDE_WORD = re.compile(r"^(?:\+{0,2}([A-Za-z_]\w*(?:\.[\w-]+)+)|\+{1,2}([A-Za-z_]\w*))=(.*)$", re.S)
_CMD_HINT = re.compile(
    r"(?:^|[\s/$+])(?:python3?|torchrun|deepspeed|accelerate|ray (?:start|job submit)|launch_server|vllm serve|"
    r"sglang|train\w*\.py|pretrain\w*\.py|main_ppo|openrlhf|\w+\.sh)\b")
_FLAG = re.compile(r"^--([A-Za-z][\w.-]*)(?:=(.*))?$")
ARRAY_START = re.compile(r"^\s*(?:export\s+)?[A-Za-z_]\w*=\(\s*(.*)$")
_SHORT = re.compile(r"^-[A-Za-z]")
_SCRIPT = re.compile(r"\.(?:py|sh)$")
_PATH_FLAG = re.compile(r"file|path|plugin|script|config|module|program|dir", re.I)
_NUMBER = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")
_MAX_ARRAY_LINES = 2000


def _is_value(w: str) -> bool:
    """A word that can be a flag's value: not a flag, a short option, a ``--`` separator or an array expansion."""
    return not (_FLAG.match(w) or _SHORT.match(w) or w in ("\\", "--") or "[@]" in w or "[*]" in w
                or w in ("$@", "$*", '"$@"'))


def _flag_value(name: str, vals: list[str]) -> tuple[Any, int]:
    """(the value of ``--name`` followed by the words ``vals``, how many words it takes). Several values of one kind
    (``--report_to tensorboard wandb``, ``--reward_weights 1.0 1.0``) are a list; a script (``grpo.py``), a module
    after it or an override ends the values (``--num_processes 7 src/open_r1/grpo.py``); a flag without a value is
    True."""
    if not vals or ("=" in vals[0] and "." in vals[0].split("=")[0]):
        return True, 0
    if _SCRIPT.search(vals[0]) and not _PATH_FLAG.search(name):
        return True, 0  # accelerate launch --multi_gpu train.py: a store_true flag before the script
    kinds = {bool(_NUMBER.match(v)) for v in vals}
    if len(vals) > 1 and len(kinds) == 1 and not any(_SCRIPT.search(v) or "=" in v or _CMD_HINT.search(v)
                                                     for v in vals):
        return [parse_scalar(v) for v in vals], len(vals)
    return parse_scalar(vals[0]), 1


def _add_flags(words: list[tuple[str, int, str]], fs: FactSet, prefix: str = "") -> None:
    """``--flags`` of one command's words ``(word, line, line text)``: ``--k=v``, ``--k v``, ``--k v1 v2``, ``--k``;
    ``-m module`` -> ``launch.module``. Each fact at the line of its flag."""
    i = 0
    while i < len(words):
        w, no, text = words[i]
        m = _FLAG.match(w)
        if w == "-m" and i + 1 < len(words) and not _FLAG.match(words[i + 1][0]):
            fs.add("launch.module", words[i + 1][0], no, "flag", text)
            i += 2
            continue
        if not m or w in ("-", "--"):
            i += 1
            continue
        name = m.group(1).replace("-", "_")
        i += 1
        if m.group(2) is not None:
            val: Any = parse_scalar(m.group(2))
        else:
            vals = []
            while i + len(vals) < len(words) and _is_value(words[i + len(vals)][0]):
                vals.append(words[i + len(vals)][0])
            val, used = _flag_value(name, vals)
            i += used
        fs.add(prefix + name, val, no, "flag", text)
        if prefix:
            fs.add(name, val, no, "flag", text)


def _flush_command(fs: FactSet, pending: list[tuple[list[str], int, str]], array: bool) -> None:
    """Facts of one launch command read over all its lines (``pending``: each line's words, number, text), each
    command of a ``&&`` / ``;`` list on its own (_segment_facts)."""
    seg: list[tuple[str, int, str]] = []
    for ws, no, text in pending:
        for w in ws:
            if w == SEPARATOR:
                _segment_facts(fs, seg, array)
                seg = []
            else:
                seg.append((w, no, text))
    _segment_facts(fs, seg, array)
    pending.clear()


def _segment_facts(fs: FactSet, words: list[tuple[str, int, str]], array: bool) -> None:
    """The environment assignments before the launcher (``CUDA_VISIBLE_DEVICES=0,1 NPROC_PER_NODE=6 swift rlhf``),
    every ``--flag`` and every Hydra override of one command, each at its own line (the words stop at a pipe or a
    redirection: command_lines.words)."""
    i = 0
    while not array and i < len(words) and (m := ENV_ASSIGN.match(words[i][0])):
        fs.add(m.group(1), parse_scalar(m.group(2)), words[i][1], "env", words[i][2])
        i += 1
    while i < len(words) and words[i][0] in ("export", "nohup", "time", "exec"):
        i += 1
    rest = words[i:]
    prefix = "ray_start." if [w for w, _, _ in rest[:2]] == ["ray", "start"] else ""
    _add_flags(rest, fs, prefix)
    for w, no, text in rest:
        m = _OVERRIDE_WORD.match(w)
        if m:
            fs.add(m.group(1) or m.group(2), parse_override_value(m.group(3)), no, "override", text)
            fs.formats.add("hydra-overrides")


def command_facts(fs: FactSet, s: str, t: str, no: int, shell_vars: dict[str, str], state: dict,
                   starts_array: re.Match[str] | None) -> None:
    """One line of a launch command or a bash array: its words (``$VAR`` expanded from earlier assignments) join
    ``state["pending"]``; when the command ends (no ``\\``, or the array's ``)``), it is read (_flush_command).
    ``state``: ``in_cmd`` (the next line continues it), ``in_array``, ``pending``."""
    body = s[2:] if s.startswith(("$ ", "+ ")) else s
    if "$" in body:
        body = expand_vars(body, shell_vars)
    in_array = state["in_array"]
    if starts_array:
        in_array = True
        body = starts_array.group(1)
    body, more = split_continuation(strip_comment(body))
    if in_array and body.rstrip().endswith(")") and body.count("(") < body.count(")"):
        in_array = False
        body = body.rstrip()[:-1]
    inc = re.search(r"--include[ =]\S*?:([\d,]+)", body)
    if inc:
        fs.add("num_gpus", len(inc.group(1).split(",")), no, "flag", t)
    state["pending"].append((words(body), no, t))
    if in_array and len(state["pending"]) > _MAX_ARRAY_LINES:
        in_array = False  # an array whose ')' never came: read what it had
    fs.formats.add("launch-command")
    fs.command_lines.add(no)
    state["in_cmd"], state["in_array"] = more, in_array
    if not more and not in_array:
        _flush_command(fs, state["pending"], state.pop("array", False) or bool(starts_array))
    elif starts_array:
        state["array"] = True


def is_command_start(s: str) -> bool:
    """A stripped line that starts a launch command (or is a lone ``--flag`` line of a pasted fragment)."""
    return (bool(_CMD_HINT.search(s)) or s.startswith(("$ ", "+ ")) or (s[:2] == "--" and s[2:3].isalpha()) or starts_command(s)
            or (s.endswith("\\") and not ASSIGNS_ONLY.match(s)))


def end_command(fs: FactSet, state: dict) -> None:
    """A command cut short (a blank line, the end of the input, a line that is not part of it) is read as it is."""
    if state["pending"]:
        _flush_command(fs, state["pending"], state.pop("array", False))
    state["in_cmd"] = state["in_array"] = False
