"""Where a key the input does not set goes, in the input's own syntax (used by tools/engine/edits.py).

- launch command (``--flags``, Hydra ``key=value`` overrides): into the command that carries most of the
  input's settings: a new continuation line before its last line (`` \\`` kept), a new element of a bash
  array (``ARGS=( ... )``, no backslash), or appended to a one-line command (before ``| tee``, ``>``,
  ``&&``, ``;`` or a comment);
- JSON: a member inside the object that owns the dotted path (``zero_optimization.overlap_comm`` goes into
  ``"zero_optimization": {...}``; a missing parent becomes a nested object), with the comma the previous
  member needs, inline for a one-line object;
- YAML: under the block-mapping parent of the dotted path, at its children's indentation (missing parents
  are created), or at the end of the document for a top-level key.

An addition is an edit of an anchor line: the anchor as it is, then the added line(s) (``\\n``-joined).
"""
from __future__ import annotations

import json
import re
from typing import Any

from grpo_debug.tools.engine.facts import FactSet
from grpo_debug.tools.engine.normalize import Line

_CMD_TAIL = re.compile(r"\s(?:\|\s|>|2>|&&|;|#)")


def yaml_scalar(v: Any) -> str:
    """A YAML scalar: booleans and null spelled the YAML way, strings quoted when YAML would misread them."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    s = str(v)
    if isinstance(v, str) and (re.search(r"[:#{}\[\],&*!|>'\"%@`]", s) or s.strip() != s or not s):
        return json.dumps(s)
    return s


def _py(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return "null" if v is None else str(v)


def _style(key: str, fs: FactSet) -> str:
    origins = {f.origin for f in fs.facts}
    if "." in key and "override" in origins:
        return "override"
    for o in ("flag", "override", "json", "yaml", "kwargs"):
        if o in origins:
            return o
    return "override"


def _flag_text(key: str, new: Any, fs: FactSet, text: str) -> str | None:
    dotted = "." in key and re.search(r"(?<![\w-])--[a-z]+\.[a-z]", text)
    name = key if dotted else key.rsplit(".", 1)[-1]
    dash = len(re.findall(r"(?<![\w-])--[a-z0-9]+-[a-z0-9]", text))
    under = len(re.findall(r"(?<![\w-])--[a-z0-9]+_[a-z0-9]", text))
    name = name if under > dash else name.replace("_", "-")
    if new is False:
        return None  # a switch that is off is left out, not written as '--x False'
    return f"--{name}" if new is True else f"--{name} {_py(new)}"


def _nested(rest: list[str], new: Any) -> Any:
    for part in reversed(rest[1:]):
        new = {part: new}
    return new


def line_text(key: str, new: Any, fs: FactSet, text: str) -> str | None:
    """The added setting as one line of the input's syntax (no placement)."""
    style = _style(key, fs)
    if style == "flag":
        return _flag_text(key, new, fs, text)
    if style == "json":
        return f"{json.dumps(key)}: {json.dumps(new)}"
    if style == "yaml":
        return f"{key}: {yaml_scalar(new)}" + ("  (nest under the dotted path)" if "." in key else "")
    if style == "kwargs":
        return f"{key.rsplit('.', 1)[-1]}={_py(new)}"
    return f"{key}={_py(new)}"


def add_key(key: str, new: Any, fs: FactSet, by_no: dict[int, Line], text_only: bool = False):
    """(anchor line number, the added line(s)) for ``key``; or the line text alone when no place fits."""
    nos = sorted(by_no)
    text = "\n".join(by_no[n].raw.rstrip("\r\n") for n in nos)
    style = _style(key, fs)
    plain = line_text(key, new, fs, text)
    if text_only or plain is None or not nos or nos != list(range(1, len(nos) + 1)):
        return plain
    raws = {n: by_no[n].raw.rstrip("\r\n") for n in nos}
    if style in ("flag", "override"):
        placed = _in_command(plain, fs, raws, style)
    elif style == "json":
        placed = _in_json(key, new, text)
    elif style == "yaml":
        placed = _in_yaml(key, new, raws)
    else:
        placed = None
    return placed or plain


# ---- launch commands ------------------------------------------------------------------------------

def _blocks(raws: dict[int, str]) -> list[tuple[list[int], bool]]:
    """Commands as (line numbers, is a bash array): continuation runs and ``NAME=( ... )`` arrays."""
    out, cur, arr = [], [], False
    for n in sorted(raws):
        s = raws[n].rstrip()
        if not cur:
            arr = bool(re.search(r"=\(\s*(#.*)?$", s)) or bool(re.search(r"=\(", s) and s.count("(") > s.count(")"))
        cur.append(n)
        if arr:
            if s.strip().startswith(")") or (s.endswith(")") and s.count(")") > s.count("(")):
                out.append((cur, True)); cur = []
        elif not s.endswith("\\"):
            out.append((cur, False)); cur = []
    if cur:
        out.append((cur, arr))
    return out


