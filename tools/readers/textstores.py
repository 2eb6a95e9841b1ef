"""Text metric stores: verl's file-logger JSONL, HF Trainer's trainer_state.json, DeepSpeed's csv_monitor.

verl JSONL (verl/utils/tracking.py FileLogger, verl 0.9.1): one line per step,
`orjson.dumps({"step": step, "data": data}) + b"\\n"` to $VERL_FILE_LOGGER_PATH or
$VERL_FILE_LOGGER_ROOT/<project>/<experiment>.jsonl. orjson writes NaN and +-inf as null, so a null metric
is read as NaN (with a note: the sign of an infinity is lost in the file). Python's json writes NaN /
Infinity literals, read as such. A line that does not parse (a torn last line of a live run) is a note.

trainer_state.json (transformers/trainer_callback.py TrainerState.save_to_json: json.dumps(asdict(state),
indent=2, sort_keys=True)): `log_history` is a list of dicts each carrying "step" (the optimizer step,
global_step) and the logged numbers (loss, grad_norm, learning_rate, epoch, reward, ...). Python's json
writes NaN / Infinity literals. Top-level trainer settings (train_batch_size, logging_steps, max_steps,
num_train_epochs, save_steps, eval_steps) are config; the rest is summary.

DeepSpeed csv_monitor (deepspeed/monitor/csv_monitor.py): <output_path>/<job_name>/<event>.csv, one file per
event name with '/' and ' ' replaced by '_', header row ['step', <last part of the event name>], then
rows [step, value]; deepspeed_config.csv holds key,value rows. The engine logs Train/Samples/* against
global_samples, so a file whose name holds '_Samples_' is on the 'samples' axis, others on 'step'.
"""
from __future__ import annotations

import csv
import json
import math
import os

from .base import Limits, Sink, StoreRun, as_number, bounded_lines, bump, count_note, flatten, parse_scalar

WHOLE_FILE_MAX = 256 << 20

_TS_CONFIG = ("train_batch_size", "logging_steps", "max_steps", "num_train_epochs", "save_steps", "eval_steps")


def _read_whole(path: str, limits: Limits, run: StoreRun) -> bytes | None:
    """A whole JSON file, or None (with a note) when it is over WHOLE_FILE_MAX or max_bytes."""
    size = os.path.getsize(path)
    cap = min(limits.max_bytes, WHOLE_FILE_MAX)
    if size > cap:
        run.notes.append(f"{os.path.basename(path)}: {size} bytes, over the {cap}-byte bound for a whole-file read; not read")
        return None
    with open(path, "rb") as f:
        return f.read()


def sniff_verl_line(line: bytes) -> bool:
    try:
        d = json.loads(line)
    except ValueError:
        return False
    return isinstance(d, dict) and "step" in d and isinstance(d.get("data"), dict)


def read_verl_jsonl(path: str, limits: Limits) -> StoreRun:
    run = StoreRun(source=path, kind="verl_jsonl")
    sink, name = Sink(run, limits), os.path.basename(path)
    nulls, skipped, bad = 0, {}, []
    last = 0
    for n, line in bounded_lines(path, limits, run.notes):
        last = n
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            step, data = d["step"], d["data"]
            if not isinstance(data, dict):
                raise TypeError("data is not an object")
        except (ValueError, KeyError, TypeError) as e:
            bad.append((n, type(e).__name__))
            continue
        for k, v in flatten(data, sep="/").items():
            if v is None:
                nulls += 1
                v = math.nan
            x = as_number(v)
            if x is None:
                bump(skipped, type(v).__name__)
                continue
            sink.add(k, "step", step, x, f"{name}#line {n}")
    sink.close()
    if nulls:
        run.notes.append(f"{nulls} null values read as NaN (verl's FileLogger writes NaN and +-inf as null via orjson)")
    if bad:
        desc = [f"line {n}{' (last line, torn?)' if n == last else ''}: {err}" for n, err in bad[:5]]
        run.notes.append(f"{len(bad)} unparseable lines skipped: " + "; ".join(desc) + (" ..." if len(bad) > 5 else ""))
    count_note(run, skipped, "non-numeric values")
    return run


def read_trainer_state(path: str, limits: Limits) -> StoreRun:
    run = StoreRun(source=path, kind="trainer_state")
    name = os.path.basename(path)
    data = _read_whole(path, limits, run)
    if data is None:
        return run
    try:
        state = json.loads(data)
    except ValueError as e:
        run.notes.append(f"{name} does not parse as JSON ({e}); nothing read")
        return run
    if not isinstance(state, dict):
        run.notes.append(f"{name} is not a JSON object; nothing read")
        return run
    sink, skipped, nostep = Sink(run, limits), {}, 0
    for i, entry in enumerate(state.get("log_history") or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("step"), (int, float)):
            nostep += 1
            continue
        for k, v in entry.items():
            if k == "step":
                continue
            x = as_number(v)
            if x is None:
                bump(skipped, f"{k} ({type(v).__name__})")
                continue
            sink.add(k, "global_step", entry["step"], x, f"{name}#log_history[{i}]")
    sink.close()
    if nostep:
        run.notes.append(f"{nostep} log_history entries without a numeric step skipped")
    count_note(run, skipped, "non-numeric log_history values")
    for k, v in state.items():
        if k == "log_history":
            continue
        (run.config if k in _TS_CONFIG else run.summary)[k] = v
    return run


def is_ds_csv(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.readline().strip().split(",")
    except OSError:
        return False
    return len(head) == 2 and head[0] == "step" and bool(head[1])


def read_deepspeed_csv(path: str, limits: Limits) -> StoreRun:
    """A csv_monitor job folder (every step,<name> csv in it), or one such csv file."""
    run = StoreRun(source=path, kind="deepspeed_csv")
    if os.path.isdir(path):
        files = sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".csv")
                       and not os.path.islink(os.path.join(path, n)))
    else:
        files = [path]
    sink = Sink(run, limits)
    for fp in files:
        base = os.path.basename(fp)
        if base == "deepspeed_config.csv":
            _ds_config(fp, run, limits)
        elif is_ds_csv(fp):
            _ds_series(fp, run, sink, limits)
        else:
            run.notes.append(f"{base}: not a step,<value> csv; not read")
    sink.close()
    return run


def _ds_series(fp: str, run: StoreRun, sink: Sink, limits: Limits) -> None:
    base = os.path.basename(fp)
    key = base[:-4]
    axis = "samples" if "_Samples_" in f"_{key}_" else "step"
    bad = 0
    for n, line in bounded_lines(fp, limits, run.notes):
        row = _csv_row(line)
        if not row or row[0] == "step":  # the header; written again when a restarted job appends
            continue
        try:
            step, value = float(row[0]), float(row[1])
        except (ValueError, IndexError):
            bad += 1
            continue
        sink.add(key, axis, step, value, f"{base}#row {n}")
    if bad:
        run.notes.append(f"{base}: {bad} malformed rows skipped")


def _ds_config(fp: str, run: StoreRun, limits: Limits) -> None:
    for n, line in bounded_lines(fp, limits, run.notes):
        row = _csv_row(line)
        if n == 1 or len(row) < 2:
            continue
        run.config[row[0]] = parse_scalar(row[1])


def _csv_row(line: bytes) -> list[str]:
    """One csv_monitor row (csv.writer output; the monitor writes no embedded newlines)."""
    return next(csv.reader([line.decode("utf-8", "replace")]), [])
