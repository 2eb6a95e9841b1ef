"""W&B local run folders (`wandb/run-*/`, `wandb/offline-run-*/`) without the wandb SDK.

`run-<id>.wandb` framing: the LevelDB log format as W&B writes it (wandb/sdk/internal/datastore.py up to
wandb 0.18; wandb-core's core/pkg/leveldb/record.go since, same bytes): a 7-byte file header
ident ':W&B', uint16 magic 0xBEE1, uint8 version 0; then 32 KiB blocks of chunks, each with a 7-byte header
(uint32 checksum, uint16 length, uint8 type: 1 FULL, 2 FIRST, 3 MIDDLE, 4 LAST), little-endian. The
checksum is zlib CRC-32 (IEEE) of the type byte and the payload (datastore.py: zlib.crc32(data,
crc32(type))); CRC-32C is also accepted. A block tail shorter than a header is zero padding. A bad chunk
skips to the next block (as the Go reader's Recover does); a short final chunk is a note (a live run).

Records: wandb/proto/wandb_internal.proto `Record` (checked against wandb 0.31.0's descriptors):
num = 1, history = 2, summary = 3, output = 4, config = 5, files = 6, stats = 7, artifact = 8,
tbrecord = 9, alert = 10, telemetry = 11, metric = 12, output_raw = 13, control = 16, run = 17, exit = 18,
uuid = 19, final = 20, header = 21, footer = 22, preempting = 23, ..., request = 100.
HistoryRecord: item = 1, step = 2 (HistoryStep num = 1). HistoryItem: key = 1, nested_key = 2, none = 3,
boolean = 4, integer = 5 (sint64), number = 6 (double), text = 7, json = 8, value_json = 16.
SummaryRecord / ConfigRecord: update = 1, remove = 2 of items {key = 1, nested_key = 2, value_json = 16}.
OutputRecord / OutputRawRecord: output_type = 1 (0 STDERR, 1 STDOUT), timestamp = 2, line = 3.
RunExitRecord: exit_code = 1, runtime = 2. MetricRecord: name = 1, glob_name = 2, step_metric = 4.
RunRecord: run_id = 1, entity = 2, project = 3, config = 4, summary = 5, display_name = 8.

History points lie on the `_step` axis, or on a metric's step_metric (wandb.define_metric) when the row
carries it. W&B's JSON encodes non-finite numbers as NaN / Infinity / -Infinity, read back as floats.
Beside the log: files/output.log (console, used when the log holds no output records),
files/wandb-summary.json (final summary), files/config.yaml ({key: {value: ...}} items).
"""
from __future__ import annotations

import fnmatch
import json
import os
import struct
import zlib

from .base import Limits, Sink, StoreRun, as_number, bump, count_note, flatten
from .wire import WireError, as_signed64, crc32c, f64, iter_fields, text, zigzag

BLOCK, HEADER = 32768, 7
MAX_RECORD = 16 << 20
_NUM_START = set("-0123456789NI")
_RECORD_NAMES = {6: "files", 7: "stats", 8: "artifact", 9: "tbrecord", 10: "alert", 11: "telemetry",
                 20: "final", 21: "header", 22: "footer", 23: "preempting", 24: "noop_link_artifact",
                 25: "use_artifact", 26: "environment", 27: "output_logger", 100: "request"}


CONSOLE_MAX = 64 << 20  # files/output.log read into the store's console up to this; a longer one is streamed as a log
SUMMARY_MAX = 16 << 20  # wandb-summary.json (a final summary is KBs)


def wandb_files(run_dir: str) -> list[str]:
    """The regular run-*.wandb files of a run folder (links, FIFOs and devices left out)."""
    from grpo_debug.tools import safefs

    return [e.path for e in safefs.regular_files(run_dir, 20_000) if e.name.endswith(".wandb")]


