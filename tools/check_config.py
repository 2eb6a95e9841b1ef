"""Config checks: a config file, launch script or pasted config block in, what the settings will cause
and the exact edits out. Same engine and rules as triage (one engine, many views); stricter about the
input: a YAML/JSON document or shell script that does not parse is an error naming the line.
"""
from __future__ import annotations

import os
import shlex

import yaml

from grpo_debug.skills.loader import RuleBase
from grpo_debug.tools.engine.facts import ConfigParseError, detect_frameworks, parse_document_strict
from grpo_debug.tools.models import TriageResult
from grpo_debug.tools.inputs import read_input, sniff_format
from grpo_debug.tools.triage import triage_text

def _check_shell(s: str, label: str) -> None:
    """Unbalanced quotes in a launch script: an error naming the line where the command starts. A quoted
    value may span lines (e.g. RUNTIME_ENV_JSON="{ ... }"); only a quote still open at the end is an error."""
    buf: list[str] = []
    start = None
    for no, line in enumerate(s.splitlines(), 1):
        if line.lstrip().startswith("#") and not buf:
            continue
        if not buf:
            start = no
        buf.append(line[:-1] if line.rstrip().endswith("\\") else line)
        if line.rstrip().endswith("\\"):
            continue
        try:
            shlex.split("\n".join(buf), comments=True)
        except ValueError as e:
            if "No closing quotation" in str(e):
                continue  # the quoted value goes on on the next line
            raise ConfigParseError(f"{label}: cannot parse the shell command starting at line {start}: {e}") from e
        buf = []
    if buf:
        raise ConfigParseError(f"{label}: unbalanced quote in the shell command starting at line {start}")


def check_config(text: str | None = None, path: str | os.PathLike | None = None, *, rules: RuleBase | None = None,
                 max_findings: int = 20) -> TriageResult:
    """Check a config (verl/Hydra YAML, DeepSpeed JSON, accelerate YAML, TRL/HF args) or a launch script.

    Returns the triage contract: each finding's symptom is what the setting will cause, its evidence the
    config lines, its ``patch`` the new values and ``edits`` the exact replacement lines.

    Raises:
        InputError: unreadable input (see triage).
        ConfigParseError: a YAML/JSON document or shell command that does not parse (names the line).
    """
    s, label, skipped, hint = read_input(text, path)
    fmt = sniff_format(s, hint)
    if fmt in ("yaml", "json"):
        parse_document_strict(s, fmt, label)
    elif fmt == "sh":
        _check_shell(s, label)
    res = triage_text(s, label=label, hint=fmt if fmt in ("yaml", "json") else None, skipped=skipped, rules=rules,
                      max_findings=max_findings)
    if not res.findings:
        res.summary = (f"No rule flags these settings ({res.coverage.config_facts} settings read; "
                       f"{len(res.coverage.unknown_config_keys)} not used by any rule, listed in coverage). "
                       "This checks known failure patterns only; it is not a guarantee that the run will work.")
    return res


__all__ = ["check_config", "ConfigParseError", "detect_frameworks", "sniff_format", "yaml"]
