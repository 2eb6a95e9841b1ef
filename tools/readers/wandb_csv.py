"""W&B CSV exports: a chart panel's "Download CSV" and a run's history written with pandas.

Chart export (the W&B app, a line plot's menu > Download > CSV; file name ``wandb_export_<time>.csv``). No
format document is published; the layout here is the one of exports and of the scripts reading them in public
repositories (e.g. ``"Step"``, ``"<run> - train/loss"``, ``"<run> - train/loss__MIN"``, ``"<run> -
train/loss__MAX"``; ``"Group: <name> - train/loss"`` when the panel groups runs; an x axis other than the step,
``"Relative Time (Process)"`` or a custom x such as ``"epoch"``, then with ``"<run> - _step"`` columns):

- the first column is the panel's x axis, one row per x value;
- then per run drawn and per metric a column ``<run> - <metric>`` (split at the last ``" - "``; a column
  without it belongs to one unnamed run), and ``__MIN`` / ``__MAX`` columns, the band of a smoothed or grouped
  line: they are not metrics of their own and are not read;
- an empty cell: that run has no value at that x.

Steps come only from a step field: the x column when it is ``Step`` / ``_step``, else the run's own
``<run> - _step`` column; otherwise the points are filed on the x axis the panel used (its column name).

History CSV (``wandb.Api().run(path).history()`` returns a pandas DataFrame, the Public API docs; written with
``DataFrame.to_csv``): one run, a ``_step`` column holding W&B's step, ``_runtime`` / ``_timestamp`` beside the
metrics. pandas writes NaN as an empty cell (``na_rep=''``), so a NaN of that file cannot be told from a missing
value (a note says so). W&B publishes no run-export JSON format: ``run.history()`` / ``scan_history()`` return
rows in memory, the CLI reference lists no export command (agent, artifact, pull, restore, sync, ...), and the
full history is a Parquet artifact (``<run-id>-history``, type ``wandb-history``, the docs' "why are steps missing
from a CSV metric export"); none of these is read here.

Several runs in one chart export: one :class:`StoreRun` per run, ``run_id`` its name.
"""
from __future__ import annotations

import csv
import math
import os

from .base import Limits, Sink, StoreRun, bounded_lines, count_note, first_bytes

BANDS = ("__MIN", "__MAX")
STEP_NAMES = ("Step", "_step")
HISTORY_SKIP = ("_step", "_runtime", "_timestamp", "")
MAX_COLUMNS = 10_000


def _header(path: str) -> list[str]:
    """The first row of ``path`` (a UTF-8 BOM dropped), parsed as CSV; [] when there is none."""
    head = first_bytes(path, 1 << 20).split(b"\n", 1)[0].rstrip(b"\r")  # many runs x metrics: a long header
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    try:
        return next(csv.reader([head.decode("utf-8")]), [])
    except (UnicodeDecodeError, csv.Error):
        return []


def shape(cols: list[str]) -> str | None:
    """``"chart"`` (a panel's Download CSV), ``"history"`` (a run's history DataFrame) or None for a header."""
    if len(cols) < 2 or len(cols) > MAX_COLUMNS:
        return None
    rest = cols[1:]
    bands = {c for c in rest if c.endswith(BANDS)}
    named = all(c and (" - " in c or c in bands or c + "__MIN" in bands or c + "__MAX" in bands) for c in rest)
    if named and (bands or cols[0] in STEP_NAMES) and cols[0]:
        return "chart"
    if "_step" in cols and cols[0] in ("", "_step"):
        return "history"
    return None


def is_wandb_csv(path: str) -> bool:
    """Whether ``path`` starts with the header of a W&B chart export or history CSV (see the module doc)."""
    return shape(_header(path)) is not None


def _split(col: str) -> tuple[str, str]:
    """(run label, metric) of a chart column ``<run> - <metric>``; ('', col) without a run label."""
    run, sep, metric = col.rpartition(" - ")
    return (run, metric) if sep and metric else ("", col)


