"""A .gz log read member by member with zlib, so a cut file gives up every byte it still holds.

``gzip.GzipFile.read(n)`` raises EOFError when the file ends inside a member and drops what that call had
decompressed: read in 4 MiB calls, a log gzipped while still being written (or copied half-way) loses up to its
last 4 MiB, which is where the crash usually is. Here each call hands back what zlib has produced so far, and the
EOFError comes on the next call, after the last readable byte (large_logs.scan_stream then says the input ended
early). Output per call is bounded (``zlib.decompressobj().decompress(data, max_length)``), so a decompression bomb
costs time, not memory. Several members back to back (``cat a.gz b.gz``, pigz) are read in turn; the CRC-32 and
length of each member are checked by zlib (a mismatch is an OSError). Bytes after the last member that do not
start another one (padding) are ignored, as gzip(1) does with zeros.
"""
from __future__ import annotations

import io
import zlib

_GZIP = 16 + zlib.MAX_WBITS  # zlib's gzip wrapper: header, deflate data, CRC-32 and length trailer
_READ = 1 << 16


class GzipMembers(io.RawIOBase):
    """Decompressed bytes of the gzip file ``raw`` (a binary file object) as a readable raw stream."""

    def __init__(self, raw):
        super().__init__()
        self._raw = raw
        self._d = zlib.decompressobj(_GZIP)
        self._in_member = False  # bytes of the current member were fed and its end is not reached
        self._next = b""  # input after the end of a member: the next member, or padding
        self._pending_error: EOFError | None = None  # raised on the next call: the bytes before it went out first

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        """Fill ``b`` with decompressed bytes, as many as fit unless the input ends first (a caller reading 4 MiB
        chunks gets 4 MiB chunks, as from a plain file); 0 at the end. Raises EOFError when the file ends inside a
        member, on the call after the one that returned the last bytes before the cut, and OSError for corrupt
        data."""
        view, got = memoryview(b), 0
        while got < len(view):
            if self._pending_error is not None:
                if got:
                    break
                e, self._pending_error = self._pending_error, None
                raise e
            try:
                n = self._read_some(view[got:])
            except EOFError as e:
                self._pending_error = e
                continue
            if not n:
                break
            got += n
        return got

    def _read_some(self, b) -> int:
        """Up to ``len(b)`` bytes from at most one piece of compressed input (``readinto``'s step)."""
        want = len(b)
        while True:
            src = self._d.unconsumed_tail or self._next or self._raw.read(_READ)
            if src is self._next:
                self._next = b""
            if not src:
                if self._in_member:
                    self._in_member = False
                    raise EOFError("the gzip file ends inside a member (a truncated or partly copied file)")
                return 0
            if not self._in_member and not self._d.unconsumed_tail:
                if len(src) < 2:  # a member boundary may fall between two reads
                    src += self._raw.read(_READ)
                if not src.startswith(b"\x1f\x8b"):
                    return 0  # not another member: trailing padding
            try:
                out = self._d.decompress(src, want)
            except zlib.error as e:
                raise OSError(f"corrupt gzip data: {e}") from None
            self._in_member = not self._d.eof
            if self._d.eof:  # the member's trailer checked; what follows may be another member
                self._next, self._d = self._d.unused_data, zlib.decompressobj(_GZIP)
            if out:
                b[: len(out)] = out
                return len(out)

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            chunks = []
            while data := self.read(1 << 20):
                chunks.append(data)
            return b"".join(chunks)
        buf = bytearray(n)
        got = self.readinto(buf)
        return bytes(buf[:got])

    def close(self) -> None:
        self._raw.close()
        super().close()
