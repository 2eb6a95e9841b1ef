"""Turn a patch (key -> new value) into exact text edits of the input (the line as it is, the line as it
should be), in the input's own syntax: Hydra/verl overrides, ``--flags``, JSON, YAML, ``k=v`` reprs and
environment assignments. Keys not set in the input become lines to add, in the style the input uses.
"""
from __future__ import annotations

import json
import re
from typing import Any

from grpo_debug.tools.engine.facts import Fact, FactSet
from grpo_debug.tools.models import Edit
from grpo_debug.tools.engine.normalize import Line


def _py(v: Any, like: str = "") -> str:
    """A value in override/flag syntax, keeping the input's spelling of booleans (True vs true)."""
    if isinstance(v, bool):
        return ("True" if v else "False") if like[:1].isupper() or not like else ("true" if v else "false")
    if v is None:
        return "null"
    return str(v)


def _flag_names(key: str) -> list[str]:
    base = key.rsplit(".", 1)[-1]
    return list(dict.fromkeys([base.replace("_", "-"), base]))


def _edit_existing(f: Fact, new: Any, raw: str) -> str | None:
    last = re.escape(f.key.rsplit(".", 1)[-1])
    if f.origin == "override":
        m = re.search(rf"(\+{{0,2}}{re.escape(f.key)}=)(\"[^\"]*\"|'[^']*'|\S*)", raw)
        if m:
            return raw[:m.start(2)] + _py(new, m.group(2)) + raw[m.end(2):]
    elif f.origin == "flag":
        for name in _flag_names(f.key):
            m = re.search(rf"--{re.escape(name)}(?:=|\s+)(?!--)(\S+)", raw) if f.value is not True else None
            if m:
                return raw[:m.start(1)] + _py(new) + raw[m.end(1):]
            m = re.search(rf"\s?--{re.escape(name)}\b", raw)
            if m and f.value is True:
                if new is False:
                    return raw[:m.start()] + raw[m.end():]
                return raw[:m.end()] + f" {_py(new)}" + raw[m.end():]
    elif f.origin == "json":
        m = re.search(rf"(\"{last}\"\s*:\s*)([^,}}\n]+?)(\s*[,}}]|\s*$)", raw)
        if m:
            return raw[:m.start(2)] + json.dumps(new) + raw[m.end(2):]
    elif f.origin == "yaml":
        m = re.search(rf"^(\s*{last}\s*:\s*)([^#\n]*?)(\s*(#.*)?)$", raw)
        if m:
            return raw[:m.start(2)] + _yaml(new) + raw[m.end(2):]
    elif f.origin in ("kwargs", "env"):
        m = re.search(rf"(\b{last}=)('[^']*'|\"[^\"]*\"|[^,\s)]+)", raw)
        if m:
            return raw[:m.start(2)] + _py(new, m.group(2)) + raw[m.end(2):]
    return None


def _yaml(v: Any) -> str:
    """A YAML scalar: booleans and null spelled the YAML way, strings quoted when YAML would misread them."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    s = str(v)
    if isinstance(v, str) and (re.search(r"[:#{}\[\],&*!|>'\"%@`]", s) or s.strip() != s or not s):
        return json.dumps(s)
    return s


def _style(fs: FactSet) -> str:
    origins = [f.origin for f in fs.facts]
    for o in ("override", "flag", "json", "yaml", "kwargs"):
        if o in origins:
            return o
    return "override"


def _flag_style_underscore(lines: list[Line]) -> bool:
    """Whether the input spells multi-word flags with underscores (OpenRLHF --actor_num_nodes) rather than
    dashes (slime/Megatron --num-gpus-per-node): majority of --flag tokens."""
    text = "\n".join(ln.text for ln in lines)
    dash = len(re.findall(r"(?<![\w-])--[a-z0-9]+-[a-z0-9]", text))
    under = len(re.findall(r"(?<![\w-])--[a-z0-9]+_[a-z0-9]", text))
    return under > dash


def _new_line(key: str, new: Any, fs: FactSet, underscore: bool = False) -> str:
    style = _style(fs)
    if style == "flag":
        name = key.rsplit(".", 1)[-1]
        name = name if underscore else name.replace("_", "-")
        return f"--{name}" if new is True else f"--{name} {_py(new)}"
    if style == "json":
        return f'"{key}": {json.dumps(new)}' if "." not in key else f'{json.dumps(key)}: {json.dumps(new)}  (nest under the dotted path)'
    if style == "yaml":
        return f"{key}: {_yaml(new)}" + ("  (nest under the dotted path)" if "." in key else "")
    if style == "kwargs":
        return f"{key.rsplit('.', 1)[-1]}={_py(new)}"
    return f"{key}={_py(new)}"


def applicable(key: str, fs: FactSet) -> bool:
    """A patch key fits the input when the input sets it (or its parent), or speaks its namespace: a dotted
    verl key is not added to a TRL recipe, a DeepSpeed JSON key is not added to a slime script."""
    if fs.get(key) is not None or ("." in key and fs.get(key.rsplit(".", 1)[0]) is not None):
        return True
    if "." in key:
        ns = key.split(".", 1)[0].lower() + "."
        return any(f.key.lower().startswith(ns) for f in fs.facts)
    return True


def edits_for_patch(patch: dict[str, Any] | None, fs: FactSet, lines: list[Line] | dict[int, Line]) -> list[Edit]:
    """Exact edits for ``patch`` against the input: replace the line that sets a key, or add one."""
    out: list[Edit] = []
    by_no = lines if isinstance(lines, dict) else {ln.no: ln for ln in lines}
    underscore = _flag_style_underscore(list(by_no.values()))
    for key, new in (patch or {}).items():
        if not applicable(key, fs):
            continue
        f = fs.get(key)
        if f is None and "." in key:
            parent = fs.get(key.rsplit(".", 1)[0])  # TRL/HF `fp16: true` for DeepSpeed's fp16.enabled
            if parent is not None and isinstance(parent.value, bool):
                f = parent
        if f is not None and f.line in by_no:
            raw = by_no[f.line].raw.rstrip("\r\n")
            if f.value == new:
                continue  # already set as the fix asks
            changed = _edit_existing(f, new, raw)
            if changed is not None and changed != raw:
                out.append(Edit(key=f.key, line=f.line, old=raw, new=changed))
                continue
            out.append(Edit(key=f.key, line=f.line, old=raw, new=_new_line(f.key, new, fs, underscore),
                            note="could not rewrite the line in place; set this instead"))
        else:
            out.append(Edit(key=key, line=None, old=None, new=_new_line(key, new, fs, underscore), note="not set in the input; add it"))
    return out
