"""TensorBoard event files (`events.out.tfevents.*`) without tensorboard or tensorflow.

Framing: TFRecord (tensorflow/core/lib/io/record_writer.h): uint64 length, uint32 masked CRC-32C of the
length bytes, `length` bytes of data, uint32 masked CRC-32C of the data, all little-endian. The length CRC
is always checked; data CRCs are checked for the first `CRC_BUDGET` bytes of each file when CRC-32C is the
pure-Python one (about 10 MB/s), for all of it when a native crc32c package is importable. A short or
corrupt record ends that file's read with a note, never an exception.

Payload: tensorflow/core/util/event.proto `Event`: wall_time = 1 (double), step = 2 (int64),
file_version = 3, graph_def = 4, summary = 5, log_message = 6, session_log = 7, tagged_run_metadata = 8,
meta_graph_def = 9, source_metadata = 10.
tensorflow/core/framework/summary.proto `Summary`: value = 1 (repeated Value). `Summary.Value`: tag = 1,
simple_value = 2 (float), obsolete_old_style_histogram = 3, image = 4, histo = 5, audio = 6, node_name = 7,
tensor = 8 (TensorProto), metadata = 9 (SummaryMetadata: plugin_data = 1 {plugin_name = 1, content = 2},
display_name = 2, summary_description = 3, data_class = 4 with DATA_CLASS_SCALAR = 1).
tensorflow/core/framework/tensor.proto `TensorProto`: dtype = 1, tensor_shape = 2 (TensorShapeProto:
dim = 2 {size = 1, name = 2}), version_number = 3, tensor_content = 4, float_val = 5, double_val = 6,
int_val = 7, string_val = 8, int64_val = 10, bool_val = 11, half_val = 13.
tensorflow/core/framework/types.proto DataType: DT_FLOAT 1, DT_DOUBLE 2, DT_INT32 3, DT_UINT8 4,
DT_INT16 5, DT_INT8 6, DT_INT64 9, DT_BOOL 10, DT_BFLOAT16 14, DT_HALF 19.

Scalars come as simple_value (torch's and tensorboardX's add_scalar) or as a one-element numeric tensor
(TF2 `tf.summary.scalar`, torch add_scalar(new_style=True)). Several files of one run (a resumed run) are
merged; for a (tag, step) written more than once the point with the later wall_time wins.
"""
from __future__ import annotations

import os
import struct

from .base import Limits, Sink, StoreRun, bump, count_note
from .wire import WireError, crc32c_is_native, f32, f64, iter_fields, masked_crc32c, packed, read_varint, text

CRC_BUDGET = 8 << 20
MAX_RECORD = 16 << 20  # a record longer than this (an image or graph, never a scalar) is skipped by seeking
_NUMERIC = {1: ("<f", 4), 2: ("<d", 8), 3: ("<i", 4), 4: ("<B", 1), 5: ("<h", 2), 6: ("<b", 1),
            9: ("<q", 8), 10: ("<?", 1), 19: ("<e", 2)}
_EVENT_KINDS = {3: "file_version", 4: "graph_def", 6: "log_message", 7: "session_log",
                8: "tagged_run_metadata", 9: "meta_graph_def", 10: "source_metadata"}
_VALUE_KINDS = {3: "old_style_histogram", 4: "image", 5: "histo", 6: "audio"}


def is_event_file(name: str) -> bool:
    return name.startswith("events.out.tfevents.") or ".tfevents." in name


