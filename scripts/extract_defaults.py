"""Extract a framework's config defaults from each of its releases' own source, into ``skills/defaults/<fw>.json``.

    python scripts/extract_defaults.py verl /path/to/verl.git  [--min 0.3.0]
    python scripts/extract_defaults.py trl  /path/to/trl.git   [--min 0.14.0]

The argument is a git directory (a clone, or ``git --bare``) holding the release tags. For every stable tag
(``vX.Y.Z``, ``vX.Y.Z.postN``; no rc/dev) at or above ``--min``:

- verl: the full default trainer config, ``verl/trainer/config/_generated_ppo_trainer.yaml`` (written by verl's
  ``scripts/generate_trainer_config.sh`` from the Hydra defaults since 0.5) or, before it existed,
  ``verl/trainer/config/ppo_trainer.yaml``; flattened to dotted keys (``actor_rollout_ref.rollout.max_num_batched_tokens``);
  only scalars are kept (an ``${...}`` interpolation is kept as its text, which says what it follows);
- trl: the dataclass fields of ``GRPOConfig`` in ``trl/trainer/grpo_config.py`` whose default is a literal
  (``field(default=1e-6)`` or ``x: int = 5``), read with ``ast`` (no import of TRL); fields inherited from
  ``transformers.TrainingArguments`` and not redeclared are not there.

The output keeps, per key, runs of releases with the same value: ``[[first, last, value], ...]`` as indices into
``releases`` (each with tag, version, commit and the file read), so a lookup says "default of verl 0.8.0" or, with no
version, the values across releases. Prints the counts (releases, keys, keys whose default changed).
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
_STABLE = re.compile(r"^v(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?$")
VERL_FILES = ("verl/trainer/config/_generated_ppo_trainer.yaml", "verl/trainer/config/ppo_trainer.yaml")
TRL_FILE = "trl/trainer/grpo_config.py"


def _git(gitdir: str, *args: str) -> str:
    p = subprocess.run(["git", "--git-dir", gitdir, *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise FileNotFoundError(p.stderr.strip()[:300])
    return p.stdout


def stable_tags(gitdir: str, minimum: tuple[int, ...]) -> list[tuple[tuple[int, ...], str]]:
    """(version tuple, tag) of the stable release tags >= ``minimum``, oldest first."""
    out = []
    for tag in _git(gitdir, "tag").split():
        m = _STABLE.match(tag)
        if m:
            v = tuple(int(x or 0) for x in m.groups())
            if v[:3] >= minimum:
                out.append((v, tag))
    return sorted(out)


def flatten(d, prefix: str = "") -> dict:
    """Dotted keys of a nested mapping's scalar leaves (lists of scalars kept whole)."""
    out = {}
    for k, v in (d or {}).items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif v is None or isinstance(v, (bool, int, float, str)) or (
                isinstance(v, list) and all(isinstance(x, (bool, int, float, str)) for x in v)):
            out[key] = v
    return out


def verl_defaults(gitdir: str, tag: str) -> tuple[str, dict]:
    for path in VERL_FILES:
        try:
            text = _git(gitdir, "show", f"{tag}:{path}")
        except FileNotFoundError:
            continue
        data = yaml.safe_load(text)
        data.pop("defaults", None)
        return path, flatten(data)
    raise FileNotFoundError(f"{tag}: none of {VERL_FILES}")


def _literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT


_NOT = object()


def trl_defaults(gitdir: str, tag: str) -> tuple[str, dict]:
    tree = ast.parse(_git(gitdir, "show", f"{tag}:{TRL_FILE}"))
    cls = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "GRPOConfig"), None)
    if cls is None:
        raise FileNotFoundError(f"{tag}: no GRPOConfig in {TRL_FILE}")
    out = {}
    for st in cls.body:
        if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None):
            continue
        val = st.value
        if isinstance(val, ast.Call) and getattr(val.func, "id", "") == "field":
            kw = {k.arg: k.value for k in val.keywords}
            if "default" not in kw:
                continue
            val = kw["default"]
        v = _literal(val)
        if v is not _NOT and (v is None or isinstance(v, (bool, int, float, str))):
            out[st.target.id] = v
    return TRL_FILE, out


def runs(per_release: list[dict]) -> dict:
    """key -> [[first, last, value], ...] over release indices (a key absent from a release breaks its run)."""
    keys = sorted({k for d in per_release for k in d})
    out = {}
    for k in keys:
        rs: list[list] = []
        for i, d in enumerate(per_release):
            if k not in d:
                continue
            v = d[k]
            if rs and rs[-1][1] == i - 1 and rs[-1][2] == v:
                rs[-1][1] = i
            else:
                rs.append([i, i, v])
        out[k] = rs
    return out


def extract(framework: str, gitdir: str, minimum: tuple[int, ...]) -> dict:
    """The defaults document of ``framework`` (see the module doc). Raises FileNotFoundError when no release has
    the expected file."""
    read = {"verl": verl_defaults, "trl": trl_defaults}[framework]
    releases, per = [], []
    for v, tag in stable_tags(gitdir, minimum):
        try:
            path, d = read(gitdir, tag)
        except FileNotFoundError as e:
            print(f"skip {tag}: {e}", file=sys.stderr)
            continue
        commit = _git(gitdir, "rev-list", "-n1", tag).strip()
        version = ".".join(map(str, v[:3])) + (f".post{v[3]}" if v[3] else "")
        releases.append({"tag": tag, "version": version, "commit": commit[:12], "file": path})
        per.append(d)
    if not releases:
        raise FileNotFoundError(f"no release of {framework} in {gitdir} has its defaults file")
    return {"framework": framework, "extracted_by": "scripts/extract_defaults.py", "releases": releases,
            "keys": runs(per)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("framework", choices=["verl", "trl"])
    ap.add_argument("gitdir")
    ap.add_argument("--min", default=None, help="oldest release (default: verl 0.3.0, trl 0.14.0)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    minimum = tuple(int(x) for x in (a.min or {"verl": "0.3.0", "trl": "0.14.0"}[a.framework]).split("."))
    doc = extract(a.framework, a.gitdir, minimum)
    out = Path(a.out or ROOT / "skills" / "defaults" / f"{a.framework}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, separators=(",", ":"), sort_keys=True) + "\n", encoding="utf-8")
    changed = sum(1 for r in doc["keys"].values() if len({json.dumps(x[2]) for x in r}) > 1)
    print(f"{a.framework}: {len(doc['releases'])} releases ({doc['releases'][0]['version']}.."
          f"{doc['releases'][-1]['version']}), {len(doc['keys'])} keys, {changed} with a default that changed -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
