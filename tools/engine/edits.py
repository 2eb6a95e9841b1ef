"""Turn a patch (key -> new value) into exact text edits of the input (the line as it is, the line as it
should be), in the input's own syntax: Hydra/verl overrides, ``--flags``, JSON, YAML, ``k=v`` reprs and
environment assignments. Keys not set in the input become lines added where the syntax needs them
(tools/engine/placement.py); all edits of one line become one edit.

What a rule's patch may do to a given input (:func:`rule_patch`):

- framework: a rule's ``patch_by_framework`` picks the patch for the input's framework (slime's
  ``slime.rollout.forge_load.generate_rollout`` for a slime script, Relax's ``relax.engine...`` for a Relax
  one); a module path of another framework is never written, nor a non-dotted key the input does not set
  into an input whose framework the rule does not name;
- secrets: a line that holds a secret (tools/redact.py) is never rewritten nor used as an anchor; the edit
  comes as text to set by hand (answers show such a line redacted: an applied answer would write ``***``);
- direction: ``bounds`` say how a value may move (``min``: raise to at least, ``max``: lower to at most,
  ``set``); an edit never moves a value against its rule (a mem fraction of 0.5 is not raised to 0.7
  by a rule that says lower it).
"""
from __future__ import annotations

import json
import re
from typing import Any

from grpo_debug.tools.engine.facts import Fact, FactSet
from grpo_debug.tools.engine.normalize import Line
from grpo_debug.tools.engine.placement import add_key, yaml_scalar
from grpo_debug.tools.models import Edit
from grpo_debug.tools.redact import holds_secret

# tools/run/frameworks.detect's names -> the names rules use in applies_to / patch_by_framework
_FRAMEWORK_NAMES = {"slime": {"slime", "relax"}, "megatron": {"megatron", "megatron-lm"}, "trl": {"trl", "hf-trainer"},
                    "nemo_rl": {"nemo-rl"}, "prime_rl": {"prime-rl"}}
# top-level Python packages of frameworks: a module path value starting with one belongs to that framework
_PACKAGES = {"relax": "relax", "slime": "slime", "verl": "verl", "trl": "trl", "openrlhf": "openrlhf",
             "deepspeed": "deepspeed", "megatron": "megatron"}


class _KeysOnly:
    """A FactSet's settings without its ``versions.*`` rows (a pip line does not make a file a TRL file)."""

    def __init__(self, fs: FactSet):
        self.facts = [f for f in fs.facts if not f.key.lower().startswith("versions.")]


def config_frameworks(fs: FactSet) -> set[str]:
    """The frameworks whose config keys the input writes (tools/run/frameworks.detect over the settings alone, its
    markers sourced in skills/aliases.yaml), in the rules' names: those with two keys or more, or the only one."""
    from grpo_debug.tools.run.frameworks import detect

    hits = detect((), _KeysOnly(fs))
    out: set[str] = set()
    for h in hits:
        if h.score >= 2 or len(hits) == 1:
            out |= _FRAMEWORK_NAMES.get(h.name, {h.name})
    return out


def input_frameworks(fs: FactSet, lines: list[Line] | dict[int, Line]) -> set[str]:
    """The frameworks the input is written for, in the rules' names. slime and Relax share their flags;
    the entry point (``relax/entrypoints``, ``-m relax``, ``slime/``, ``train.py`` of slime) tells them apart.
    Costs a pass over the settings and the text: a caller with many rules computes it once and passes it on
    (``frameworks=`` of :func:`rule_patch` and :func:`already_set`)."""
    out = config_frameworks(fs)
    if "deepspeed" in out and not any(f.origin in ("json", "yaml") and _is_deepspeed_key(f.key) for f in fs.facts):
        out.discard("deepspeed")  # a launcher's --zero_stage is not a DeepSpeed config file
    for eng in ("vllm", "sglang"):  # the rollout engine a trainer drives counts too (TRL use_vllm, vllm_num_engines)
        if any(eng in f.key.lower() and f.value not in (False, None, 0) or
               f.key.lower().endswith("rollout.name") and str(f.value).lower() == eng for f in fs.facts):
            out.add(eng)
    text = "\n".join(ln.raw for ln in (lines.values() if isinstance(lines, dict) else lines))
    # the literal first: a leading \b keeps re from skipping ahead to it (a streamed log's kept text is megabytes)
    relax = "relax" in text and bool(re.search(r"\brelax[./]", text))
    slime = "slime" in text and bool(re.search(r"\bslime[./]", text))
    if {"slime", "relax"} <= out or relax or slime:
        if relax != slime:
            out -= {"slime", "relax"}
            out.add("relax" if relax else "slime")
    return out


