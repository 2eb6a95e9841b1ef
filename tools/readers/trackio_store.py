"""Trackio project databases (`$TRACKIO_DIR/<project>.db`, default ~/.cache/huggingface/trackio), without trackio.

Schema (trackio/sqlite_storage.py, trackio 0.43.0): metrics(id, run_id, timestamp, run_name, step,
metrics TEXT/BLOB JSON, ...), configs(id, run_id, run_name, config JSON, created_at), system_metrics(id,
run_id, timestamp, run_name, metrics JSON). Older databases have no run_id column (runs keyed by run_name).
Values pass through trackio/utils.py serialize_values, which writes inf / -inf / nan as the strings
"Infinity" / "-Infinity" / "NaN"; they are read back as floats. Trackio keeps the database in WAL mode;
it is opened read-only (immutable=1 when the folder does not allow the -shm file).
Config keys starting with '_' (trackio's _Username, _Created, _Group) go to summary, the rest are
flattened with '.'. One StoreRun per run.
"""
from __future__ import annotations

import json
import os

from .base import (Limits, Sink, StoreRun, as_number, bump, check_tables, count_note, flatten, open_sqlite_ro,
                   sqlite_tables, table_refusal)


def is_trackio(tables: dict[str, list[str]]) -> bool:
    m = tables.get("metrics", [])
    return "run_name" in m and "metrics" in m and "run_uuid" not in m


def read_trackio(path: str, limits: Limits) -> list[StoreRun]:
    con, note = open_sqlite_ro(path)
    name = os.path.basename(path)
    try:
        check_tables(con, ("metrics",))
        tables = sqlite_tables(con)
        notes = [w for w in (table_refusal(con, t) for t in ("configs", "system_metrics")) if w]
        for t in ("configs", "system_metrics"):
            if table_refusal(con, t):
                tables.pop(t, None)
        idcol = "run_id" if "run_id" in tables.get("metrics", []) else "run_name"
        runs: dict[str, StoreRun] = {}

        def get(rid, rname):
            r = runs.get(rid)
            if r is None:
                r = runs[rid] = StoreRun(source=path, kind="trackio", run_id=rid)
                r.summary["run_name"] = rname
                if note:
                    r.notes.append(note)
                r.notes += notes
            return r

        if "configs" in tables:
            ccol = "run_id" if "run_id" in tables["configs"] else "run_name"
            for rid, rname, cfg in con.execute(f"SELECT {ccol}, run_name, config FROM configs"):
                r = get(rid, rname)
                _config(r, cfg)
        sinks: dict[str, Sink] = {}
        skipped: dict[str, dict[str, int]] = {}
        q = f"SELECT id, {idcol}, run_name, step, metrics FROM metrics ORDER BY {idcol}, step, id LIMIT ?"
        for rowid, rid, rname, step, blob in con.execute(q, (limits.max_points + 1,)):
            r = get(rid, rname)
            sink = sinks.setdefault(rid, Sink(r, limits))
            _row(sink, rowid, step, blob, f"{name} metrics id={rowid} run={rname} step={step}", skipped.setdefault(rid, {}))
        for rid, sink in sinks.items():
            sink.close()
            count_note(runs[rid], skipped.get(rid, {}), "non-numeric trackio values")
        if "system_metrics" in tables:
            for rid, n in con.execute(f"SELECT {idcol}, COUNT(*) FROM system_metrics GROUP BY {idcol}"):
                if rid in runs:
                    runs[rid].notes.append(f"system_metrics: {n} rows (GPU/CPU samples on wall-clock time) not read")
    finally:
        con.close()
    return list(runs.values())


def _config(r: StoreRun, cfg) -> None:
    try:
        data = json.loads(cfg.decode() if isinstance(cfg, bytes) else cfg)
        if not isinstance(data, dict):
            raise ValueError("not an object")
    except (ValueError, AttributeError, RecursionError) as e:
        r.notes.append(f"configs row unreadable ({str(e)[:80]})")
        return
    for k, v in data.items():
        if str(k).startswith("_"):
            r.summary[k] = v
        elif isinstance(v, dict):
            r.config.update(flatten(v, str(k)))
        else:
            r.config[str(k)] = v


def _row(sink: Sink, rowid, step, blob, where: str, skipped: dict) -> None:
    try:
        data = json.loads(blob.decode() if isinstance(blob, bytes) else blob)
        flat = flatten(data, sep="/", max_keys=sink.limits.max_record_keys)
        step = float(step)
    except (ValueError, AttributeError, TypeError, RecursionError):
        bump(skipped, "unparseable row")
        return
    for k, v in flat.items():
        x = as_number(v)
        if x is None:
            bump(skipped, type(v).__name__)
            continue
        sink.add(k, "step", step, x, where)
