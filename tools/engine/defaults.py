"""Framework config defaults by release, as extracted from each release's own source (``skills/defaults/<fw>.json``,
written by ``scripts/extract_defaults.py``: verl's generated trainer config, TRL's ``GRPOConfig`` fields).

A check that needs a value the input does not write asks :func:`resolve`: the input's own fact when there is one,
else a default fact whose ``origin`` says where it comes from (``default of verl 0.8.0``, or with no known version
``default of verl 0.3.0-0.9.0`` when every release agrees, and no fact at all when releases disagree and the
version is unknown: the caller then says what decides). A default fact has ``line`` 0: it is not a line of the
input, so it never becomes evidence (:func:`input_lines`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from grpo_debug.tools.engine.facts import Fact, FactSet

DEFAULTS_DIR = Path(__file__).resolve().parents[2] / "skills" / "defaults"
DEFAULT_ORIGIN = "default"


@dataclass(frozen=True)
class Default:
    """One key's default: ``value`` at ``version`` (or the one value every release in ``releases`` agrees on);
    ``values``: every distinct value across the releases read; ``releases``: ``first-last`` version text."""
    key: str
    value: Any
    version: str | None
    releases: str
    values: tuple

    @property
    def origin(self) -> str:
        return f"{DEFAULT_ORIGIN} of {self.releases}"


@lru_cache(maxsize=None)
def _doc(framework: str) -> dict | None:
    p = DEFAULTS_DIR / f"{framework}.json"
    if not p.is_file():
        return None
    return json.loads(p.read_text(encoding="utf-8"))


def frameworks() -> list[str]:
    """The frameworks with extracted defaults."""
    return sorted(p.stem for p in DEFAULTS_DIR.glob("*.json"))


def _vkey(v: str) -> tuple[int, ...]:
    parts = []
    for x in v.replace("post", "").split("."):
        digits = "".join(c for c in x if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts + [0] * (4 - len(parts)))


def _match_key(keys: dict, key: str) -> str | None:
    if key in keys:
        return key
    tail = "." + key
    hits = [k for k in keys if k.endswith(tail)]
    return hits[0] if len(hits) == 1 else None


def lookup(framework: str, key: str, version: str | None = None) -> Default | None:
    """The default of ``key`` (a full dotted key, or its unique tail) in ``framework``'s release ``version`` (the
    newest release read at or before it); with no version, across all releases read. None when the framework has
    no defaults file, the key is unknown or ambiguous, or ``version`` predates every release read."""
    doc = _doc(framework)
    if doc is None:
        return None
    k = _match_key(doc["keys"], key)
    if k is None:
        return None
    rel = [r["version"] for r in doc["releases"]]
    runs = doc["keys"][k]
    values = tuple(dict.fromkeys(json.dumps(r[2]) for r in runs))
    vals = tuple(json.loads(v) for v in values)
    if version is None:
        first, last = rel[runs[0][0]], rel[runs[-1][1]]
        one = vals[0] if len(vals) == 1 else None
        return Default(k, one, None, f"{framework} {first}-{last}" if first != last else f"{framework} {first}", vals)
    at = [i for i, v in enumerate(rel) if _vkey(v) <= _vkey(version)]
    if not at:
        return None
    i = at[-1]
    run = next((r for r in runs if r[0] <= i <= r[1]), None)
    if run is None:
        return None
    return Default(k, run[2], rel[i], f"{framework} {rel[i]}", vals)


def resolve(fs: FactSet, key: str, framework: str, version: str | None = None, *aliases: str) -> Fact | None:
    """The input's fact for ``key`` (or an alias), else the framework default as a Fact (line 0, origin
    ``default of <fw> <release(s)>``); None when neither is known or releases disagree and no version is given."""
    f = fs.get(key, *aliases)
    if f is not None:
        return f
    d = lookup(framework, key, version)
    if d is None or (d.version is None and len(d.values) > 1):
        return None
    return Fact(d.key, d.value, 0, d.origin)


def is_default(f: Fact | None) -> bool:
    return f is not None and f.origin.startswith(DEFAULT_ORIGIN + " of ")


def input_lines(*facts: Fact | None) -> list[int]:
    """The input lines of ``facts`` (defaults have none)."""
    return sorted({f.line for f in facts if f is not None and f.line > 0})


def version_of(fs: FactSet, framework: str) -> str | None:
    """The framework's release the input states (``versions.<fw>`` facts from pip lines / version prints)."""
    f = fs.get(f"versions.{framework}")
    return str(f.value) if f is not None and f.value not in (None, "") else None
