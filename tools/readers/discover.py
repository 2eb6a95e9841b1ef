"""Which store a path is (sniffed from its name and first bytes), finding stores under a folder, reading one.

find_stores walks with os.scandir and never follows a symlinked folder; a symlinked file is taken only when
it resolves inside the folder (and is then read through its link). A folder that is itself a store (a
TensorBoard log folder, a W&B run folder, an MLflow run folder, a csv_monitor job folder) is listed once
and not descended into.
"""
from __future__ import annotations

import os
from typing import NamedTuple

from .base import Limits, StoreRun, first_bytes, open_sqlite_ro, sqlite_tables

_SKIP_DIRS = {".git", "__pycache__", "node_modules", ".trash", ".venv", "venv", "site-packages"}
_SQLITE_EXT = (".db", ".sqlite", ".sqlite3")


class StoreRef(NamedTuple):
    path: str
    kind: str


def sniff_file(path: str) -> str | None:
    """The kind of a single file, or None."""
    from .tfevents import is_event_file

    name = os.path.basename(path)
    if is_event_file(name):
        return "tensorboard"
    if name.endswith(".wandb"):
        return "wandb" if first_bytes(path, 4) == b":W&B" else None
    if name == "trainer_state.json":
        return "trainer_state"
    head = first_bytes(path, 16)
    if head.startswith(b"SQLite format 3\x00"):
        return _sqlite_kind(path)
    if name.endswith(".jsonl"):
        from .textstores import sniff_verl_line

        line = first_bytes(path, 1 << 16).split(b"\n", 1)[0]
        return "verl_jsonl" if sniff_verl_line(line) else None
    if name.endswith(".csv"):
        from .textstores import is_ds_csv
        from .wandb_csv import is_wandb_csv

        return "deepspeed_csv" if is_ds_csv(path) else "wandb_csv" if is_wandb_csv(path) else None
    return None


def _sqlite_kind(path: str) -> str | None:
    from .trackio_store import is_trackio

    try:
        con, _ = open_sqlite_ro(path)
    except Exception:  # noqa: BLE001 - not openable: not a store we can read
        return None
    try:
        tables = sqlite_tables(con)
    except Exception:  # noqa: BLE001
        return None
    finally:
        con.close()
    m = tables.get("metrics", [])
    if {"run_uuid", "is_nan", "key", "value", "step"} <= set(m) and "runs" in tables:
        return "mlflow"
    return "trackio" if is_trackio(tables) else None


def sniff_dir(path: str, names: list[str] | None = None) -> str | None:
    """The kind of a folder that is itself one store, or None."""
    from .mlflow_store import is_mlflow_run_dir
    from .tfevents import is_event_file
    from .textstores import is_ds_csv

    from grpo_debug.tools import safefs

    if names is None:
        names = [e.name for e in safefs.regular_files(path, 20_000)]
        files = names
    else:
        files = [n for n in names if safefs.kind(os.path.join(path, n)) == "file"]
    if any(n.endswith(".wandb") for n in files) and first_bytes(
            os.path.join(path, next(n for n in files if n.endswith(".wandb"))), 4) == b":W&B":
        return "wandb"
    if any(is_event_file(n) for n in files):
        return "tensorboard"
    if is_mlflow_run_dir(path):
        return "mlflow"
    csvs = [n for n in files if n.endswith(".csv") and n != "deepspeed_config.csv"]
    if csvs and all(is_ds_csv(os.path.join(path, n)) for n in csvs[:20]):
        return "deepspeed_csv"
    return None


def find_stores(folder: str, max_depth: int = 6, max_files: int = 20000, notes: list[str] | None = None) -> list[StoreRef]:
    """Metric stores under folder, depth-first in name order. Bounded by max_depth folders down and
    max_files directory entries looked at; folders are listed through tools.safefs (no link followed, a
    symlinked file or folder is a note); what the bounds or links left out goes to `notes` if given."""
    from grpo_debug.tools import safefs

    notes = [] if notes is None else notes
    folder = os.path.abspath(folder)
    if safefs.kind(folder) == "file" or (os.path.isfile(folder) and not os.path.isdir(folder)):
        kind = sniff_file(folder)
        return [StoreRef(folder, kind)] if kind else []
    out: list[StoreRef] = []
    seen = [0]

    def walk(d: str, depth: int) -> None:
        if seen[0] > max_files:
            return
        try:
            entries = safefs.scandir(d, max_files + 1 - seen[0])
        except safefs.Refused as e:
            if "entries" in e.why:
                notes.append(f"stopped at {d}: more than max_files={max_files} entries looked at")
                seen[0] = max_files + 1
            else:
                notes.append(f"cannot list {d} ({e.why})")
            return
        except OSError as e:
            notes.append(f"cannot list {d} ({e.strerror})")
            return
        if seen[0] + len(entries) > max_files:
            notes.append(f"stopped at {d}: more than max_files={max_files} entries looked at")
            seen[0] = max_files + 1
            return
        seen[0] += len(entries)
        kind = sniff_dir(d, [e.name for e in entries if e.kind == "file"])
        if kind:
            out.append(StoreRef(d, kind))
            if kind != "tensorboard":
                return
        for e in entries:
            if e.kind == "link":
                notes.append(f"symlink {e.path} not followed")
            elif e.kind == "dir":
                if e.name in _SKIP_DIRS:
                    continue
                if depth >= max_depth:
                    notes.append(f"{e.path} not searched (max_depth={max_depth})")
                    continue
                walk(e.path, depth + 1)
            elif e.kind == "file":  # beside TensorBoard files too (a verl output folder holds both)
                fk = _file_kind(e)
                if fk:
                    out.append(StoreRef(e.path, fk))

    with safefs.anchored(folder):
        walk(folder, 0)
    return out


def _file_kind(e) -> str | None:
    from .tfevents import is_event_file

    n = e.name
    if n.endswith(".csv"):  # a csv_monitor csv is a store only as part of its folder (sniff_dir); a W&B export alone
        from .wandb_csv import is_wandb_csv

        return "wandb_csv" if is_wandb_csv(e.path) else None
    if is_event_file(n) or n.endswith(".wandb"):
        return None  # these are stores only as part of their folder (found by sniff_dir)
    if n == "trainer_state.json" or n.endswith(".jsonl") or n.endswith(_SQLITE_EXT):
        return sniff_file(e.path)
    return None


def read_store(path: str, limits: Limits | None = None, **bounds) -> list[StoreRun]:
    """Read the store at path (a file or a store folder) into StoreRuns. A folder that is not itself a
    store (or is a TensorBoard log folder, whose sub-folders may be runs too) is searched with find_stores
    and every store found is read; the search's notes go to the first run's notes. bounds: Limits fields
    (max_bytes, max_points, max_console)."""
    from grpo_debug.tools import safefs

    limits = limits or Limits(**bounds)
    if os.path.isdir(path):
        with safefs.anchored(path):
            return _read_folder(path, limits)
    kind = sniff_file(path)
    if kind is None:
        return []
    return _read(path, kind, limits)


def _read_folder(path: str, limits: Limits) -> list[StoreRun]:
    kind = sniff_dir(path)
    if kind and kind != "tensorboard":  # a TensorBoard log folder may hold run sub-folders too
        return _read(path, kind, limits)
    notes: list[str] = []
    runs = []
    for ref in find_stores(path, notes=notes):
        runs += _read(ref.path, ref.kind, limits)
    if notes and runs:
        runs[0].notes += [f"search: {n}" for n in notes]
    return runs


def _read(path: str, kind: str, limits: Limits) -> list[StoreRun]:
    try:
        return _dispatch(path, kind, limits)
    except Exception as e:  # noqa: BLE001 - one unreadable store must not stop the others
        return [StoreRun(source=path, kind=kind, notes=[f"reader failed: {type(e).__name__}: {e}"])]


def _dispatch(path: str, kind: str, limits: Limits) -> list[StoreRun]:
    if kind == "tensorboard":
        from .tfevents import read_tensorboard

        return [read_tensorboard(path, limits)]
    if kind == "wandb":
        from .wandb_log import read_wandb

        return [read_wandb(path, limits)]
    if kind == "mlflow":
        from .mlflow_store import read_mlflow_files, read_mlflow_sqlite

        return [read_mlflow_files(path, limits)] if os.path.isdir(path) else read_mlflow_sqlite(path, limits)
    if kind == "trackio":
        from .trackio_store import read_trackio

        return read_trackio(path, limits)
    from . import textstores

    if kind == "wandb_csv":
        from .wandb_csv import read_wandb_csv

        return read_wandb_csv(path, limits)
    fn = {"verl_jsonl": textstores.read_verl_jsonl, "trainer_state": textstores.read_trainer_state,
          "deepspeed_csv": textstores.read_deepspeed_csv}[kind]
    return [fn(path, limits)]