def iter_chunks(f, size: int, limits: Limits, notes: list[str], name: str):
    """Yield (record bytes, offset of its first chunk) from a .wandb file positioned after its header."""
    pos, parts, start, orphans, held = HEADER, None, 0, 0, 0
    while pos < size:
        if pos >= limits.max_bytes:
            notes.append(f"{name}: stopped at byte {pos} of {size} (max_bytes {limits.max_bytes})")
            return
        left = BLOCK - pos % BLOCK
        if left < HEADER:
            f.seek(left, 1)
            pos += left
            continue
        head = f.read(HEADER)
        if len(head) < HEADER:
            notes.append(f"{name}: truncated chunk header at byte {pos}; rest ignored")
            return
        crc, ln, typ = struct.unpack("<IHB", head)
        if crc == 0 and ln == 0 and typ == 0:  # zeroed rest of block
            f.seek(left - HEADER, 1)
            pos += left
            continue
        data = f.read(ln)
        if len(data) < ln:
            notes.append(f"{name}: truncated final chunk at byte {pos} ({len(data)} of {ln} bytes); rest ignored")
            return
        if ln + HEADER > left or typ not in (1, 2, 3, 4) or not _crc_ok(crc, typ, data):
            notes.append(f"{name}: corrupt chunk at byte {pos}; skipped to the next block")
            pos += left
            f.seek(pos)
            parts = None
            continue
        if typ == 1:
            parts = None
            yield data, pos
        elif typ == 2:
            parts, start, held = [data], pos, len(data)
        elif parts is not None:
            parts.append(data)
            held += len(data)
            if held > MAX_RECORD:  # a record spanning more than MAX_RECORD bytes is no metric record; dropped
                notes.append(f"{name}: record at byte {start} longer than {MAX_RECORD >> 20} MiB; skipped")
                parts = None
            elif typ == 4:
                yield b"".join(parts), start
                parts = None
        else:
            orphans += 1  # a MIDDLE/LAST chunk whose FIRST was lost to corruption
        pos += HEADER + ln
    if orphans:
        notes.append(f"{name}: {orphans} continuation chunks without their first chunk skipped")
    if parts is not None:
        notes.append(f"{name}: record at byte {start} has no LAST chunk (file ends mid-record); ignored")


def _crc_ok(crc: int, typ: int, data: bytes) -> bool:
    if zlib.crc32(data, zlib.crc32(bytes([typ]))) & 0xFFFFFFFF == crc:
        return True
    return crc32c(bytes([typ]) + data) == crc


class _State:
    def __init__(self, run: StoreRun, limits: Limits):
        self.run, self.sink = run, Sink(run, limits)
        self.step_metric: dict[str, str] = {}
        self.glob_step: list[tuple[str, str]] = []
        self.out: dict[str, list[str]] = {"output": [], "output_raw": []}
        self.skipped: dict[str, int] = {}
        self.nonnum: dict[str, int] = {}
        self.fallback = 0


def read_wandb(path: str, limits: Limits) -> StoreRun:
    """A run folder (its .wandb file and files/), or a .wandb file alone."""
    run_dir = path if os.path.isdir(path) else os.path.dirname(path)
    logs = wandb_files(path) if os.path.isdir(path) else [path]
    run = StoreRun(source=path, kind="wandb")
    st = _State(run, limits)
    for log in logs:
        _read_log(log, st, limits)
    st.sink.close()
    if st.fallback:
        run.notes.append(f"{st.fallback} history values had a step_metric absent from their row; put on _step")
    count_note(run, st.skipped, "W&B record types not read")
    count_note(run, st.nonnum, "non-numeric history values")
    _console(run, st, run_dir, limits)
    _side_files(run, run_dir)
    if not logs:
        run.notes.append("no run-*.wandb file in the folder")
    return run


def _read_log(log: str, st: _State, limits: Limits) -> None:
    from grpo_debug.tools import safefs

    name = os.path.basename(log)
    try:
        sf = safefs.open_file(log)
    except OSError as e:
        st.run.notes.append(f"{name}: cannot open ({getattr(e, 'why', None) or e.strerror or e})")
        return
    size, f = sf.size, sf.fileobj()
    with f:
        head = f.read(HEADER)
        if len(head) < HEADER or head[:4] != b":W&B":
            st.run.notes.append(f"{name}: no ':W&B' file header; not read")
            return
        magic, version = struct.unpack("<HB", head[4:])
        if magic != 0xBEE1 or version != 0:
            st.run.notes.append(f"{name}: header magic {magic:#x} version {version} (expected 0xbee1 0); read anyway")
        for n, (data, off) in enumerate(iter_chunks(f, size, limits, st.run.notes, name)):
            try:
                _record(data, f"{name}#record {n}", st)
            except WireError as e:
                st.run.notes.append(f"{name}: record {n} at byte {off} is not a Record ({e}); skipped")


