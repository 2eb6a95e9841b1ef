"""Console metric formats beyond the built-in shapes of engine/metrics.py, one small unit per format (issue 11,
part 3). Each unit cites the framework source that prints the format.

Two kinds of unit, tried in this order by :func:`grpo_debug.tools.engine.metrics.extract_metrics`:

- block units ``fn(lines, i, table, state) -> int``: a format spanning several lines that starts at ``lines[i]``;
  they return how many lines they read (0: not this format here);
- line units ``fn(line, table, state) -> bool``: one line; ``BEFORE`` run ahead of the built-in shapes (their
  lines would otherwise be misread), ``AFTER`` only when no built-in shape read the line.

``table`` is the engine's MetricTable (``add(fmt, step, line, {raw key: value})``, ``lines``); ``state`` a dict the
units keep their step counters in. Every unit checks a cheap substring first, so a line costs a few ``in`` tests.

| unit            | format                                                                   |
|-----------------|--------------------------------------------------------------------------|
| skyrl.py        | SkyRL ConsoleLogger: ``Step N:`` then a pprint dict, floats as strings     |
| areal.py        | AReaL StatsLogger: ``Train step N/M done.`` then a tabulate fancy_grid    |
| nemo_rl.py      | NeMo-RL ``===== Step N/M =====`` and ``  • Name: value`` result bullets   |
| wandb_summary.py| ``wandb: Run summary:`` lines printed when a W&B run finishes             |
| trainer_state.py| HF trainer_state.json ``"log_history": [...]`` pasted as text             |
| markdown.py     | markdown tables: a step column, metric-per-row, or a row per variant     |
| jsonl.py        | verl FileLogger ``{"step": N, "data": {...}}``; ROLL ``metrics_tag:`` / JSON dicts |
| prime_rl.py     | prime-rl ``Step N | ... | Loss 0.1 | Grad. Norm 0.2 | ...`` lines          |
| kv_summary.py   | ``key: value   key: value`` summaries (two or more pairs, 2+ spaces apart) |
| prose.py        | a known metric key followed by a number or range in a sentence of a report |
"""
from __future__ import annotations

from grpo_debug.tools.engine.metric_formats.areal import areal_grid
from grpo_debug.tools.engine.metric_formats.jsonl import json_step_line, roll_line
from grpo_debug.tools.engine.metric_formats.kv_summary import kv_summary
from grpo_debug.tools.engine.metric_formats.markdown import markdown_table
from grpo_debug.tools.engine.metric_formats.nemo_rl import nemo_rl_line
from grpo_debug.tools.engine.metric_formats.prime_rl import prime_rl_line
from grpo_debug.tools.engine.metric_formats.prose import prose_mentions
from grpo_debug.tools.engine.metric_formats.skyrl import skyrl_block
from grpo_debug.tools.engine.metric_formats.trainer_state import trainer_state_block
from grpo_debug.tools.engine.metric_formats.wandb_summary import wandb_summary

BLOCKS = (skyrl_block, areal_grid, trainer_state_block, markdown_table, wandb_summary)
BEFORE = (json_step_line, roll_line, prime_rl_line, nemo_rl_line)
AFTER = (kv_summary, prose_mentions)

__all__ = ["AFTER", "BEFORE", "BLOCKS"]
