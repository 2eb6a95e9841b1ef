"""Hostile run folders and stores, made at test time (issue 21): each builder writes one attack under ``root``
and returns the path to give to ``grpo-debug triage``. Shared by the in-process tests, the CLI tests and the
MCP tests (tests/test_hostile_folders.py)."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import struct
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data"
STORES = DATA / "stores"
NAN_LOG = Path(__file__).resolve().parents[2] / "tools" / "examples" / "verl_grpo_nan.log"
GIB = 1 << 30


def _mlruns(root: Path) -> Path:
    """A copy of the MLflow file-store fixture; returns the run folder."""
    dst = root / "run"
    shutil.copytree(STORES / "mlflow" / "mlruns", dst / "mlruns")
    return next(p.parent for p in (dst / "mlruns").glob("*/*/meta.yaml"))


def fifo_in_mlflow_params(root: Path) -> Path:
    run = _mlruns(root)
    os.mkfifo(run / "params" / "blocked")
    os.mkfifo(run / "metrics" / "blocked_metric")
    return root / "run"


def fifo_csv_in_deepspeed(root: Path) -> Path:
    dst = root / "run" / "csv_monitor" / "job"
    shutil.copytree(STORES / "deepspeed" / "csv_monitor" / "fixture_job", dst)
    os.mkfifo(dst / "Train_Samples_blocked.csv")
    return root / "run"


def _mlflow_db(root: Path) -> Path:
    (root / "run").mkdir(parents=True, exist_ok=True)
    db = root / "run" / "mlflow.db"
    shutil.copy(STORES / "mlflow" / "mlflow.db", db)
    return db


def mlflow_db_endless_view(root: Path) -> Path:
    """``params`` is a view counting an endless recursive query (100% CPU inside SQLite)."""
    db = _mlflow_db(root)
    con = sqlite3.connect(db)
    con.execute("DROP TABLE params")
    con.execute("CREATE VIEW params AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                "SELECT 'k' AS key, CAST(count(*) AS TEXT) AS value, 'r' AS run_uuid FROM c")
    con.commit()
    con.close()
    return root / "run"


def mlflow_db_generated_column(root: Path) -> Path:
    """``metrics.step`` replaced by a generated column that builds a huge blob on every read (ORDER BY step)."""
    db = _mlflow_db(root)
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(metrics)")]
    keep = [c for c in cols if c != "step"]
    con.execute("ALTER TABLE metrics RENAME TO metrics_old")
    con.execute(f"CREATE TABLE metrics ({', '.join(keep)}, step INTEGER GENERATED ALWAYS AS "
                "(length(hex(zeroblob(50000000)))) VIRTUAL)")
    con.execute(f"INSERT INTO metrics ({', '.join(keep)}) SELECT {', '.join(keep)} FROM metrics_old")
    con.execute("DROP TABLE metrics_old")
    con.commit()
    con.close()
    return root / "run"


def tensorboard_huge_length(root: Path) -> Path:
    """An event file whose first record says 4 GB, made sparse so the size agrees."""
    from grpo_debug.tools.readers.wire import masked_crc32c

    d = root / "run" / "tb"
    d.mkdir(parents=True)
    f = d / "events.out.tfevents.1700000000.host.1.0"
    length = 4 * GIB
    head = struct.pack("<Q", length)
    with open(f, "wb") as fh:
        fh.write(head + struct.pack("<I", masked_crc32c(head)))
        fh.truncate(16 + length)
    return root / "run"


def _sparse_line(path: Path, size: int, prefix: bytes = b"") -> None:
    with open(path, "wb") as fh:
        fh.write(prefix)
        fh.truncate(size)


def mlflow_metric_huge_line(root: Path) -> Path:
    run = _mlruns(root)
    _sparse_line(run / "metrics" / "huge", 3 * GIB, b"1700000000000 1.0 ")
    return root / "run"


def verl_jsonl_huge_line(root: Path) -> Path:
    (root / "run").mkdir(parents=True)
    good = (STORES / "verl" / "metrics.jsonl").read_bytes()
    with open(root / "run" / "metrics.jsonl", "wb") as fh:
        fh.write(good + b'{"step": 999, "data": {"x": "')
        fh.truncate(len(good) + 3 * GIB)
    return root / "run"


def wandb_huge_summary(root: Path) -> Path:
    src = next((STORES / "wandb_run").glob("wandb/*run-*"))
    dst = root / "run" / "wandb" / src.name
    shutil.copytree(src, dst)
    (dst / "files").mkdir(exist_ok=True)
    _sparse_line(dst / "files" / "wandb-summary.json", 3 * GIB, b'{"a": "')
    return root / "run"


def wandb_huge_output_log(root: Path) -> Path:
    """A 1 GiB files/output.log (normal for a long run: streamed, never refused nor held whole)."""
    src = next((STORES / "wandb_run").glob("wandb/*run-*"))
    dst = root / "run" / "wandb" / src.name
    shutil.copytree(src, dst)
    (dst / "files").mkdir(exist_ok=True)
    line = b"step 1: actor/grad_norm=0.5 critic/score/mean=0.1\n"
    with open(dst / "files" / "output.log", "wb") as fh:
        fh.write(line * 1000)
        fh.truncate(GIB)
    return root / "run"


def links_out_of_the_folder(root: Path, secret: Path) -> Path:
    """Symlinked subfolders and files pointing at ``secret`` (a file) and its folder: MLflow params/, a W&B
    files/ folder, a .wandb file, a plain log."""
    run = _mlruns(root)
    shutil.rmtree(run / "params")
    (run / "params").symlink_to(secret.parent, target_is_directory=True)
    wb = root / "run" / "wandb" / "run-20260101_000000-abc"
    wb.mkdir(parents=True)
    (wb / "files").symlink_to(secret.parent, target_is_directory=True)
    (wb / "run-abc.wandb").symlink_to(secret)
    (root / "run" / "train.log").symlink_to(secret)
    return root / "run"


def jsonl_bad_step_after_nan(root: Path) -> Path:
    """A verl JSONL whose grad_norm goes NaN, then one appended line with ``"step": "x"``."""
    (root / "run").mkdir(parents=True)
    lines = [json.dumps({"step": i, "data": {"actor/grad_norm": 0.5 + 0.01 * i, "actor/pg_loss": -0.1}})
             for i in range(1, 30)]
    lines.append('{"step": 30, "data": {"actor/grad_norm": NaN, "actor/pg_loss": NaN}}')
    lines.append('{"step": "x", "data": {"actor/grad_norm": 1.0}}')
    (root / "run" / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return root / "run"


def jsonl_deeply_nested_beside_log(root: Path) -> Path:
    """A JSONL with one line nested 100,000 deep beside the NaN example log."""
    (root / "run").mkdir(parents=True)
    shutil.copy(NAN_LOG, root / "run" / "train.log")
    good = json.dumps({"step": 1, "data": {"actor/grad_norm": 0.5}})
    deep = '{"step": 2, "data": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}"
    (root / "run" / "metrics.jsonl").write_text(good + "\n" + deep + "\n")
    return root / "run"


def jsonl_million_keys(root: Path) -> Path:
    (root / "run").mkdir(parents=True)
    data = ",".join(f'"k{i}":1' for i in range(1_000_000))
    (root / "run" / "metrics.jsonl").write_text(
        json.dumps({"step": 1, "data": {"actor/grad_norm": 0.5}}) + "\n" + '{"step": 2, "data": {' + data + "}}\n")
    return root / "run"


def gz_newline_bombs(root: Path, n: int = 5) -> Path:
    """Five 1 MiB .gz files of nothing but newlines (each about 1 GiB decompressed)."""
    import zlib

    (root / "run").mkdir(parents=True)
    for i in range(n):
        co = zlib.compressobj(9, zlib.DEFLATED, 31)
        with open(root / "run" / f"rank{i}.log.gz", "wb") as fh:
            block = b"\n" * (1 << 20)
            written = 0
            while written < (1 << 20):
                out = co.compress(block)
                fh.write(out)
                written += len(out)
            fh.write(co.flush())
    return root / "run"


ATTACKS = {
    "fifo_in_mlflow_params": fifo_in_mlflow_params,
    "fifo_csv_in_deepspeed": fifo_csv_in_deepspeed,
    "mlflow_db_endless_view": mlflow_db_endless_view,
    "mlflow_db_generated_column": mlflow_db_generated_column,
    "tensorboard_huge_length": tensorboard_huge_length,
    "mlflow_metric_huge_line": mlflow_metric_huge_line,
    "verl_jsonl_huge_line": verl_jsonl_huge_line,
    "wandb_huge_summary": wandb_huge_summary,
    "wandb_huge_output_log": wandb_huge_output_log,
    "jsonl_bad_step_after_nan": jsonl_bad_step_after_nan,
    "jsonl_deeply_nested_beside_log": jsonl_deeply_nested_beside_log,
    "jsonl_million_keys": jsonl_million_keys,
    "gz_newline_bombs": gz_newline_bombs,
}
