"""Metric-store readers (grpo_debug.tools.readers) against fixtures written by the real libraries
(tests/data/stores/make_fixtures.py). Planted fault in every fixture: grad_norm flat ~1.0 to step 39,
climbing x1.25 per step from 40, NaN at 60, +inf at 61 (where the store keeps infinities)."""
from __future__ import annotations

import glob
import json
import math
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_debug.tools.readers import Limits, StoreRun, find_stores, read_store, sniff_file

STORES = Path(__file__).resolve().parent / "data" / "stores"
TB = STORES / "tensorboard" / "run1"
WB = Path(glob.glob(str(STORES / "wandb_run" / "wandb" / "offline-run-*"))[0])  # wandb-core (0.31)
WB_LEGACY = Path(glob.glob(str(STORES / "wandb_legacy_run" / "wandb" / "offline-run-*"))[0])  # Python SDK 0.17.9
MLDB = STORES / "mlflow" / "mlflow.db"
MLRUN = Path(glob.glob(str(STORES / "mlflow" / "mlruns" / "*" / "*" / "meta.yaml"))[0]).parent
TRACKIO = STORES / "trackio" / "fixture.db"
VERL = STORES / "verl" / "metrics.jsonl"
TS = STORES / "trainer_state" / "checkpoint-70" / "trainer_state.json"
DS = STORES / "deepspeed" / "csv_monitor" / "fixture_job"


def one(path, **kw) -> StoreRun:
    runs = read_store(str(path), **kw)
    assert len(runs) == 1, runs
    return runs[0]


def gn(s: int) -> float:
    return 1.0 + 0.01 * ((s * 7) % 5 - 2) if s < 40 else 1.25 ** (s - 39)


def check_fault(run: StoreRun, key: str, inf_kept=True, scale=1.0, rel=1e-6):
    v = run.series[key].values_at()
    assert v[39 * scale] == pytest.approx(gn(39), rel=rel)
    assert v[40 * scale] == pytest.approx(1.25, rel=rel)
    assert v[55 * scale] == pytest.approx(gn(55), rel=rel)
    assert math.isnan(v[60 * scale])
    assert (v[61 * scale] == math.inf) if inf_kept else math.isnan(v[61 * scale])
    assert len(v) == 70


def test_find_stores_lists_every_fixture():
    refs = find_stores(str(STORES))
    kinds = sorted(r.kind for r in refs)
    assert kinds == sorted(["deepspeed_csv", "mlflow", "mlflow", "tensorboard", "trackio", "trainer_state",
                            "verl_jsonl", "wandb", "wandb", "wandb_csv", "wandb_csv", "wandb_csv"])
    assert {Path(r.path) for r in refs} >= {TB, WB, WB_LEGACY, MLDB, MLRUN, TRACKIO, VERL, TS, DS}


# ---- TensorBoard ---------------------------------------------------------------------------------------

def test_tensorboard_resumed_run_later_write_wins():
    run = one(TB)
    assert run.kind == "tensorboard" and run.notes == []
    s = run.series["actor/grad_norm"]
    assert s.axis == "step"
    v = s.values_at()
    assert v[44.0] == pytest.approx(gn(44), rel=1e-6)
    assert v[45.0] == pytest.approx(gn(45) + 0.5, rel=1e-6)  # second file, later wall_time
    assert v[50.0] == pytest.approx(gn(50) + 0.5, rel=1e-6)
    assert math.isnan(v[60.0]) and v[61.0] == math.inf
    assert run.series["actor/pg_loss"].values_at()[61.0] == -math.inf
    pts = dict((x, w) for x, _, w in s.points)
    assert pts[44.0].startswith("events.out.tfevents.1700000000.fixture.1.0#record ")
    assert pts[45.0].startswith("events.out.tfevents.1700000500.fixture.1.1#record ")


def test_tensorboard_log_folder_with_run_subfolders(tmp_path):
    shutil.copytree(TB, tmp_path / "logs")
    shutil.copytree(TB, tmp_path / "logs" / "seed2")
    shutil.copy(VERL, tmp_path / "logs" / "metrics.jsonl")
    runs = read_store(str(tmp_path / "logs"))
    assert sorted(Path(r.source).name for r in runs) == ["logs", "metrics.jsonl", "seed2"]


