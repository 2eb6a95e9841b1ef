"""The rule-base schema: one rule = one YAML file = one :class:`Rule`.

A rule explains one mechanism (why a run broke), names the symptom code it produces
(``skills/symptoms.py``), says how to recognise it (machine-checkable signals), how to fix it,
where the knowledge comes from (each source marked verified or not) and carries its own positive and
negative examples. The layout follows semgrep (data-driven rules with test cases) and ruff (rule pages
with what/why/fix sections).

Signals are evaluated by :mod:`grpo_debug.tools.engine.match` against the facts the triage engine extracted:

- ``regex``: a regular expression searched in every normalised log line.
- ``event``: an extracted event kind (``cuda_oom``, ``traceback``, ...) optionally filtered by a regex
  on its text (see :data:`grpo_debug.tools.engine.events.EVENT_KINDS`).
- ``detector``: a named detector over metric series (``nonfinite``, ``spike``, ``growth``, ...), see
  :data:`grpo_debug.tools.engine.detectors.DETECTORS`.
- ``config``: a predicate over one config fact (from YAML/JSON, Hydra overrides, ``--flags``,
  ``key=value`` reprs, DeepSpeed config prints). ``key`` matches a fact whose normalised key equals
  it or ends with ``.<key>``; list several spellings in ``keys``.
- ``check``: a named Python check over all config facts (batch arithmetic, GPU counts), see
  :data:`grpo_debug.tools.engine.config_checks.CHECKS`.
- ``probe``: a predicate over an on-host probe fact (``grpo-debug probe``; facts of the host the
  server runs on, or of a probe report pasted in), e.g. ``ulimit_nofile lt 65535``.
- ``query``: words that route a free-text question to this rule (used by ``suggest`` and the
  ``diagnose`` operations; never by log triage).
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import Field, field_validator, model_validator

from grpo_debug.skills.provenance import AppliesTo, Source, VerificationStatus, _Strict  # noqa: F401  (re-exported)

Confidence = Literal["high", "medium", "low"]
ConfigOp = Literal["eq", "ne", "lt", "le", "gt", "ge", "in", "not_in", "missing", "present",
                   "truthy", "falsy", "regex"]


class RegexSignal(_Strict):
    kind: Literal["regex"] = "regex"
    pattern: str = Field(description="Python regex searched in each normalised line (re.search).")
    ignore_case: bool = True
    max_lines: int = Field(5, ge=1, le=50, description="Evidence lines to keep.")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        re.compile(v)
        return v


class EventSignal(_Strict):
    kind: Literal["event"] = "event"
    event: str = Field(description="Event kind from tools/engine/events.py, e.g. cuda_oom, traceback.")
    message: str | None = Field(None, description="Optional regex over the event's text (all its lines).")
    source: str | None = Field(None, description="Optional regex over the process prefix of the event's first line "
                               "(the Ray actor or worker name, e.g. RayWorkerWrapper, as engine/normalize.py strips it).")

    @field_validator("message", "source")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        if v is not None:
            re.compile(v)
        return v


class DetectorSignal(_Strict):
    kind: Literal["detector"] = "detector"
    detector: str = Field(description="Detector name from tools/engine/detectors.py.")
    params: dict[str, Any] = Field(default_factory=dict)


class ConfigSignal(_Strict):
    kind: Literal["config"] = "config"
    key: str | None = None
    keys: list[str] = Field(default_factory=list, description="Alternative spellings of the key.")
    op: ConfigOp = "eq"
    value: Any = None

    @model_validator(mode="after")
    def _has_key(self) -> "ConfigSignal":
        if not self.key and not self.keys:
            raise ValueError("config signal needs key or keys")
        if self.op == "regex":
            re.compile(str(self.value))
        return self

    def all_keys(self) -> list[str]:
        return ([self.key] if self.key else []) + list(self.keys)


class CheckSignal(_Strict):
    kind: Literal["check"] = "check"
    check: str = Field(description="Check name from tools/engine/config_checks.py.")
    params: dict[str, Any] = Field(default_factory=dict)


class ProbeSignal(_Strict):
    """A predicate over an on-host probe fact (probes/collect.py host_facts keys without the 'probe.'
    prefix, e.g. ulimit_nofile, dev_shm_gib, gpu_bf16, versions.vllm, conflicts)."""

    kind: Literal["probe"] = "probe"
    fact: str
    op: ConfigOp = "eq"
    value: Any = None


class QuerySignal(_Strict):
    kind: Literal["query"] = "query"
    terms: list[str] = Field(min_length=1, description="Lower-case words or phrases of a question.")


Signal = Annotated[Union[RegexSignal, EventSignal, DetectorSignal, ConfigSignal, CheckSignal, ProbeSignal, QuerySignal],
                   Field(discriminator="kind")]


class Match(_Strict):
    """When a rule fires (semgrep's pattern / pattern-either / pattern-not):

    ``all`` must all hold; at least one of ``any`` must hold (when given); none of ``none`` may;
    when ``either`` is given, at least one of those sub-matches must hold too. ``support`` signals
    are optional: when they hold they add evidence and raise the score, never required.
    """

    all: list[Signal] = Field(default_factory=list)
    any: list[Signal] = Field(default_factory=list)
    none: list[Signal] = Field(default_factory=list)
    either: list["Match"] = Field(default_factory=list)
    support: list[Signal] = Field(default_factory=list)

    @model_validator(mode="after")
    def _nonempty(self) -> "Match":
        if not self.all and not self.any and not self.either:
            raise ValueError("match needs at least one signal in all, any or either")
        return self

    def signals(self) -> list[Signal]:
        """Every signal, recursively (for linting)."""
        out = list(self.all) + list(self.any) + list(self.none) + list(self.support)
        for m in self.either:
            out += m.signals()
        return out


# the names a fix is written per framework under (patch_by_framework, summary_by_framework): the rules' names for
# the trainers and libraries whose keys a fix names (tools/run/versions.canonical spellings)
FIX_FRAMEWORKS: tuple[str, ...] = ("verl", "slime", "relax", "openrlhf", "trl", "hf-trainer", "deepspeed", "megatron",
                                   "vllm", "sglang", "skyrl", "areal", "nemo-rl", "roll", "prime-rl")


class Fix(_Strict):
    summary: str = Field(min_length=10, description="The change, naming the exact option/key/flag.")
    steps: list[str] = Field(default_factory=list)
    patch: dict[str, Any] | None = Field(None, description="key -> new value, where one applies.")
    bounds: dict[str, Literal["min", "max", "set"]] = Field(default_factory=dict, description=(
        "How a patch value moves the user's value (tools/engine/edits.py): min = raise to at least this, never "
        "lower; max = lower to at most this, never raise (a key that is not set is then left alone: its default "
        "may already be on the safe side); set (the default) = write the value."))
    patch_by_framework: dict[str, dict[str, Any]] = Field(default_factory=dict, description=(
        "framework -> the patch for files of that framework (its own keys, flags and module paths), replacing "
        "`patch` there; when given, files of frameworks not listed get no edit."))
    summary_by_framework: dict[str, str] = Field(default_factory=dict, description=(
        "framework -> the fix as that framework's user writes it (its own keys and flags only; framework-neutral "
        "steps included), shown instead of `summary` when the input is of that framework (tools/engine/"
        "version_gate.fix_summary); other frameworks and an unknown one get `summary`. Names as in "
        "patch_by_framework (FIX_FRAMEWORKS)."))
    safety: Literal["safe", "review"] = "safe"
    safety_note: str = ""

    @model_validator(mode="after")
    def _framework_names(self) -> "Fix":
        for field, names in (("patch_by_framework", self.patch_by_framework),
                             ("summary_by_framework", self.summary_by_framework)):
            bad = sorted(set(names) - set(FIX_FRAMEWORKS))
            if bad:
                raise ValueError(f"fix.{field}: unknown framework(s) {bad}; use one of {', '.join(FIX_FRAMEWORKS)}")
        for fw, text in self.summary_by_framework.items():
            if len(text.strip()) < 10:
                raise ValueError(f"fix.summary_by_framework.{fw}: a fix of at least 10 characters")
        return self


_RELEASE = re.compile(r"^(\d+(?:\.\d+)*)(?:\.?(a|b|rc|dev|post)(\d*))?$")


def release_key(v: str) -> tuple | None:
    """Sort key of a release number (``0.10.2``, ``0.9.0rc1``, ``0.8.0.dev``, ``0.3.0.post1``); None for ''.
    Raises ValueError for anything else. Pre-releases sort before their release, post-releases after."""
    if not v:
        return None
    m = _RELEASE.match(v.strip())
    if not m:
        raise ValueError(f"not a release number: {v!r}")
    nums = tuple(int(x) for x in m.group(1).split("."))
    nums = nums + (0,) * (4 - len(nums)) if len(nums) < 4 else nums
    tag = {"dev": -3, "a": -2, "b": -1, "rc": -1, None: 0, "post": 1}[m.group(2)]
    return nums + (tag, int(m.group(3) or 0))


class VersionRange(_Strict):
    """Releases of one framework where something holds: the half-open range ``[introduced_in, fixed_in)``.

    ``introduced_in``: the first release where the mechanism (or a spelling) exists; empty = since the
    earliest release. ``fixed_in``: the first release where it no longer holds (the fix, the removal);
    empty = still holds in the newest release checked. Versions are the framework's own release numbers
    (PEP 440 as on PyPI: ``0.7.0``, ``0.19.3``; Megatron's ``core_v0.18.0`` tag is written ``0.18.0``).
    ``checked``: the releases the knowledge audit (scripts/audit_knowledge.py) looked at, or how the
    bounds were confirmed (a PR, a tag); ``note``: what the bounds rest on, or why one is unknown.
    A rule with no range for a framework claims every release. Gating by the run's version:
    ``tools/engine/version_gate.py``.
    """

    introduced_in: str = ""
    fixed_in: str = ""
    checked: list[str] = Field(default_factory=list)
    note: str = ""
    when: list[Signal] = Field(default_factory=list, description=(
        "Signals (as in match) that pick the case the range is about, e.g. a key left to its default: "
        "{kind: config, key: gradient_clipping, op: missing}. When one does not hold, the range does not gate "
        "(the rule's other case holds in every release). tools/engine/version_gate.py"))

    @model_validator(mode="after")
    def _ordered(self) -> "VersionRange":
        lo, hi = release_key(self.introduced_in), release_key(self.fixed_in)
        if lo and hi and lo >= hi:
            raise ValueError(f"empty range [{self.introduced_in}, {self.fixed_in})")
        return self


class Identifier(_Strict):
    """One spelling the rule names (a flag, config key, env var, metric or error text) and the releases of
    ``framework`` where that spelling exists: the half-open range ``[since, until)`` (empty = open end).
    A renamed flag is two entries, e.g. ``{name: --max_norm, framework: openrlhf, until: "0.10.2"}`` and
    ``{name: --actor.max_norm, framework: openrlhf, since: "0.10.2"}``; ``replaced_by`` names the spelling
    that takes over. Only spellings whose existence depends on the release need an entry; the audit
    checks every other identifier a rule names against every release it looks at."""

    name: str = Field(min_length=2)
    framework: str = Field(min_length=2)
    kind: Literal["flag", "key", "env", "metric", "message", "path", "name", "symbol"] = Field(
        "flag", description="flag: a CLI option; key: a config key (dotted path or last component); env: an "
        "environment variable; metric: a logged metric name; message: error/log text; path: a source file or "
        "file.py::function; name: any other identifier named in prose (a function, a field); symbol: a constant.")
    since: str = ""
    until: str = ""
    replaced_by: str = ""
    note: str = ""

    @model_validator(mode="after")
    def _ordered(self) -> "Identifier":
        VersionRange(introduced_in=self.since, fixed_in=self.until)
        return self


class Example(_Strict):
    name: str
    input: str
    format: Literal["log", "yaml", "json", "sh", "text"] = "log"
    expect: Literal["match", "no_match"]
    mode: Literal["triage", "query"] = "triage"
    probe: dict[str, Any] = Field(default_factory=dict, description="Host facts for probe signals (keys without 'probe.').")
    note: str = ""


class Rule(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*[a-z0-9]$")
    title: str = Field(min_length=5)
    symptom: str = Field(description="Code from skills/symptoms.py (SYMPTOMS) this mechanism produces.")
    kind: Literal["diagnostic", "guidance"] = Field(
        "diagnostic", description="guidance: a seed rule of practice, matched on config/query only.")
    pattern_class: str | None = Field(None, description="One of the seed's 7 pattern classes, if any.")
    seed_refs: list[str] = Field(default_factory=list, description="e.g. 'MUST DO 2', 'quick-map: NaN in loss'.")
    confidence: Confidence = "medium"
    priority: int = Field(0, ge=-5, le=5, description="Ranking nudge for specific mechanisms.")
    match: Match
    what: str = Field(min_length=10, description="What the rule detects.")
    why: str = Field(min_length=10, description="The mechanism.")
    fix: Fix
    next_checks: list[str] = Field(default_factory=list)
    sharpen: list[str] = Field(default_factory=list, description="Information that would sharpen it.")
    applies_to: AppliesTo = Field(default_factory=AppliesTo)
    sources: list[Source] = Field(min_length=1)
    examples: list[Example] = Field(min_length=2)
    tags: list[str] = Field(default_factory=list)
    versions: dict[str, VersionRange] = Field(
        default_factory=dict,
        description="Per framework (as in applies_to.frameworks): the releases [introduced_in, fixed_in) where "
                    "the mechanism holds. See VersionRange.")
    identifiers: list[Identifier] = Field(
        default_factory=list, description="Spellings that exist only in some releases, with their ranges.")

    @field_validator("why", "what")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v.strip()

    @model_validator(mode="after")
    def _examples_both_ways(self) -> "Rule":
        kinds = {e.expect for e in self.examples}
        if kinds != {"match", "no_match"}:
            raise ValueError(f"rule {self.id}: needs at least one 'match' and one 'no_match' example")
        return self

    @model_validator(mode="after")
    def _ranges_name_frameworks(self) -> "Rule":
        named = set(self.applies_to.frameworks)
        for fw in self.versions:  # identifiers may name another framework's spelling (a contrast, a source)
            if named and fw not in named:
                raise ValueError(f"rule {self.id}: version range for {fw!r}, not in applies_to.frameworks")
        return self

    @property
    def verified(self) -> bool:
        return any(s.status == "verified" for s in self.sources)
