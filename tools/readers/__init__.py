"""Readers of the metric stores a training run leaves on disk (issue 13, part 1), no tracking SDK needed.

    from grpo_debug.tools.readers import read_store, find_stores
    for ref in find_stores("RUN_DIR"):          # StoreRef(path, kind), symlinks out of the folder not followed
        for run in read_store(ref.path):         # list[StoreRun]
            run.series["actor/grad_norm"].points  # [(x, value, where)], NaN/inf kept as floats

Each StoreRun: source (path), kind (one of KINDS), series {raw key: Series(key, axis, points)}, config
(flattened dotted keys), console (lines), summary, exit_code, notes (everything skipped and why: record
types not read, torn or corrupt tails, bounds hit), run_id (for stores holding several runs).

| kind          | reads                                                               | module          |
|---------------|---------------------------------------------------------------------|-----------------|
| tensorboard   | events.out.tfevents.* (a folder = one run; later wall_time wins)    | tfevents.py     |
| wandb         | wandb/{run,offline-run}-*/run-*.wandb + files/ (output.log,         | wandb_log.py    |
|               | wandb-summary.json, config.yaml)                                    |                 |
| mlflow        | SQLite store (mlflow.db, verl's /tmp/mlruns.db), mlruns/<exp>/<run>/ | mlflow_store.py |
| trackio       | trackio project SQLite (<project>.db)                               | trackio_store.py|
| verl_jsonl    | verl FileLogger JSONL {"step": N, "data": {...}}                    | textstores.py   |
| trainer_state | HF Trainer trainer_state.json log_history                           | textstores.py   |
| deepspeed_csv | DeepSpeed csv_monitor job folder (<event>.csv: step,value)          | textstores.py   |
| wandb_csv     | W&B chart "Download CSV" (Step, <run> - <metric>[__MIN/__MAX]),      | wandb_csv.py    |
|               | a run's history DataFrame as CSV (_step column)                     |                 |

Each module's docstring cites the on-disk format it follows. Imports: this package pulls in only the
standard library's dataclasses/os; sqlite3, json, yaml, csv are imported inside the reader that needs them.

Measured choice: own readers of the documented formats, not the official libraries
(2-core AMD EPYC, Python 3.11.7; imports: best of 5, wall time of the import statement, and in brackets
the sum of the top-level cumulative times `python -X importtime` reports beyond a bare interpreter's;
reads: one run of 2,000 steps x 40 scalars per store;
official libraries in a throwaway venv: tensorboard 2.21.0 without TensorFlow, wandb 0.31.0, mlflow-skinny
3.17.2 + SQLAlchemy 2.1.9; RSS = maximum resident set of the whole process, /usr/bin/time -v).

| task                          | ours: import / read / RSS  | official: import / read / RSS                   |
|-------------------------------|----------------------------|-------------------------------------------------|
| import only (wall; -X         | package 15 ms (24) / 13 MB;| EventAccumulator 217 ms (255) / 42 MB;          |
| importtime sum in brackets)   | all readers + sqlite3 +    | wandb + wandb_internal_pb2 445 ms (1065) / 58 MB;|
|                               | yaml 37 ms (48) / 16 MB    | mlflow MlflowClient 785 ms (2170) / 90 MB       |
| TensorBoard, 3.7 MB, 80k pts  | 17 ms / 0.97 s / 66 MB     | EventAccumulator 207 ms / 1.22 s / 64 MB        |
| W&B offline, 5.8 MB, 86k pts  | 16 ms / 0.84 s / 26 MB     | wandb + pb2 Record parse* 694 ms / 0.08 s / 61 MB|
| MLflow SQLite, 21 MB, 80k pts | 24 ms / 0.49 s / 40 MB     | MlflowClient.get_metric_history 1.18 s / 3.72 s |
|                               |                            | / 147 MB                                        |

* wandb 0.31 ships no Python reader of .wandb files (datastore.py went with the move to wandb-core, Go);
the figure is datastore.py's framing loop plus the SDK's C-backed protobuf Record parser. Its parse is
faster than our pure-Python protobuf decoding, but its import alone costs about what our whole read does,
and the SDK is 62 MB installed (wandb 0.31.0, before its dependencies) and not a dependency we may take.
tensorboard imports TensorFlow when TF is installed (not measured here; it only adds). TFRecord data CRCs
are checked with a pure-Python CRC-32C (about 10 MB/s) for the first 8 MiB of each file, for all of it
when google_crc32c or crc32c is importable.

Bounds (Limits): max_bytes read per file (1 GiB), max_points kept per run (2,000,000), max_console lines
(200,000); find_stores(max_depth=6, max_files=20000). What a bound cuts off is said in notes.
"""
from .base import KINDS, Limits, Series, StoreRun
from .discover import StoreRef, find_stores, read_store, sniff_dir, sniff_file

__all__ = ["KINDS", "Limits", "Series", "StoreRun", "StoreRef", "find_stores", "read_store", "sniff_dir", "sniff_file"]
