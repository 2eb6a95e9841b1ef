"""W&B CSV exports (tools/readers/wandb_csv.py): a chart panel's Download CSV (runs, __MIN/__MAX bands, another
x axis with per-run _step columns) and a run's history DataFrame written as CSV; routed as a store file."""
from __future__ import annotations

import math
from pathlib import Path

from grpo_debug.tools.readers import Limits, find_stores, read_store, sniff_file
from grpo_debug.tools.readers.wandb_csv import shape

DATA = Path(__file__).resolve().parent / "data" / "stores" / "wandb_csv"
CHART = DATA / "wandb_export_2026-11-30T10_00_00.000+00_00.csv"


def _pts(run, key):
    return [(x, v) for x, v, _ in run.series[key].points]


def _same(a, b):
    return len(a) == len(b) and all(x == y and (v == w or (math.isnan(v) and math.isnan(w)))
                                    for (x, v), (y, w) in zip(a, b))


def test_chart_export_one_run_per_label_bands_not_metrics_values_exact():
    assert sniff_file(str(CHART)) == "wandb_csv"
    runs = {r.run_id: r for r in read_store(str(CHART))}
    assert set(runs) == {"ruby-sweep-7", "calm-sweep-8"}
    ruby, calm = runs["ruby-sweep-7"], runs["calm-sweep-8"]
    assert set(ruby.series) == set(calm.series) == {"actor/pg_loss", "actor/grad_norm"}  # no __MIN/__MAX series
    assert _same(_pts(ruby, "actor/pg_loss"), [(1, -0.9131), (2, -0.8702), (3, -0.8), (4, -1.2e-05), (5, math.nan)])
    assert _same(_pts(ruby, "actor/grad_norm"), [(1, 0.41), (2, 0.52), (3, 1.7), (4, 12.5), (5, math.inf)])
    # an empty cell is no point (step 5 of calm, step 6 of ruby), -inf kept with its sign
    assert _same(_pts(calm, "actor/pg_loss"), [(1, 0.02), (2, 0.018), (3, -0.01), (4, 0.0), (6, -math.inf)])
    assert ruby.series["actor/pg_loss"].axis == "step"
    assert ruby.series["actor/pg_loss"].points[0][2] == f"{CHART.name}#row 2"
    assert any("__MIN/__MAX" in n for n in ruby.notes)


def test_other_x_axis_takes_the_runs_own_step_column():
    (run,) = read_store(str(DATA / "wandb_export_relative_time.csv"))
    assert run.run_id == "solo-run-3" and set(run.series) == {"train/loss"}  # _step is the step, not a metric
    assert _same(_pts(run, "train/loss"), [(10, 2.31), (20, -0.5), (30, 1.2e-05), (40, -math.inf)])


def test_other_x_axis_without_step_column_keeps_that_axis(tmp_path):
    p = tmp_path / "wandb_export.csv"
    p.write_text('"Relative Time (Process)","a - loss","a - loss__MIN","a - loss__MAX"\n"1.5","0.5","0.5","0.5"\n'
                 '"3.0","-0.25","-0.25","-0.25"\n')
    (run,) = read_store(str(p))
    s = run.series["loss"]
    assert s.axis == "Relative Time (Process)" and [(x, v) for x, v, _ in s.points] == [(1.5, 0.5), (3.0, -0.25)]
    assert any("not the step" in n for n in run.notes)


def test_history_csv_steps_from_step_column():
    (run,) = read_store(str(DATA / "history.csv"))
    assert set(run.series) == {"train/loss", "train/grad_norm"}
    assert _same(_pts(run, "train/loss"), [(0, 2.5), (5, -0.25), (10, 1e-06)])
    assert _same(_pts(run, "train/grad_norm"), [(0, 0.9), (10, math.inf)])


def test_shapes_that_are_not_exports():
    assert shape(["step", "Train_Samples_train_loss"]) is None  # DeepSpeed csv_monitor
    assert shape(["Name", "State", "Runtime", "eval/loss"]) is None  # the runs table export: one row per run
    assert shape(["Step", "loss"]) is None
    assert shape(["Step", "r - loss", "r - loss__MIN"]) == "chart"
    assert shape(["Step", "train_loss", "train_loss__MIN", "train_loss__MAX"]) == "chart"


def test_text_cells_counted_and_point_limit(tmp_path):
    p = tmp_path / "wandb_export.csv"
    p.write_text("\ufeffStep,r - loss,r - loss__MIN\n1,0.5,0.5\n2,oops,0\nx,0.1,0\n3,0.25,0.2\n", encoding="utf-8")
    (run,) = read_store(str(p))
    assert [(x, v) for x, v, _ in run.series["loss"].points] == [(1, 0.5), (3, 0.25)]
    assert any("cells that are not numbers x1" in n and "rows without a step x1" in n for n in run.notes)
    (run,) = read_store(str(p), Limits(max_points=1))
    assert len(run.series["loss"].points) == 1 and any("point limit" in n for n in run.notes)


def test_found_in_a_folder_and_triaged_as_a_store_file(tmp_path):
    from grpo_debug.tools.rundir.analyze import triage_any

    kinds = {Path(r.path).name: r.kind for r in find_stores(str(DATA))}
    assert kinds == {CHART.name: "wandb_csv", "history.csv": "wandb_csv", "wandb_export_relative_time.csv": "wandb_csv"}
    res = triage_any(path=str(CHART))
    assert any(CHART.name in f and "wandb_csv store run ruby-sweep-7" in f for f in res.coverage.files)
    assert any(f.symptom == "nan_inf" for f in res.findings)  # the nan at step 5 of ruby-sweep-7


def test_the_run_model_of_an_export_names_series_canonically_and_keeps_rows():
    from grpo_debug.tools.run.build import from_store

    ruby = next(r for r in read_store(str(CHART)) if r.run_id == "ruby-sweep-7")
    run = from_store(ruby)
    pts = {p.raw_key: p for s in run.series.values() for p in s.points if p.step == 1.0}
    assert pts["actor/pg_loss"].value == -0.9131 and pts["actor/pg_loss"].where == f"{CHART.name}#row 2"
    assert all(s.axis == "step" for s in run.series.values()) and "wandb_csv" in run.formats


def test_a_second_run_s_points_at_the_same_steps_are_never_dropped_silently():
    """A W&B chart CSV of two runs is merged as one run (runs of one store are not split yet): the second run's
    points at steps the first already has are not merged, and the coverage says how many and of which run."""
    from grpo_debug.tools.rundir.analyze import triage_any

    res = triage_any(path=str(DATA / "wandb_export_2026-11-30T10_00_00.000+00_00.csv"))
    notes = [s for s in res.coverage.skipped if "not merged" in s]
    assert notes and "calm-sweep-8" in notes[0] and "points" in notes[0]
