"""Build a :class:`~grpo_debug.tools.run.model.Run` from what the engine extracted or a metric store read.

    from grpo_debug.tools.run import build_run, from_context, from_store
    run = build_run(lines)                     # normalised lines: metrics, facts, events extracted here
    run = from_context(ctx)                    # an engine Context (tools/engine/match.py): reuses its tables
    run = from_store(store_run)                # tools.readers.StoreRun: store series + config + console

Naming: a raw key the alias table (``skills/aliases``, through ``tools/run/names.py``) maps to a canonical
name, for the run's most evident framework or else unambiguously across frameworks, is filed under it; when several raw keys of one run map to the same canonical name, the one with most
points takes it and the others stay under their raw names (a note says so). Unknown keys stay raw.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Any

from grpo_debug.tools.run import names
from grpo_debug.tools.run.model import ConfigFact, Point, Run

# x axis of a console format's step number (tools/engine/metrics.py formats)
# axes that count something other than training steps: values stated in prose, tqdm updates, summaries, table
# rows, counted overflow messages (a line on one of them cannot be mapped to a step)
COUNTER_AXES = frozenset({"mention", "tqdm_update", "summary", "summary_group", "table", "row", "overflow_count"})
_FORMAT_AXIS = {"verl": "step", "hf_trainer": "step", "openrlhf": "global_step", "megatron": "iteration",
                "deepspeed": "step", "openrlhf_tqdm": "tqdm_update", "generic": "step", "areal": "global_step",
                "wandb_summary": "summary", "kv_summary": "summary_group", "markdown": "table"}


def _axis(fmt: str, raw_key: str) -> str:
    if fmt == "slime":  # slime logs rollout/* against rollout/step and train/* against train/step
        head = raw_key.split("/", 1)[0]
        return f"{head}/step" if head in ("rollout", "train", "perf", "eval") and "/" in raw_key else "step"
    if raw_key == "deepspeed/loss_scale":
        return "overflow_count"  # counted overflow messages (engine/metrics.py), not optimizer steps
    return _FORMAT_AXIS.get(fmt, "step")


def _names(raw_counts: dict[str, int], framework: str | None, canon) -> dict[str, tuple[str, bool]]:
    """raw key -> (series name, canonical?). The raw key with most points wins a shared canonical name."""
    by_canon: dict[str, list[str]] = {}
    for k in raw_counts:
        c = canon(k, framework) or (canon(k, None) if framework else None)  # a key of another framework of the run
        if c:
            by_canon.setdefault(c, []).append(k)
    out = {k: (k, False) for k in raw_counts}
    for c, ks in by_canon.items():
        best = max(ks, key=lambda k: raw_counts[k])  # max keeps the first among equals
        if c in raw_counts and c not in ks:
            continue  # a raw key already spelled like the canonical name but meaning another thing keeps it
        out[best] = (c, True)
    return out


@contextmanager
def _no_gc():
    """Pause the cyclic garbage collector while many acyclic points are allocated (a 100k-line log allocates
    ~250k points; collections triggered by the allocations cost 3x the allocation itself)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def add_table(run: Run, table, canon=None) -> None:
    """File every series of an engine ``MetricTable`` into ``run`` (points keep line and raw key)."""
    canon = canon or names.metric_name
    fmt_of: dict[str, str] = {}
    for rec in table.records:
        for k in rec.keys:
            fmt_of.setdefault(k, rec.fmt)
    named = _names({k: len(v) for k, v in table.series.items()}, run.framework, canon)
    axes = getattr(table, "axes", {})
    with _no_gc():  # once for all series: re-enabling it per series let a collection run after each
        for k, pts in table.series.items():
            name, is_canon = named[k]
            axis = axes.get(k) or _axis(fmt_of.get(k, "generic"), k)
            run.extend(name, [Point(p.step, p.value, k, line=p.line) for p in pts], axis=axis, canonical=is_canon)
    shared = [k for k, (n, c) in named.items() if not c and (canon(k, run.framework) or canon(k, None))]
    if shared:
        run.notes.append("raw keys kept raw because another key of the run took their canonical name: "
                         + ", ".join(sorted(shared)[:8]))
    run.formats |= set(table.formats)


