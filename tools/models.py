"""Result models: the triage output contract, shared by the CLI, MCP tools and scripts.

Clients such as Claude Code show the model only the structured result, so every field is named and
described to read well on its own.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, WithJsonSchema

from grpo_debug.skills.knowledge import GpuSpec  # noqa: F401  (FamilyReport.gpu)


class Evidence(BaseModel):
    line: int = Field(description="1-based line number in the input as given.")
    text: str = Field(description="The line, normalised (ANSI, Ray prefix, timestamps stripped), truncated.")
    source: str | None = Field(None, description="Ray actor/worker prefix the line came from, if any.")


class Setting(BaseModel):
    key: str = Field(description="Config key or flag as found in the input.")
    value: Any
    line: int = Field(description="1-based input line that sets it.")
    source: str | None = Field(None, description="The file of a run folder the line is in (null for one input).")


class Edit(BaseModel):
    key: str
    line: int | None = Field(None, description="1-based line to change; null when the key must be added.")
    old: str | None = Field(None, description="The line as it is now.")
    new: str = Field(description="The replacement line (or the line to add), in the input's own syntax.")
    note: str = ""


class Cause(BaseModel):
    rule_id: str = Field(description="Rule id; read the whole rule with explain_rule / rule://{id}.")
    title: str
    confidence: Literal["high", "medium", "low"] = Field("medium", description="How sure the rule is of this mechanism.")
    why: str = Field(description="The mechanism.")
    fix: str = Field(description="The change this cause calls for.")
    verified: bool = Field(description="True when at least one source of the rule was checked.")
    matched: list[str] = Field(default_factory=list, description="Signals that fired, in words.")


class Onset(BaseModel):
    """Where a finding's change starts (tools/engine/onset.py), not where a detector saw it nor where it ends."""

    step: int | float = Field(description="The step (the series' own x axis) where the change starts.")
    line: int | None = Field(None, description="1-based input line of the metric point at that step (for a run "
                                               "folder: the line in ``file``); null when the input has no lines.")
    file: str | None = Field(None, description="The file that line is in (the input's path, a run folder's file); "
                                               "null for pasted text.")
    time: str | None = Field(None, description="Wall-clock time of that point when the input has timestamps.")
    series: str | None = Field(None, description="The series the onset is read from (canonical name or raw key).")
    kind: str = Field("", description="climb (a hinge fit), shift (a level shift), nonfinite (the first NaN/inf), "
                                      "spike (an isolated spike that recovered), exact (the detector's own first "
                                      "point: a drop to 0, a plateau), point (too little baseline to fit).")
    detected_step: int | float | None = Field(None, description="The step where the detector saw the change.")


class Finding(BaseModel):
    symptom: str = Field(description="Symptom code (skills/symptoms.py SYMPTOMS).")
    title: str
    confidence: Literal["high", "medium", "low"]
    onset: Onset | None = Field(None, description="Where the change starts, for a finding over a metric series.")
    evidence: list[Evidence] = Field(default_factory=list)
    causes: list[Cause] = Field(default_factory=list, description="Most likely first.")
    fix: str = Field(description="Concrete change naming the exact option/key/flag.")
    patch: dict[str, Any] | None = Field(None, description="key -> new value where one applies.")
    edits: list[Edit] = Field(default_factory=list, description="The patch as exact text edits of the input.")
    settings: list[Setting] = Field(default_factory=list,
                                    description="The run's own current values of the keys the fix names.")
    next_checks: list[str] = Field(default_factory=list)
    sharpen: list[str] = Field(default_factory=list, description="Information that would sharpen this finding.")
    score: float = Field(0.0, description="Ranking score (higher = more likely); for ordering only.")
    run: str | None = Field(None, description="The run this finding is about when the input holds several "
                                              "(a [A]/[B] paste, a sweep folder: `runs` lists them); else null.")
    risk: bool = Field(False, description="True for a risk: a rule matched the configuration only, with no observed "
                                          "symptom (event, metric, log line) in the input; always low confidence, "
                                          "listed after the diagnosed findings.")
    consequence_of: int | None = Field(None, description="Index (into the same findings list) of the finding this "
                                                         "one follows from; null for a root cause.")


class SeriesSummary(BaseModel):
    points: int
    first_step: float | None = None
    last_step: float | None = None
    first: float | None = None
    last: float | None = None
    min: float | None = None
    max: float | None = None
    first_nonfinite_step: float | None = None
    first_nonfinite_line: int | None = None


class Coverage(BaseModel):
    input: str = Field(description="What was read: a path, or '<text>' for pasted text.")
    bytes_read: int = 0
    lines_read: int = 0
    formats: list[str] = Field(default_factory=list, description="Log/config formats recognised.")
    metric_lines: int = 0
    event_lines: int = 0
    config_facts: int = 0
    lines_not_understood: int = Field(0, description="Non-blank lines no parser or pattern used.")
    not_understood_sample: list[Evidence] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list, description="What was skipped and why.")
    unknown_config_keys: list[str] = Field(default_factory=list,
                                           description="Config keys read but used by no rule (first 50).")
    files: list[str] = Field(default_factory=list,
                             description="Folder input: each file read and how ('path: kind, lines, series, points').")
    versions: list[str] = Field(default_factory=list,
                                description="Framework versions the rules were gated by, each with its source.")


