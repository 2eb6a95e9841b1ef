"""A config printed into a log as a Python dict: read as config facts at the lines that print each key.

verl prints its resolved config at start, ``pprint(OmegaConf.to_container(config, resolve=True))`` in
``TaskRunner.run`` (volcengine/verl verl/trainer/main_ppo.py; the same print in main_generation.py and the
experimental one_step_off_policy / fully_async / transfer_queue mains), under the Ray prefix of the driver task::

    (TaskRunner pid=40213) {'actor_rollout_ref': {'actor': {'_target_': 'verl.workers.config.FSDPActorConfig',
    (TaskRunner pid=40213)                                  'clip_ratio': 0.2,
    (TaskRunner pid=40213)                                  'ppo_micro_batch_size_per_gpu': 4,

``print(config)`` of an OmegaConf ``DictConfig`` gives the same dict on one line. A block starts at a line whose text
(after the Ray prefix) opens a dict with a ``'``-quoted key (a Python repr; JSON is read by facts.py) and ends where its brackets close; lines of other processes
interleaved in it are left out. It is parsed with :func:`ast.parse` (never evaluated) and each leaf becomes
``(dotted.key, value, line of the key)``; a leaf that is not a literal (``inf``, an object repr) is skipped, a block
that does not parse gives nothing. A flat one-line dict is not a config (TRL prints its per-step metrics so).

An arguments object printed at start-up is config too: Hugging Face ``TrainingArguments.__str__`` (transformers
src/transformers/training_args.py; TRL's GRPOConfig/PPOConfig and ms-swift's arguments inherit it) prints
``f"{self.__class__.__name__}(\\n{''.join(f'{k}={v},\\n' for k, v in sorted(asdict(self).items()))})"``: a
``GRPOConfig(`` line, one ``key=value,`` line per field (values by ``str``: unquoted strings, enum names, dicts) and a
``)`` line (:func:`repr_blocks`). One-line reprs (``Namespace(lr=1e-06, ...)`` of argparse, a dataclass repr) are read
by facts.py; either may follow a logger's text (open-r1's ``logger.info(f"Training parameters {training_args}")``).
Megatron-LM prints its parsed arguments at start (``_print_args`` in megatron/training/arguments.py, rank 0):
``------------------------ arguments ------------------------``, then ``'  {} {} {}'.format(arg, '.' * (48 -
len(arg)), value)`` per argument, sorted, then ``-------------------- end of arguments ---------------------``
(:func:`megatron_args`).
:func:`settings_print_lines` names all these lines so the metric readers leave them alone.
"""
from __future__ import annotations

import ast
import re
from typing import Any

from grpo_debug.tools.engine.normalize import Line

MAX_BLOCK_LINES = 20_000
MAX_BLOCK_CHARS = 2_000_000
_START = re.compile(r"^\s*\{'")  # a repr quotes keys with ' (JSON's " lines are read as JSON elsewhere)
_OPEN, _CLOSE = "{[(", "}])"
_STRING = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")


def _depth(t: str, depth: int) -> int:
    """Bracket depth after ``t``; brackets inside quoted strings do not count (a string never spans lines in a
    repr: pprint splits a long one into adjacent literals)."""
    bare = _STRING.sub("", t)
    return depth + sum(bare.count(c) for c in _OPEN) - sum(bare.count(c) for c in _CLOSE)


def dict_blocks(lines: list[Line], skip: set[int] | frozenset[int] = frozenset()) -> list[list[Line]]:
    """The printed dict blocks of ``lines`` (each the block's own lines, in order). Linear: a block that does not
    close within MAX_BLOCK_LINES lines of its process is dropped and the scan goes on after it."""
    out: list[list[Line]] = []
    i, n = 0, len(lines)
    while i < n:
        ln = lines[i]
        if ln.no in skip or not _START.match(ln.text):
            i += 1
            continue
        block, j = _dict_block_at(lines, i)
        if block:
            out.append(block)
        i = j if j > i else i + 1
    return out


def _dict_block_at(lines: list[Line], i: int) -> tuple[list[Line] | None, int]:
    """(the dict block starting at ``lines[i]`` or None when it does not close, the index after its last line)."""
    ln = lines[i]
    block, depth, j, chars, n = [], 0, i, 0, len(lines)
    while j < n and len(block) < MAX_BLOCK_LINES and chars < MAX_BLOCK_CHARS:
        x = lines[j]
        j += 1
        if x.source != ln.source:
            continue  # another process's line interleaved in the print
        block.append(x)
        chars += len(x.text)
        depth = _depth(x.text, depth)
        if depth <= 0:
            break
    return (block if depth == 0 else None), j


def _leaves(node: ast.AST, prefix: str, out: list[tuple[str, Any, int]]) -> None:
    if not isinstance(node, ast.Dict):
        return
    for k, v in zip(node.keys, node.values):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, (str, int))):
            continue
        key = f"{prefix}.{k.value}" if prefix else str(k.value)
        if isinstance(v, ast.Dict):
            _leaves(v, key, out)
            continue
        try:
            val = ast.literal_eval(v)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue  # inf, nan, an object repr: not a literal
        if isinstance(val, (list, tuple)) and not all(isinstance(x, (str, int, float, bool, type(None))) for x in val):
            continue  # a list of mappings: not a setting the rules name
        out.append((key, list(val) if isinstance(val, tuple) else val, k.lineno))


