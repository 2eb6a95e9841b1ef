"""A minimal TensorBoard event-file writer (TFRecord framing + the Event/Summary fields the reader reads), for
tests and benchmarks of big stores without tensorboard installed. Format: tools/readers/tfevents.py docstring."""
from __future__ import annotations

import math
import random
import struct


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _ld(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def event(step: int, wall: float, tag: str, value: float) -> bytes:
    """One Event with one simple_value scalar (what torch's add_scalar writes)."""
    val = _ld(1, tag.encode()) + b"\x15" + struct.pack("<f", value)
    return b"\x09" + struct.pack("<d", wall) + b"\x10" + _varint(step) + _ld(5, _ld(1, val))


def record(data: bytes) -> bytes:
    from grpo_debug.tools.readers.wire import masked_crc32c

    head = struct.pack("<Q", len(data))
    return head + struct.pack("<I", masked_crc32c(head)) + data + struct.pack("<I", masked_crc32c(data))


def write_run(path: str, steps: int, tags: list[str], seed: int = 0, climb_from: int | None = None) -> int:
    """Write ``steps`` x ``tags`` scalars (noisy healthy values; ``actor/grad_norm`` climbs from ``climb_from``)
    to ``path``; returns the number of points."""
    rng = random.Random(seed)
    n = 0
    with open(path, "wb") as fh:
        fh.write(record(b"\x09" + struct.pack("<d", 1.7e9) + b"\x1a\x0dbrain.Event:2"))
        for s in range(1, steps + 1):
            for t in tags:
                v = 1.0 + 0.05 * rng.gauss(0, 1)
                if t == "actor/grad_norm" and climb_from is not None and s >= climb_from:
                    v *= math.exp((s - climb_from) / 200)
                fh.write(record(event(s, 1.7e9 + s, t, v)))
                n += 1
    return n
