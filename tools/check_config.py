"""Config checks: a config file, launch script or pasted config block in, what the settings will cause
and the exact edits out. Same engine and rules as triage (one engine, many views); stricter about the
input: a YAML/JSON document or shell script that does not parse is an error naming the line.
"""
from __future__ import annotations

import os
import shlex

import yaml

from grpo_debug.skills.loader import RuleBase
from grpo_debug.tools.engine.facts import ConfigParseError, parse_document_strict
from grpo_debug.tools.models import TriageResult
from grpo_debug.tools.inputs import read_input, sniff_format
from grpo_debug.tools.triage import triage_text

def _quote_after(line: str, quote: str | None) -> str | None:
    """The quote (' or ") still open at the end of ``line`` when ``quote`` was open at its start (POSIX shell
    rules: backslash escapes outside single quotes, # starts a comment at a word start)."""
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if quote == "'":
            if c == "'":
                quote = None
        elif quote == '"':
            if c == "\\":
                i += 1
            elif c == '"':
                quote = None
        elif c == "\\":
            i += 1
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            break
        i += 1
    return quote


def _check_shell(s: str, label: str) -> None:
    """Unbalanced quotes in a launch script: an error naming the line where the command starts. A quoted
    value may span lines (e.g. RUNTIME_ENV_JSON="{ ... }"); only a quote still open at the end is an error."""
    buf: list[str] = []
    start = None
    quote: str | None = None
    for no, line in enumerate(s.splitlines(), 1):
        if line.lstrip().startswith("#") and not buf:
            continue
        if not buf:
            start = no
        buf.append(line[:-1] if line.rstrip().endswith("\\") else line)
        quote = _quote_after(line, quote)
        if line.rstrip().endswith("\\") or quote:
            continue  # a continuation, or the quoted value goes on on the next line
        try:  # one parse per complete command: linear however long an open quote runs
            shlex.split("\n".join(buf), comments=True)
        except ValueError as e:
            raise ConfigParseError(f"{label}: cannot parse the shell command starting at line {start}: {e}") from e
        buf = []
    if buf:
        raise ConfigParseError(f"{label}: unbalanced quote in the shell command starting at line {start}")


def check_config(text: str | None = None, path: str | os.PathLike | None = None, *, rules: RuleBase | None = None,
                 max_findings: int = 20, versions=None) -> TriageResult:
    """Check a config (verl/Hydra YAML, DeepSpeed JSON, accelerate YAML, TRL/HF args) or a launch script.

    Returns the triage contract: each finding's symptom is what the setting will cause, its evidence the
    config lines, its ``patch`` the new values and ``edits`` the exact replacement lines. ``versions``: as in
    :func:`grpo_debug.tools.triage.triage` (``"verl=0.9.0,deepspeed=0.19.5"``, ``host``).

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
                      max_findings=max_findings, versions=versions)
    _add_diff(res, s, label)
    if not res.findings:
        res.summary = (f"No rule flags these settings ({res.coverage.config_facts} settings read; "
                       f"{len(res.coverage.unknown_config_keys)} not used by any rule, listed in coverage). "
                       "This checks known failure patterns only; it is not a guarantee that the run will work.")
    return res


def _add_diff(res: TriageResult, s: str, label: str) -> None:
    """Every finding's edits as one unified diff (tools/engine/diff.py); an edit of a line that several
    findings change carries the merged line, so applying the edits one by one gives the diff's file."""
    from grpo_debug.tools.engine.diff import file_diff, merge_edits

    edits = [e for f in res.findings for e in f.edits]
    if not edits:
        return
    merged, _ = merge_edits(edits)
    for e in edits:
        if e.line in merged and e.old == merged[e.line][0]:
            e.new = merged[e.line][1]
    name = label if label and not label.startswith("<") else "input"
    res.diff, _ = file_diff(s, edits, name)


__all__ = ["check_config", "ConfigParseError", "sniff_format", "yaml"]
