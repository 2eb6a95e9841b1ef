"""Signals by kind (issue 22, "rules read the Run"): how many signals of the rule base address canonical names (a
metric of ``skills/aliases.yaml``, a canonical config id, an error class) and how many still read raw text or raw
metric keys. ``pytest -s`` prints the counts.

The kinds:

- ``raw_text``: a ``regex`` signal, or an ``event`` signal whose ``message:`` pattern does not name an error class
  (``^\\[class\\]``, the class in ``tools/engine/error_classes.py``); raw-line regexes belong in the units that
  extract events or classify errors, not in rules;
- ``error_class``: an ``event`` signal whose ``message:`` names an error class; ``event``: an event kind alone;
- ``detector_canonical``: ``metric:`` a canonical metric id, nothing else; ``detector_canonical_fallback``: a
  ``metric:`` with a ``keys:`` regex beside it (used when the run lacks the series);
- ``detector_raw_key``: a ``keys:`` regex over metric keys; ``detector_builtin_regex``: a table detector with
  neither, so it reads its own built-in key regex (``tools/engine/detectors.py``);
- ``detector_run``: a run-model detector (``tools/engine/series``) left to its default series; ``detector_all``: a
  detector over every series (``nonfinite`` with no selection);
- ``config_canonical`` (every key a canonical config id) / ``config_raw``; ``check``, ``probe``, ``query``.

The ceilings are today's counts: a new rule (or an edit) that adds a raw-text or raw-key signal fails here. Lower a
ceiling when a conversion removes one; never raise it to let a raw signal in (give the metric an alias in
``skills/aliases.yaml``, or the message an error class, instead).
"""
from __future__ import annotations

import re
from collections import Counter

from grpo_debug.skills.aliases import CANONICAL_CONFIG, load_aliases
from grpo_debug.skills.loader import default_rules
from grpo_debug.skills.schema import (CheckSignal, ConfigSignal, DetectorSignal, EventSignal, Match, ProbeSignal,
                                      QuerySignal, RegexSignal, Rule)
from grpo_debug.tools.engine.detectors import DETECTORS
from grpo_debug.tools.engine.error_classes import BY_NAME

# the most signals of each raw kind the rule base may hold (today's counts, after the conversions of issue 22)
# detector_raw_key 10 -> 11: nemo-rl-loo-normalized-advantage-explosion reads advantages/max (no canonical alias yet)
CEILING = {"raw_text": 75, "detector_raw_key": 11, "detector_builtin_regex": 10, "detector_canonical_fallback": 0}

# table detectors whose selection without keys/metric is a regex of their own over metric keys (detectors.py)
_BUILTIN_REGEX = {"spike", "growth", "decline", "flat", "vanished", "zero_reward", "length_cap"}
_CLASS_NAME = re.compile(r"^\^?\\\[(?:\(\?:)?([a-z0-9_|]+)\)?\\\]")


def signals(m: Match):
    """Every signal of a match: all, any, none, support, then the either sub-matches (recursively)."""
    yield from (*m.all, *m.any, *m.none, *m.support)
    for sub in m.either:
        yield from signals(sub)


def names_class(message: str) -> bool:
    """True when an event ``message:`` pattern starts with ``\\[name\\]`` (or ``\\[(?:a|b)\\]``), every name an
    error class of ``tools/engine/error_classes.py``."""
    m = _CLASS_NAME.match(message)
    return bool(m) and all(n in BY_NAME for n in m.group(1).split("|"))