def block_settings(block: list[Line]) -> list[tuple[str, Any, int]]:
    """(dotted key, value, input line) of every literal leaf of one printed dict block; [] when it does not parse
    or is a flat one-line dict (a metric print, not a config)."""
    text = "\n".join([block[0].text.lstrip(), *(x.text for x in block[1:])])
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return []
    body = tree.body
    if not isinstance(body, ast.Dict):
        return []
    if len(block) == 1 and not any(isinstance(v, ast.Dict) for v in body.values):
        return []
    flat: list[tuple[str, Any, int]] = []
    try:
        _leaves(body, "", flat)
    except RecursionError:
        return []
    return [(k, v, block[no - 1].no) for k, v, no in flat if 0 < no <= len(block)]


_REPR_START = re.compile(r"(?:^|\s)([A-Z]\w*)\($")  # also after a logger's text: "Training parameters GRPOConfig("
_REPR_FIELD = re.compile(r"^\s*([A-Za-z_]\w*)=(.*?),?\s*$")
ONE_LINE_REPR = re.compile(r"(?:^|\s)(?:[A-Z]\w*(?:Config|Arguments|Args)|Namespace)\(\w+=.*\)\s*$")
MAX_REPR_LINES = 2_000


def repr_blocks(lines: list[Line], skip: set[int] | frozenset[int] = frozenset()) -> list[list[Line]]:
    """The multi-line arguments prints of ``lines`` (``GRPOConfig(`` ... ``)``, see the module text), each the block's
    own lines; a block needs two ``key=value,`` lines and its ``)`` within MAX_REPR_LINES lines of its process."""
    out: list[list[Line]] = []
    i, n = 0, len(lines)
    while i < n:
        ln = lines[i]
        if ln.no in skip or not ln.text.endswith("(") or not _REPR_START.search(ln.text):
            i += 1
            continue
        block, fields, j, closed = [ln], 0, i + 1, False
        while j < n and len(block) < MAX_REPR_LINES:
            x = lines[j]
            j += 1
            if x.source != ln.source:
                continue
            block.append(x)
            if x.text.strip() == ")":
                closed = True
                break
            fields += _REPR_FIELD.match(x.text) is not None
        if closed and fields >= 2:
            out.append(block)
            i = j
        else:
            i += 1
    return out


def repr_settings(block: list[Line]) -> list[tuple[str, Any, int]]:
    """(key, value, input line) of each ``key=value,`` line of one arguments print: a dict or list value read as a
    literal (never evaluated), anything else as the scalar it prints (facts.parse_scalar does that for the caller:
    the value is returned as its text, stripped)."""
    out: list[tuple[str, Any, int]] = []
    for x in block[1:-1]:
        m = _REPR_FIELD.match(x.text)
        if not m:
            continue  # a value printed over several lines (a template string): not a setting the rules name
        raw = m.group(2).strip()
        val: Any = raw
        if raw[:1] in "{[(":
            try:
                val = ast.literal_eval(raw)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                val = raw
            if isinstance(val, dict):
                for k, v in val.items():
                    if isinstance(v, (str, int, float, bool, type(None))):
                        out.append((f"{m.group(1)}.{k}", v, x.no))
                continue
        out.append((m.group(1), val, x.no))
    return out


def settings_print_lines(lines: list[Line]) -> set[int]:
    """Line numbers of configs printed into a log (a dict block of more than one line or with nested dicts, a
    multi-line or one-line arguments repr): settings, never metric values. One pass over the lines' first
    characters, then a scan of each candidate; a flat one-line dict (a metric print) is not one."""
    out: set[int] = set()
    reprs = megatron = False
    i, n = 0, len(lines)
    while i < n:
        t = lines[i].text
        head = t[:1] if t[:1] != " " else t.lstrip()[:1]
        if head == "{" and _START.match(t) and ("': {" in t or not t.rstrip().endswith("}")):
            block, j = _dict_block_at(lines, i)
            if block:
                out.update(x.no for x in block)
                i = j
                continue
        elif head == "-" and t.endswith("-") and " arguments " in t:
            megatron = True
        elif "(" in t:
            if "=" in t and ONE_LINE_REPR.search(t):
                out.add(lines[i].no)
            reprs = reprs or (t.endswith("(") and _REPR_START.search(t) is not None)
        i += 1
    if reprs:
        for block in repr_blocks(lines):
            out.update(x.no for x in block)
    if megatron:
        out.update(no for _, _, no in megatron_args(lines))
    return out


_MEGATRON_HEAD = re.compile(r"^\s*-{3,} ((?:end of )?[\w ]{0,30}arguments) -{3,}\s*$")
_MEGATRON_ARG = re.compile(r"^\s+([A-Za-z_]\w*) \.* ?(.*?)\s*$")


def megatron_args(lines: list[Line]) -> list[tuple[str, str, int]]:
    """(argument, value as printed, input line) of each Megatron-LM arguments print (see the module text): the
    lines between a ``---- arguments ----`` header and its ``---- end of arguments ----`` line of the same process;
    a block without its end line (a cut log) is read up to the first line of another shape."""
    out: list[tuple[str, str, int]] = []
    i, n = 0, len(lines)
    while i < n:
        m = _MEGATRON_HEAD.match(lines[i].text) if lines[i].text.lstrip()[:3] == "---" else None
        if not m or m.group(1).startswith("end of"):
            i += 1
            continue
        src, j = lines[i].source, i + 1
        while j < n:
            x = lines[j]
            j += 1
            if x.source != src:
                continue
            a = _MEGATRON_ARG.match(x.text)
            if a is None:
                break  # the end line, or the print was cut
            out.append((a.group(1), a.group(2), x.no))
        i = j
    return out
