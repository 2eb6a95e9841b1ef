"""The neutral output of every reader (StoreRun, Series), the read limits, and small shared helpers.

Nothing here imports beyond the standard library; readers import what they need inside functions.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

KINDS = ("tensorboard", "wandb", "mlflow", "trackio", "verl_jsonl", "trainer_state", "deepspeed_csv")

# MLflow stores +-inf as +-sys.float_info.max (mlflow/store/tracking/sqlalchemy_store.py, _sanitize_value)
FLOAT_MAX = 1.7976931348623157e308


@dataclass
class Series:
    """One metric as the store kept it: raw key, the name of its x axis, and (x, value, where) points.

    `where` names the file and the record/row/line the point came from, for evidence. NaN and +-inf
    are kept as float('nan') / float('inf')."""
    key: str
    axis: str = "step"
    points: list[tuple[float, float, str]] = field(default_factory=list)

    def values_at(self) -> dict[float, float]:
        """{x: value}; the last point wins for a repeated x."""
        return {x: v for x, v, _ in self.points}


@dataclass
class StoreRun:
    """One run read from one metric store (a file, or a run folder / database of it)."""
    source: str
    kind: str
    series: dict[str, Series] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    console: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    exit_code: int | None = None
    notes: list[str] = field(default_factory=list)
    run_id: str | None = None  # a store holding several runs (MLflow, trackio) names which one this is

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; non-finite values become the strings 'NaN', 'Infinity', '-Infinity'."""
        return {"source": self.source, "kind": self.kind, "run_id": self.run_id,
                "series": {k: {"key": s.key, "axis": s.axis, "points": [[x, json_num(v), w] for x, v, w in s.points]}
                           for k, s in self.series.items()},
                "config": self.config, "console": self.console, "summary": self.summary,
                "exit_code": self.exit_code, "notes": self.notes}


@dataclass
class Limits:
    """Bounds on one read. max_bytes: bytes read from any one file; max_points: points kept per run;
    max_console: console lines kept per run. What a bound cuts off is said in StoreRun.notes."""
    max_bytes: int = 1 << 30
    max_points: int = 2_000_000
    max_console: int = 200_000


class Sink:
    """Collects points for one run, honouring Limits.max_points and counting what it refuses."""

    def __init__(self, run: StoreRun, limits: Limits):
        self.run, self.limits, self.count, self.refused = run, limits, 0, 0

    def add(self, key: str, axis: str, x: float, value: float, where: str) -> bool:
        if self.count >= self.limits.max_points:
            self.refused += 1
            return False
        s = self.run.series.get(key)
        if s is None:
            s = self.run.series[key] = Series(key=key, axis=axis)
        s.points.append((float(x), value, where))
        self.count += 1
        return True

    def close(self) -> None:
        if self.refused:
            self.run.notes.append(f"point limit {self.limits.max_points} reached: {self.refused} further points not kept")


def json_num(v: float) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


NONFINITE_STR = {"nan": math.nan, "NaN": math.nan, "Infinity": math.inf, "inf": math.inf, "+inf": math.inf,
                 "-Infinity": -math.inf, "-inf": -math.inf}


def as_number(v: Any) -> float | None:
    """A metric value as float, or None when it is not a number. bool is not a number here; the strings
    'NaN', 'Infinity', '-Infinity' (JSON stores that cannot hold non-finite floats) are."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        return NONFINITE_STR.get(v)
    return None


def flatten(d: dict, prefix: str = "", sep: str = ".", out: dict | None = None) -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}; lists and scalars are leaves."""
    out = {} if out is None else out
    for k, v in d.items():
        key = f"{prefix}{sep}{k}" if prefix else str(k)
        if isinstance(v, dict) and v:
            flatten(v, key, sep, out)
        else:
            out[key] = v
    return out


def parse_scalar(s: str) -> Any:
    """A config value kept as text ('8', '1e-06', 'True', 'grpo') as int/float/bool/None when it is one."""
    t = s.strip()
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    return s


def count_note(run: StoreRun, counts: dict[str, int], what: str) -> None:
    """Append one note 'skipped <what>: a xN, b xM' when anything was counted."""
    if counts:
        run.notes.append(f"skipped {what}: " + ", ".join(f"{k} x{n}" for k, n in sorted(counts.items())))


def bump(counts: dict[str, int], key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


def open_sqlite_ro(path: str):
    """Open a SQLite database read-only without writing beside it. Returns (connection, note or None).

    A rollback-journal database, or a WAL database with a -wal file (a live writer's uncheckpointed pages),
    is opened with URI mode=ro. A WAL database without a -wal file is opened with immutable=1: mode=ro would
    create -wal/-shm files next to it (https://www.sqlite.org/wal.html#readonly)."""
    import sqlite3
    from urllib.parse import quote

    base = "file:" + quote(str(path)) + "?mode=ro"
    head = first_bytes(path, 20)
    wal = len(head) == 20 and head[18] == 2 and head[19] == 2
    if wal and not os.path.exists(str(path) + "-wal"):
        con = sqlite3.connect(base + "&immutable=1", uri=True)
        return con, None
    try:
        con = sqlite3.connect(base, uri=True)
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
        return con, ("WAL database with a -wal file: read with mode=ro (SQLite may add a -shm file)" if wal else None)
    except sqlite3.OperationalError as e:
        con = sqlite3.connect(base + "&immutable=1", uri=True)
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
        return con, f"opened with immutable=1 after '{e}' (its -wal file, if any, was not read)"


def sqlite_tables(con) -> dict[str, list[str]]:
    """{table: [columns]} of a SQLite database."""
    out = {}
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
        out[name] = [r[1] for r in con.execute(f'PRAGMA table_info("{name}")').fetchall()]
    return out


def first_bytes(path: str, n: int) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def bounded_lines(path: str, limits: Limits, notes: list[str], label: str | None = None):
    """Yield (line number from 1, line bytes without its newline) of a file, streamed, stopping before
    limits.max_bytes are passed (a note says so). A last line without a newline is yielded too."""
    label = label or os.path.basename(path)
    used = 0
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            used += len(raw)
            if used > limits.max_bytes:
                size = os.path.getsize(path)
                notes.append(f"{label}: stopped at line {n} (byte {used - len(raw)} of {size}; max_bytes {limits.max_bytes})")
                return
            yield n, raw.rstrip(b"\r\n")