def test_tensorboard_tensor_scalars_float_val_and_double_content():
    run = one(TB / "events.out.tfevents.1700000500.fixture.1.1")
    score = run.series["critic/score/mean"].values_at()  # DT_DOUBLE tensor_content: exact double
    assert score[60.0] == 0.2 + 0.01 * 50 - 0.02 * 10
    ent = run.series["actor/entropy"].values_at()  # DT_FLOAT float_val
    assert ent[70.0] == pytest.approx(1.2 - 0.005 * 70, rel=1e-6)
    assert min(ent) == 45.0


def test_tensorboard_truncated_and_corrupt_tails_are_notes(tmp_path):
    src = TB / "events.out.tfevents.1700000000.fixture.1.0"
    data = src.read_bytes()
    cut = tmp_path / "cut" / src.name
    cut.parent.mkdir()
    cut.write_bytes(data[:-7])
    run = one(cut)
    assert any("truncated final record" in n for n in run.notes)
    assert run.series["actor/grad_norm"].values_at()[49.0] == pytest.approx(gn(49), rel=1e-6)
    bad = tmp_path / "bad" / src.name
    bad.parent.mkdir()
    mid = len(data) // 2
    bad.write_bytes(data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1:])
    run = one(bad)
    assert any("CRC" in n for n in run.notes), run.notes
    assert 1.0 in run.series["actor/grad_norm"].values_at()


def test_tensorboard_huge_file_bounded(tmp_path):
    run = one(TB / "events.out.tfevents.1700000000.fixture.1.0", max_bytes=2000)
    assert any("max_bytes 2000" in n for n in run.notes)
    assert 0 < len(run.series["actor/grad_norm"].points) < 20
    run = one(TB, max_points=100)
    assert sum(len(s.points) for s in run.series.values()) == 100
    assert any("max_points" in n for n in run.notes) and any("not read" in n for n in run.notes)


# ---- W&B -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("folder", [WB, WB_LEGACY], ids=["wandb-core", "wandb-0.17-python"])
def test_wandb_offline_run_history_config_console_exit(folder):
    run = one(folder)
    assert run.kind == "wandb" and run.run_id == "fixture01" and run.exit_code == 1
    check_fault(run, "actor/grad_norm")
    assert run.series["actor/grad_norm"].axis == "_step"
    assert run.series["actor/pg_loss"].values_at()[61.0] == -math.inf
    rl = run.series["rollout/response_length"]  # define_metric("rollout/*", step_metric="train/global_step")
    assert rl.axis == "train/global_step" and rl.values_at()[40.0 * 4] == 140.0
    assert run.config["actor_rollout_ref.rollout.n"] == 8
    assert run.config["algorithm.kl_ctrl.kl_coef"] == 0.001
    assert "RuntimeError: loss is NaN at step 60" in run.console
    assert "step:40 - actor/grad_norm:1.25" in run.console
    assert run.summary["_step"] == 70
    assert all(w.startswith("run-fixture01.wandb#record ") for _, _, w in run.series["actor/grad_norm"].points)
    assert any("telemetry" in n for n in run.notes)  # record types not read are said


def _copy_run(tmp_path) -> Path:
    dst = tmp_path / "wandb" / WB.name
    shutil.copytree(WB, dst)
    return dst


def test_wandb_truncated_log_is_a_note(tmp_path):
    dst = _copy_run(tmp_path)
    log = dst / "run-fixture01.wandb"
    data = log.read_bytes()
    log.write_bytes(data[: len(data) - 300])
    run = one(dst)
    assert any("truncated" in n or "no LAST chunk" in n for n in run.notes), run.notes
    assert run.exit_code is None  # the exit record was in the cut tail
    assert run.series["actor/grad_norm"].values_at()[40.0] == 1.25


def test_wandb_corrupt_chunk_skips_to_next_block(tmp_path):
    dst = _copy_run(tmp_path)
    log = dst / "run-fixture01.wandb"
    data = bytearray(log.read_bytes())
    assert len(data) > 32768
    data[20000] ^= 0xFF
    log.write_bytes(bytes(data))
    run = one(dst)
    assert any("corrupt chunk" in n for n in run.notes), run.notes
    assert run.exit_code == 1  # read again from the second block on
    assert 70.0 in run.series["actor/entropy"].values_at()