def add_facts(run: Run, facts, canon=None) -> None:
    """File every engine ``Fact`` (key, value, line, origin) as a ConfigFact (canonical name when known)."""
    canon = canon or names.config_name
    for f in facts.facts:
        c = canon(f.key, run.framework) or (canon(f.key, None) if run.framework else None)
        run.facts.append(ConfigFact(name=c or f.key, value=f.value, raw_key=f.key, line=f.line, origin=f.origin,
                                    canonical=bool(c)))
    run.formats |= set(facts.formats)


def build_run(lines, *, metrics=None, facts=None, events=None, source: str = "<text>",
              text: str | None = None, hint: str | None = None) -> Run:
    """A Run from normalised lines (``tools.engine.normalize.Line``).

    ``metrics`` (MetricTable), ``facts`` (FactSet) and ``events`` (list[Event]) are reused when given, else
    extracted here (``text``/``hint``: the whole document and its kind, for YAML/JSON configs).
    """
    from grpo_debug.tools.engine.metrics import extract_metrics
    from grpo_debug.tools.run.frameworks import detect
    from grpo_debug.tools.run.samples import all_samples

    if metrics is None:
        metrics = extract_metrics(lines)
    if facts is None:
        from grpo_debug.tools.engine.facts import extract_facts

        facts = extract_facts(lines, text, hint if hint in ("yaml", "json") else None, skip=metrics.lines)
    if events is None:
        from grpo_debug.tools.engine.events import extract_events

        events = extract_events(lines)
    run = Run(source=source, frameworks=detect(lines, facts, metrics.formats), events=list(events))
    add_table(run, metrics)
    add_facts(run, facts)
    run.samples = all_samples(lines)
    return run


def from_context(ctx, source: str = "<text>") -> Run:
    """The Run of an engine Context (its lines, MetricTable, FactSet and events; nothing re-extracted)."""
    return build_run(ctx.lines, metrics=ctx.metrics, facts=ctx.facts, events=ctx.events, source=source)


_STORE_FRAMEWORK = {"verl_jsonl": "verl", "trainer_state": "trl", "deepspeed_csv": "deepspeed"}


def from_store(store, canon=None) -> Run:
    """A Run from a ``tools.readers.StoreRun``: store series (points keep ``where``; x on the store's axis),
    flattened config as facts (``where`` = the store), console lines read for events, frameworks from the
    config keys, the console and the store kind. The store's notes are kept in ``Run.notes``."""
    from grpo_debug.tools.engine.facts import FactSet
    from grpo_debug.tools.engine.normalize import normalize_line
    from grpo_debug.tools.run.frameworks import detect
    from grpo_debug.tools.run.model import FrameworkHit

    lines = [normalize_line(t, i + 1) for i, t in enumerate(store.console)]
    fs = FactSet()
    for k, v in store.config.items():
        fs.add(str(k), v, 0, "store")
    run = Run(source=store.source + (f"#{store.run_id}" if store.run_id else ""), frameworks=detect(lines, fs),
              notes=list(store.notes), formats={store.kind})
    fw = _STORE_FRAMEWORK.get(store.kind)
    if fw and not run.has_framework(fw):
        run.frameworks.append(FrameworkHit(name=fw, evidence=[f"{store.kind} store"], score=2))
        run.frameworks.sort(key=lambda h: -h.score)
    canon = canon or names.metric_name
    named = _names({k: len(s.points) for k, s in store.series.items()}, run.framework, canon)
    with _no_gc():
        for k, s in store.series.items():
            name, is_canon = named[k]
            run.extend(name, [Point(x, v, k, where=where) for x, v, where in s.points], axis=s.axis, canonical=is_canon)
    add_facts(run, fs)
    for f in run.facts:
        f.line, f.where = None, store.source
    if lines:
        from grpo_debug.tools.engine.events import extract_events

        run.events = extract_events(lines)
    return run


def as_dict(run: Run) -> dict[str, Any]:
    """A JSON-ready summary: frameworks, series (name, axis, raw keys, points count), facts count, notes."""
    return {"source": run.source,
            "frameworks": [{"name": h.name, "version": h.version, "lines": h.lines, "evidence": h.evidence}
                           for h in run.frameworks],
            "series": {n: {"axis": s.axis, "raw_keys": s.raw_keys, "points": len(s.points), "canonical": s.canonical}
                       for n, s in run.series.items()},
            "facts": len(run.facts), "events": len(run.events), "samples": len(run.samples), "notes": run.notes}