def _record(data, where: str, st: _State) -> None:
    for fno, wt, val in iter_fields(data):
        if wt != 2:
            continue
        if fno == 2:
            _history(val, where, st)
        elif fno == 3:
            _items(val, st.run.summary, where)
        elif fno == 5:
            _config(val, st.run.config)
        elif fno in (4, 13):
            st.out["output" if fno == 4 else "output_raw"].append(_output_line(val))
        elif fno == 12:
            _metric(val, st)
        elif fno == 17:
            _run_record(val, st)
        elif fno == 18:
            for f2, w2, v2 in iter_fields(val):
                if f2 == 1 and w2 == 0:
                    st.run.exit_code = as_signed64(v2)
                    if st.run.exit_code >= 1 << 31:
                        st.run.exit_code -= 1 << 32
                elif f2 == 2 and w2 == 0:
                    st.run.summary["_exit_runtime"] = v2
        elif fno in _RECORD_NAMES:
            bump(st.skipped, _RECORD_NAMES[fno])
        elif fno not in (16, 19, 200):
            bump(st.skipped, f"field {fno}")


def _item_value(buf, numeric: bool = False) -> tuple[str, object, bool]:
    """(key, value, has_value) of a HistoryItem / SummaryItem / ConfigItem. numeric: a value_json that
    float() reads (numbers, NaN, Infinity, -Infinity) is taken as a float without the JSON parser."""
    keys, value, has = [], None, False
    for fno, wt, val in iter_fields(buf):
        if fno in (1, 2) and wt == 2:
            keys.append(text(val))
        elif fno == 4 and wt == 0:
            value, has = bool(val), True
        elif fno == 5 and wt == 0:
            value, has = zigzag(val), True
        elif fno == 6 and wt == 1:
            value, has = f64(val), True
        elif fno == 7 and wt == 2:
            value, has = text(val), True
        elif fno in (8, 16) and wt == 2:
            t = text(val)
            if numeric and t[:1] in _NUM_START:
                try:
                    value, has = float(t), True
                    continue
                except ValueError:
                    pass
            try:
                value, has = json.loads(t), True
            except ValueError:
                value, has = text(val), True
        elif fno == 3:
            value, has = None, True
    return ".".join(k for k in keys if k), value, has


def _history(buf, where: str, st: _State) -> None:
    row, step = {}, None
    for fno, wt, val in iter_fields(buf):
        if fno == 1 and wt == 2:
            key, value, has = _item_value(val, numeric=True)
            if has:
                row[key] = value
        elif fno == 2 and wt == 2:
            for f2, w2, v2 in iter_fields(val):
                if f2 == 1 and w2 == 0:
                    step = as_signed64(v2)
    if step is None:
        step = as_number(row.get("_step"))
    for key, value in row.items():
        if isinstance(value, dict):
            for k2, v2 in flatten(value, key).items():
                _point(st, k2, v2, step, row, where)
        else:
            _point(st, key, value, step, row, where)


def _point(st: _State, key, value, step, row, where) -> None:
    x = as_number(value)
    if x is None:
        bump(st.nonnum, type(value).__name__)
        return
    axis, at = "_step", step
    sm = _step_metric_for(st, key)
    if sm and sm != key:
        v = as_number(row.get(sm))
        if v is not None:
            axis, at = sm, v
        else:
            st.fallback += 1
    if at is None:
        bump(st.nonnum, "row without _step")
        return
    st.sink.add(key, axis, at, x, where)


def _step_metric_for(st: _State, key: str) -> str | None:
    if key in st.step_metric:
        return st.step_metric[key]
    for pat, sm in st.glob_step:
        if fnmatch.fnmatchcase(key, pat):
            return sm
    return None


def _items(buf, into: dict, where: str) -> None:
    for fno, wt, val in iter_fields(buf):
        if wt != 2:
            continue
        key, value, has = _item_value(val)
        if fno == 1 and has:
            into[key] = value
        elif fno == 2:
            into.pop(key, None)


def _config(buf, config: dict) -> None:
    raw: dict = {}
    removed = []
    for fno, wt, val in iter_fields(buf):
        if wt != 2:
            continue
        key, value, has = _item_value(val)
        if fno == 1 and has:
            raw[key] = value
        elif fno == 2:
            removed.append(key)
    config.update(flatten(_unwrap(raw)))
    for k in removed:
        for c in [c for c in config if c == k or c.startswith(k + ".")]:
            config.pop(c)


def _unwrap(d):
    """config.yaml writes {key: {value: v, desc: ...}}; records may too. Keep v."""
    if isinstance(d, dict):
        if "value" in d and set(d) <= {"value", "desc"}:
            return _unwrap(d["value"])
        return {k: _unwrap(v) for k, v in d.items()}
    return d