def test_wandb_side_files_and_output_log(tmp_path):
    dst = _copy_run(tmp_path)
    (dst / "files" / "config.yaml").write_text(
        "_wandb:\n  value:\n    cli_version: 0.31.0\nextra_key:\n  desc: null\n  value: 3\n")
    (dst / "files" / "wandb-summary.json").write_text(json.dumps({"final/score": 0.3, "_step": 70}))
    run = one(dst)
    assert run.config["extra_key"] == 3 and run.summary["final/score"] == 0.3
    # a log without output records: console comes from files/output.log
    (dst / "files" / "output.log").write_text("line one\nTraceback (most recent call last):\n")
    run = one(dst / "run-fixture01.wandb")
    assert run.console[:1] == ["step:1 - actor/grad_norm:1.0"]  # records win over output.log


# ---- MLflow --------------------------------------------------------------------------------------------

def test_mlflow_sqlite_nan_inf_params_read_only(tmp_path):
    db = tmp_path / "mlruns.db"
    shutil.copy(MLDB, db)
    before = sorted(os.listdir(tmp_path))
    mtime = db.stat().st_mtime_ns
    run = one(db)
    assert run.kind == "mlflow" and run.run_id and run.summary["status"] == "FINISHED"
    check_fault(run, "actor/grad_norm")
    assert run.series["actor/pg_loss"].values_at()[61.0] == -math.inf
    assert run.config["actor_rollout_ref.rollout.n"] == 8 and run.config["algorithm.adv_estimator"] == "grpo"
    w = dict((x, w) for x, _, w in run.series["actor/grad_norm"].points)[60.0]
    assert w.startswith("mlruns.db metrics rowid=") and "key=actor/grad_norm step=60" in w
    assert sorted(os.listdir(tmp_path)) == before and db.stat().st_mtime_ns == mtime


def test_mlflow_file_store():
    run = one(MLRUN)
    assert run.kind == "mlflow" and run.summary["status"] == "FINISHED"
    check_fault(run, "actor/grad_norm")
    assert run.series["critic/score/mean"].axis == "step"
    assert run.config["actor_rollout_ref.rollout.n"] == 8
    assert dict((x, w) for x, _, w in run.series["actor/grad_norm"].points)[60.0] == "metrics/actor/grad_norm#line 60"


def test_mlflow_file_store_bounded():
    run = one(MLRUN, max_points=30)
    assert len(run.series["actor/entropy"].points) == 30
    assert any("max_points 30" in n for n in run.notes)
    run = one(MLRUN, max_bytes=200)
    assert 0 < len(run.series["actor/grad_norm"].points) < 10 and any("max_bytes 200" in n for n in run.notes)


def test_mlflow_sqlite_several_runs(tmp_path):
    db = tmp_path / "two.db"
    shutil.copy(MLDB, db)
    con = sqlite3.connect(db)
    (uuid,) = con.execute("SELECT run_uuid FROM runs").fetchone()
    cols = [r[1] for r in con.execute("PRAGMA table_info(runs)")]
    row = list(con.execute("SELECT * FROM runs").fetchone())
    row[cols.index("run_uuid")] = "second"
    con.execute(f"INSERT INTO runs VALUES ({','.join('?' * len(row))})", row)
    con.execute("INSERT INTO metrics SELECT key, value, timestamp, 'second', step, is_nan FROM metrics WHERE step < 10")
    con.commit()
    con.close()
    runs = {r.run_id: r for r in read_store(str(db))}
    assert set(runs) == {uuid, "second"} and len(runs["second"].series["actor/grad_norm"].points) == 9


# ---- trackio, verl, trainer_state, DeepSpeed -----------------------------------------------------------

def test_trackio_wal_database():
    run = one(TRACKIO)
    assert run.kind == "trackio" and run.summary["run_name"] == "planted"
    check_fault(run, "actor/grad_norm")
    assert run.series["actor/pg_loss"].values_at()[61.0] == -math.inf
    assert run.config["actor_rollout_ref.rollout.n"] == 8 and "_Created" in run.summary


