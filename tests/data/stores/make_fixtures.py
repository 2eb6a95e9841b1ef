#!/usr/bin/env python3
"""Write the metric-store fixtures under tests/data/stores/ with the real libraries.

Run it from a throwaway virtual environment, never the project's:

    python3 -m venv /tmp/fxvenv
    /tmp/fxvenv/bin/pip install tensorboardX tensorboard mlflow-skinny sqlalchemy alembic trackio wandb orjson
    /tmp/fxvenv/bin/python tests/data/stores/make_fixtures.py

(the committed files were written with HOME pointing at a scratch folder). Arguments name the fixtures to
rewrite (tensorboard wandb mlflow_sqlite mlflow_files trackio verl trainer_state deepspeed); none = all.
Versions used for the committed files: see VERSIONS.txt next to this script (written by the run).

Every fixture carries the same planted fault (one training run, steps 1..70):
  grad_norm  flat at ~1.0 for steps 1..39, climbing x1.25 per step from step 40,
             NaN at step 60, +inf at step 61, NaN from step 62 on;
  loss       finite until 59, NaN from step 60 (-inf at step 61 where the store can hold it);
  reward     rising to step 50, then falling;
  entropy    slowly falling.
Store-specific layouts:
  tensorboard/run1/   two event files of a resumed run (steps 1..50, then 45..70 written later with
                      different values at 45..50 -- the later write wins), scalars as simple_value in the
                      first file and as tensors (float_val; double tensor_content) in the second.
  wandb_run/          an offline run (wandb.init(mode="offline")), console lines printed, exit code 1,
                      written by wandb-core (wandb >= 0.18);
  wandb_legacy_run/   the same run written by wandb 0.17.9's Python datastore:
                      /tmp/wb17/bin/pip install wandb==0.17.9; /tmp/wb17/bin/python make_fixtures.py wandb
  mlflow/mlflow.db    SQLite store (the tracking URI verl defaults to is sqlite:////tmp/mlruns.db).
  mlflow/mlruns/      legacy file store.
  trackio/            trackio's project SQLite database.
  verl/metrics.jsonl  verl's FileLogger lines (orjson: NaN and inf become null).
  trainer_state/      HF Trainer trainer_state.json (written the way TrainerState.save_to_json does).
  deepspeed/          DeepSpeed csv_monitor files (layout of deepspeed/monitor/csv_monitor.py).
trainer_state.json and the csv_monitor files are written by hand from the documented format:
transformers and deepspeed would pull torch and a CUDA toolchain into the throwaway venv for two files.
"""
import json
import os
import pathlib
import shutil
import sqlite3
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("MLFLOW_ENABLE_TELEMETRY", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
STEPS = range(1, 71)
NAN, INF = float("nan"), float("inf")


def grad_norm(s):
    if s < 40:
        return 1.0 + 0.01 * ((s * 7) % 5 - 2)
    if s < 60:
        return 1.25 ** (s - 39)
    return INF if s == 61 else NAN


def loss(s, neg_inf=False):
    if s < 60:
        return 0.5 - 0.002 * s
    return -INF if (s == 61 and neg_inf) else NAN


def reward(s):
    return 0.2 + 0.01 * s if s <= 50 else 0.7 - 0.02 * (s - 50)


def entropy(s):
    return 1.2 - 0.005 * s


def verl_row(s):
    return {"actor/grad_norm": grad_norm(s), "actor/pg_loss": loss(s, neg_inf=True),
            "critic/score/mean": reward(s), "actor/entropy": entropy(s)}


CONFIG = {"algorithm": {"adv_estimator": "grpo", "kl_ctrl": {"kl_coef": 0.001}},
          "actor_rollout_ref": {"actor": {"optim": {"lr": 1e-6}, "ppo_mini_batch_size": 256},
                                "rollout": {"n": 8, "name": "vllm"}},
          "trainer": {"total_training_steps": 70, "project_name": "fixture", "experiment_name": "planted"}}


def clean(p):
    if p.exists():
        shutil.rmtree(p)
    p.mkdir(parents=True)
    return p


def versions():
    from importlib.metadata import version, PackageNotFoundError
    out = [f"python {sys.version.split()[0]}"]
    for name in ("tensorboardX", "tensorboard", "protobuf", "wandb", "mlflow-skinny", "sqlalchemy", "trackio", "orjson"):
        try:
            out.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            out.append(f"{name} (not installed)")
    return out


def make_tensorboard():
    from tensorboardX import SummaryWriter
    from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboardX.proto.tensor_pb2 import TensorProto
    import struct

    d = clean(HERE / "tensorboard" / "run1")
    tmp = pathlib.Path(tempfile.mkdtemp())
    # first life of the run: steps 1..50, simple_value (what torch's and tensorboardX's add_scalar write)
    w = SummaryWriter(logdir=str(tmp / "a"))
    for s in range(1, 51):
        for k, v in verl_row(s).items():
            w.add_scalar(k, v, s, walltime=1_700_000_000 + s)
    w.close()
    # resumed run: steps 45..70 written later; 45..50 overlap with different grad_norm values
    w = SummaryWriter(logdir=str(tmp / "b"))
    fw = w._get_file_writer()
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
    for s in range(45, 71):
        row = verl_row(s)
        if s <= 50:
            row["actor/grad_norm"] = row["actor/grad_norm"] + 0.5  # the resumed value, which must win
        vals = []
        for k, v in row.items():
            if k == "critic/score/mean":  # TF2 style: double tensor with tensor_content
                t = TensorProto(dtype=2, tensor_content=struct.pack("<d", v))
            else:  # tensor with float_val (torch SummaryWriter add_scalar(new_style=True))
                t = TensorProto(dtype=1, float_val=[v])
            vals.append(Summary.Value(tag=k, tensor=t, metadata=meta))
        fw.add_summary(Summary(value=vals), s, walltime=1_700_000_500 + s)
    w.close()
    for sub, name in (("a", "events.out.tfevents.1700000000.fixture.1.0"), ("b", "events.out.tfevents.1700000500.fixture.1.1")):
        (src,) = list((tmp / sub).glob("events.out.tfevents.*"))
        shutil.move(str(src), d / name)
    shutil.rmtree(tmp)
    return {"fault_step": 40, "nan_step": 60}


def _legacy_wandb() -> bool:
    """wandb < 0.18 writes the .wandb log from Python (wandb/sdk/internal/datastore.py); later, wandb-core."""
    from importlib.metadata import version

    return tuple(int(x) for x in version("wandb").split(".")[:2]) < (0, 18)


def make_wandb():
    import wandb

    legacy = _legacy_wandb()
    root = clean(HERE / ("wandb_legacy_run" if legacy else "wandb_run"))
    quiet = {"_disable_stats": True, "_disable_meta": True} if legacy else {"x_disable_stats": True, "x_disable_meta": True}
    run = wandb.init(mode="offline", dir=str(root), project="fixture", id="fixture01", config=CONFIG,
                     settings=wandb.Settings(console="wrap", disable_git=True, save_code=False, **quiet))
    run.define_metric("train/global_step")
    run.define_metric("rollout/*", step_metric="train/global_step")
    for s in STEPS:
        row = {"actor/grad_norm": grad_norm(s), "actor/pg_loss": loss(s, neg_inf=True),
               "critic/score/mean": reward(s), "actor/entropy": entropy(s)}
        if s % 10 == 0:
            row["train/global_step"] = s * 4
            row["rollout/response_length"] = 100.0 + s
        run.log(row, step=s)
        if s in (1, 40, 60):
            print(f"step:{s} - actor/grad_norm:{grad_norm(s)}", flush=True)
    print("RuntimeError: loss is NaN at step 60", flush=True)
    run.finish(exit_code=1)
    wdir = root / "wandb"
    (rundir,) = [p for p in wdir.iterdir() if p.is_dir() and p.name.startswith("offline-run-")]
    for p in list(rundir.rglob("*")):  # keep the store, drop host-specific debug logs
        if p.is_file() and (p.suffix == ".log" and p.name != "output.log" or p.name in ("wandb-metadata.json", "requirements.txt")):
            p.unlink()
    for p in sorted(rundir.rglob("*"), reverse=True):
        if p.is_dir() and not any(p.iterdir()):
            p.rmdir()
    for p in wdir.iterdir():
        if p != rundir:
            if p.is_symlink() or p.is_file():
                p.unlink()
            else:
                shutil.rmtree(p)
    return {"run_dir": str(rundir.relative_to(HERE))}


def make_mlflow_sqlite():
    import mlflow

    d = clean(HERE / "mlflow")
    db = d / "mlflow.db"
    mlflow.set_tracking_uri(f"sqlite:///{db}")
    exp = mlflow.set_experiment("fixture")
    with mlflow.start_run(experiment_id=exp.experiment_id, run_name="planted"):
        mlflow.log_params({"algorithm/adv_estimator": "grpo", "actor_rollout_ref/actor/optim/lr": 1e-6,
                           "actor_rollout_ref/rollout/n": 8})
        for s in STEPS:
            mlflow.log_metrics({k.replace("@", "_at_"): v for k, v in verl_row(s).items()}, step=s)
        mlflow.set_tag("note", "planted fault")
    mlflow.end_run()
    # Size: MLflow's migrations create ~65 tables (one page each at least, ~1 MB). Drop the tables that
    # stayed empty, apart from the ones a reader looks at, so the committed file stays small; rows untouched.
    keep = {"runs", "metrics", "params", "tags", "experiments", "latest_metrics", "alembic_version"}
    con = sqlite3.connect(db)
    con.execute("PRAGMA foreign_keys=OFF")
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
        if name not in keep and con.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0] == 0:
            con.execute(f'DROP TABLE "{name}"')
    con.commit()
    con.execute("VACUUM")
    con.close()