def _is_deepspeed_key(key: str) -> bool:
    return bool(re.match(r"(deepspeed_config\.)?((zero_optimization|fp16|bf16|optimizer|scheduler)\.|(gradient_clipping|"
                         r"train_micro_batch_size_per_gpu|train_batch_size|gradient_accumulation_steps|zero_stage)$)", key))


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _bound_of(bounds: dict[str, str], key: str) -> str:
    k = key.lower()
    for b, how in bounds.items():
        bl = b.lower()
        if bl == k or k.endswith("." + bl) or bl.endswith("." + k):
            return how
    return "set"


def _foreign_module(v: Any, frameworks: set[str]) -> bool:
    """A module path value (``relax.engine.rollout...``) of a framework the input is not written for."""
    if not isinstance(v, str) or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", v):
        return False
    fw = _PACKAGES.get(v.split(".", 1)[0])
    return fw is not None and fw not in frameworks


def rule_patch(fix, rule_frameworks: list[str], computed: dict[str, Any], fs: FactSet,
               lines: list[Line] | dict[int, Line], frameworks: set[str] | None = None) -> dict[str, Any]:
    """The changes one rule asks of this input: the values its checks computed for the input (they win),
    else its ``patch_by_framework`` entry for the input's framework (or ``patch``), kept to what fits the
    input (see the module doc) and moved only the way ``fix.bounds`` allow. ``frameworks``: the input's
    (:func:`input_frameworks`), when the caller has them."""
    fws = input_frameworks(fs, lines) if frameworks is None else frameworks
    by_fw = getattr(fix, "patch_by_framework", None) or {}
    if by_fw:
        picked = [fw for fw in by_fw if fw in fws]
        base = dict(by_fw[picked[0]]) if len(picked) == 1 else {}
    else:
        base = dict(fix.patch or {})
    named = {n for fw in rule_frameworks for n in ({fw} | _FRAMEWORK_NAMES.get(fw, set()))}
    if named and fws and not (fws & named):
        return {}  # a file of a framework the rule does not name: not even a check's values go in
    out: dict[str, Any] = {}
    for key, new in {**base, **computed}.items():
        if key not in computed:
            if _foreign_module(new, fws) or not applicable(key, fs):
                continue
            if "." not in key and fs.get(key) is None and named and fws and not (fws & named):
                continue  # a key of another framework's file
        how = "set" if key in computed else _bound_of(getattr(fix, "bounds", None) or {}, key)
        if how != "set":
            f = fs.get(key)
            cur, want = _number(f.value) if f else None, _number(new)
            if f is None or cur is None or want is None:
                continue  # unset (its default may already be on the safe side) or not a number
            if (how == "min" and cur >= want) or (how == "max" and cur <= want):
                continue  # already where the rule wants it: never move it back
        out[key] = new
    return out


# Settings that protect a run: gradient clipping (verl grad_clip / optim.clip_grad, Megatron --clip-grad, DeepSpeed
# gradient_clipping, TRL/HF max_grad_norm). A patch that sets one to 0/off removes the safeguard.
_SAFEGUARDS = re.compile(r"(?:^|[._-])(?:grad_clip|clip_grad|clip_grad_norm|gradient_clipping|max_grad_norm)$", re.I)


def removes_safeguard(key: str, new: Any) -> bool:
    """Whether setting ``key`` to ``new`` turns a safeguard off (clipping set to 0, None, false or 'off'): such a
    change is made only when the input shows the symptom it answers (tools/triage.py keeps it out of a risk)."""
    if not _SAFEGUARDS.search(key.lstrip("-").replace("-", "_")):
        return False
    return new is None or new is False or _number(new) == 0 or str(new).strip().lower() in ("0", "0.0", "off", "false", "none")


