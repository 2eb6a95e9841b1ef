"""Is a .zst file whole? A walk over its frame and block headers (RFC 8878, section 3.1), without decompressing.

python-zstandard's ``stream_reader`` returns the data of a truncated file up to where it was cut and then ends as
if the file were complete, so a triage of a cut log would look like a whole run. Walking the headers costs one
seek per block (a block holds at most 128 KiB): a 1 GB log compressed to 100 MB is checked in a few ms.

Layout (RFC 8878): a file is frames back to back. A Zstandard frame is the magic ``28 B5 2F FD``, a frame header
(descriptor byte: frame content size flag (bits 7-6), single segment (bit 5), checksum flag (bit 2), dictionary
id flag (bits 1-0); then a window descriptor unless single segment, the dictionary id (0/1/2/4 bytes), the
frame content size (0/1/2/4/8 bytes; 1 when the flag is 0 and single segment is set)), then blocks of a 3-byte
little-endian header (bit 0 last block, bits 1-2 type: raw, RLE, compressed, reserved; bits 3-23 size; an RLE
block carries 1 byte), then a 4-byte checksum when the flag is set. A skippable frame is a magic
``0x184D2A50``-``0x184D2A5F`` and a 4-byte little-endian size.
"""
from __future__ import annotations

import io
import os
import struct

ZSTD_MAGIC = 0xFD2FB528
_DICT_ID_BYTES = (0, 1, 2, 4)
_FCS_BYTES = (0, 2, 4, 8)


def truncation(fh) -> str | None:
    """Why the .zst file ``fh`` (a binary file, seekable) is not whole, or None when every frame ends inside it.
    Reads headers only; leaves the position at the start. Never raises for a damaged file (it says so)."""
    size = fh.seek(0, os.SEEK_END)
    pos = 0
    try:
        while pos < size:
            fh.seek(pos)
            head = fh.read(4)
            if len(head) < 4:
                return f"the file ends inside a frame header at byte {pos:,}"
            magic = struct.unpack("<I", head)[0]
            if magic & 0xFFFFFFF0 == 0x184D2A50:  # a skippable frame
                raw = fh.read(4)
                if len(raw) < 4:
                    return f"the file ends inside a skippable frame at byte {pos:,}"
                pos += 8 + struct.unpack("<I", raw)[0]
                continue
            if magic != ZSTD_MAGIC:
                return f"no zstd frame at byte {pos:,} (the data after it cannot be read)"
            pos = _frame_end(fh, pos + 4, size)
            if pos < 0:
                return "the file ends inside a zstd frame (a truncated or partly copied file)"
        if pos > size:
            return "the file ends inside a zstd frame (a truncated or partly copied file)"
        return None
    finally:
        fh.seek(0)


def _frame_end(fh, pos: int, size: int) -> int:
    """The offset just past the frame whose header starts at ``pos`` (after the magic), or -1 when the file ends
    inside it."""
    fh.seek(pos)
    d = fh.read(1)
    if not d:
        return -1
    desc = d[0]
    fcs_flag, single, checksum, dict_flag = desc >> 6, (desc >> 5) & 1, (desc >> 2) & 1, desc & 3
    fcs = _FCS_BYTES[fcs_flag] if fcs_flag or not single else 1
    pos += 1 + (0 if single else 1) + _DICT_ID_BYTES[dict_flag] + fcs
    while True:
        if pos + 3 > size:
            return -1
        fh.seek(pos)
        hdr = int.from_bytes(fh.read(3), "little")
        last, kind, bsize = hdr & 1, (hdr >> 1) & 3, hdr >> 3
        pos += 3 + (1 if kind == 1 else bsize)
        if pos > size:
            return -1
        if last:
            return pos + (4 if checksum else 0)


class CheckedZstd(io.RawIOBase):
    """A zstd decompressing reader that raises EOFError at its end when :func:`truncation` found the file cut, so
    the streamed triage says its input ended early (large_logs.scan_stream) instead of looking whole."""

    def __init__(self, reader, problem: str | None):
        super().__init__()
        self._r, self._problem = reader, problem

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self._r.readinto(b)
        if not n and self._problem:
            problem, self._problem = self._problem, None
            raise EOFError(problem)
        return n

    def read(self, n: int = -1) -> bytes:
        data = self._r.read(n)
        if not data and self._problem:
            problem, self._problem = self._problem, None
            raise EOFError(problem)
        return data

    def close(self) -> None:
        self._r.close()
        super().close()
