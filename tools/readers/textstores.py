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

from .base import (Limits, Sink, StoreRun, TooManyKeys, as_number, bounded_lines, bump, count_note, flatten,
                   parse_scalar)

WHOLE_FILE_MAX = 64 << 20  # a whole-file JSON read (trainer_state.json of a long run is a few MB)

_TS_CONFIG = ("train_batch_size", "logging_steps", "max_steps", "num_train_epochs", "save_steps", "eval_steps")


def _read_whole(path: str, limits: Limits, run: StoreRun) -> bytes | None:
    """A whole JSON file, or None (with a note) when it is over WHOLE_FILE_MAX or max_bytes."""
    from grpo_debug.tools import safefs

    cap = min(limits.max_bytes, WHOLE_FILE_MAX)
    try:
        return safefs.read_bytes(path, cap)
    except OSError as e:
        run.notes.append(f"{os.path.basename(path)}: {getattr(e, 'why', None) or e.strerror or e}")
        return None


def sniff_verl_line(line: bytes) -> bool:
    try:
        d = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(d, dict) and "step" in d and isinstance(d.get("data"), dict)


def _step_of(v) -> float:
    """A record's step: an int or a float that is a whole number (verl logs ints); anything else raises."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise TypeError(f"step is {type(v).__name__}")
    return float(v)


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
            step, data = _step_of(d["step"]), d["data"]
            if not isinstance(data, dict):
                raise TypeError("data is not an object")
            flat = flatten(data, sep="/", max_keys=limits.max_record_keys)
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            bad.append((n, "too many keys" if isinstance(e, TooManyKeys) else
                        "nested too deep" if isinstance(e, RecursionError) else str(e)[:60] or type(e).__name__))
            continue
        for k, v in flat.items():
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
    except (ValueError, RecursionError) as e:
        run.notes.append(f"{name} does not parse as JSON ({str(e)[:80] or 'nested too deep'}); nothing read")
        return run
    if not isinstance(state, dict):
        run.notes.append(f"{name} is not a JSON object; nothing read")
        return run
    sink, skipped, nostep = Sink(run, limits), {}, 0
    for i, entry in enumerate(state.get("log_history") or []):
        if (not isinstance(entry, dict) or isinstance(entry.get("step"), bool)
                or not isinstance(entry.get("step"), (int, float)) or not math.isfinite(entry["step"])):
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
    from .base import first_bytes

    head = first_bytes(path, 4096).split(b"\n", 1)[0].decode("utf-8", "replace").strip().split(",")
    return len(head) == 2 and head[0] == "step" and bool(head[1])


def read_deepspeed_csv(path: str, limits: Limits) -> StoreRun:
    """A csv_monitor job folder (every step,<name> csv in it), or one such csv file."""
    run = StoreRun(source=path, kind="deepspeed_csv")
    from grpo_debug.tools import safefs

    if os.path.isdir(path):
        entries = [e for e in safefs.scandir(path, 20_000) if e.name.endswith(".csv")]
        for e in entries:
            if e.kind != "file":
                run.notes.append(f"{e.name}: {'a symbolic link' if e.kind == 'link' else 'not a regular file'}; not read")
        files = [e.path for e in entries if e.kind == "file"]
    else:
        files = [path]
    sink = Sink(run, limits)
    for fp in files:
        base = os.path.basename(fp)
        try:
            if base == "deepspeed_config.csv":
                _ds_config(fp, run, limits)
            elif is_ds_csv(fp):
                _ds_series(fp, run, sink, limits)
            else:
                run.notes.append(f"{base}: not a step,<value> csv; not read")
        except OSError as e:  # one unreadable file is a note; the others are read
            run.notes.append(f"{base}: {getattr(e, 'why', None) or e.strerror or e}")
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
            if not math.isfinite(step):
                raise ValueError(row[0])
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