# the clipping settings of each trainer (verl actor ...optim.clip_grad / grad_clip, Megatron and slime --clip-grad,
# DeepSpeed gradient_clipping, TRL/HF max_grad_norm, OpenRLHF --max_norm / --actor.max_norm)
_CLIP_KEYS = re.compile(r"(?:^|[._-])(?:grad_clip|clip_grad|gradient_clipping|max_grad_norm|max_norm)$", re.I)


def clipping_on(fs: FactSet) -> Fact | None:
    """The input's gradient clipping setting when it is on (a positive number), else None: the actor's when the input
    sets several (a critic's clip_grad says nothing of the actor), the one a file or launch line sets before a value
    a log prints back."""
    on = [f for f in fs.facts if _CLIP_KEYS.search(f.key.replace("-", "_")) and "critic" not in f.key.lower()
          and (_number(f.value) or 0) > 0]
    if not on:
        return None
    return min(on, key=lambda f: ("actor" not in f.key.lower(), f.origin == "printed", f.line))


def already_set(fix, fs: FactSet, lines: list[Line] | dict[int, Line], frameworks: set[str] | None = None) -> list[str]:
    """The settings a rule's fix asks for that the input already has ('key = value (line N)'), counting a
    value on the safe side of its bound; the answer then says so instead of asking for them again."""
    fws = input_frameworks(fs, lines) if frameworks is None else frameworks
    by_fw = getattr(fix, "patch_by_framework", None) or {}
    base = next((p for fw, p in by_fw.items() if fw in fws), {}) if by_fw else (fix.patch or {})
    out = []
    for key, want in base.items():
        f = fs.get(key)
        if f is None:
            continue
        how, cur, num = _bound_of(getattr(fix, "bounds", None) or {}, key), _number(f.value), _number(want)
        if f.value == want or (cur is not None and num is not None and (how == "min" and cur >= num or
                                                                       how == "max" and cur <= num)):
            out.append(f"{f.key} = {f.value!r} (line {f.line})")
    return out


def _py(v: Any, like: str = "") -> str:
    """A value in override/flag syntax, keeping the input's spelling of booleans (True vs true)."""
    if isinstance(v, bool):
        return ("True" if v else "False") if like[:1].isupper() or not like else ("true" if v else "false")
    if v is None:
        return "null"
    return str(v)


def _flag_names(key: str) -> list[str]:
    """Spellings of a flag: the whole key (OpenRLHF's dotted --actor.max_norm), then its last part."""
    base = key.rsplit(".", 1)[-1]
    return list(dict.fromkeys([key.replace("_", "-"), key, base.replace("_", "-"), base]))


def _edit_existing(f: Fact, new: Any, raw: str) -> str | None:
    last = re.escape(f.key.rsplit(".", 1)[-1])
    if f.origin == "override":
        m = re.search(rf"(\+{{0,2}}{re.escape(f.key)}=)(\"[^\"]*\"|'[^']*'|\S*)", raw)
        if m:
            return raw[:m.start(2)] + _py(new, m.group(2)) + raw[m.end(2):]
    elif f.origin == "flag":
        for name in _flag_names(f.key):
            m = re.search(rf"--{re.escape(name)}(?:=|\s+)(?!--)(?!\\)(\S+)", raw) if f.value is not True else None
            if m:
                return raw[:m.start(1)] + _py(new) + raw[m.end(1):]
            m = re.search(rf"\s?--{re.escape(name)}(?![\w-])", raw)
            if m and f.value is True:
                if new is False:
                    return raw[:m.start()] + raw[m.end():]
                return raw[:m.end()] + f" {_py(new)}" + raw[m.end():]
    elif f.origin == "json":
        m = re.search(rf"(\"{last}\"\s*:\s*)([^,}}\n]+?)(\s*[,}}]|\s*$)", raw)
        if m:
            return raw[:m.start(2)] + json.dumps(new) + raw[m.end(2):]
    elif f.origin == "yaml":
        m = re.search(rf"^(\s*(?:-\s+)?{last}\s*:\s*)([^#\n]*?)(\s*(#.*)?)$", raw)
        if m:
            return raw[:m.start(2)] + yaml_scalar(new) + raw[m.end(2):]
    elif f.origin in ("kwargs", "env"):
        m = re.search(rf"(\b{last}=)('[^']*'|\"[^\"]*\"|[^,\s)]+)", raw)
        if m:
            return raw[:m.start(2)] + _py(new, m.group(2)) + raw[m.end(2):]
    return None


