"""The run model (issue 11): one :class:`Run` per input, whatever the framework or the store.

    from grpo_debug.tools.run import Run, build_run, from_context, from_store
    run = from_context(ctx)              # or build_run(lines) / from_store(store_run)
    run.framework                        # 'verl' (most evident), run.frameworks: [FrameworkHit(name, version, lines, evidence)]
    run.series_of("grad_norm")           # Series(name, axis, points[Point(step, value, raw_key, line, where)])
    run.fact("rollout_n")                # ConfigFact(name, value, raw_key, line, where, origin) or None

| module        | holds                                                                    |
|---------------|--------------------------------------------------------------------------|
| model.py      | Run, Series, Point, ConfigFact, FrameworkHit, Sample (shapes and units)  |
| build.py      | build_run / from_context / from_store / add_table / add_facts            |
| names.py      | canonical names through skills/aliases (no table of its own)             |
| frameworks.py | frameworks with version and evidence lines                               |
| samples.py    | rollout text samples printed in logs                                     |
| versions.py   | framework releases: VersionHit, comparison, the caller's and the host's   |
| version_units.py | releases the input shows (pip, banners, image tags, flag spellings)   |
"""
from grpo_debug.tools.run.model import ConfigFact, FrameworkHit, Point, Run, Sample, Series
from grpo_debug.tools.run.build import add_facts, add_table, as_dict, build_run, from_context, from_store

__all__ = ["ConfigFact", "FrameworkHit", "Point", "Run", "Sample", "Series", "add_facts", "add_table", "as_dict",
           "build_run", "from_context", "from_store"]