def test_sqlite_read_leaves_no_side_files_and_sees_a_live_wal(tmp_path):
    db = tmp_path / "fixture.db"
    shutil.copy(TRACKIO, db)
    assert len(one(db).series["actor/grad_norm"].points) == 70
    assert sorted(os.listdir(tmp_path)) == ["fixture.db"]  # WAL database, no -wal: immutable=1, no -shm made
    live = tmp_path / "live.db"  # a writer still open: its rows sit in live.db-wal
    con = sqlite3.connect(live)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE metrics (id INTEGER PRIMARY KEY, timestamp TEXT, run_name TEXT, step INTEGER, metrics TEXT)")
    con.executemany("INSERT INTO metrics (timestamp, run_name, step, metrics) VALUES ('t', 'r', ?, ?)",
                    [(s, json.dumps({"loss": 1.0 / s if s < 5 else "NaN"})) for s in range(1, 8)])
    con.commit()
    try:
        assert (tmp_path / "live.db-wal").exists()
        run = one(live)
        v = run.series["loss"].values_at()
        assert v[2.0] == 0.5 and math.isnan(v[7.0])
    finally:
        con.close()


def test_verl_jsonl_nulls_are_nan_and_torn_line_is_note(tmp_path):
    run = one(VERL)
    check_fault(run, "actor/grad_norm", inf_kept=False)  # orjson wrote inf as null
    assert any("null values read as NaN" in n for n in run.notes)
    torn = tmp_path / "metrics.jsonl"
    torn.write_bytes(VERL.read_bytes() + b'{"step": 71, "data": {"actor/grad')
    run = one(torn)
    assert any("torn" in n for n in run.notes) and 71.0 not in run.series["actor/grad_norm"].values_at()


def test_trainer_state_log_history():
    run = one(TS)
    assert run.series["grad_norm"].axis == "global_step"
    check_fault(run, "grad_norm")
    assert run.config["max_steps"] == 70 and run.summary["global_step"] == 70
    assert run.series["loss"].points[0][2] == "trainer_state.json#log_history[0]"


def test_deepspeed_csv_monitor_samples_axis():
    run = one(DS)
    s = run.series["Train_Samples_grad_norm"]
    assert s.axis == "samples"
    check_fault(run, "Train_Samples_grad_norm", scale=8)
    assert s.points[0][2] == "Train_Samples_grad_norm.csv#row 2"


# ---- discovery and bounds ------------------------------------------------------------------------------

