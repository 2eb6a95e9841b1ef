#!/usr/bin/env python3
"""Knowledge audit: does every identifier a rule names exist in the framework releases the rule claims?

For every rule under skills/rules/ this collects the identifiers it names (CLI flags, dotted config keys,
env vars, metric names, source paths, error text in regex signals) from its signals, fix patch keys and
text, decides which framework each belongs to (the rule's applies_to.frameworks and the identifier's
shape), fetches the published source of the releases to check (``pip download --no-deps`` wheels or
sdists from the package index; Megatron-LM, slime and Megatron-DeepSpeed from their git tags when a
snapshot is on this machine; torch from the installed package) and looks each identifier up:

- flags: argparse option strings (``"--foo-bar"``) or dataclass/YAML field names, ``_``/``-`` equivalent;
  ``--sglang-X`` (slime) is sglang's ``--X``;
- config keys: the last component as a field/key name; for verl also the dotted path in the YAML defaults;
- env vars and constants: the name as a word in the source (NCCL's from the strings of libnccl);
- metrics: the last path component as a word; source paths: the file and the ``def``/``class``;
- error text: the longest literal run of each regex alternative, case-insensitive, in the source text.

Releases checked per (rule, framework): the newest release inside the rule's range (``versions:`` data,
half-open [introduced_in, fixed_in)) and one older one (the range's introduced_in, else a default older
release); identifiers with their own ``[since, until)`` (rule ``identifiers:`` data) are only required
inside that range, and the releases at its bounds are added to the check.

Writes docs/knowledge_audit.md (table) and docs/knowledge_audit.json. Not part of the test suite; needs
network access to the package index on first run (cache: ~/.cache/grpo-debug-audit).

    python scripts/audit_knowledge.py [--rules skills/rules] [--offline] [--only RULE_ID ...]
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("GRPO_DEBUG_AUDIT_CACHE", Path.home() / ".cache" / "grpo-debug-audit"))
INDEX_VERSION = 5

# ---------------------------------------------------------------------------------------------- frameworks
#: framework -> how to get its source. pypi: package; git: snapshot folder + tag prefix; installed: module.
FRAMEWORKS = {
    "verl": {"pypi": "verl", "older": "0.6.1"},
    "trl": {"pypi": "trl", "older": "0.19.1"},
    "openrlhf": {"pypi": "openrlhf", "older": "0.10.1"},
    "deepspeed": {"pypi": "deepspeed", "older": "0.19.2", "sdist": True},
    "vllm": {"pypi": "vllm", "older": "0.20.2"},
    "sglang": {"pypi": "sglang", "older": "0.5.5"},
    "ray": {"pypi": "ray", "older": "2.49.2", "binary": True},  # OOM-killer texts live in the raylet
    "transformers": {"pypi": "transformers", "older": "4.57.1"},
    "megatron": {"git": "NVIDIA+Megatron-LM", "tag": r"core_v(\d+\.\d+\.\d+)$", "older": "0.17.1",
                 "pypi_note": "megatron-core wheels lack megatron/training (the CLI flags); git tags used"},
    "slime": {"git": "THUDM+slime", "tag": r"v(\d+\.\d+\.\d+(?:\.post\d+)?)$", "older": "0.2.0"},
    "megatron-deepspeed": {"git": "deepspeedai+Megatron-DeepSpeed", "tag": None},
    "areal": {"git": "inclusionAI+AReaL", "tag": r"v(\d+\.\d+\.\d+(?:\.post\d+)?)$", "older": "0.3.4"},
    "accelerate": {"pypi": "accelerate", "older": "1.10.1"},
    "torch": {"installed": "torch"},
    "nccl": {"pypi": "nvidia-nccl-cu12", "binary": True, "older": None},
}
#: spellings in applies_to.frameworks -> audit framework
ALIASES = {"megatron-lm": "megatron", "pytorch": "torch", "torch.distributed": "torch", "hf-trainer": "transformers"}
#: a rule naming the key framework may name identifiers of these too
IMPLIED = {
    "slime": ["slime", "megatron", "sglang"], "relax": ["slime", "megatron", "sglang"],
    "openrlhf": ["openrlhf", "deepspeed", "vllm"], "trl": ["trl", "transformers"],
    "megatron-deepspeed": ["megatron-deepspeed", "deepspeed"], "verl": ["verl"], "areal": ["areal"],
    "accelerate": ["accelerate"],
}
UNCHECKABLE = {
    "relax": "Relax is not on the package index and no snapshot of its repository could be fetched",
    "rllm": "rLLM is not audited (not one of the frameworks the audit downloads)",
    "pipelinerl": "PipelineRL is not audited", "paddlenlp": "PaddleNLP is not audited",
    "vllm-ascend": "vllm-ascend is not audited",
}
EXTERNAL_FLAGS = {  # flags of tools that are not frameworks: docker, nvidia-smi, ulimit, pip, ...
    "--shm-size": "docker", "--ipc": "docker", "--ulimit": "docker", "--query-compute-apps": "nvidia-smi",
    "--format": "nvidia-smi", "--help": "any CLI", "--pid": "docker", "--force": "pip", "--include": "rsync/ray",
}
ENV_PREFIX = [("NCCL_", "nccl"), ("TORCH_NCCL_", "torch"), ("TORCHINDUCTOR_", "torch"), ("TORCH_", "torch"),
              ("PYTORCH_", "torch"), ("VLLM_", "vllm"), ("SGLANG_", "sglang"), ("RAY_", "ray")]
EXTERNAL_ENV = {"CUDA_": "a CUDA driver/runtime variable", "RLIMIT_": "a POSIX resource name",
                "TORCH_NCCL_": "read by torch's C++ ProcessGroupNCCL, absent from the CPU torch installed here",
                "MODEL_": "a launch-script variable"}
VERL_ROOTS = {"actor_rollout_ref", "algorithm", "data", "trainer", "critic", "reward_model", "actor", "rollout",
              "ref", "rollout_correction", "checkpoint_engine", "multi_turn", "custom_reward_function"}
DS_ROOTS = {"zero_optimization", "fp16", "bf16", "optimizer", "scheduler", "gradient_clipping"}


def canon(fw: str) -> str:
    return ALIASES.get(fw, fw)


# ------------------------------------------------------------------------------------------------ versions
def vkey(v: str):
    from grpo_debug.skills.schema import release_key
    return release_key(v)


def pip_versions(pkg: str, offline: bool) -> list[str]:
    f = CACHE / "versions" / f"{pkg}.json"
    if f.exists() and (offline or (Path(f).stat().st_mtime > __import__("time").time() - 86400)):
        return json.loads(f.read_text())
    if offline:
        return []
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", pkg], capture_output=True, text=True,
                         timeout=120).stdout
    m = re.search(r"Available versions:\s*(.+)", out)
    vs = [v.strip() for v in m.group(1).split(",")] if m else []
    vs = [v for v in vs if re.fullmatch(r"\d+(\.\d+)*(\.post\d+)?", v)]  # releases only
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(vs))
    return vs


def git_dir(spec: dict) -> Path | None:
    for base in (Path("/work/.mirror"), CACHE / "git"):
        p = base / spec["git"] / "repo"
        if p.is_dir():
            return p
    return None


def releases(fw: str, offline: bool) -> list[str]:
    """Known releases of a framework, newest first."""
    spec = FRAMEWORKS[fw]
    if "installed" in spec:
        try:
            from importlib.metadata import version
            return [version(spec["installed"]).split("+")[0]]
        except Exception:
            return []
    if "git" in spec:
        g = git_dir(spec)
        if not g:
            return []
        if not spec.get("tag"):
            return ["HEAD"]
        tags = subprocess.run(["git", "-C", str(g), "tag"], capture_output=True, text=True).stdout.split()
        vs = [m.group(1) for t in tags if (m := re.fullmatch(spec["tag"], t))]
        return sorted(set(vs), key=vkey, reverse=True)
    vs = pip_versions(spec["pypi"], offline)
    return sorted(vs, key=vkey, reverse=True)


# -------------------------------------------------------------------------------------------------- source
TEXT_EXT = (".py", ".yaml", ".yml", ".json", ".toml", ".cfg", ".pyi")


def _unpack(archive: Path, dest: Path, binary: bool) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    if archive.suffix == ".whl" or archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as z:
            for n in z.namelist():
                if n.endswith(TEXT_EXT) or (binary and (".so" in n or n.endswith("/raylet"))):
                    z.extract(n, dest)
    else:
        with tarfile.open(archive) as t:
            members = [m for m in t.getmembers() if m.isfile() and m.name.endswith(TEXT_EXT)]
            t.extractall(dest, members=members, filter="data")


def source_dir(fw: str, ver: str, offline: bool) -> tuple[Path | None, str]:
    """Unpacked source of one release (cached); returns (folder, how it was obtained) or (None, why not)."""
    spec = FRAMEWORKS[fw]
    dest = CACHE / "src" / f"{fw}-{ver}"
    if (dest / ".done").exists():
        return dest, (dest / ".done").read_text()
    if "installed" in spec:
        import importlib.util
        s = importlib.util.find_spec(spec["installed"])
        if not s or not s.submodule_search_locations:
            return None, f"{spec['installed']} is not installed"
        return Path(list(s.submodule_search_locations)[0]), f"installed {spec['installed']} {ver}"
    if "git" in spec:
        g = git_dir(spec)
        if not g:
            return None, f"no snapshot of {spec['git'].replace('+', '/')} on this machine (search tool: fetch)"
        ref = "HEAD" if ver == "HEAD" else next(t for t in subprocess.run(
            ["git", "-C", str(g), "tag"], capture_output=True, text=True).stdout.split()
            if (m := re.fullmatch(spec["tag"], t)) and m.group(1) == ver)
        dest.mkdir(parents=True, exist_ok=True)
        arch = subprocess.run(["git", "-C", str(g), "archive", "--format=tar", ref], capture_output=True)
        if arch.returncode:
            return None, f"git archive {ref} failed"
        import io
        with tarfile.open(fileobj=io.BytesIO(arch.stdout)) as t:
            members = [m for m in t.getmembers() if m.isfile() and m.name.endswith(TEXT_EXT)]
            t.extractall(dest, members=members, filter="data")
        how = f"git tag {ref} of {spec['git'].replace('+', '/')}"
        if ref == "HEAD":
            date = subprocess.run(["git", "-C", str(g), "log", "-1", "--format=%h %cs"], capture_output=True,
                                  text=True).stdout.strip()
            how = f"git HEAD ({date}) of {spec['git'].replace('+', '/')}"
        (dest / ".done").write_text(how)
        return dest, how
    if offline:
        return None, "offline and not cached"
    dl = CACHE / "dl"
    dl.mkdir(parents=True, exist_ok=True)
    pkg = spec["pypi"]
    stem = pkg.replace("-", "_")
    have = [p for p in dl.iterdir() if p.name.lower().startswith(f"{stem.lower()}-{ver}") or
            p.name.lower().startswith(f"{pkg.lower()}-{ver}")]
    have = [p for p in have if re.match(rf"(?i)({re.escape(stem)}|{re.escape(pkg)})-{re.escape(ver)}[-.]", p.name)]
    if not have:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", f"{pkg}=={ver}", "-d", str(dl)]
        if spec.get("sdist"):
            cmd[4:4] = ["--no-binary", ":all:", "--no-build-isolation"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if r.returncode:
            return None, f"pip download {pkg}=={ver} failed: {r.stderr.strip().splitlines()[-1:]}"
        have = [p for p in dl.iterdir() if re.match(rf"(?i)({re.escape(stem)}|{re.escape(pkg)})-{re.escape(ver)}[-.]",
                                                   p.name)]
    if not have:
        return None, f"no file for {pkg}=={ver}"
    _unpack(have[0], dest, spec.get("binary", False))
    how = f"{have[0].name} from the package index"
    (dest / ".done").write_text(how)
    return dest, how


_STR_LIT = re.compile(r"""["'](--[A-Za-z][\w.-]*)["']""")
_FSTR_FLAG = re.compile(r"""f["']--\{\w+\}\.([\w-]+)["']""")
_CONCAT = re.compile(r"""(?<=[^\\])(["'])\s*\n\s*[rfbuRFBU]{0,2}\1""")
_FIELD = re.compile(r"^[ \t]*([A-Za-z_]\w*)[ \t]*:(?!:)", re.M)  # dataclass fields, YAML keys, dict keys
_DICTKEY = re.compile(r"""["']([A-Za-z_][\w.]*)["']\s*:""")
_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", re.M)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class Index:
    how: str
    words: dict[str, str] = field(default_factory=dict)  # word -> first file
    flags: dict[str, str] = field(default_factory=dict)  # normalised --flag -> first file
    fields: dict[str, str] = field(default_factory=dict)
    defs: dict[str, list[str]] = field(default_factory=dict)  # def/class name -> files (up to 50)
    files: dict[str, str] = field(default_factory=dict)  # basename -> relative path
    yaml_paths: dict[str, str] = field(default_factory=dict)
    texts: list[tuple[str, str]] = field(default_factory=list)  # (rel path, lowered whitespace-collapsed text)


def _norm_flag(f: str) -> str:
    return f.replace("_", "-").lower()


def _flatten(d, prefix=""):
    if isinstance(d, dict):
        for k, v in d.items():
            if isinstance(k, str):
                p = f"{prefix}.{k}" if prefix else k
                yield p
                yield from _flatten(v, p)


def _binary_strings(path: Path) -> str:
    data = path.read_bytes()
    return "\n".join(m.decode("ascii", "replace") for m in re.findall(rb"[\x20-\x7e]{6,}", data))


def build_index(root: Path, how: str, fw: str) -> Index:
    ix = Index(how=how)
    binary = FRAMEWORKS[fw].get("binary") or fw == "torch"
    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        rel = str(p.relative_to(root))
        if "/tests/" in f"/{rel}" or "/test/" in f"/{rel}":
            continue
        if p.name.endswith(TEXT_EXT):
            try:
                text = p.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
        elif binary and (".so" in p.name or p.name == "raylet") and p.stat().st_size < 600_000_000 and (
                fw == "nccl" or "c10" in p.name or "torch_python" in p.name or p.name in ("_raylet.so", "raylet")):
            text = _binary_strings(p)
        else:
            continue
        ix.files.setdefault(p.name, rel)
        for w in set(_WORD.findall(text)):
            ix.words.setdefault(w, rel)
        for f in _STR_LIT.findall(text):
            ix.flags.setdefault(_norm_flag(f), rel)
        for f in _FSTR_FLAG.findall(text):  # f"--{prefix}.max_norm" -> any --<group>.max_norm
            ix.flags.setdefault(_norm_flag("--*." + f), rel)
        for f in _FIELD.findall(text) + _DICTKEY.findall(text):
            ix.fields.setdefault(f, rel)
        for d in set(_DEF.findall(text)):
            fl = ix.defs.setdefault(d, [])
            if len(fl) < 50:
                fl.append(rel)
        if p.suffix in (".yaml", ".yml") and "config" in rel:
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError:
                data = None
            for k in _flatten(data):
                ix.yaml_paths.setdefault(k, rel)
        joined = _CONCAT.sub("", text)  # "a b " f"c" -> one literal, as Python reads it
        ix.texts.append((rel, re.sub(r"\s+", " ", joined.lower())))
    return ix


_INDEXES: dict[tuple[str, str], Index | str] = {}


def get_index(fw: str, ver: str, offline: bool) -> Index | str:
    key = (fw, ver)
    if key in _INDEXES:
        return _INDEXES[key]
    pk = CACHE / "index" / f"{fw}-{ver}.v{INDEX_VERSION}.pickle"
    if pk.exists():
        _INDEXES[key] = pickle.loads(pk.read_bytes())
        return _INDEXES[key]
    root, how = source_dir(fw, ver, offline)
    if root is None:
        _INDEXES[key] = how
        return how
    print(f"  indexing {fw} {ver} ({how})", file=sys.stderr)
    ix = build_index(root, how, fw)
    pk.parent.mkdir(parents=True, exist_ok=True)
    pk.write_bytes(pickle.dumps(ix))
    _INDEXES[key] = ix
    return ix


# ------------------------------------------------------------------------------------ identifier extraction
@dataclass
class Ident:
    name: str
    kind: str  # flag, key, env, metric, message, path, symbol, name
    origin: str  # where in the rule
    lookup: str = ""  # what is searched, when not the name
    frameworks: list[str] = field(default_factory=list)  # candidates; empty = decided at check time
    external: str = ""  # why it is not a framework's identifier


FLAG_RE = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*(?:\.[A-Za-z_][\w-]*)*")
ENV_RE = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]\b")
DOTTED_RE = re.compile(r"(?<![\w./-])[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+(?![\w/-])")
PYPATH_RE = re.compile(r"(?<![\w.-])[\w/]*\w\.py\b")
TICK_RE = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*_[A-Za-z0-9_]+)`")
FILE_EXT = (".py", ".yaml", ".yml", ".json", ".md", ".txt", ".pt", ".html", ".cpp", ".conf", ".out", ".io", ".org",
            ".com", ".ai", ".safetensors", ".sh", ".log", ".cu", ".h")
MODULE_ROOTS = {"torch", "verl", "openrlhf", "slime", "relax", "vllm", "sglang", "ray", "deepspeed", "megatron", "trl",
                "transformers", "rllm"}
NOT_KEYS = {"json", "requests", "urllib3", "importlib", "client", "self", "tokenizer", "llm", "e", "i", "tensor",
            "next_token_ids", "device_mesh", "versions", "trajectory", "step", "nan", "skipped", "decoder",
            "self_attention", "github", "docs", "www", "arxiv", "huggingface", "raylet", "resp", "model"}


SNAKE_RE = re.compile(r"(?<![\w./-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w/(-])")
QUOTED_RE = re.compile(r"(?:(?<=\s)|(?<=^)|(?<=\())'([^']{16,}?)'(?=[\s,.;:)]|$)")
SRC_DEF_RE = re.compile(r"([\w/]+\.py)[: ]+(?:def |class )?([A-Za-z_][A-Za-z0-9_]*[a-z_][A-Za-z0-9_]*)\b(?!\.py)")


#: names of this project's own tools, pattern classes and symptom codes that rule prose mentions
INTERNAL = {"pi_old", "pi_rollout", "pi_theta", "nan_guide", "stream_safety", "muon_clipping", "rollout_mismatch",
            "config_error", "loss_plateau",
            "logprob_mismatch", "check_config", "probe_host", "step1_mismatch", "zero_reward", "length_cap"}
#: text a message comes from when it is not in any audited Python source
EXTERNAL_MESSAGE = [
    (re.compile(r"(?i)cuda error|illegal memory access|watchdog|worknccl|nccl work|/dev/shm|ncclcumem|cumem"),
     "CUDA runtime / NCCL / torch's C++ distributed code (the torch installed here is a CPU build)"),
    (re.compile(r"(?i)no such file or directory|too many open files|errno"), "an operating-system error text"),
]


#: identifiers confirmed by hand in a repository copy (the search tool's index), not in a published release: they
#: stay "unverified" (no release was checked) and the note says where they were seen
SEEN_IN_INDEX = {
    "relax.engine.rollout.forge_load.generate_rollout":
        "seen in redai-studio/Relax relax/engine/rollout/forge_load.py (search index copy @7a346d39), not a release",
    "forge_load.generate_rollout":
        "seen in redai-studio/Relax relax/engine/rollout/forge_load.py (search index copy @7a346d39), not a release",
    "relax/entrypoints/train.py": "seen in redai-studio/Relax (search index copy @c0beb154), not a release",
}


def message_runs(quoted: str) -> list[str]:
    """Literal runs of a quoted message with placeholders ('(...)', '{n}', '...', 'X')."""
    if len(quoted.split()) < 4:
        return []
    parts = re.split(r"\(\.\.\.\)|\{[^}]*\}|\.\.\.|\([A-Z]\)|\bX\b|\bY\b|\bN\b|\d+", quoted)
    runs = [p.strip(" ,.:;'\"") for p in parts]
    runs = [r for r in runs if len(r) >= 16 and " " in r]
    return [max(runs, key=len)] if runs else []


def literal_runs(pattern: str) -> list[str]:
    """The longest literal run of each top-level alternative of a regex (error text the rule expects)."""
    alts, depth, cur = [], 0, ""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            cur += pattern[i:i + 2]; i += 2; continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "|" and depth == 0:
            alts.append(cur); cur = ""
        else:
            cur += c
        i += 1
    alts.append(cur)
    out = []
    for a in alts:
        a = re.sub(r"\(\?[imsx]+\)", "", a)
        a = re.sub(r"\\[sSdDwWbB][*+?]?|\[[^\]]*\][*+?]?(\{\d*,?\d*\})?|\.[*+?]\??|\{\d*,?\d*\}|\(\?:|[()^$|?*+]",
                   "\x00", a)
        a = re.sub(r"\\(.)", r"\1", a)
        runs = [r.strip() for r in a.split("\x00")]
        runs = [r for r in runs if len(r) >= 12 and (" " in r or "_" in r)]
        if runs:
            out.append(max(runs, key=len))
    return out


def extract(raw: dict, rule) -> list[Ident]:
    from grpo_debug.skills.schema import ConfigSignal, DetectorSignal, EventSignal, RegexSignal
    found: dict[tuple[str, str], Ident] = {}

    def add(name, kind, origin, **kw):
        name = name.strip().rstrip(".-")
        if len(name) < 3 or "xxx" in name.lower() or name.startswith("#"):  # placeholders, YAML comments
            return
        if kind == "name" and (name in INTERNAL or any(p.isdigit() for p in name.split("_"))):
            return
        if kind == "path" and name.split("/")[0] in ("probes", "tools", "skills", "server") and (
                ROOT / name.split("::")[0]).exists():
            kind = "own"  # this repository's own files
        found.setdefault((kind, name), Ident(name=name, kind=kind, origin=origin, **kw))

    texts = []
    for k in ("title", "what", "why"):
        texts.append((k, str(raw.get(k, ""))))
    fx = raw.get("fix") or {}
    texts.append(("fix.summary", str(fx.get("summary", ""))))
    texts += [("fix.steps", str(s)) for s in fx.get("steps", []) or []]
    texts.append(("fix.safety_note", str(fx.get("safety_note", ""))))
    texts += [("next_checks", str(s)) for s in raw.get("next_checks", []) or []]
    for origin, t in texts:
        t = re.sub(r"https?://\S+", " ", t)
        for f in FLAG_RE.findall(t):
            add(f, "flag", origin)
        for e in ENV_RE.findall(t):
            add(e, "env" if any(e.startswith(p) for p, _ in ENV_PREFIX) or any(e.startswith(p) for p in EXTERNAL_ENV)
                else "symbol", origin)
        for p in PYPATH_RE.findall(t):
            add(p, "path", origin)
        for d in DOTTED_RE.findall(t):
            if d.endswith(FILE_EXT) or d.split(".")[0] in NOT_KEYS or re.search(r"\.(com|org|io|ai|html)\b", d):
                continue
            first = d.split(".")[0]
            if first in MODULE_ROOTS or first.endswith(("_trainer", "_workers")) or re.search(r"\._", d):
                add(d, "path", origin)
            elif first in ("args", "config", "cfg"):  # an attribute of the parsed arguments
                add(d, "key", origin, lookup=d.split(".", 1)[1])
            else:
                add(d, "key", origin)
        for w in TICK_RE.findall(t) + SNAKE_RE.findall(t):
            if not w.isupper():
                add(w, "name", origin)
        for q in QUOTED_RE.findall(t):
            for r in message_runs(q):
                add(r, "message", origin)
    for src in raw.get("sources", []) or []:
        ref, note = str(src.get("ref", "")), str(src.get("note", ""))
        if ref.startswith(("http", "seed:", "case ")):
            continue
        for path, func in SRC_DEF_RE.findall(ref):
            add(f"{path}::{func}", "path", "sources")
        for p in PYPATH_RE.findall(ref):
            add(p, "path", "sources")
        for q in QUOTED_RE.findall(ref):
            for r in message_runs(q):
                add(r, "message", "sources")
    for sig in rule.match.signals():
        if isinstance(sig, ConfigSignal):
            for k in sig.all_keys():
                if not k.startswith("versions."):
                    add(k, "key", "match.config")
        elif isinstance(sig, RegexSignal):
            for r in literal_runs(sig.pattern):
                add(r, "message", "match.regex")
        elif isinstance(sig, EventSignal) and sig.message:
            for r in literal_runs(sig.message):
                add(r, "message", f"match.event:{sig.event}")
        elif isinstance(sig, DetectorSignal):
            keys = sig.params.get("keys") or sig.params.get("key")
            if isinstance(keys, str):
                for k in keys.split("|"):
                    k = k.strip("^$() ")
                    if re.fullmatch(r"[\w/.-]+", k) and ("_" in k or "/" in k):
                        add(k, "metric", f"match.detector:{sig.detector}")
    for k in (rule.fix.patch or {}):
        if k.startswith("--"):
            add(k, "flag", "fix.patch")
        else:
            add(k, "key", "fix.patch")
    for i in rule.identifiers:
        add(i.name, i.kind, "identifiers")
    return list(found.values())


# -------------------------------------------------------------------------------------------------- checks
def candidates(ident: Ident, rule_fws: list[str]) -> tuple[list[str], str, str]:
    """(audit frameworks to search, the name to search, external reason or '')."""
    fws = [canon(f) for f in rule_fws]
    implied: list[str] = []
    for f in fws:
        for g in IMPLIED.get(f, [f]):
            if g not in implied:
                implied.append(g)
    checkable = [f for f in implied if f in FRAMEWORKS]
    name = ident.lookup or ident.name
    if ident.kind == "flag" and ident.name.startswith("--sglang-"):  # slime/Relax expose sglang's args so
        return ["sglang"], "--" + ident.name[len("--sglang-"):], ""
    for i in ident_data(ident):
        return [canon(i.framework)], name, ""
    if ident.kind == "flag":
        if ident.name in EXTERNAL_FLAGS:
            return [], name, f"a {EXTERNAL_FLAGS[ident.name]} option, not a framework's"
        if ident.name.startswith("--sglang-"):  # slime/Relax expose every sglang server arg with this prefix
            return ["sglang"], "--" + ident.name[len("--sglang-"):], ""
        if "." in ident.name:
            return ["openrlhf"], name, ""
        if ident.name in ("--nproc_per_node", "--nproc-per-node"):
            return ["torch"], name, ""
        if ident.name in ("--head", "--address", "--port", "--node-ip-address", "--ray-address",
                          "--runtime-env-json", "--num-gpus") and "ray" in fws + ["ray"]:
            return ["ray"] + checkable, name, ""
    if ident.kind in ("env", "symbol"):
        for p, why in EXTERNAL_ENV.items():
            if ident.name.startswith(p):
                return [], name, why
        for p, f in ENV_PREFIX:
            if ident.name.startswith(p):
                return [f] + [c for c in checkable if c != f], name, ""
    if ident.kind == "key" and "." in name and name.split(".")[0] in VERL_ROOTS and "verl" in fws:
        return ["verl"], name, ""
    if ident.kind == "key" and name.split(".")[0] in DS_ROOTS and "deepspeed" in implied:
        return ["deepspeed"] + [c for c in checkable if c != "deepspeed"], name, ""
    if ident.kind == "key" and name.startswith("sglang_") and ("slime" in fws or "relax" in fws):
        return ["sglang"], name[len("sglang_"):], ""
    if ident.kind == "message":
        extra = [f for f in ("torch", "ray", "transformers") if f not in checkable]
        return checkable + extra, name, ""
    if ident.kind == "path":
        first = name.split(".")[0].split("/")[0]
        if first in FRAMEWORKS:
            return [first], name, ""
        if first in UNCHECKABLE:
            return [], name, UNCHECKABLE[first]
    if not checkable:
        why = "; ".join(UNCHECKABLE.get(f, f"{f} is not audited") for f in fws) or "the rule names no framework"
        return [], name, why
    return checkable, name, ""


_CURRENT_RULE = None


def ident_data(ident: Ident):
    """The rule's ``identifiers:`` entries that speak for this identifier: the same name (a flag and the key it
    sets count as one: ``--rollout.max_new_tokens`` / ``rollout.max_new_tokens``), the same source file for
    ``file.py::function``, or, for error text, one message containing the other (a quote cut at a placeholder);
    an entry of exactly the same name, when there is one, is the only one."""
    out = []
    bare = ident.name.lstrip("-")
    for i in (_CURRENT_RULE.identifiers if _CURRENT_RULE else []):
        if i.name == ident.name or i.name.lstrip("-") == bare:
            out.append(i)
        elif ident.kind == "path" and i.kind == "path" and i.name.split("::")[0] == ident.name.split("::")[0]:
            out.append(i)
        elif ident.kind == "message" and i.kind == "message" and len(i.name) >= 16 and len(ident.name) >= 16 and (
                i.name.lower() in ident.name.lower() or ident.name.lower() in i.name.lower()):
            out.append(i)
    # an entry of the very name decides alone: a generic phrase ('cannot be scheduled right now', in every release)
    # given its own entry is not bound by the range of a longer message that contains it
    exact = [i for i in out if i.name == ident.name]
    return exact or out


def lookup(ix: Index, kind: str, name: str) -> str | None:
    """Where ``name`` is found in one release (a file, with how), or None."""
    if kind == "flag":
        n = _norm_flag(name)
        if n in ix.flags:
            return f"{ix.flags[n]} (option string)"
        if "." in n and "--*." + n.split(".", 1)[1] in ix.flags:
            return f"{ix.flags['--*.' + n.split('.', 1)[1]]} (option --{{group}}.{n.split('.', 1)[1]})"
        bare = name.lstrip("-")
        for f in {bare.replace("-", "_"), bare.replace(".", "_").replace("-", "_")}:
            if f in ix.fields:
                return f"{ix.fields[f]} (field {f})"
        return None
    if kind == "key":
        if name in ix.yaml_paths:
            return f"{ix.yaml_paths[name]} (YAML path)"
        last = name.split(".")[-1]
        if last in ix.fields:
            return f"{ix.fields[last]} (field {last})"
        if name in ix.fields:
            return f"{ix.fields[name]} (key)"
        if "." in name and _norm_flag("--" + name) in ix.flags:  # OpenRLHF's dotted flags set dotted keys
            return f"{ix.flags[_norm_flag('--' + name)]} (option --{name})"
        if "." not in name and _norm_flag("--" + name) in ix.flags:  # argparse dest of --x-y / --x_y
            return f"{ix.flags[_norm_flag('--' + name)]} (option --{name})"
        return None
    if kind in ("env", "symbol"):
        return f"{ix.words[name]}" if name in ix.words else None
    if kind == "name":  # a backticked name: a config field, a function or any word of the source
        if name + ".py" in ix.files:
            return ix.files[name + ".py"]
        for table, how in ((ix.fields, "field"), (ix.defs, "def"), (ix.words, "word")):
            if name in table:
                where = table[name][0] if how == "def" else table[name]
                return f"{where} ({how})"
        return None
    if kind == "metric":
        last = name.split("/")[-1]
        if last in ix.words:
            return f"{ix.words[last]} (word {last})"
        for rel, t in ix.texts:
            if name.lower() in t:
                return rel
        return None
    if kind == "path" and "::" in name:  # file.py::function from a source note
        path, func = name.split("::")
        base = path.split("/")[-1]
        files = ix.defs.get(func, [])
        same = [f for f in files if f.endswith("/" + base) or f == base]
        if same:
            return f"{same[0]} (def {func})"
        if base in ix.files and func in ix.words:
            return f"{ix.files[base]} ({func}, not a def)"
        return None
    if kind == "path":
        if name.endswith(".py"):
            base = name.split("/")[-1]
            if base in ix.files:
                full = ix.files[base]
                tail = name.split("/", 1)[1] if name.count("/") > 1 else name  # python/ray/x.py -> ray/x.py
                if "/" in name and not full.endswith(tail):
                    # files[] keeps the first file of that name: another one may sit at the very path
                    same = next((rel for rel, _ in ix.texts if rel.endswith("/" + tail) or rel == tail), None)
                    # folder differs: report where the file is now
                    return same or f"{full} (file; path differs)"
                return full
            return None
        parts = name.split(".")
        last = parts[-1]
        mod = parts[-2] if len(parts) >= 2 else ""
        if f"{mod}.py" in ix.files and (last in ix.defs or f"{last}.py" in ix.files or last in ix.words):
            return f"{ix.files[mod + '.py']} ({last})"
        if last + ".py" in ix.files:
            return ix.files[last + ".py"]
        if mod + ".py" not in ix.files and last in ix.defs and len(parts) <= 2:
            return f"{ix.defs[last][0]} (def {last})"
        return None
    if kind == "message":
        if " " not in name and name + ".py" in ix.files:  # a module named in a traceback pattern
            return ix.files[name + ".py"]
        n = re.sub(r"\s+", " ", name.lower())
        for rel, t in ix.texts:
            if n in t:
                return rel
        # a log line with values filled in ('Downcasting torch.float32 to torch.float16' from 'Downcasting %s
        # to %s'): the longest run between value-like words (dotted, numeric) must be in the source
        runs = [r.strip() for r in re.split(r"\S*[\d.(){}=]\S*", n)]
        runs = [r for r in runs if len(r) >= 10 and r != n]
        if runs:
            part = max(runs, key=len)
            for rel, t in ix.texts:
                if part in t:
                    return f"{rel} (the text around the values: {part!r})"
        return None
    return None


def check(rule, raw, offline: bool, rel_cache: dict) -> list[dict]:
    global _CURRENT_RULE
    _CURRENT_RULE = rule
    rows = []
    rule_fws = rule.applies_to.frameworks
    for ident in extract(raw, rule):
        fws, name, external = candidates(ident, rule_fws)
        row = {"rule": rule.id, "identifier": ident.name, "kind": ident.kind, "origin": ident.origin,
               "framework": "", "versions_checked": [], "status": "", "where": "", "missing_in": [], "note": ""}
        if ident.kind == "own":
            ok = (ROOT / ident.name.split("::")[0]).exists()
            row.update(framework="grpo-debug", status="found" if ok else "missing",
                       where=ident.name.split("::")[0] if ok else "", note="this repository's own file")
            rows.append(row)
            continue
        if external or not fws:
            row.update(status="unverified", note=external or "no framework to check")
            rows.append(row)
            continue
        data = ident_data(ident)
        results = []  # (fw, {ver: where|None})
        for fw in fws:
            if fw not in rel_cache:
                rel_cache[fw] = releases(fw, offline)
            rels = rel_cache[fw]
            if not rels:
                results.append((fw, None, f"no releases of {fw} available here"))
                continue
            vers = plan_versions(rule, fw, rels, data)
            per = {}
            why_not = ""
            for v, required in vers:
                ix = get_index(fw, v, offline)
                if isinstance(ix, str):
                    why_not = ix
                    continue
                per[v] = (lookup(ix, ident.kind, name), required)
            results.append((fw, per, why_not))
        best = None
        for fw, per, why_not in results:
            if not per:
                continue
            ok_req = all(w for w, req in per.values() if req)
            any_found = any(w for w, _ in per.values())
            score = (ok_req and any_found, any_found)
            if best is None or score > best[0]:
                best = (score, fw, per)
        if best is None:
            row.update(status="unverified", framework="/".join(fws),
                       note="; ".join(w for _, _, w in results if w) or "no source available")
        else:
            (_, any_found), fw, per = best
            row["framework"] = fw + (f" (via {name})" if name != ident.name and ident.kind == "flag" else "")
            row["versions_checked"] = [v for v in per]
            miss = [v for v, (w, req) in per.items() if req and not w]
            outside = [v for v, (w, req) in per.items() if not req]
            row["missing_in"] = miss
            row["where"] = next((f"{v}: {w}" for v, (w, _) in per.items() if w), "")
            ext = next((why for rx, why in EXTERNAL_MESSAGE if rx.search(ident.name)), "")
            if not any_found and ident.kind == "message" and ext:
                row.update(status="unverified", framework="/".join(fws[:3]),
                           note=f"not in the audited Python sources; comes from {ext}")
                rows.append(row)
                continue
            unaudited = [f for f in rule_fws if canon(f) in UNCHECKABLE]
            if not any_found and unaudited:
                row.update(status="unverified", framework="/".join(unaudited),
                           note=f"not in the checked sources ({', '.join(f for f, p, _ in results if p)}); "
                                + "; ".join(UNCHECKABLE[canon(f)] for f in unaudited))
                rows.append(row)
                continue
            if not any_found:
                row["status"] = "missing"
                row["framework"] = "/".join(f for f, p, _ in results if p)
                row["versions_checked"] = sorted({v for _, p, _ in results if p for v in p}, key=str)
            elif miss:
                row["status"] = "missing"
            else:
                row["status"] = "found"
            if outside:
                row["note"] = "outside its range (not required): " + ", ".join(
                    f"{v} {'has it' if per[v][0] else 'lacks it'}" for v in outside)
        rows.append(row)
    return rows


def plan_versions(rule, fw: str, rels: list[str], data) -> list[tuple[str, bool]]:
    """[(release, required)]: the newest and one older release inside the rule's range for ``fw``, plus the
    bounds of the identifier's own range; ``required`` = inside the identifier's range too."""
    spec = FRAMEWORKS[fw]
    rng = None
    for k, v in rule.versions.items():
        if canon(k) == fw:
            rng = v
    lo = vkey(rng.introduced_in) if rng and rng.introduced_in else None
    hi = vkey(rng.fixed_in) if rng and rng.fixed_in else None

    def in_rule(v):
        k = vkey(v) if v != "HEAD" else None
        return k is None or ((lo is None or k >= lo) and (hi is None or k < hi))

    inr = [v for v in rels if in_rule(v)] or rels[:1]
    chosen = [inr[0]]
    older = None
    if rng and rng.introduced_in and rng.introduced_in in rels:
        older = rng.introduced_in
    elif spec.get("older") and spec["older"] in inr:
        older = spec["older"]
    elif len(inr) > 1 and spec.get("older") is not None and "installed" not in spec:
        older = inr[min(len(inr) - 1, 8)]
    if older and older not in chosen:
        chosen.append(older)
    ranges = [(vkey(d.since) if d.since else None, vkey(d.until) if d.until else None) for d in data
              if canon(d.framework) == fw]
    for d in data:
        if canon(d.framework) != fw:
            continue
        if d.since and d.since in rels and d.since not in chosen:
            chosen.append(d.since)
        if d.until:
            before = [v for v in rels if v != "HEAD" and vkey(v) < vkey(d.until)]
            if before and before[0] not in chosen:
                chosen.append(before[0])

    def required(v):
        if not ranges or v == "HEAD":
            return True
        k = vkey(v)
        return any((a is None or k >= a) and (b is None or k < b) for a, b in ranges)

    return [(v, required(v)) for v in chosen]


# -------------------------------------------------------------------------------------------------- report
def _by_release(vs: list[str]) -> list[str]:
    return sorted(vs, key=lambda v: vkey(v) if v != "HEAD" else ())


def write_reports(rows: list[dict], out_dir: Path, meta: dict) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = {s: sum(r["status"] == s for r in rows) for s in ("found", "missing", "unverified")}
    (out_dir / "knowledge_audit.json").write_text(json.dumps({"meta": meta, "counts": counts, "rows": rows},
                                                             indent=1, ensure_ascii=False) + "\n")
    lines = ["# Knowledge audit", "",
             "Generated by `python scripts/audit_knowledge.py` (not part of the test run): every identifier a rule",
             "names, looked up in the published source of the framework releases the rule claims. `missing`: absent",
             "from a release inside the rule's (or the identifier's) version range; `unverified`: no source could be",
             "checked, with the reason. Machine-readable: `docs/knowledge_audit.json`.", "",
             f"Identifiers checked: {len(rows)}; found {counts['found']}, missing {counts['missing']}, "
             f"unverified {counts['unverified']}.", "",
             "Releases audited: " + "; ".join(f"{k} {', '.join(_by_release(v))}"
                                              for k, v in sorted(meta["releases"].items())), "",
             "| rule | identifier | kind | framework | versions checked | status | where found / note |",
             "| --- | --- | --- | --- | --- | --- | --- |"]

    def cell(s):
        return str(s).replace("|", "\\|").replace("\n", " ")

    order = {"missing": 0, "unverified": 1, "found": 2}
    for r in sorted(rows, key=lambda r: (order[r["status"]], r["rule"], r["identifier"])):
        status = r["status"] + (f" in {', '.join(r['missing_in'])}" if r["status"] == "missing" and r["missing_in"]
                                else "")
        where = r["where"] or ""
        if r["note"]:
            where = (where + "; " if where else "") + r["note"]
        lines.append(f"| {cell(r['rule'])} | `{cell(r['identifier'])}` | {r['kind']} | {cell(r['framework'])} | "
                     f"{cell(', '.join(r['versions_checked']))} | {status} | {cell(where)} |")
    (out_dir / "knowledge_audit.md").write_text("\n".join(lines) + "\n")


def fill_open_ranges(rules_dir: Path, rows: list[dict]) -> int:
    """Give every framework a rule names (applies_to.frameworks) a version range: where a rule has none for a
    framework, add an open one listing the releases this audit checked for it (or why none could be checked).
    Existing ranges are left alone. Returns the number of entries added."""
    import json as _json

    from grpo_debug.skills.knowledge import load_yaml
    checked: dict[tuple[str, str], set[str]] = {}
    missing: set[tuple[str, str]] = set()
    for r in rows:
        fw = r["framework"].split(" ")[0]
        if fw in FRAMEWORKS:
            checked.setdefault((r["rule"], fw), set()).update(r["versions_checked"])
            if r["status"] == "missing":
                missing.add((r["rule"], fw))
    added = 0
    for f in sorted(rules_dir.rglob("*.yaml")):
        text = f.read_text()
        raw = load_yaml(text)
        have = set((raw.get("versions") or {}).keys())
        new = []
        for name in (raw.get("applies_to") or {}).get("frameworks", []):
            if name in have:
                continue
            fw = canon(name)
            vs = sorted(checked.get((raw["id"], fw), set()) - {"HEAD"}, key=vkey)
            if fw in UNCHECKABLE:
                entry = {"note": f"not audited: {UNCHECKABLE[fw]}"}
            elif fw not in FRAMEWORKS:
                entry = {"note": f"not audited: {name} is not one of the frameworks the audit downloads"}
            elif vs and (raw["id"], fw) in missing:
                entry = {"checked": vs, "note": "open range; identifiers missing from a release checked are listed "
                                                "in docs/knowledge_audit.md"}
            elif vs:
                entry = {"checked": vs, "note": "open range: every identifier of the rule attributed to this framework "
                                                "was found in the releases checked"}
            else:
                entry = {"note": "open range: the rule names no identifier of this framework to check"}
            new.append(f"  {name}: {{" + ", ".join(f"{k}: {_json.dumps(v)}" for k, v in entry.items()) + "}")
        if not new:
            continue
        lines = text.rstrip("\n").split("\n")
        if "versions" in (raw or {}):
            at = lines.index("versions:") + 1
            lines[at:at] = new
        else:
            at = lines.index("identifiers:") if "identifiers:" in lines else len(lines)
            lines[at:at] = ["versions:"] + new
        f.write_text("\n".join(lines) + "\n")
        added += len(new)
    return added


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rules", default=str(ROOT / "skills" / "rules"))
    ap.add_argument("--out", default=str(ROOT / "docs"))
    ap.add_argument("--offline", action="store_true", help="use only what is cached")
    ap.add_argument("--only", nargs="*", default=[], help="rule ids to audit (default: all)")
    ap.add_argument("--no-write", action="store_true", help="print the missing rows, write nothing")
    ap.add_argument("--fill-ranges", action="store_true",
                    help="add an open version range (with the releases checked) to every framework a rule names "
                         "that has none yet; edits the rule files")
    a = ap.parse_args(argv)
    from grpo_debug.skills.loader import load_rule_file
    from grpo_debug.skills.knowledge import load_yaml
    rows, rel_cache = [], {}
    files = sorted(Path(a.rules).rglob("*.yaml"))
    for f in files:
        raw = load_yaml(f.read_text())
        (rule,) = load_rule_file(f)
        if a.only and rule.id not in a.only:
            continue
        rows += check(rule, raw, a.offline, rel_cache)
    for r in rows:
        if r["status"] == "unverified" and r["identifier"] in SEEN_IN_INDEX:
            r["note"] = SEEN_IN_INDEX[r["identifier"]] + "; " + r["note"]
    used = sorted({(r["framework"].split(" ")[0], v) for r in rows for v in r["versions_checked"]})
    rel: dict[str, list[str]] = {}
    for fw, v in used:
        if fw in FRAMEWORKS:
            rel.setdefault(fw, []).append(v)
    meta = {"rules": len(files), "releases": rel,
            "sources": {f"{fw} {v}": (ix.how if isinstance(ix, Index) else ix) for (fw, v), ix in _INDEXES.items()}}
    counts = {s: sum(r["status"] == s for r in rows) for s in ("found", "missing", "unverified")}
    for r in rows:
        if r["status"] == "missing":
            print(f"MISSING {r['rule']}: {r['identifier']} [{r['kind']}] {r['framework']} in "
                  f"{r['missing_in'] or r['versions_checked']} {r['note']}")
    print(f"identifiers {len(rows)}: found {counts['found']}, missing {counts['missing']}, "
          f"unverified {counts['unverified']}")
    if not a.no_write:
        write_reports(rows, Path(a.out), meta)
    if a.fill_ranges:
        print(f"version ranges added: {fill_open_ranges(Path(a.rules), rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