def kind_of(sig) -> str:
    """The kind (module docstring) of one signal."""
    if isinstance(sig, RegexSignal):
        return "raw_text"
    if isinstance(sig, EventSignal):
        if sig.message is None:
            return "event"
        return "error_class" if sig.event == "error" and names_class(sig.message) else "raw_text"
    if isinstance(sig, DetectorSignal):
        metric, keys = sig.params.get("metric"), sig.params.get("keys")
        if metric is not None:
            return "detector_canonical_fallback" if keys else "detector_canonical"
        if keys:
            return "detector_raw_key"
        fn = DETECTORS.get(sig.detector)
        if getattr(fn, "reads_run", False):
            return "detector_run"
        return "detector_builtin_regex" if sig.detector in _BUILTIN_REGEX else "detector_all"
    if isinstance(sig, ConfigSignal):
        return "config_canonical" if all(k in CANONICAL_CONFIG for k in sig.all_keys()) else "config_raw"
    for cls, name in ((CheckSignal, "check"), (ProbeSignal, "probe"), (QuerySignal, "query")):
        if isinstance(sig, cls):
            return name
    raise AssertionError(f"unknown signal type {type(sig).__name__}")


def count_kinds(rules: list[Rule]) -> Counter:
    """Signals per kind over ``rules``."""
    return Counter(kind_of(s) for r in rules for s in signals(r.match))


def over_ceiling(counts: Counter, ceiling: dict[str, int] = CEILING) -> dict[str, tuple[int, int]]:
    """{kind: (count, ceiling)} for every raw kind above its ceiling."""
    return {k: (counts[k], c) for k, c in ceiling.items() if counts[k] > c}


def raw_signals(rules: list[Rule]) -> dict[str, list[str]]:
    """{raw kind: ['rule-id: signal', ...]} (the message of a failing ceiling lists them)."""
    out: dict[str, list[str]] = {}
    for r in rules:
        for s in signals(r.match):
            k = kind_of(s)
            if k in CEILING:
                out.setdefault(k, []).append(f"{r.id}: {s.model_dump(exclude_defaults=True)}")
    return out


RULES = list(default_rules())


def test_signal_kinds_stay_under_their_ceilings():
    counts = count_kinds(RULES)
    print("\nsignals by kind:", dict(sorted(counts.items())), "total", sum(counts.values()))
    over = over_ceiling(counts)
    listing = {k: raw_signals(RULES).get(k, [])[-5:] for k in over}
    assert not over, (f"raw signals above their ceiling (count, ceiling): {over}; address a canonical metric "
                      f"(skills/aliases.yaml) or an error class instead. Last ones: {listing}")


def test_ceilings_are_tight():
    """A conversion that removed raw signals lowers the ceiling, so the room cannot be spent on a new raw one."""
    counts = count_kinds(RULES)
    slack = {k: (counts[k], c) for k, c in CEILING.items() if counts[k] < c}
    assert not slack, f"lower CEILING to today's counts (count, ceiling): {slack}"


def test_canonical_metrics_of_detectors_are_in_the_alias_table():
    metrics = set(load_aliases().metrics)
    bad = [(r.id, s.detector, s.params["metric"]) for r in RULES for s in signals(r.match)
           if isinstance(s, DetectorSignal) and "metric" in s.params and s.params["metric"] not in metrics]
    assert not bad, f"detector metric: names missing from skills/aliases.yaml metrics: {bad}"


def test_every_detector_signal_is_classified_by_what_it_reads():
    # the known detectors only (test_rules checks names); a detector of the table without a default regex listed
    # here would count as reading every series, which only nonfinite does
    for r in RULES:
        for s in signals(r.match):
            if isinstance(s, DetectorSignal) and kind_of(s) == "detector_all":
                assert s.detector == "nonfinite", (r.id, s.detector)


def test_a_new_raw_text_rule_is_caught():
    base = count_kinds(RULES)
    rule = RULES[0].model_copy(update={"match": Match.model_validate({"any": [
        {"kind": "regex", "pattern": "some raw line"},
        {"kind": "event", "event": "error", "message": "CUDA error: an illegal memory access"},
        {"kind": "detector", "detector": "growth", "params": {"keys": "my_metric"}},
        {"kind": "detector", "detector": "spike"},
        {"kind": "detector", "detector": "growth", "params": {"metric": "grad_norm", "keys": "grad"}}]})})
    counts = count_kinds([*RULES, rule])
    assert counts["raw_text"] == base["raw_text"] + 2
    assert counts["detector_raw_key"] == base["detector_raw_key"] + 1
    assert set(over_ceiling(counts, {k: base[k] for k in CEILING})) == set(CEILING)


