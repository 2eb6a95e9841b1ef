"""Config facts: every setting found in a config file, a launch script or a pasted log, with its line.

Sources, in order of precedence inside one input:

- a whole-file YAML or JSON document (Hydra/verl YAML, DeepSpeed JSON, accelerate YAML): nested keys
  flattened with ``.``; line numbers from the YAML node marks;
- JSON blocks embedded in a log (a ``{`` line up to its closing ``}``), flattened the same way;
- a config printed as a Python dict (verl's ``pprint(OmegaConf.to_container(config, resolve=True))`` at start,
  printed_config.py), each key at its own line;
- verl/Hydra overrides ``a.b.c=v`` (also ``+a.b=v`` / ``++a.b=v``) anywhere in a command;
- launch commands (python/torchrun/accelerate/deepspeed/swift/ray/sglang/vllm lines, their ``\\``
  continuations and bash arrays ``ARGS=( ... )``): every env prefix, ``--flag`` and override at its line
  (launch_facts.py; which lines are commands: command_lines.py);
- ``Name(k=v, ...)`` reprs (TrainingArguments, GRPOConfig, argparse ``Namespace``, vLLM engine config) and ``k=v``
  lists; the multi-line ``GRPOConfig(`` / ``key=value,`` / ``)`` print of TrainingArguments (printed_config.py);
- DeepSpeed config prints ``[config.py:NNN:print]   gradient_clipping ...... 0.0``;
- ``export KEY=VAL`` lines (every assignment of the line);
- ``pip list`` / ``pip show`` lines -> ``versions.<package>``;
- a stated cluster in a comment (``# cluster: 2 nodes, 4 x A100``) -> ``cluster.nodes`` /
  ``cluster.gpus_per_node``.

The code a traceback quotes under its ``File "...", line N`` frames is never read for settings (``dim=-1`` is an
argument, not a config key; errors_classify.quoted_source_lines).

A key is compared case-insensitively; a rule key matches a fact key equal to it or ending with
``.<key>`` (so ``gradient_clipping`` matches a DeepSpeed JSON top-level key and ``rollout.n`` matches
``actor_rollout_ref.rollout.n``).
"""
from __future__ import annotations

import json
import re
from typing import Any

import yaml

from grpo_debug.tools.engine.documents import (DocumentError, compose_yaml, load_json, resolve_interpolations,
                                               scalar_value)
from grpo_debug.tools.engine.command_lines import ASSIGNS_ONLY, ENV_ASSIGN, words
from grpo_debug.tools.engine.fact_model import (Fact, FactSet, expand_vars, parse_override_value,  # noqa: F401
                                                parse_scalar)  # (re-exported: facts.Fact, facts.parse_scalar, ...)
from grpo_debug.tools.engine.launch_facts import ARRAY_START, command_facts, end_command, is_command_start
from grpo_debug.tools.engine.normalize import Line


class ConfigParseError(ValueError):
    """A config document (YAML/JSON) or launch script that cannot be parsed; names the line."""


def _resolve_interpolations(text: str, flat: list[tuple[str, Any, int]]) -> list[tuple[str, Any, int]]:
    """${a.b} interpolations resolved against the same document only (never the environment); see documents."""
    return resolve_interpolations(flat)