def _in_command(added: str, fs: FactSet, raws: dict[int, str], style: str) -> tuple[int, str] | None:
    lines_with = {f.line for f in fs.facts if f.origin == style}
    blocks = [(b, arr) for b, arr in _blocks(raws) if lines_with & set(b)]
    if not blocks:
        return None
    block, arr = max(blocks, key=lambda ba: (len(lines_with & set(ba[0])), ba[0][0]))
    if any(re.search(r"(^|\s)(\.\.\.|…)(\s|$)", raws[n]) for n in block):
        return None  # the command is cut ('...'): the key may be set in the part not shown
    last = block[-1]
    if arr:
        close = raws[last].rstrip()
        if close.strip() == ")" and len(block) > 1:
            anchor = block[-2]
            indent = re.match(r"\s*", raws[anchor]).group(0) or "   "
            return anchor, indent + added
        i = close.rfind(")")
        return last, "\x00" + close[:i].rstrip() + " " + added + close[i:]
    if len(block) > 1:
        anchor = block[-2]
        indent = re.match(r"\s*", raws[last]).group(0) or re.match(r"\s*", raws[anchor]).group(0) or "  "
        return anchor, f"{indent}{added} \\"
    s = raws[last]
    m = _CMD_TAIL.search(s)
    cut = m.start() if m else len(s.rstrip())
    return last, "\x00" + s[:cut].rstrip() + " " + added + s[cut:]


# ---- JSON -------------------------------------------------------------------------------------------

def _json_objects(text: str) -> dict[str, tuple[int, int]]:
    """Dotted path -> (offset of '{', offset of '}') of every object value; the root object is ''."""
    out: dict[str, tuple[int, int]] = {}
    stack: list[tuple[str, int, bool]] = []  # (path, open offset, is object)
    i, n, key, last_str = 0, len(text), None, None
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            last_str = text[i + 1:j]
            i = j
        elif c == ":":
            key = last_str
        elif c in "{[":
            parent = stack[-1][0] if stack else None
            path = "" if parent is None else (f"{parent}.{key}" if parent and key else (key or ""))
            if stack and not stack[-1][2]:
                path = "\x00"  # inside an array: not addressable by a dotted key
            stack.append((path, i, c == "{"))
            key = None
        elif c in "}]" and stack:
            path, o, obj = stack.pop()
            if obj and "\x00" not in path:
                out.setdefault(path, (o, i))
        elif c == ",":
            key = None
        i += 1
    return out


def _in_json(key: str, new: Any, text: str) -> tuple[int, str] | None:
    objs = _json_objects(text)
    parts = key.split(".")
    for k in range(len(parts) - 1, -1, -1):
        path = ".".join(parts[:k])
        if path in objs:
            break
    else:
        return None
    if any(re.search(rf'"{re.escape(p)}"\s*:', text) for p in parts[k:k + 1]):
        return None  # the next key exists with a value that is not an object
    o, c = objs[path]
    member = f"{json.dumps(parts[k])}: {json.dumps(_nested(parts[k:], new))}"
    p = c - 1
    while p > o and text[p].isspace():
        p -= 1
    line_of = lambda off: text.count("\n", 0, off) + 1  # noqa: E731
    start = lambda no: sum(len(x) + 1 for x in text.split("\n")[:no - 1])  # noqa: E731
    lp, lc = line_of(p), line_of(c)
    raw = text.split("\n")[lp - 1]
    col = p - start(lp)
    sep = "" if text[p] == "{" else ","
    if lp == lc:
        return lp, "\x00" + raw[:col + 1] + (sep + " " if sep else "") + member + raw[col + 1:]
    indent = re.match(r"\s*", raw).group(0) if sep else re.match(r"\s*", raw).group(0) + "  "
    return lp, "\x00" + raw[:col + 1] + sep + raw[col + 1:] + "\n" + indent + member


# ---- YAML -------------------------------------------------------------------------------------------

_YKEY = re.compile(r"^(\s*)([A-Za-z_][\w.-]*)\s*:(\s*(#.*)?)?$|^(\s*)([A-Za-z_][\w.-]*)\s*:\s+\S")


def _yaml_parents(raws: dict[int, str]) -> dict[str, tuple[int, int, int | None]]:
    """Dotted path -> (line, indent, indent of its first child) of every block-mapping key."""
    out: dict[str, tuple[int, int, int | None]] = {}
    stack: list[tuple[int, str]] = []
    for n in sorted(raws):
        s = raws[n]
        if not s.strip() or s.lstrip().startswith(("#", "-", "---", "...")):
            continue
        m = _YKEY.match(s)
        if not m:
            continue
        ind = len(m.group(1) if m.group(1) is not None else m.group(5))
        name = m.group(2) or m.group(6)
        while stack and stack[-1][0] >= ind:
            stack.pop()
        if stack and out[stack[-1][1]][2] is None:
            ln, pind, _ = out[stack[-1][1]]
            out[stack[-1][1]] = (ln, pind, ind)
        path = (stack[-1][1] + "." if stack else "") + name
        if m.group(2):
            out[path] = (n, ind, None)
            stack.append((ind, path))
        else:
            out.setdefault("\x00" + path, (n, ind, None))  # a key with a value on its line (scalar or flow)
    return out


def _in_yaml(key: str, new: Any, raws: dict[int, str]) -> tuple[int, str] | None:
    parents = _yaml_parents(raws)
    parts = key.split(".")
    for k in range(len(parts) - 1, 0, -1):
        path = ".".join(parts[:k])
        if path in parents:
            anchor, ind, child = parents[path]
            step = (child - ind) if child is not None else 2
            break
    else:
        k, anchor, ind, step = 0, max(raws), -2, 2
    if any("\x00" + ".".join(parts[:j]) in parents for j in range(k + 1, len(parts) + 1)):
        return None  # the key (or a parent to create) is already set on one line, e.g. `rollout: {name: vllm}`
    out, level = [], ind + step
    for part in parts[k:-1]:
        out.append(" " * level + part + ":")
        level += step
    out.append(" " * level + f"{parts[-1]}: {yaml_scalar(new)}")
    return anchor, "\n".join(out)
