"""Load and query the rule base: the package's ``skills/rules/<subsystem>/<id>.yaml`` plus user rule packs.

Packaged rules sit on one axis, the subsystem a rule is about (``SUBSYSTEMS``); where a rule came from
(a seed document, a framework's FAQ, a reference) is recorded in its ``sources``, never in its folder.

User packs: any folder of rule YAML files in the same format, given with ``extra_dirs`` or the
environment variable ``GRPO_DEBUG_RULES`` (folders separated by ``os.pathsep``). A user rule with the
id of a packaged rule replaces it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Iterable

import yaml

from pydantic import ValidationError

from grpo_debug.skills.knowledge import load_yaml
from grpo_debug.skills.schema import Rule
from grpo_debug.skills.symptoms import SYMPTOMS


#: The folders of ``skills/rules/``: one per subsystem a rule is about; ``general`` for the rest.
SUBSYSTEMS = ("deepspeed", "megatron", "verl", "slime", "relax", "trl_openrlhf", "vllm_sglang", "ray", "host",
              "general")


class RuleBaseError(ValueError):
    """A rule file could not be read or does not follow the schema; names the file."""


@dataclass
class RuleBase:
    rules: dict[str, Rule] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)

    def get(self, rule_id: str) -> Rule | None:
        return self.rules.get(rule_id)

    def __iter__(self):
        return iter(self.rules.values())

    def __len__(self) -> int:
        return len(self.rules)

    def by_symptom(self, code: str) -> list[Rule]:
        return [r for r in self.rules.values() if r.symptom == code]

    def by_pattern_class(self, name: str) -> list[Rule]:
        return [r for r in self.rules.values() if r.pattern_class == name]

    def regex_patterns(self) -> list[tuple[str, bool]]:
        """Every regex signal of the rules as (pattern, ignore_case), each once, in a stable order."""
        from grpo_debug.skills.schema import RegexSignal

        return list(dict.fromkeys((s.pattern, s.ignore_case) for r in self for s in r.match.signals()
                                  if isinstance(s, RegexSignal)))


def _rule_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.yaml") if p.is_file())


def load_rule_file(path: Path) -> list[Rule]:
    """Parse one YAML file holding a rule mapping (or a list of them). Raises RuleBaseError."""
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise RuleBaseError(f"{path}: cannot read rule file: {e}") from e
    items = data if isinstance(data, list) else [data]
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise RuleBaseError(f"{path}: entry {i} is not a mapping")
        try:
            rule = Rule.model_validate(item)
        except ValidationError as e:
            raise RuleBaseError(f"{path}: rule {item.get('id', i)!r} is invalid: {e}") from e
        if rule.symptom not in SYMPTOMS:
            raise RuleBaseError(f"{path}: rule {rule.id}: unknown symptom code {rule.symptom!r}")
        out.append(rule)
    return out


def _packaged_root() -> Path:
    return Path(str(resources.files("grpo_debug.skills").joinpath("rules")))


def load_rules(extra_dirs: Iterable[str | os.PathLike] = (), *, include_env: bool = True,
               mentioning: str | None = None) -> RuleBase:
    """Load the packaged rules and any user packs. Raises RuleBaseError on a bad file or duplicate id.
    With ``mentioning``, only files whose text holds that string are parsed (a fast subset)."""
    rb = RuleBase()
    dirs: list[tuple[Path, bool]] = [(_packaged_root(), False)]
    env = os.environ.get("GRPO_DEBUG_RULES", "") if include_env else ""
    for d in [*extra_dirs, *[x for x in env.split(os.pathsep) if x]]:
        p = Path(d)
        if not p.is_dir():
            raise RuleBaseError(f"rule pack folder {p} does not exist or is not a folder")
        dirs.append((p, True))
    for root, user in dirs:
        for f in _rule_files(root):
            if mentioning is not None and mentioning not in f.read_text(encoding="utf-8", errors="replace"):
                continue
            for rule in load_rule_file(f):
                if rule.id in rb.rules and not user:
                    raise RuleBaseError(f"{f}: duplicate rule id {rule.id!r} (also in {rb.origin[rule.id]})")
                rb.rules[rule.id] = rule
                rb.origin[rule.id] = str(f)
    return rb


@lru_cache(maxsize=1)
def default_rules() -> RuleBase:
    """The packaged rule base plus GRPO_DEBUG_RULES packs, loaded once per process."""
    return load_rules()


@lru_cache(maxsize=1)
def probe_rules() -> RuleBase:
    """The rules with a ``probe`` signal (what ``grpo-debug probe`` evaluates), without parsing the others."""
    rb = load_rules(mentioning="probe")  # a superset of the files with a probe signal
    rb.rules = {k: r for k, r in rb.rules.items() if any(s.kind == "probe" for s in r.match.signals())}
    return rb
