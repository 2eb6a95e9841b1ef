"""The config fact model shared by the fact readers (facts.py, launch_facts.py): ``Fact``, ``FactSet``, scalar and
Hydra-override value parsing, and ``$VAR`` expansion from shell assignments seen earlier."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Fact:
    """One setting: dotted ``key``, parsed ``value``, 1-based input ``line``, the reader that found it (``origin``:
    yaml, json, flag, override, env, printed, kwargs, ...) and the line's text (at most 300 characters)."""

    key: str
    value: Any
    line: int
    origin: str
    text: str = ""


@dataclass
class FactSet:
    """Every fact of one input in reading order, the formats seen, and the lines read as launch commands or as
    config blocks (so no other reader takes them)."""

    facts: list[Fact] = field(default_factory=list)
    formats: set[str] = field(default_factory=set)
    command_lines: set[int] = field(default_factory=set)  # lines read as (part of) a launch command
    block_lines: set[int] = field(default_factory=set)  # every line of a config block read (parents, list items, brackets)

    def add(self, key: str, value: Any, line: int, origin: str, text: str = "") -> None:
        """Record a fact (key stripped, text stripped and cut to 300 characters)."""
        self.facts.append(Fact(key.strip(), value, line, origin, text.strip()[:300]))

    def find(self, key: str) -> list[Fact]:
        """Facts whose key equals ``key`` or ends with ``.key`` (case-insensitive); last wins order."""
        k = key.lower()
        return [f for f in self.facts if (fk := f.key.lower()) == k or fk.endswith("." + k)]

    def get(self, *keys: str) -> Fact | None:
        """The last fact set for any of ``keys`` (later settings override earlier ones)."""
        found = [f for k in keys for f in self.find(k)]
        return max(found, key=lambda f: f.line) if found else None

    def value(self, *keys: str, default: Any = None) -> Any:
        """The value of ``get(*keys)``, else ``default``."""
        f = self.get(*keys)
        return f.value if f else default

    def __len__(self) -> int:
        return len(self.facts)


_BOOL = {"true": True, "false": False, "yes": True, "no": False, "on": True, "off": False}


def parse_scalar(v: Any) -> Any:
    """'1.0' -> 1.0, 'True' -> True, 'null' -> None, quoted strings unquoted; others unchanged."""
    if not isinstance(v, str):
        return v
    s = v.strip().rstrip(",").strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        s = s[1:-1]
    low = s.lower()
    if low in _BOOL:
        return _BOOL[low]
    if low in ("null", "none", "~"):
        return None
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s


def parse_override_value(v: str):
    """A Hydra/verl override value as Hydra reads it ('[1,2]' -> list, 'null' -> None, quoted strings),
    through OmegaConf's dotlist grammar as verl does; plain scalar parsing as a fallback."""
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        v = v[1:-1]  # shell quoting around the whole value
    if v == "" or "$" in v or len(v) > 2000:  # OmegaConf's grammar never sees interpolations or huge values
        return parse_scalar(v)
    try:
        from omegaconf import OmegaConf

        val = OmegaConf.from_dotlist([f"k={v}"])["k"]
        return OmegaConf.to_container(val) if OmegaConf.is_config(val) else val
    except Exception:  # noqa: BLE001 - OmegaConf raises several grammar errors; fall back to plain parsing
        return parse_scalar(v)


_VAR_REF = re.compile(r"\$\{([A-Za-z_]\w*)(?::?-([^}]*))?\}|\$([A-Za-z_]\w*)")


def expand_vars(s: str, env: dict[str, str]) -> str:
    """Expand $NAME, ${NAME} and ${NAME:-default} from shell assignments seen earlier; unknown names stay."""
    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(3)
        if name in env:
            return env[name]
        if m.group(2) is not None:
            return m.group(2)
        return m.group(0)
    return _VAR_REF.sub(sub, s)
