"""The neutral output of every reader (StoreRun, Series), the read limits, and small shared helpers.

Nothing here imports beyond the standard library; readers import what they need inside functions.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

KINDS = ("tensorboard", "wandb", "mlflow", "trackio", "verl_jsonl", "trainer_state", "deepspeed_csv", "wandb_csv")

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
    console_file: str | None = None  # a console log too big to hold (W&B files/output.log): read as a streamed log

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
    max_console: console lines kept per run; max_line_bytes: longest line of a text store (JSONL, csv, MLflow
    metric file) read, longer ones skipped and counted; max_record_keys: keys of one record (a JSONL line) read. What a bound cuts off is said in StoreRun.notes."""
    max_bytes: int = 1 << 30
    max_points: int = 2_000_000
    max_console: int = 200_000
    max_line_bytes: int = 1 << 20
    max_record_keys: int = 10_000


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


class TooManyKeys(ValueError):
    """A record with more keys than Limits.max_record_keys (flatten's ``max_keys``)."""


def flatten(d: dict, prefix: str = "", sep: str = ".", out: dict | None = None, *, max_keys: int | None = None,
            max_depth: int = 64) -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}; lists and scalars are leaves, and so is a dict nested deeper than
    ``max_depth``. Raises TooManyKeys past ``max_keys`` leaves (None: no bound)."""
    out = {} if out is None else out
    for k, v in d.items():
        key = f"{prefix}{sep}{k}" if prefix else str(k)
        if isinstance(v, dict) and v and max_depth > 0:
            flatten(v, key, sep, out, max_keys=max_keys, max_depth=max_depth - 1)
            continue
        out[key] = v
        if max_keys is not None and len(out) > max_keys:
            raise TooManyKeys(f"more than {max_keys} keys")
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


SQLITE_BUDGET_S = 10.0  # seconds of SQLite work per database before the query is interrupted
SQLITE_MAX_LENGTH = 16 << 20  # longest string or blob a query may build (SQLITE_LIMIT_LENGTH)
SQLITE_MAX_TABLES = 500


class StoreRefused(Exception):
    """A store (or one of its tables) that is not read, and why: a view or virtual table where a table was
    expected, a generated column, a query interrupted past its time budget."""


def _sqlite_factory():
    import sqlite3

    class _Conn(sqlite3.Connection):
        """A connection that keeps the safely opened file descriptor alive (its /proc/self/fd path) until closed."""
        keeper = None

        def close(self) -> None:  # noqa: D401
            try:
                super().close()
            finally:
                if self.keeper is not None:
                    self.keeper.close()
                    self.keeper = None

    return _Conn


def open_sqlite_ro(path: str, budget_s: float | None = None):
    """Open a SQLite database read-only without writing beside it and without following a link. Returns
    (connection, note or None).

    The file is opened through :mod:`tools.safefs` first (a link, FIFO or device is refused: Refused). On Linux
    SQLite then opens ``/proc/self/fd/N`` of that very descriptor, so the file read is the one checked. A
    rollback-journal database is opened with mode=ro; a WAL database without a -wal file with immutable=1
    (mode=ro would create -wal/-shm files next to it, https://www.sqlite.org/wal.html#readonly); a WAL database
    with a -wal file (a live writer's uncheckpointed pages) by its path with mode=ro, checked to be the same
    file. Every query is interrupted after ``budget_s`` seconds (SQLITE_BUDGET_S; progress handler) and no
    string or blob may grow past SQLITE_MAX_LENGTH bytes (SQLITE_LIMIT_LENGTH), so a hostile view or
    zeroblob cannot spin or grow without end."""
    import sqlite3
    import time
    from urllib.parse import quote

    from grpo_debug.tools import safefs

    keeper = safefs.open_file(path)
    try:
        head = keeper.head(100)
        wal = len(head) >= 20 and head[18] == 2 and head[19] == 2
        has_wal = safefs.kind(str(path) + "-wal") == "file"
        fdpath = f"/proc/self/fd/{keeper.fd}"
        by_fd = os.path.exists(fdpath) and not (wal and has_wal)
        target = fdpath if by_fd else os.path.realpath(str(path))
        uri = "file:" + quote(target) + "?mode=ro" + ("&immutable=1" if wal and not has_wal else "")
        con = sqlite3.connect(uri, uri=True, factory=_sqlite_factory(), check_same_thread=False)
        con.keeper = keeper
    except BaseException:
        keeper.close()
        raise
    if not by_fd:
        st, kst = os.stat(target), os.fstat(keeper.fd)
        if (st.st_dev, st.st_ino) != (kst.st_dev, kst.st_ino):
            con.close()
            raise safefs.Refused(str(path), "changed while it was opened; not read")
    deadline = time.monotonic() + (SQLITE_BUDGET_S if budget_s is None else budget_s)
    con.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 20_000)
    if hasattr(con, "setlimit"):
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_MAX_LENGTH)
    try:
        con.execute("PRAGMA trusted_schema=OFF")
        con.execute("PRAGMA query_only=ON")
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError:
        con.close()
        raise
    note = "WAL database with a -wal file: read with mode=ro (SQLite may add a -shm file)" if wal and has_wal else None
    return con, note


def sqlite_tables(con) -> dict[str, list[str]]:
    """{table: [columns]} of the ordinary tables of a SQLite database (views and virtual tables left out; at most
    SQLITE_MAX_TABLES)."""
    out = {}
    rows = con.execute("SELECT name, sql FROM sqlite_master WHERE type='table' LIMIT ?", (SQLITE_MAX_TABLES,)).fetchall()
    for name, sql in rows:
        if sql and sql.lstrip().upper().startswith("CREATE VIRTUAL"):
            continue
        out[name] = [r[1] for r in con.execute(f'PRAGMA table_xinfo("{_ident(name)}")').fetchall()]
    return out


def _ident(name: str) -> str:
    return str(name).replace('"', '""')


def table_refusal(con, name: str) -> str | None:
    """Why table ``name`` is not read (a view, a virtual table, generated or hidden columns, whose expressions
    run on every read), or None when it is an ordinary table with declared columns only (or absent)."""
    row = con.execute("SELECT type, sql FROM sqlite_master WHERE name=?", (name,)).fetchone()
    if row is None:
        return None
    typ, sql = row
    if typ != "table" or (sql or "").lstrip().upper().startswith("CREATE VIRTUAL"):
        return f"'{name}' is a {'virtual table' if typ == 'table' else typ}, not a table; not read"
    hidden = [r[1] for r in con.execute(f'PRAGMA table_xinfo("{_ident(name)}")').fetchall() if r[6]]
    if hidden:
        return f"table '{name}' has generated or hidden columns ({', '.join(map(str, hidden[:3]))}); not read"
    return None


def check_tables(con, names) -> None:
    """Raise StoreRefused unless each of ``names`` is an ordinary table (see :func:`table_refusal`)."""
    for name in names:
        why = table_refusal(con, name)
        if why:
            raise StoreRefused(why)


def first_bytes(path: str, n: int) -> bytes:
    """The first ``n`` bytes of a regular file (no link, FIFO or device), or b''."""
    from grpo_debug.tools import safefs

    return safefs.head(path, n)


def bounded_lines(path: str, limits: Limits, notes: list[str], label: str | None = None):
    """Yield (line number from 1, line bytes without its newline) of a regular file, streamed, stopping before
    limits.max_bytes are passed; a line over limits.max_line_bytes is skipped and counted (notes say both). A
    last line without a newline is yielded too. Raises Refused/OSError when the file cannot be opened safely."""
    from grpo_debug.tools import safefs

    label = label or os.path.basename(path)
    stats = safefs.LineStats()
    with safefs.open_file(path) as f:
        try:
            yield from f.lines(limits.max_line_bytes, limits.max_bytes, stats)
        finally:
            notes.extend(stats.notes(label, limits.max_line_bytes, limits.max_bytes, f.size))