class _Plan:
    """Which column holds what: per run label its metric columns and its own ``_step`` column."""

    def __init__(self, cols: list[str], kind: str):
        self.x_name, self.kind = cols[0], kind
        self.metrics: dict[str, list[tuple[int, str]]] = {}
        self.step_col: dict[str, int] = {}
        self.bands = 0
        for i, c in enumerate(cols[1:], 1):
            if kind == "history":
                if c not in HISTORY_SKIP:
                    self.metrics.setdefault("", []).append((i, c))
                elif c == "_step":
                    self.step_col[""] = i
                continue
            if c.endswith(BANDS):
                self.bands += 1
                continue
            run, metric = _split(c)
            if metric == "_step":
                self.step_col[run] = i
            elif metric.startswith("_"):  # _runtime, _timestamp: W&B's own bookkeeping
                continue
            else:
                self.metrics.setdefault(run, []).append((i, metric))
        self.x_is_step = kind == "chart" and self.x_name in STEP_NAMES


def _cell(row: list[str], i: int) -> float | None:
    """The number in cell ``i`` (nan, inf, -inf and exponents as float() reads them); None when empty; raises
    ValueError for text."""
    s = row[i].strip() if i < len(row) else ""
    return float(s) if s else None


def _row(plan: _Plan, row: list[str], n: int, sinks: dict[str, Sink], base: str, bad: dict[str, int]) -> None:
    try:
        x = _cell(row, 0) if plan.kind == "chart" else None
    except ValueError:
        x = None
    for run, cols in plan.metrics.items():
        axis, step = (plan.x_name, x) if not plan.x_is_step else ("step", x)
        sc = plan.step_col.get(run)
        if sc is not None:
            try:
                step, axis = _cell(row, sc), "step"
            except ValueError:
                step = None
        if step is None or not math.isfinite(step):
            if any(i < len(row) and row[i].strip() for i, _ in cols):
                bad["rows without a step"] = bad.get("rows without a step", 0) + 1
            continue
        for i, metric in cols:
            try:
                v = _cell(row, i)
            except ValueError:
                bad["cells that are not numbers"] = bad.get("cells that are not numbers", 0) + 1
                continue
            if v is not None:
                sinks[run].add(metric, axis, step, v, f"{base}#row {n}")


def read_wandb_csv(path: str, limits: Limits) -> list[StoreRun]:
    """The runs of a W&B chart export or history CSV at ``path`` (one StoreRun per run label); every point's
    ``where`` is ``<file>#row N`` (N: the 1-based line of the file). Bounded by ``limits`` (bytes, line length,
    points); what is skipped is in the first run's notes. Raises OSError (safefs.Refused) when the file cannot be
    opened safely."""
    base = os.path.basename(path)
    cols = _header(path)
    kind = shape(cols)
    if kind is None:
        return [StoreRun(source=path, kind="wandb_csv", notes=[f"{base}: not a W&B chart export or history CSV "
                                                                "(header)"])]
    plan = _Plan(cols, kind)
    runs = {r: StoreRun(source=path, kind="wandb_csv", run_id=r or None) for r in plan.metrics}
    if not runs:
        return [StoreRun(source=path, kind="wandb_csv", notes=[f"{base}: no metric columns"])]
    first = next(iter(runs.values()))
    sinks = {r: Sink(run, limits) for r, run in runs.items()}
    bad: dict[str, int] = {}
    for n, line in bounded_lines(path, limits, first.notes):
        if n == 1 or not line.strip():
            continue
        try:
            row = next(csv.reader([line.decode("utf-8", "replace")]), [])
        except csv.Error:
            bad["malformed rows"] = bad.get("malformed rows", 0) + 1
            continue
        _row(plan, row, n, sinks, base, bad)
    for s in sinks.values():
        s.close()
    if plan.bands:
        first.notes.append(f"{plan.bands} __MIN/__MAX columns (the band of a smoothed or grouped line) not read")
    if kind == "chart" and not plan.x_is_step and any(r not in plan.step_col for r in plan.metrics):
        first.notes.append(f"the x axis is '{plan.x_name[:60]}', not the step: points without a '<run> - _step' "
                           "column are on that axis")
    if kind == "history":
        first.notes.append("pandas writes NaN as an empty cell: a NaN of this history CSV reads as a missing value")
    count_note(first, bad, "rows or cells")
    return list(runs.values())