# Nested results in the tool results below carry a one-level JSON schema: it is what the MCP server publishes
# anyway (server/app.py shallow_schema) and it keeps the server's start-up from walking every nested model
# once per tool. Validation still uses the full models.
_OBJECTS = WithJsonSchema({"type": "array", "items": {"type": "object"}})
_OBJECT = WithJsonSchema({"type": "object"})
_OPT_OBJECT = WithJsonSchema({"anyOf": [{"type": "object"}, {"type": "null"}]})


class RunSummary(BaseModel):
    """One run of an input that holds several (tools/rundir/runs.py)."""

    name: str = Field(description="The run's name: its [A]/[B] label, its file, or 'run 2 (line 41)'.")
    source: str = Field("", description="Where it is in the input: 'lines 1-40', a file of the folder.")
    verdict: str | None = Field(None, description="The run's own verdict (healthy / not_healthy / cannot_tell).")
    findings: list[dict[str, Any]] = Field(default_factory=list,
                                           description="{symptom, confidence, rule_ids, title}, most likely first.")
    config: dict[str, Any] = Field(default_factory=dict,
                                   description="Config facts whose value differs between the runs: this run's value.")
    series: dict[str, dict[str, Any]] = Field(default_factory=dict,
                                              description="Key series: {median, max, last, points} of this run.")


class TriageResult(BaseModel):
    summary: str = Field(description="One paragraph a person or agent can act on.")
    verdict: Literal["healthy", "not_healthy", "cannot_tell"] = Field(
        "cannot_tell", description="healthy: a training run's metrics and no medium/high finding; not_healthy: a "
                                   "medium/high finding; cannot_tell: too little to judge. The reason is the "
                                   "summary's first sentence.")
    findings: Annotated[list[Finding], _OBJECTS] = Field(default_factory=list, description="Most likely first.")
    metrics: Annotated[dict[str, SeriesSummary], _OBJECT] = Field(default_factory=dict, description="Per metric series.")
    coverage: Annotated[Coverage, _OBJECT]
    truncated: bool = Field(False, description="True when findings or evidence were cut to bound the size.")
    diff: str = Field("", description="check_config: every edit as one unified diff; apply with `patch -p0 FILE`.")
    # the verdict's reason and the chain sentence, kept in process so a face that recomputes the summary
    # (tools/rundir/analyze.py, after mapping lines to files) can say them again; never serialised
    _reason: str = PrivateAttr("")
    _chain: str = PrivateAttr("")
    runs: Annotated[list[RunSummary], _OBJECTS] = Field(
        default_factory=list, description="When the input holds several runs (a [A]/[B] paste, a second launch, a "
                                          "sweep folder): each run's verdict, findings and the config facts that set "
                                          "it apart, broken runs first; empty for a single run.")


# ---- the five seed tool families (tools/families/) ----

class Item(BaseModel):
    kind: str = Field(description="pattern, symptom, rule, fix, recommendation, chain, derivation, gpu, comparison, stream_finding")
    id: str
    title: str
    body: str = ""
    fields: dict[str, Any] = Field(default_factory=dict)
    verification: str | None = Field(None, description="verified | partial | unverified | not_found (best source).")


class FamilyReport(BaseModel):
    """One answer of a family operation. ``items`` are views of rules/derivations/GPU specs;
    ``findings`` are the triage engine's findings on the given input (same contract as triage)."""

    family: str
    operation: str
    summary: str
    gpu: Annotated[GpuSpec | None, _OPT_OBJECT] = None
    items: Annotated[list[Item], _OBJECTS] = Field(default_factory=list)
    findings: Annotated[list[Finding], _OBJECTS] = Field(default_factory=list)
    rules: list[str] = Field(default_factory=list, description="Rule ids used; read one with explain_rule.")
    notes: list[str] = Field(default_factory=list)


# ---- suggest (tools/suggest.py) ----

class ToolSuggestion(BaseModel):
    tool: str
    operation: str = ""
    why: str


class RuleSuggestion(BaseModel):
    rule_id: str
    title: str
    symptom: str
    score: float


class Suggestion(BaseModel):
    summary: str
    tools: list[ToolSuggestion] = Field(default_factory=list, description="Most useful first.")
    rules: list[RuleSuggestion] = Field(default_factory=list, description="Rules to read (explain_rule).")
    prompts: list[str] = Field(default_factory=list, description="MCP prompts with a guided flow for this.")


# ---- probes (tools/probe_report.py) ----

class ProbeResult(BaseModel):
    summary: str
    findings: Annotated[list[Finding], _OBJECTS] = Field(default_factory=list, description="Rules that fire on the host facts.")
    facts: dict[str, Any] = Field(default_factory=dict, description="Flat host facts (probe.* keys) the rules read.")
    host: dict[str, Any] | None = Field(None, description="The full host report (environment, GPUs, numerics).")
    checkpoint: dict[str, Any] | None = None
    tokenizer: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None
    cluster: dict[str, Any] | None = None
