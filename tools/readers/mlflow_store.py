"""MLflow tracking stores, read without mlflow: SQLite databases and the legacy `mlruns/` file store.

SQLite (mlflow/store/tracking/dbmodels/models.py; verl's default tracking URI is sqlite:////tmp/mlruns.db,
`mlflow server`'s is mlflow.db): tables metrics(key, value, timestamp, run_uuid, step, is_nan),
params(key, value, run_uuid), tags(key, value, run_uuid), runs(run_uuid, name, status, start_time, end_time,
lifecycle_stage, experiment_id, ...), experiments(experiment_id, name, ...). NaN is stored as value 0 with
is_nan = 1; +-inf as +-1.7976931348623157e308 (sys.float_info.max), mapped back to +-inf here. The database
is opened read-only (URI mode=ro). Each run is one StoreRun; a (key, step) logged twice keeps the later
timestamp.

File store (mlflow/store/tracking/file_store.py): mlruns/<experiment_id>/<run_id>/ with meta.yaml
(status as RunStatus: 1 RUNNING, 2 SCHEDULED, 3 FINISHED, 4 FAILED, 5 KILLED), metrics/<key> with lines
"timestamp value step" (older: "timestamp value"; a key with '/' is a sub-folder path), params/<key> and
tags/<key> holding the value as text.

Params become config: verl flattens its config with '/' before logging it
(verl/utils/tracking.py _compute_mlflow_params_from_objects), so '/' in a param key is read as '.'.
"""
from __future__ import annotations

import math
import os

from .base import (FLOAT_MAX, Limits, Sink, StoreRun, bounded_lines, check_tables, open_sqlite_ro, parse_scalar,
                   table_refusal)

_STATUS = {1: "RUNNING", 2: "SCHEDULED", 3: "FINISHED", 4: "FAILED", 5: "KILLED"}


def _value(value, is_nan) -> float:
    if is_nan:
        return math.nan
    v = float(value)
    if v >= FLOAT_MAX:
        return math.inf
    if v <= -FLOAT_MAX:
        return -math.inf
    return v


def read_mlflow_sqlite(path: str, limits: Limits) -> list[StoreRun]:
    con, note = open_sqlite_ro(path)
    name = os.path.basename(path)
    try:
        check_tables(con, ("runs", "metrics"))
        runs = {}
        cols = {r[1] for r in con.execute('PRAGMA table_info("runs")')}
        sel = ", ".join(c if c in cols else "NULL" for c in
                        ("run_uuid", "name", "status", "start_time", "end_time", "lifecycle_stage", "experiment_id"))
        for uuid, rname, status, start, end, stage, exp in con.execute(f"SELECT {sel} FROM runs"):
            r = runs[uuid] = StoreRun(source=path, kind="mlflow", run_id=uuid)
            r.summary.update({"run_name": rname, "status": status, "start_time": start, "end_time": end,
                              "lifecycle_stage": stage, "experiment_id": exp})
            if note:
                r.notes.append(note)
        _params(con, runs, path)
        _metrics(con, runs, name, limits)
    finally:
        con.close()
    return list(runs.values())


def _params(con, runs: dict, path: str) -> None:
    import sqlite3

    first = next(iter(runs.values()), None)
    for table in ("params", "tags"):
        why = table_refusal(con, table)
        if why and first is not None:
            first.notes.append(why)
    if table_refusal(con, "params") is None:
        for key, value, uuid in con.execute("SELECT key, value, run_uuid FROM params"):
            r = runs.get(uuid)
            if r is not None:
                r.config[str(key).replace("/", ".")] = parse_scalar(str(value))
    if table_refusal(con, "tags") is not None:
        return
    try:
        for key, value, uuid in con.execute("SELECT key, value, run_uuid FROM tags"):
            r = runs.get(uuid)
            if r is not None:
                r.summary.setdefault("tags", {})[key] = value
    except sqlite3.OperationalError as e:  # a store without a tags table; an interrupted query is said
        if "interrupt" in str(e) and runs:
            next(iter(runs.values())).notes.append(f"tags not read ({e})")


def _metrics(con, runs: dict, name: str, limits: Limits) -> None:
    sinks = {u: Sink(r, limits) for u, r in runs.items()}
    q = ("SELECT rowid, run_uuid, key, step, value, is_nan FROM metrics "
         "ORDER BY run_uuid, key, step, timestamp, rowid LIMIT ?")
    last = None
    orphans = rows = 0
    cap = limits.max_points * 2
    for rowid, uuid, key, step, value, is_nan in con.execute(q, (cap,)):
        rows += 1
        r = runs.get(uuid)
        if r is None:
            orphans += 1
            continue
        where = f"{name} metrics rowid={rowid} run={uuid} key={key} step={step}"
        s = r.series.get(key)
        if last == (uuid, key, step) and s is not None and s.points:
            s.points[-1] = (float(step), _value(value, is_nan), where)  # a re-logged step: later timestamp wins
            continue
        sinks[uuid].add(key, "step", step, _value(value, is_nan), where)
        last = (uuid, key, step)
    for s in sinks.values():
        s.close()
    if rows >= cap and runs:
        next(iter(runs.values())).notes.append(f"{name}: stopped after {cap} metric rows (2 x max_points)")
    if orphans and runs:
        next(iter(runs.values())).notes.append(f"{orphans} metric rows name a run_uuid missing from runs; skipped")