def make_mlflow_files():
    import mlflow

    d = HERE / "mlflow" / "mlruns"
    if d.exists():
        shutil.rmtree(d)
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # MLflow 3 keeps the file store in maintenance mode
    mlflow.set_tracking_uri(d.as_uri())
    exp = mlflow.set_experiment("fixture")
    with mlflow.start_run(experiment_id=exp.experiment_id, run_name="planted"):
        mlflow.log_params({"algorithm/adv_estimator": "grpo", "actor_rollout_ref/rollout/n": 8})
        for s in STEPS:
            mlflow.log_metrics(verl_row(s), step=s)
    mlflow.end_run()


def make_trackio():
    d = clean(HERE / "trackio")
    os.environ["TRACKIO_DIR"] = str(d)
    import trackio

    trackio.init(project="fixture", name="planted", config=CONFIG)
    for s in STEPS:
        trackio.log(verl_row(s), step=s)
    trackio.finish()
    for p in d.iterdir():  # keep only the project database
        if p.suffix != ".db":
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    # trackio leaves the database in WAL mode (kept: readers must open it read-only all the same). Drop the
    # tables that stayed empty apart from the ones a reader looks at, as for MLflow; rows untouched.
    con = sqlite3.connect(d / "fixture.db")
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
        if name not in ("metrics", "configs", "system_metrics", "sqlite_sequence") and \
                con.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0] == 0:
            con.execute(f'DROP TABLE "{name}"')
    con.commit()
    con.execute("VACUUM")
    con.close()