def read_tensorboard(path: str, limits: Limits) -> StoreRun:
    """A single event file, or a folder: all event files directly in it, as one run."""
    from grpo_debug.tools import safefs

    run = StoreRun(source=path, kind="tensorboard")
    if os.path.isdir(path):
        entries = [e for e in safefs.scandir(path, 20_000) if is_event_file(e.name)]
        for e in entries:
            if e.kind != "file":
                run.notes.append(f"{e.name}: {'a symbolic link' if e.kind == 'link' else 'not a regular file'}; not read")
        files = [e.path for e in entries if e.kind == "file"]
    else:
        files = [path]
    best: dict[tuple[str, float], tuple[tuple, float, str]] = {}
    skipped: dict[str, int] = {}
    for order, f in enumerate(files):
        if len(best) >= limits.max_points:
            run.notes.append(f"{os.path.basename(f)} not read: max_points {limits.max_points} reached")
            continue
        _read_file(f, order, limits, run, best, skipped)
    sink = Sink(run, limits)
    for (tag, step), (_, value, where) in sorted(best.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        sink.add(tag, "step", step, value, where)
    sink.close()
    count_note(run, skipped, "non-scalar TensorBoard records")
    run.summary["files"] = [os.path.basename(f) for f in files]
    return run


def _read_file(path, order, limits, run, best, skipped) -> None:
    from grpo_debug.tools import safefs

    name = os.path.basename(path)
    try:
        sf = safefs.open_file(path)
    except OSError as e:
        run.notes.append(f"{name}: cannot open ({getattr(e, 'why', None) or e.strerror or e})")
        return
    size = sf.size
    f = sf.fileobj()
    verify_all = crc32c_is_native()
    with f:
        pos = rec = 0
        while True:
            if pos >= limits.max_bytes:
                run.notes.append(f"{name}: stopped at byte {pos} of {size} (max_bytes {limits.max_bytes})")
                return
            head = f.read(12)
            if not head:
                return
            if len(head) < 12:
                run.notes.append(f"{name}: truncated record header at byte {pos} (record {rec}); rest ignored")
                return
            (length,) = struct.unpack("<Q", head[:8])
            if masked_crc32c(head[:8]) != struct.unpack("<I", head[8:])[0]:
                run.notes.append(f"{name}: corrupt length CRC at byte {pos} (record {rec}); rest ignored")
                return
            if pos + 16 + length > size:
                run.notes.append(f"{name}: truncated final record at byte {pos} (record {rec} declares {length} "
                                 f"bytes, past the end of the {size}-byte file); rest ignored")
                return
            if length > MAX_RECORD:
                f.seek(length + 4, 1)
                bump(skipped, f"records over {MAX_RECORD >> 20} MiB (not scalars)")
                pos += 16 + length
                rec += 1
                continue
            data = f.read(length)
            tail = f.read(4)
            if len(data) < length or len(tail) < 4:
                run.notes.append(f"{name}: truncated final record at byte {pos} (record {rec}: {len(data)} of "
                                 f"{length} bytes); rest ignored")
                return
            if (verify_all or pos < CRC_BUDGET) and masked_crc32c(data) != struct.unpack("<I", tail)[0]:
                run.notes.append(f"{name}: data CRC mismatch in record {rec} at byte {pos}; record skipped")
            else:
                try:
                    _event(data, f"{name}#record {rec}", (order, rec), best, skipped)
                except WireError as e:
                    run.notes.append(f"{name}: record {rec} is not an Event ({e}); skipped")
            if len(best) > limits.max_points:
                run.notes.append(f"{name}: stopped at record {rec} (max_points {limits.max_points} (tag, step) pairs)")
                return
            if not verify_all and pos < CRC_BUDGET <= pos + 16 + length < size:
                run.notes.append(f"{name}: data CRCs checked for the first {CRC_BUDGET} bytes only "
                                 "(no native crc32c); lengths checked throughout")
            pos += 16 + length
            rec += 1


def _simple(data) -> tuple[float, int, str, float] | None:
    """(wall_time, step, tag, simple_value) of the Event layout torch's and tensorboardX's add_scalar write
    (wall_time, step, summary { value { tag, simple_value } }, one-byte lengths), read with struct; None for
    any other layout (the general parser then reads it). Same values as the general parser (test)."""
    n = len(data)
    if n < 22 or data[0] != 0x09 or data[9] != 0x10:
        return None
    try:
        step, pos = read_varint(data, 10)
    except WireError:
        return None
    if pos + 6 > n or data[pos] != 0x2A or data[pos + 2] != 0x0A or data[pos + 4] != 0x0A:
        return None
    l1, l2, lt = data[pos + 1], data[pos + 3], data[pos + 5]
    end = pos + 2 + l1
    if l1 >= 0x80 or l2 >= 0x80 or lt >= 0x80 or end != n or pos + 4 + l2 != end or l2 != lt + 7:
        return None
    t0 = pos + 6
    if data[t0 + lt] != 0x15:
        return None
    try:
        tag = bytes(data[t0:t0 + lt]).decode("utf-8")
    except UnicodeDecodeError:
        return None
    wall = struct.unpack_from("<d", data, 1)[0]
    value = struct.unpack_from("<f", data, t0 + lt + 1)[0]
    return wall, (step - (1 << 64) if step >= 1 << 63 else step), tag, value


def _event(data, where, order, best, skipped) -> None:
    fast = _simple(data)
    if fast is not None:
        wall, step, tag, value = fast
        key = (tag, float(step))
        prio = (wall, *order)
        old = best.get(key)
        if old is None or prio >= old[0]:
            best[key] = (prio, value, where)
        return
    wall, step, summary = 0.0, 0, None
    for fno, wt, val in iter_fields(data):
        if fno == 1 and wt == 1:
            wall = f64(val)
        elif fno == 2 and wt == 0:
            step = val - (1 << 64) if val >= 1 << 63 else val
        elif fno == 5 and wt == 2:
            summary = val
        elif fno in _EVENT_KINDS and fno != 3:
            bump(skipped, _EVENT_KINDS[fno])
    if summary is None:
        return
    for fno, wt, val in iter_fields(summary):
        if fno != 1 or wt != 2:
            continue
        tag, value = _value(val, skipped)
        if tag is None or value is None:
            continue
        key = (tag, float(step))
        prio = (wall, *order)
        old = best.get(key)
        if old is None or prio >= old[0]:
            best[key] = (prio, value, where)


def _value(buf, skipped) -> tuple[str | None, float | None]:
    tag, simple, tensor, plugin, kind = None, None, None, "", None
    for fno, wt, val in iter_fields(buf):
        if fno == 1 and wt == 2:
            tag = text(val)
        elif fno == 2 and wt == 5:
            simple = f32(val)
        elif fno == 8 and wt == 2:
            tensor = val
        elif fno == 9 and wt == 2:
            plugin = _plugin_name(val)
        elif fno in _VALUE_KINDS:
            kind = _VALUE_KINDS[fno]
    if simple is not None:
        return tag, simple
    if tensor is not None:
        v = _tensor_scalar(tensor)
        if v is None:
            bump(skipped, f"tensor ({plugin or 'no plugin'})")
        return tag, v
    bump(skipped, kind or "empty value")
    return tag, None


def _plugin_name(buf) -> str:
    for fno, wt, val in iter_fields(buf):
        if fno == 1 and wt == 2:
            for f2, w2, v2 in iter_fields(val):
                if f2 == 1 and w2 == 2:
                    return text(v2)
    return ""


def _tensor_scalar(buf) -> float | None:
    """The value of a one-element numeric TensorProto, else None."""
    dtype, elems, content, vals = 0, 1, None, []
    for fno, wt, val in iter_fields(buf):
        if fno == 1 and wt == 0:
            dtype = val
        elif fno == 2 and wt == 2:
            elems = _num_elements(val)
        elif fno == 4 and wt == 2:
            content = bytes(val)
        elif fno == 5:
            vals += packed(wt, val, "f")
        elif fno == 6:
            vals += packed(wt, val, "d")
        elif fno in (7, 10, 11):
            vals += packed(wt, val, "v")
        elif fno == 13:
            vals += [struct.unpack("<e", struct.pack("<H", h & 0xFFFF))[0] for h in packed(wt, val, "v")]
    if elems != 1:
        return None
    if content is not None:
        if dtype == 14 and len(content) == 2:  # bfloat16: the high half of a float32
            return struct.unpack("<f", b"\x00\x00" + content)[0]
        fmt = _NUMERIC.get(dtype)
        if fmt is None or len(content) != fmt[1]:
            return None
        return float(struct.unpack(fmt[0], content)[0])
    if len(vals) == 1 and dtype in _NUMERIC:
        return float(vals[0])
    return None


def _num_elements(buf) -> int:
    n = 1
    for fno, wt, val in iter_fields(buf):
        if fno == 2 and wt == 2:
            size = 0
            for f2, w2, v2 in iter_fields(val):
                if f2 == 1 and w2 == 0:
                    size = v2 - (1 << 64) if v2 >= 1 << 63 else v2
            n *= size
    return n