def _output_line(buf) -> str:
    """The text of an OutputRecord / OutputRawRecord; stdout and stderr share one console."""
    for fno, wt, val in iter_fields(buf):
        if fno == 3 and wt == 2:
            return text(val)
    return ""


def _metric(buf, st: _State) -> None:
    name = glob = sm = ""
    for fno, wt, val in iter_fields(buf):
        if wt == 2 and fno == 1:
            name = text(val)
        elif wt == 2 and fno == 2:
            glob = text(val)
        elif wt == 2 and fno == 4:
            sm = text(val)
    if sm and name:
        st.step_metric[name] = sm
    elif sm and glob:
        st.glob_step.append((glob, sm))


def _run_record(buf, st: _State) -> None:
    names = {1: "run_id", 2: "entity", 3: "project", 8: "display_name"}
    for fno, wt, val in iter_fields(buf):
        if wt != 2:
            continue
        if fno in names:
            st.run.summary["_" + names[fno]] = text(val)
            if fno == 1:
                st.run.run_id = text(val)
        elif fno == 4:
            _config(val, st.run.config)
        elif fno == 5:
            _items(val, st.run.summary, "run")


def _console(run: StoreRun, st: _State, run_dir: str, limits: Limits) -> None:
    kind = "output" if st.out["output"] else "output_raw"
    chunks = st.out[kind]
    lines: list[str] = []
    if chunks:
        # output_raw records are raw terminal writes (a line and its newline may come apart): joined as they
        # are; output records are processed lines, each ended with a newline if it lacks one.
        text_ = "".join(c if kind == "output_raw" or c.endswith("\n") else c + "\n" for c in chunks)
        lines = [ln.rsplit("\r", 1)[-1] for ln in text_.splitlines()]
        if st.out["output"] and st.out["output_raw"]:
            run.notes.append("console from output records; output_raw records not used (same stream)")
    else:
        lines = _output_log(run, os.path.join(run_dir, "files", "output.log"), limits)
    if len(lines) > limits.max_console:
        run.notes.append(f"console: kept the last {limits.max_console} of {len(lines)} lines")
        lines = lines[-limits.max_console:]
    run.console = lines


def _output_log(run: StoreRun, log: str, limits: Limits) -> list[str]:
    """files/output.log as console lines when it is at most CONSOLE_MAX bytes; a longer one is left for the
    folder's log reader (StoreRun.console_file: streamed like any big log, never loaded whole)."""
    from grpo_debug.tools import safefs

    k = safefs.kind(log)
    if k == "missing":
        return []
    if k != "file":
        run.notes.append(f"files/output.log: {'a symbolic link' if k == 'link' else 'not a regular file'}; not read")
        return []
    try:
        with safefs.open_file(log) as f:
            if f.size > CONSOLE_MAX:
                run.console_file = log
                run.notes.append(f"files/output.log: {f.size} bytes, streamed as a log")
                return []
            data = f.read_all(CONSOLE_MAX)
    except OSError as e:
        run.notes.append(f"files/output.log: {getattr(e, 'why', None) or e.strerror or e}")
        return []
    run.notes.append("console read from files/output.log (no output records in the log)")
    return data.decode("utf-8", "replace").splitlines()


def _side_files(run: StoreRun, run_dir: str) -> None:
    from grpo_debug.tools import safefs

    files = os.path.join(run_dir, "files")
    summ = os.path.join(files, "wandb-summary.json")
    if safefs.kind(summ) != "missing":
        try:
            data = json.loads(safefs.read_bytes(summ, SUMMARY_MAX))
            if isinstance(data, dict):
                run.summary.update(data)
        except (OSError, ValueError, RecursionError) as e:
            run.notes.append(f"files/wandb-summary.json unreadable ({getattr(e, 'why', None) or str(e)[:100]})")
    cfg = os.path.join(files, "config.yaml")
    if safefs.kind(cfg) != "missing":
        try:
            from grpo_debug.tools.engine.documents import load_yaml  # the safe loader: no alias bombs, no tags

            data = load_yaml(safefs.read_bytes(cfg, 4 * 2**20).decode("utf-8", "replace")) or {}
            for k, v in flatten(_unwrap(data)).items():
                run.config.setdefault(k, v)
        except Exception as e:  # noqa: BLE001 - a bad side file is a note, the log was read
            run.notes.append(f"files/config.yaml unreadable ({type(e).__name__}: {e})")