def make_verl_jsonl():
    import orjson

    d = clean(HERE / "verl")
    # verl/utils/tracking.py FileLogger.log (verl 0.9.1):
    #   self.fp.write(orjson.dumps({"step": step, "data": data}, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
    with open(d / "metrics.jsonl", "wb", buffering=0) as fp:
        for s in STEPS:
            fp.write(orjson.dumps({"step": s, "data": verl_row(s)}, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")


def make_trainer_state():
    d = clean(HERE / "trainer_state" / "checkpoint-70")
    hist = []
    for s in STEPS:
        hist.append({"epoch": round(s / 70, 4), "grad_norm": grad_norm(s), "learning_rate": 1e-6,
                     "loss": loss(s), "reward": reward(s), "step": s})
    hist.append({"epoch": 1.0, "step": 70, "total_flos": 0.0, "train_loss": NAN, "train_runtime": 123.4,
                 "train_samples_per_second": 4.5, "train_steps_per_second": 0.57})
    state = {"best_metric": None, "best_model_checkpoint": None, "epoch": 1.0, "eval_steps": 500,
             "global_step": 70, "is_hyper_param_search": False, "is_local_process_zero": True,
             "is_world_process_zero": True, "log_history": hist, "logging_steps": 1, "max_steps": 70,
             "num_train_epochs": 1, "save_steps": 70, "total_flos": 0.0, "train_batch_size": 8,
             "trial_name": None, "trial_params": None}
    # transformers TrainerState.save_to_json: json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"
    (d / "trainer_state.json").write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")


def make_deepspeed_csv():
    import csv

    # deepspeed/monitor/csv_monitor.py: log_dir = output_path/job_name; one file per event,
    # filename = log_name.replace('/', '_').replace(' ', '_') + '.csv', header ['step', last part of log_name],
    # rows [step, value]; the engine logs Train/Samples/* against global_samples.
    d = clean(HERE / "deepspeed" / "csv_monitor" / "fixture_job")
    batch = 8
    for name, fn in (("Train/Samples/train_loss", loss), ("Train/Samples/lr", lambda s: 1e-6),
                     ("Train/Samples/grad_norm", grad_norm)):
        fname = d / (name.replace("/", "_").replace(" ", "_") + ".csv")
        with open(fname, "a+") as f:
            wr = csv.writer(f)
            wr.writerow(["step", name.split("/")[-1]])
            for s in STEPS:
                wr.writerow([s * batch, fn(s)])


def main(which):
    jobs = {"tensorboard": make_tensorboard, "wandb": make_wandb, "mlflow_sqlite": make_mlflow_sqlite,
            "mlflow_files": make_mlflow_files, "trackio": make_trackio, "verl": make_verl_jsonl,
            "trainer_state": make_trainer_state, "deepspeed": make_deepspeed_csv}
    for name in which or jobs:
        print(name, jobs[name]() or "")
    legacy = list(which) == ["wandb"] and _legacy_wandb()  # the second W&B fixture, from an older SDK
    (HERE / ("VERSIONS_wandb_legacy.txt" if legacy else "VERSIONS.txt")).write_text("\n".join(versions()) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