def test_kinds_of_canonical_signals():
    cls = next(iter(BY_NAME))
    assert kind_of(EventSignal(event="error", message=rf"^\[{cls}\]")) == "error_class"
    assert kind_of(EventSignal(event="error", message=r"^\[\w+\] out of memory")) == "raw_text"
    assert kind_of(EventSignal(event="error", message=r"^\[no_such_class_xyz\]")) == "raw_text"
    assert kind_of(EventSignal(event="cuda_oom")) == "event"
    assert kind_of(DetectorSignal(detector="late_climb", params={"metric": "grad_norm"})) == "detector_canonical"
    assert kind_of(DetectorSignal(detector="plateau")) == "detector_run"
    assert kind_of(DetectorSignal(detector="nonfinite")) == "detector_all"
    assert kind_of(ConfigSignal(key="tp", op="gt", value=1)) == "config_canonical"
    assert kind_of(ConfigSignal(keys=["tp", "tensor_model_parallel_size"], op="gt", value=1)) == "config_raw"


def test_one_table_of_fallback_spellings():
    """The default key regexes of the detectors live once, in tools/run/names.FALLBACK_KEYS (canonical ids as
    keys), and the important series once, in names.IMPORTANT_KEYS; no module under tools/ spells one again."""
    from pathlib import Path

    from importlib import import_module

    from grpo_debug.tools.engine import detectors
    from grpo_debug.tools.engine import series_store
    from grpo_debug.tools.run.names import FALLBACK_KEYS, IMPORTANT_KEYS

    collapse, flat_zero, late_climb, plateau = (import_module(f"grpo_debug.tools.engine.series.{m}")
                                                for m in ("collapse", "flat_zero", "late_climb", "plateau"))

    assert set(FALLBACK_KEYS) <= set(load_aliases().metrics)
    assert detectors.GRAD_NORM is late_climb.GRAD_NORM_KEYS is FALLBACK_KEYS["grad_norm"]
    assert detectors.ENTROPY is collapse.ENTROPY_KEYS and detectors.REWARD is flat_zero.REWARD_KEYS
    assert detectors.LOSS is plateau.LOSS_KEYS is FALLBACK_KEYS["loss"]
    tools = Path(detectors.__file__).resolve().parents[1]
    copies = [(str(p.relative_to(tools)), k) for p in tools.rglob("*.py") if p.name != "names.py"
              for k, rx in {**FALLBACK_KEYS, "important series": IMPORTANT_KEYS}.items()
              if f'r"{rx}"' in p.read_text(encoding="utf-8")]
    assert not copies, f"fallback spellings copied outside tools/run/names.py: {copies}"
    assert series_store.IMPORTANT.pattern is IMPORTANT_KEYS


def test_a_converted_signal_reads_the_canonical_series():
    """verl-fsdp2-weight-sync-cpu-leak's growth signal reads perf/cpu_memory_used_gb through its canonical id, and
    not a key that only contains the words."""
    from grpo_debug.tools.engine.match import run_detector
    from grpo_debug.tools.triage import build_context

    rule = next(r for r in RULES if r.id == "verl-fsdp2-weight-sync-cpu-leak")
    (sig,) = [s for s in signals(rule.match) if isinstance(s, DetectorSignal)]
    assert kind_of(sig) == "detector_canonical"
    log = "python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.strategy=fsdp2\n" + "".join(
        f"(TaskRunner pid=1) step:{i} - actor/pg_loss:0.01 - {key}:{40 + 12 * i}\n"
        for key in ("perf/cpu_memory_used_gb",) for i in range(1, 7))
    ctx, _ = build_context(log)
    hit = run_detector(sig.detector, dict(sig.params), ctx)
    assert hit is not None and hit.keys == ["perf/cpu_memory_used_gb"], hit
    ctx, _ = build_context(log.replace("perf/cpu_memory_used_gb", "perf/gpu_memory_used_gb"))
    assert run_detector(sig.detector, dict(sig.params), ctx) is None
