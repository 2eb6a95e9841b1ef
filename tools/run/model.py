"""The run model (issue 11, part 1): one training run as the engine sees it, whatever the framework.

Every input (a console log, a pasted fragment, a config, a launch script, a metric store read by
``tools/readers``) becomes one :class:`Run`:

- ``frameworks``: the frameworks detected, each with its version when the input prints one and the
  lines (or store locations) that show it, most evident first (:class:`FrameworkHit`);
- ``series``: ``{name: Series}``, the name canonical (``grad_norm``, ``entropy``, ``reward_mean``, ...
  from ``skills/aliases.yaml``) when the alias table knows the raw key, else the raw key itself. Each
  series has its own x axis (``step``, ``iteration``, ``rollout/step``, ``train/step``, ``samples``)
  and each :class:`Point` keeps its x, value, raw key and 1-based line (console) or ``where`` (store);
- ``facts``: canonical config facts (``world_size``, ``tp``, ``rollout_n``, ...) or raw keys, each a
  :class:`ConfigFact` with value, raw key and line / where; the last setting wins (``fact(name)``);
- ``events``: the engine's :class:`~grpo_debug.tools.engine.events.Event` list (tracebacks, error lines);
- ``samples``: rollout text samples where a log prints them (:class:`Sample`);
- ``notes``: what was skipped and why (a reader's bound, an unreadable record, a raw key kept raw).

Build one with :func:`grpo_debug.tools.run.build.build_run` (normalised lines),
:func:`~grpo_debug.tools.run.build.from_context` (an engine Context) or
:func:`~grpo_debug.tools.run.build.from_store` (a ``tools.readers.StoreRun``). The model itself imports
only the standard library and the engine's Event/Line types.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterator

from grpo_debug.tools.engine.events import Event


@dataclass(slots=True)
class Point:
    """One logged value. ``step``: x on the series' axis (float; a step, an iteration, a sample count).
    ``value``: the value as float, NaN/+-inf kept. ``raw_key``: the key as the input spelled it.
    ``line``: 1-based input line (console inputs), else None. ``where``: store location ("file:record"),
    else None."""

    step: float
    value: float
    raw_key: str
    line: int | None = None
    where: str | None = None

    @property
    def finite(self) -> bool:
        return math.isfinite(self.value)


@dataclass
class Series:
    """One metric over one x axis. ``name``: canonical name, or the raw key when the alias table lacks it
    (``canonical`` says which). ``axis``: the x axis name. ``points``: in input order (not re-sorted:
    a restarted run repeats steps). ``raw_keys``: every raw spelling merged into it (usually one)."""

    name: str
    axis: str = "step"
    points: list[Point] = field(default_factory=list)
    canonical: bool = False
    raw_keys: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.points)

    def finite(self) -> list[Point]:
        """The finite points, in order."""
        return [p for p in self.points if math.isfinite(p.value)]

    def values(self) -> list[float]:
        return [p.value for p in self.points]

    def first_nonfinite(self) -> Point | None:
        """The first NaN/inf point, or None."""
        return next((p for p in self.points if not math.isfinite(p.value)), None)

    def lines(self) -> list[int]:
        return [p.line for p in self.points if p.line is not None]


@dataclass(slots=True)
class FrameworkHit:
    """A framework the input shows. ``name``: lower-case id (verl, slime, openrlhf, trl, skyrl, areal,
    nemo_rl, roll, prime_rl, megatron, deepspeed, vllm, sglang, ray). ``version``: as printed, or None.
    ``lines``: 1-based lines of the evidence (at most a few). ``evidence``: short reasons
    ("metric keys actor/*", "import verl", "pip: verl==0.4.1"). ``score``: how much evidence agrees."""

    name: str
    version: str | None = None
    lines: list[int] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    score: float = 0.0


@dataclass(slots=True)
class ConfigFact:
    """One config setting. ``name``: canonical name or the raw key. ``raw_key``: as written
    (``actor_rollout_ref.rollout.n``, ``--rollout-batch-size`` as ``rollout_batch_size``). ``line``: 1-based
    input line or None; ``where``: store location or None; ``origin``: which reader found it (yaml, flag,
    override, env, store, ...)."""

    name: str
    value: Any
    raw_key: str
    line: int | None = None
    where: str | None = None
    origin: str = ""
    canonical: bool = False


@dataclass(slots=True)
class Sample:
    """A rollout text sample the log printed. ``step``: the training step it belongs to, or None;
    ``role``: prompt / response / ground_truth / score / text; ``lines``: 1-based lines."""

    text: str
    role: str = "text"
    step: float | None = None
    lines: list[int] = field(default_factory=list)


@dataclass
class Run:
    """One training run. See the module docstring for each field."""

    source: str = "<text>"
    frameworks: list[FrameworkHit] = field(default_factory=list)
    series: dict[str, Series] = field(default_factory=dict)
    facts: list[ConfigFact] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    formats: set[str] = field(default_factory=set)
    _raw: dict[str, str] = field(default_factory=dict, repr=False)  # raw key -> series name

    @property
    def framework(self) -> str | None:
        """The most evident framework's name, or None."""
        return self.frameworks[0].name if self.frameworks else None

    def framework_version(self, name: str) -> str | None:
        return next((f.version for f in self.frameworks if f.name == name), None)

    def has_framework(self, name: str) -> bool:
        return any(f.name == name for f in self.frameworks)

    def series_of(self, name: str) -> Series | None:
        """The series under canonical ``name``, or the one a raw key ``name`` was filed under, or None."""
        s = self.series.get(name)
        if s is None and name in self._raw:
            s = self.series.get(self._raw[name])
        return s

    def metric_names(self) -> list[str]:
        return list(self.series)

    def add_point(self, name: str, point: Point, *, axis: str = "step", canonical: bool = False) -> Series:
        """Append ``point`` to series ``name`` (created with ``axis`` on first use)."""
        s = self.series.get(name)
        if s is None:
            s = self.series[name] = Series(name=name, axis=axis, canonical=canonical)
        if point.raw_key not in s.raw_keys:
            s.raw_keys.append(point.raw_key)
            self._raw.setdefault(point.raw_key, name)
        s.points.append(point)
        return s

    def extend(self, name: str, points: list[Point], *, axis: str = "step", canonical: bool = False) -> Series:
        """Append many points (of one or several raw keys) to series ``name``; same as add_point in a loop."""
        s = self.series.get(name)
        if s is None:
            s = self.series[name] = Series(name=name, axis=axis, canonical=canonical)
        for k in dict.fromkeys(p.raw_key for p in points):
            if k not in s.raw_keys:
                s.raw_keys.append(k)
                self._raw.setdefault(k, name)
        s.points.extend(points)
        return s

    def facts_of(self, name: str) -> list[ConfigFact]:
        """Every fact under canonical ``name`` or with raw key ``name`` (also matching a dotted suffix
        ``.name``, case-insensitive), in input order."""
        k = name.lower()
        return [f for f in self.facts if f.name.lower() == k or (r := f.raw_key.lower()) == k or r.endswith("." + k)]

    def fact(self, name: str) -> ConfigFact | None:
        """The effective (last by line) fact for ``name``, or None."""
        found = self.facts_of(name)
        return max(found, key=lambda f: f.line or 0) if found else None

    def value(self, name: str, default: Any = None) -> Any:
        f = self.fact(name)
        return f.value if f is not None else default

    def events_of(self, kind: str) -> Iterator[Event]:
        return (e for e in self.events if e.kind == kind)