def parse_document_strict(text: str, fmt: str, label: str = "<text>") -> list[tuple[str, Any, int]]:
    """Flatten a YAML/JSON document or raise ConfigParseError naming the input, the line and the problem."""
    try:
        if fmt == "json":
            try:
                data = load_json(text)
            except json.JSONDecodeError as e:
                raise ConfigParseError(f"{label}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from e
            if not isinstance(data, dict):
                raise ConfigParseError(f"{label}: a JSON config must be an object at the top level")
        try:
            node = compose_yaml(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise ConfigParseError(f"{label}: invalid {fmt.upper()}{where}: {getattr(e, 'problem', None) or e}") from e
    except DocumentError as e:
        raise ConfigParseError(f"{label}: refused {fmt.upper()} document: {e}") from None
    if node is None:
        return []
    if not isinstance(node, yaml.MappingNode):
        raise ConfigParseError(f"{label}: expected a mapping of settings at the top level (line {node.start_mark.line + 1})")
    out: list[tuple[str, Any, int]] = []
    _flatten_node(node, "", out)
    return _resolve_interpolations(text, out)


def _flatten_node(node: yaml.Node, prefix: str, out: list[tuple[str, Any, int]]) -> None:
    """(key, value, line) of every leaf; the node graph was checked by compose_yaml (bounded expansion)."""
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = f"{prefix}.{k.value}" if prefix else str(k.value)
            if isinstance(v, yaml.ScalarNode):
                out.append((key, scalar_value(v), k.start_mark.line + 1))
            elif isinstance(v, yaml.SequenceNode) and all(isinstance(x, yaml.ScalarNode) for x in v.value):
                out.append((key, [parse_scalar(x.value) for x in v.value], k.start_mark.line + 1))
            else:
                _flatten_node(v, key, out)


def _flatten_json(text: str) -> list[tuple[str, Any, int]] | None:
    try:
        data = load_json(text)
    except (ValueError, DocumentError):
        return None
    if not isinstance(data, dict):
        return None
    first_line: dict[str, int] = {}  # one pass: the line each quoted key first appears on
    for i, line in enumerate(text.splitlines(), 1):
        for m in _JSON_KEY.finditer(line):
            first_line.setdefault(m.group(1), i)
    out: list[tuple[str, Any, int]] = []
    stack = [(iter(data.items()), "")]  # depth-first in document order, without recursion
    while stack:
        it, prefix = stack[-1]
        item = next(it, None)
        if item is None:
            stack.pop()
            continue
        k, v = item
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            stack.append((iter(v.items()), key))
        else:
            out.append((key, v, first_line.get(str(k), 1)))
    return out


_JSON_KEY = re.compile(r'"([^"\\]{1,200})"')


def flatten_document(text: str) -> list[tuple[str, Any, int]] | None:
    """Flatten a YAML/JSON mapping document into (key, value, 1-based line). None if not a mapping, or a
    document the safe loader refuses (alias bomb, recursion, unknown tag, too deep, huge integer)."""
    try:
        node = compose_yaml(text)
    except DocumentError:
        return None
    except yaml.YAMLError:
        return _flatten_json(text)
    if not isinstance(node, yaml.MappingNode):
        return None
    out = []
    _flatten_node(node, "", out)
    return _resolve_interpolations(text, out)


_KWREPR = re.compile(r"\b([A-Z]\w*(?:Config|Arguments|Args)|Namespace)\((.*)\)")
_KV = re.compile(r"(?<![\w.])([a-z_][\w]*)=('[^']*'|\"[^\"]*\"|\[[^\]]*\]|[^,\s)]+)")
_DS_PRINT = re.compile(r"\[config\.py:\d+:print\]\s+(\w+)\s+\.{2,}\s*(.*)$")
_ENV = re.compile(r"^(?:export\s+)?([A-Z][A-Z0-9_]{2,})=(\S*)")
_PIP_LIST = re.compile(r"^([A-Za-z][\w.-]*)\s+(\d+(?:\.\d+)+[\w.+-]*)\s*$")
_PIP_SHOW = re.compile(r"pip show (\S+)\s*->\s*Version:\s*(\S+)|^Version:\s*(\S+)")
_CLUSTER = re.compile(r"(?<!\d)(\d+)\s*nodes?\s*[,x×*]?\s*(?:with\s*)?(\d+)\s*(?:x\s*)?(?:[\w-]{1,40}\s+){0,4}?GPUs?|"
                      r"(?<!\d)(\d+)\s*nodes?\s*[,x×*]\s*(\d+)\s*x\s", re.I)  # digit runs start only once: linear
_COMMENT_KV = re.compile(r'"(\w+)"\s*:\s*(-?[\d.]+(?:e-?\d+)?|true|false|"[^"]*")')
_COMMENT_VERSION = re.compile(r"\b(trl|verl|vllm|sglang|deepspeed|openrlhf|slime|relax|megatron-core|megatron-lm|torch|ray|"
                              r"transformers)[ =v]+(\d+\.\d+(?:\.\w+)*)(?![\w*]|\.[\w*])", re.I)  # "0.2x" / "0.4.*" name no release
_NOT_CONFIG_KV = re.compile(r"\bpid=\d+|actor_id=|repr=<|ray::")  # Ray task/actor headers, not settings
# A logger record with a [file.py:N] tag (vLLM/SGLang: "DEBUG 12-01 04:12:50 [scheduler.py:1290] seq_group finished,
# reason=length, num_generated_tokens=..."): its key=value pairs are runtime values unless the message says it
# prints a configuration ("Initializing a V1 LLM engine ... with config: model=...")
_LOG_RECORD = re.compile(r"^\s*(?:\[?\d{4}-\d\d-\d\d[ T][\d:,.]+\]?\s+)?(?:DEBUG|INFO|WARNING|WARN|ERROR)\b[^=\n]*?"
                         r"\[[\w./-]+\.py:\d+\]")
_CONFIG_WORDS = re.compile(r"(?i)config|\bargs\b|argument|setting|param")



_VAR_ASSIGN = re.compile(r"^(?:export\s+|local\s+|readonly\s+)?([A-Za-z_]\w*)=(\"[^\"]*\"|'[^']*'|[^\s(][^\s]*)?\s*(?:#.*)?$")
def _document_facts(fs: FactSet, lines: list[Line], whole_text: str | None, fmt_hint: str | None) -> set[int]:
    """Facts of an input that is one YAML/JSON document; returns the line numbers it covered."""
    doc_lines: set[int] = set()
    if whole_text is not None and fmt_hint in ("yaml", "json", None):
        flat = flatten_document(whole_text) if fmt_hint or whole_text.lstrip().startswith(("{", "#", "-")) or \
            re.match(r"^\s*[\w.-]+:\s", whole_text) else None
        if flat and (len(flat) >= 2 or fmt_hint):
            for key, val, no in flat:
                fs.add(key, val, no,
                       "json" if whole_text.lstrip().startswith("{") else "yaml",
                       lines[no - 1].text if 0 < no <= len(lines) else "")
                doc_lines.add(no)
            fs.formats.add("json-config" if whole_text.lstrip().startswith("{") else "yaml-config")
            fs.block_lines.update(ln.no for ln in lines)  # the document's parents, list items and brackets
    return doc_lines


def _embedded_json_facts(fs: FactSet, block: list[Line]) -> None:
    """Facts of a JSON block pasted inside a log (e.g. ``cat ds_config.json``), at the block's real lines."""
    flat = flatten_document("\n".join(x.text for x in block))
    if flat:
        for key, val, no in flat:
            real = block[no - 1] if 0 < no <= len(block) else block[0]
            fs.add(key, val, real.no, "json", real.text)
        fs.formats.add("embedded-json")
        fs.block_lines.update(x.no for x in block)


def _comment_facts(fs: FactSet, s: str, t: str, no: int) -> None:
    """Facts people write in comments: ``# ds_config: {...}``, JSON key/values, versions, process and cluster sizes."""
    brace = s.find("{")
    if brace > 0 and s.rstrip().endswith("}"):  # "# ds_config: {...}" annotations in pastes
        flat = flatten_document(s[brace:])
        if flat:
            for key, val, _ in flat:
                fs.add(key, val, no, "json", t)
            fs.formats.add("embedded-json")
    for key, val in _COMMENT_KV.findall(s):  # '# model config.json: "max_position_embeddings": 4096'
        fs.add(key, parse_scalar(val), no, "comment", t)
    for pkg, ver in _COMMENT_VERSION.findall(s):
        fs.add("versions." + pkg.lower(), ver, no, "comment", t)
    nprocs = re.search(r"--num_processes[ =](\d+)|--nproc_per_node[ =](\d+)", s)
    if nprocs:
        fs.add("num_processes", int(nprocs.group(1) or nprocs.group(2)), no, "comment", t)
    m = _CLUSTER.search(s)
    if m:
        nodes = m.group(1) or m.group(3)
        gpn = m.group(2) or m.group(4)
        fs.add("cluster.nodes", int(nodes), no, "comment", t)
        fs.add("cluster.gpus_per_node", int(gpn), no, "comment", t)


def _line_facts(fs: FactSet, s: str, t: str, no: int, shell_vars: dict[str, str], in_array: bool) -> bool:
    """One-line forms: a DeepSpeed config print, shell variables, env exports, pip list / pip show lines.
    True when the line is fully read (nothing else can be on it)."""
    m = _DS_PRINT.search(t)
    if m:
        fs.add(m.group(1), parse_scalar(m.group(2)), no, "deepspeed-print", t)
        fs.formats.add("deepspeed-config-print")
        return True
    va = _VAR_ASSIGN.match(s)
    if va and not in_array:
        raw = va.group(2) or ""
        if raw[:1] not in "\"'" or (len(raw) > 1 and raw[-1] == raw[0]):  # (X="{ opens a multi-line string: unknown)
            shell_vars[va.group(1)] = expand_vars(raw.strip("\"'"), shell_vars)
    if not in_array and ASSIGNS_ONLY.match(s):  # export A=1 B=2: every assignment (a command's prefix: launch_facts)
        ws = words(expand_vars(s, shell_vars))
        for w in ws:
            if not va and (a := ENV_ASSIGN.match(w)):
                shell_vars[a.group(1)] = a.group(2)  # (one assignment alone: set above, quotes as written)
            m = _ENV.match(w)
            if m and not m.group(2).startswith("("):
                fs.add(m.group(1), parse_scalar(m.group(2)), no, "env", t)
    m = _PIP_LIST.match(s)
    if m and not s.startswith(("-", "#")) and m.group(1).lower() not in ("step", "iteration"):
        fs.add("versions." + m.group(1).lower(), m.group(2), no, "pip", t)
        return True
    m = _PIP_SHOW.search(s)
    if m:
        if m.group(1):
            fs.add("versions." + m.group(1).lower(), m.group(2), no, "pip", t)
        return True
    return False


def _kwargs_facts(fs: FactSet, t: str, no: int, is_cmd: bool) -> None:
    """``XConfig(key=value, ...)`` reprs, and lines of two or more key=value pairs outside commands."""
    m = _KWREPR.search(t)
    if m:
        for key, val in _KV.findall(m.group(2)):
            fs.add(key, parse_scalar(val), no, "kwargs", t)
        fs.formats.add("kwargs-repr")
    elif not is_cmd and len(_KV.findall(t)) >= 2 and not t.lstrip().startswith(("{", "[")) \
            and not _NOT_CONFIG_KV.search(t) and not _runtime_record(t):
        for key, val in _KV.findall(t):
            fs.add(key, parse_scalar(val), no, "kwargs", t)


def _runtime_record(t: str) -> bool:
    """A tagged logger record whose key=value pairs are runtime values, not settings (``_LOG_RECORD``)."""
    m = _LOG_RECORD.match(t)
    if m is None:
        return False
    first_kv = _KV.search(t, m.end())
    return not _CONFIG_WORDS.search(t, m.end(), first_kv.start() if first_kv else len(t))


def _shown_lines(fs: FactSet, lines: list[Line], skip: set[int] | frozenset[int]) -> set[int]:
    """Lines no other reader may take settings from: the code a traceback quotes (``dim=-1`` under a
    ``File "...", line N`` frame is not a setting; errors_classify.quoted_source_lines), and the lines of a config
    printed as a Python dict (verl's pprint of its resolved config, engine/printed_config.py), whose settings are
    added here at the line of each key."""
    from grpo_debug.tools.engine.errors_classify import quoted_source_lines
    from grpo_debug.tools.engine.printed_config import (block_settings, dict_blocks, megatron_args, repr_blocks,
                                                        repr_settings)

    shown = quoted_source_lines(lines)
    blocks = [(b, block_settings(b)) for b in dict_blocks(lines, skip | shown)]
    blocks += [(b, [(k, parse_scalar(v), no) for k, v, no in repr_settings(b)]) for b in repr_blocks(lines, skip | shown)]
    mega = megatron_args(lines)
    if mega:
        by_no = {x.no: x for x in lines if x.no in {no for _, _, no in mega}}
        blocks.append((list(by_no.values()), [(k, _printed_value(v), no) for k, v, no in mega]))
    for block, settings in blocks:
        if not settings:
            continue
        by_no = {x.no: x for x in block}
        for key, val, no in settings:
            fs.add(key, val, no, "printed", by_no[no].text)
        fs.formats.add("printed-config")
        shown.update(by_no)
        fs.block_lines.update(by_no)
    return shown


def _printed_value(v: str) -> Any:
    """A value as ``str()`` prints it: a list or dict literal read (never evaluated), else a scalar."""
    if v[:1] in "[{(":
        import ast

        try:
            return ast.literal_eval(v)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return v
    return parse_scalar(v)


def extract_facts(lines: list[Line], whole_text: str | None = None, fmt_hint: str | None = None,
                  skip: set[int] | frozenset[int] = frozenset()) -> FactSet:
    """All config facts of an input. ``whole_text`` is parsed as a YAML/JSON document when it is one;
    line numbers in ``skip`` (metric lines, already understood) are not read for settings."""
    fs = FactSet()
    doc_lines = _document_facts(fs, lines, whole_text, fmt_hint)
    shown = set() if doc_lines else _shown_lines(fs, lines, skip)
    state: dict = {"in_cmd": False, "in_array": False, "pending": []}
    json_buf: list[Line] = []
    shell_vars: dict[str, str] = {}
    for ln in lines:
        t = ln.text
        s = t.strip()
        if not s:
            if not state["in_array"]:  # a blank line ends a command, not a bash array
                end_command(fs, state)
            continue
        # embedded JSON blocks (e.g. `cat ds_config.json` in a log)
        if not doc_lines and (json_buf or (s == "{" and not t.startswith(" "))):
            json_buf.append(ln)
            if s == "}" and not t.startswith(" "):
                _embedded_json_facts(fs, json_buf)
                json_buf = []
            elif len(json_buf) > 400:
                json_buf = []
            continue
        if ln.no in doc_lines or ln.no in skip or ln.no in shown:
            continue
        if s.startswith("#"):
            _comment_facts(fs, s, t, ln.no)
            continue
        cont = state["in_cmd"] or state["in_array"]
        if _line_facts(fs, s, t, ln.no, shell_vars, state["in_array"]):
            continue
        starts_array = ARRAY_START.match(s)
        is_cmd = cont or bool(starts_array) or is_command_start(s)
        if is_cmd:
            command_facts(fs, s, t, ln.no, shell_vars, state, starts_array)
        else:
            end_command(fs, state)
        _kwargs_facts(fs, t, ln.no, is_cmd)
    end_command(fs, state)
    return fs