def applicable(key: str, fs: FactSet) -> bool:
    """A patch key fits the input when the input sets it (or its parent), or speaks its namespace: a dotted
    verl key is not added to a TRL recipe, a DeepSpeed JSON key is not added to a slime script."""
    if fs.get(key) is not None or ("." in key and fs.get(key.rsplit(".", 1)[0]) is not None):
        return True
    if "." in key:
        ns = key.split(".", 1)[0].lower() + "."
        return any(f.key.lower().startswith(ns) for f in fs.facts)
    return True


def _target(key: str, fs: FactSet) -> Fact | None:
    """The fact an edit of ``key`` rewrites: the last one set, a config file's or launch line's before one printed
    back in a log (a run folder's config.yaml, not the dict the trainer echoed at start-up)."""
    found = fs.find(key)
    own = [f for f in found if f.origin != "printed"]
    f = max(own or found, key=lambda x: x.line) if found else None
    if f is None and "." in key:
        parent = fs.get(key.rsplit(".", 1)[0])  # TRL/HF `fp16: true` for DeepSpeed's fp16.enabled
        if parent is not None and isinstance(parent.value, bool):
            f = parent
    return f


def _secret_line_edit(key: str, new: Any, no: int, fs: FactSet, by_no: dict[int, Line]) -> Edit:
    """The edit for a key whose line holds a secret (tools/redact.py): never a rewrite of that line (answers
    show it redacted, so an applied answer would write the redaction into the file); the setting as text."""
    text = add_key(key, new, fs, by_no, text_only=True) or f"{key}={_py(new)}"
    return Edit(key=key, line=None, new=text if isinstance(text, str) else f"{key}={_py(new)}",
                note=f"line {no} holds a secret and is never rewritten; set this on it yourself")


def edits_for_patch(patch: dict[str, Any] | None, fs: FactSet, lines: list[Line] | dict[int, Line]) -> list[Edit]:
    """Exact edits for ``patch`` against the input: rewrite the line that sets a key, or add the key where
    the input's syntax needs it. Several keys on one line give one edit (its ``key`` names them all)."""
    from grpo_debug.tools.engine.diff import merge_line

    by_no = lines if isinstance(lines, dict) else {ln.no: ln for ln in lines}
    now: dict[int, tuple[str, str, list[str], str]] = {}  # line -> (original, current, keys, note)
    loose: list[Edit] = []
    for key, new in (patch or {}).items():
        f = _target(key, fs)
        if f is not None and f.line in by_no:
            if f.value == new:
                continue  # already set as the fix asks
            if holds_secret(by_no[f.line].raw):
                loose.append(_secret_line_edit(key, new, f.line, fs, by_no))
                continue
            orig, cur, keys, note = now.get(f.line) or (by_no[f.line].raw.rstrip("\r\n"),) * 2 + ([], "")
            changed = _edit_existing(f, new, cur)
            if changed is None or changed == cur:
                text = add_key(key, new, fs, by_no, text_only=True)
                if text:
                    loose.append(Edit(key=f.key, line=None, new=text,
                                      note=f"could not rewrite line {f.line} in place; set this instead"))
                continue
            now[f.line] = (orig, changed, keys + [f.key], note)
            continue
        placed = add_key(key, new, fs, by_no)
        if isinstance(placed, tuple) and holds_secret(by_no[placed[0]].raw):
            loose.append(_secret_line_edit(key, new, placed[0], fs, by_no))
            continue
        if isinstance(placed, tuple):
            no, added = placed
            orig, cur, keys, _ = now.get(no) or (by_no[no].raw.rstrip("\r\n"),) * 2 + ([], "")
            whole = added[1:] if added.startswith("\x00") else orig + "\n" + added  # \x00: the anchor rewritten
            merged = merge_line(orig, [cur, whole]) if cur != orig else whole
            if merged is not None:
                now[no] = (orig, merged, keys + [key], f"adds {key} at line {no}")
                continue
            placed = whole.split("\n")[-1].strip()
        if placed:
            loose.append(Edit(key=key, line=None, new=placed, note="not set in the input; add it"))
    out = [Edit(key=", ".join(keys), line=no, old=orig, new=cur, note=note) for no, (orig, cur, keys, note) in sorted(now.items())]
    return out + loose