def test_symlinks_out_of_the_folder_are_not_followed(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    shutil.copy(VERL, root / "metrics.jsonl")
    (root / "outside_dir").symlink_to(STORES / "tensorboard")
    (root / "outside.jsonl").symlink_to(VERL)
    (root / "inside.jsonl").symlink_to(root / "metrics.jsonl")
    notes: list[str] = []
    refs = find_stores(str(root), notes=notes)
    # no link is followed, even one that stays inside (tools/safefs: a link can be swapped while triage runs)
    assert sorted(Path(r.path).name for r in refs) == ["metrics.jsonl"]
    assert all(any(name in n for n in notes) for name in ("outside_dir", "outside.jsonl", "inside.jsonl"))
    assert all(r.kind == "verl_jsonl" for r in read_store(str(root)))


def test_depth_and_entry_bounds(tmp_path):
    deep = tmp_path.joinpath(*[f"d{i}" for i in range(5)])
    deep.mkdir(parents=True)
    shutil.copy(VERL, deep / "m.jsonl")
    notes: list[str] = []
    assert find_stores(str(tmp_path), max_depth=3, notes=notes) == [] and any("max_depth" in n for n in notes)
    assert len(find_stores(str(tmp_path), max_depth=6)) == 1
    for i in range(30):
        (tmp_path / f"f{i}.txt").write_text("x")
    notes = []
    find_stores(str(tmp_path), max_files=10, notes=notes)
    assert len([n for n in notes if "max_files" in n]) == 1


def test_huge_files_are_bounded(tmp_path):
    big = tmp_path / "big.jsonl"
    line = b'{"step": %d, "data": {"actor/grad_norm": 1.0, "pad": "' + b"x" * 200 + b'"}}\n'
    with open(big, "wb") as f:
        for s in range(20000):
            f.write(line % s)
    run = one(big, max_bytes=1 << 20)
    n = len(run.series["actor/grad_norm"].points)
    assert 1000 < n < 20000 and any("max_bytes" in x for x in run.notes)
    run = one(big, max_points=500)
    assert len(run.series["actor/grad_norm"].points) == 500 and any("point limit" in x for x in run.notes)


def test_unknown_files_and_json_form(tmp_path):
    (tmp_path / "notes.jsonl").write_text('{"a": 1}\n')
    assert sniff_file(str(tmp_path / "notes.jsonl")) is None and read_store(str(tmp_path / "notes.jsonl")) == []
    d = one(MLRUN).to_dict()
    text = json.dumps(d, allow_nan=False)
    assert '"NaN"' in text and '"Infinity"' in text


def test_import_is_light():
    code = ("import sys, grpo_debug.tools.readers as r; "
            "print(sorted(m for m in ('yaml', 'sqlite3', 'csv', 'json', 'zlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_reader_failure_is_a_note_not_a_crash(tmp_path):
    bad = tmp_path / "mlflow.db"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    assert read_store(str(bad)) == []  # not openable as a store: nothing, no exception
    ts = tmp_path / "trainer_state.json"
    ts.write_text('{"log_history": [{"step": 1, "loss": 0.5}, {"loss": 1}]')
    run = one(ts)
    assert run.series == {} and "does not parse" in run.notes[0]


def test_mutated_binary_stores_never_raise(tmp_path):
    """Flipped bytes and cuts anywhere in an event file or a .wandb log: notes, never an exception (the
    readers are called directly, past read_store's catch-all)."""
    import random

    from grpo_debug.tools.readers.tfevents import read_tensorboard
    from grpo_debug.tools.readers.wandb_log import read_wandb

    rng = random.Random(13)
    cases = [(TB / "events.out.tfevents.1700000500.fixture.1.1", read_tensorboard),
             (WB / "run-fixture01.wandb", read_wandb)]
    for src, reader in cases:
        data = src.read_bytes()
        for i in range(40):
            buf = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                buf[rng.randrange(len(buf))] = rng.randrange(256)
            if i % 3 == 0:
                buf = buf[: rng.randrange(len(buf))]
            p = tmp_path / f"{i}" / src.name
            p.parent.mkdir(exist_ok=True)
            p.write_bytes(bytes(buf))
            run = reader(str(p), Limits())
            assert isinstance(run, StoreRun)


def test_record_decoders_raise_only_wire_errors():
    """Records that pass the CRC but hold bad protobuf: WireError (a note upstream), nothing else."""
    import random

    from grpo_debug.tools.readers import tfevents, wandb_log
    from grpo_debug.tools.readers.wire import WireError

    rng = random.Random(7)
    st = wandb_log._State(StoreRun(source="x", kind="wandb"), Limits())
    log = (WB / "run-fixture01.wandb").read_bytes()
    with open(WB / "run-fixture01.wandb", "rb") as f:
        f.seek(7)
        records = [r for r, _ in wandb_log.iter_chunks(f, len(log), Limits(), [], "x")]
    assert len(records) > 70
    for i in range(3000):
        base = bytearray(rng.choice(records)) if i % 2 else bytearray(rng.randbytes(rng.randint(0, 64)))
        for _ in range(rng.randint(0, 4)):
            if base:
                base[rng.randrange(len(base))] = rng.randrange(256)
        for decode in (lambda b: wandb_log._record(b, "w", st), lambda b: tfevents._event(b, "t", (0, 0), {}, {})):
            try:
                decode(bytes(base))
            except WireError:
                pass


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _field(fno: int, payload) -> bytes:
    if isinstance(payload, int):
        return _varint(fno << 3) + _varint(payload)
    if isinstance(payload, float):
        return _varint(fno << 3 | 1) + struct.pack("<d", payload)
    payload = payload.encode() if isinstance(payload, str) else payload
    return _varint(fno << 3 | 2) + _varint(len(payload)) + payload


def _wandb_log(records: list[bytes]) -> bytes:
    """Frame records the way wandb/sdk/internal/datastore.py _write_data does (FULL or FIRST/MIDDLE/LAST)."""
    import zlib

    out = bytearray(b":W&B" + struct.pack("<HB", 0xBEE1, 0))

    def chunk(typ, data):
        out.extend(struct.pack("<IHB", zlib.crc32(data, zlib.crc32(bytes([typ]))) & 0xFFFFFFFF, len(data), typ) + data)

    for rec in records:
        left = 32768 - len(out) % 32768
        if left < 7:
            out.extend(b"\x00" * left)
            left = 32768
        if len(rec) + 7 <= left:
            chunk(1, rec)
            continue
        chunk(2, rec[: left - 7])
        rest = rec[left - 7:]
        while len(rest) > 32768 - 7:
            chunk(3, rest[: 32768 - 7])
            rest = rest[32768 - 7:]
        chunk(4, rest)
    return bytes(out)


def test_wandb_typed_history_items_and_multi_block_records(tmp_path):
    """HistoryItem's typed fields (integer = 5 sint64, number = 6 double, boolean = 4, key = 1) as well as
    value_json, and one output record spanning three blocks (FIRST, MIDDLE, LAST chunks)."""
    def item(key, fno, val):
        return _field(1, _field(1, key) + _field(fno, val))

    rows = []
    for s in range(1, 6):
        hist = (item("loss", 6, 0.5 / s) + item("tokens", 5, 2 * s) +
                item("neg", 5, 2 * 3 - 1) + item("flag", 4, 1) + item("gn", 16, "NaN" if s == 5 else str(s)) +
                _field(2, _field(1, s)))
        rows.append(_field(1, s) + _field(2, hist))
    long_line = "x" * 70000
    rows.append(_field(1, 9) + _field(4, _field(1, 1) + _field(3, "before\n" + long_line + "\nafter\n")))
    rows.append(_field(1, 10) + _field(18, _field(1, (1 << 64) - 2)))  # exit_code -2 as int32
    d = tmp_path / "run-20260101_000000-abc"
    d.mkdir()
    (d / "run-abc.wandb").write_bytes(_wandb_log(rows))
    run = one(d)
    assert run.notes == [] or all("skipped" in n for n in run.notes), run.notes
    assert run.series["loss"].values_at()[4.0] == 0.125
    assert run.series["tokens"].values_at()[3.0] == 3.0  # zigzag 6 -> 3
    assert run.series["neg"].values_at()[1.0] == -3.0  # zigzag 5 -> -3
    assert math.isnan(run.series["gn"].values_at()[5.0]) and "flag" not in run.series
    assert run.console == ["before", long_line, "after"]
    assert run.exit_code == -2


def _tfrecord(data: bytes) -> bytes:
    """TFRecord framing (tensorflow/core/lib/io/record_writer.h) with masked CRC-32C."""
    from grpo_debug.tools.readers.wire import masked_crc32c

    head = struct.pack("<Q", len(data))
    return head + struct.pack("<I", masked_crc32c(head)) + data + struct.pack("<I", masked_crc32c(data))


def test_tensorboard_tf2_tensor_scalars_and_skipped_kinds(tmp_path):
    """Event files as TF2's tf.summary writes them: one-element tensors of several dtypes (event.proto,
    summary.proto, tensor.proto field numbers); histograms, images, text and graphs are skipped with a note."""
    scalars_meta = _field(9, _field(1, _field(1, "scalars")))

    def value(tag, tensor=None, meta=scalars_meta, other=None):
        body = _field(1, tag) + (_field(8, tensor) if tensor is not None else b"") + meta
        return _field(1, body + (other or b""))

    def event(step, *values, wall=1.0):
        return _tfrecord(_field(1, float(wall)) + _field(2, step) + _field(5, b"".join(values)))

    shape = lambda *dims: _field(2, b"".join(_field(2, _field(1, d)) for d in dims))  # noqa: E731
    recs = [_tfrecord(_field(1, 0.5) + _field(3, "brain.Event:2")),
            _tfrecord(_field(1, 0.6) + _field(4, b"\x0a\x00")),  # graph_def
            event(1, value("f32", _field(1, 1) + shape() + _field(4, struct.pack("<f", 0.25))),
                  value("half", _field(1, 19) + _field(13, _varint(0x3E00))),  # packed half_val 1.5
                  value("bf16", _field(1, 14) + _field(4, struct.pack("<f", 2.0)[2:])),
                  value("i64", _field(1, 9) + _field(10, _varint((1 << 64) - 5))),
                  value("hist", _field(1, 2) + shape(2, 3) + _field(4, b"\x00" * 48),
                        meta=_field(9, _field(1, _field(1, "histograms")))),
                  value("txt", _field(1, 7) + _field(8, b"hello"), meta=_field(9, _field(1, _field(1, "text")))),
                  value("img", other=_field(4, b"\x08\x01")))]
    (tmp_path / "events.out.tfevents.1.host").write_bytes(b"".join(recs))
    run = one(tmp_path)
    got = {k: s.values_at()[1.0] for k, s in run.series.items()}
    assert got == {"f32": 0.25, "half": 1.5, "bf16": 2.0, "i64": -5.0}
    note = next(n for n in run.notes if n.startswith("skipped non-scalar"))
    for part in ("graph_def x1", "image x1", "tensor (histograms) x1", "tensor (text) x1"):
        assert part in note, note