def is_mlflow_run_dir(path: str) -> bool:
    from grpo_debug.tools import safefs

    return safefs.kind(os.path.join(path, "meta.yaml")) == "file" and safefs.kind(os.path.join(path, "metrics")) == "dir"


def read_mlflow_files(run_dir: str, limits: Limits) -> StoreRun:
    run = StoreRun(source=run_dir, kind="mlflow", run_id=os.path.basename(run_dir.rstrip("/")))
    from grpo_debug.tools import safefs

    try:
        from grpo_debug.tools.engine.documents import load_yaml  # the safe loader: no alias bombs, no tags

        meta = load_yaml(safefs.read_bytes(os.path.join(run_dir, "meta.yaml"), 4 << 20).decode("utf-8", "replace")) or {}
        run.summary.update({"run_name": meta.get("run_name"), "status": _STATUS.get(meta.get("status"), meta.get("status")),
                            "start_time": meta.get("start_time"), "end_time": meta.get("end_time"),
                            "experiment_id": meta.get("experiment_id"), "lifecycle_stage": meta.get("lifecycle_stage")})
    except Exception as e:  # noqa: BLE001 - meta.yaml is context; the metrics are still read
        run.notes.append(f"meta.yaml unreadable ({type(e).__name__}: {e})")
    sink = Sink(run, limits)
    for key, fpath in _walk_keys(os.path.join(run_dir, "metrics"), run):
        try:
            _metric_file(key, fpath, run_dir, sink, limits)
        except OSError as e:
            run.notes.append(f"metrics/{key}: {getattr(e, 'why', None) or e.strerror or e}")
    sink.close()
    for sub, into in (("params", None), ("tags", "tags")):
        for key, fpath in _walk_keys(os.path.join(run_dir, sub), run):
            try:
                value = safefs.read_bytes(fpath, 1 << 16).decode("utf-8", "replace")
            except OSError as e:
                run.notes.append(f"{sub}/{key}: {getattr(e, 'why', None) or e.strerror or e}")
                continue
            if into is None:
                run.config[key.replace("/", ".")] = parse_scalar(value)
            else:
                run.summary.setdefault(into, {})[key] = value
    return run


def _walk_keys(root: str, run: StoreRun, max_entries: int = 20_000):
    """(key, path) of each regular file under ``root`` (a metrics/params/tags folder), in name order; links,
    FIFOs and devices are notes, never opened; at most ``max_entries`` entries looked at."""
    from grpo_debug.tools import safefs

    stack, seen = [root], 0
    while stack:
        d = stack.pop()
        try:
            entries = safefs.scandir(d, max_entries)
        except OSError as e:
            if safefs.kind(d) != "missing":
                run.notes.append(f"{os.path.relpath(d, os.path.dirname(root))}: {getattr(e, 'why', None) or e.strerror or e}")
            continue
        seen += len(entries)
        if seen > max_entries:
            run.notes.append(f"{os.path.basename(root)}: more than {max_entries} entries; the rest not read")
            return
        stack += [e.path for e in reversed(entries) if e.kind == "dir"]  # os.walk's order: files, then folders
        for e in entries:
            rel = os.path.relpath(e.path, os.path.dirname(root))
            if e.kind == "dir":
                continue
            if e.kind == "file":
                yield os.path.relpath(e.path, root).replace(os.sep, "/"), e.path
            else:
                run.notes.append(f"{rel}: {'a symbolic link; not followed' if e.kind == 'link' else 'not a regular file; not read'}")


def _metric_file(key: str, fpath: str, run_dir: str, sink: Sink, limits: Limits) -> None:
    rel = os.path.relpath(fpath, run_dir).replace(os.sep, "/")
    bad = 0
    points: dict[float, tuple[float, float, str]] = {}
    for n, raw in bounded_lines(fpath, limits, sink.run.notes, rel):
        line = raw.decode("utf-8", "replace")
        parts = line.split()
        try:
            ts, value = int(parts[0]), float(parts[1])
            step = float(parts[2]) if len(parts) > 2 else 0.0
        except (IndexError, ValueError):
            bad += 1
            continue
        old = points.get(step)
        if old is None and len(points) >= limits.max_points:
            sink.run.notes.append(f"{rel}: stopped at line {n} (max_points {limits.max_points})")
            break
        if old is None or ts >= old[0]:
            points[step] = (ts, value, f"{rel}#line {n}")
    for step in sorted(points):
        _, value, where = points[step]
        sink.add(key, "step", step, value, where)
    if bad:
        sink.run.notes.append(f"{rel}: {bad} malformed lines skipped")
