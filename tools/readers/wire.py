"""A minimal protocol-buffer wire-format decoder and CRC-32C, enough for TensorBoard and W&B records.

Wire format (https://protobuf.dev/programming-guides/encoding/): each field is a varint key
(field_number << 3 | wire_type) then a payload: 0 varint, 1 fixed64 (little-endian), 2 length-delimited
(varint length + bytes; strings, sub-messages, packed repeated scalars), 5 fixed32. Wire types 3/4 (groups)
are deprecated and never written by the messages read here; meeting one is a decode error.

CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and the TFRecord mask
((crc >> 15 | crc << 17) + 0xa282ead8) are from tensorflow/core/lib/hash/crc32c.h. A native implementation
(the `google_crc32c` or `crc32c` package) is used when one is importable, a table-driven one otherwise.
"""
from __future__ import annotations

import struct
from typing import Iterator

_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")


class WireError(ValueError):
    """Bytes that are not a well-formed protobuf message."""


def read_varint(buf, pos: int) -> tuple[int, int]:
    result = shift = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise WireError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("varint longer than 10 bytes")


def iter_fields(buf) -> Iterator[tuple[int, int, object]]:
    """Yield (field_number, wire_type, value): int for varint, bytes for fixed32/fixed64/length-delimited.
    One-byte keys and lengths (the common case) skip the general varint loop."""
    if not isinstance(buf, memoryview):
        buf = memoryview(buf)
    pos, n = 0, len(buf)
    while pos < n:
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = read_varint(buf, pos)
        fno, wt = key >> 3, key & 7
        if fno == 0:
            raise WireError("field number 0")
        if wt == 2:
            if pos < n and buf[pos] < 0x80:
                ln, pos = buf[pos], pos + 1
            else:
                ln, pos = read_varint(buf, pos)
            end = pos + ln
            if end > n:
                raise WireError("length-delimited field overruns the message")
            yield fno, 2, buf[pos:end]
            pos = end
        elif wt == 0:
            if pos < n and buf[pos] < 0x80:
                val, pos = buf[pos], pos + 1
            else:
                val, pos = read_varint(buf, pos)
            yield fno, 0, val
        elif wt == 5 or wt == 1:
            end = pos + (4 if wt == 5 else 8)
            if end > n:
                raise WireError(f"truncated fixed{32 if wt == 5 else 64}")
            yield fno, wt, buf[pos:end]
            pos = end
        else:
            raise WireError(f"unsupported wire type {wt}")


def as_signed64(v: int) -> int:
    """int32/int64 fields carry negatives as 64-bit two's complement varints."""
    return v - (1 << 64) if v >= 1 << 63 else v


def zigzag(v: int) -> int:
    """sint32/sint64 fields are zigzag-encoded."""
    return (v >> 1) ^ -(v & 1)


def f32(b) -> float:
    return _F32.unpack(b)[0]


def f64(b) -> float:
    return _F64.unpack(b)[0]


def text(b) -> str:
    return bytes(b).decode("utf-8", "replace")


def packed(wt: int, val, kind: str) -> list:
    """Values of a repeated numeric field, packed (wire type 2) or not. kind: 'f' float, 'd' double,
    'v' varint (signed 64), 'z' zigzag varint."""
    if wt == 2:
        raw = bytes(val)
        if kind == "f":
            return list(struct.unpack(f"<{len(raw) // 4}f", raw[: len(raw) // 4 * 4]))
        if kind == "d":
            return list(struct.unpack(f"<{len(raw) // 8}d", raw[: len(raw) // 8 * 8]))
        out, pos = [], 0
        while pos < len(raw):
            v, pos = read_varint(raw, pos)
            out.append(zigzag(v) if kind == "z" else as_signed64(v))
        return out
    if kind == "f":
        return [f32(val)]
    if kind == "d":
        return [f64(val)]
    return [zigzag(val) if kind == "z" else as_signed64(val)]


# ---- CRC-32C ---------------------------------------------------------------------------------------------

def _table() -> list[int]:
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_TABLE: list[int] | None = None


def _crc32c_py(data) -> int:
    global _TABLE
    if _TABLE is None:
        _TABLE = _table()
    t, c = _TABLE, 0xFFFFFFFF
    for b in bytes(data):
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _native():
    try:
        import google_crc32c  # type: ignore

        return lambda d: google_crc32c.value(bytes(d)), True
    except ImportError:
        pass
    try:
        import crc32c  # type: ignore

        return lambda d: crc32c.crc32c(bytes(d)), True
    except ImportError:
        return _crc32c_py, False


_IMPL = None


def crc32c(data) -> int:
    global _IMPL
    if _IMPL is None:
        _IMPL = _native()
    return _IMPL[0](data)


def crc32c_is_native() -> bool:
    global _IMPL
    if _IMPL is None:
        _IMPL = _native()
    return _IMPL[1]


def masked_crc32c(data) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF
