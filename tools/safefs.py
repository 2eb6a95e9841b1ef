"""The one way the product opens and reads a file it was given (issue 21): no link followed, regular files only,
nothing that blocks, a byte cap before every read and every line.

Every reader (console logs, configs, metric stores, run folders) opens through :func:`open_file` or
:func:`scandir`, never ``open(path)``:

- **No link is followed below the anchor.** A path is opened one component at a time with ``openat`` and
  ``O_NOFOLLOW`` from an already-open folder, so a component that is (or was swapped for) a symlink fails the
  open itself (no check-then-open race). Inside a run folder (``with anchored(folder):``) the walk starts at the
  folder: a link anywhere below it is refused. Without an anchor (a file named on the command line, or one the
  MCP server already confined) the path is resolved once and its real components are walked the same way, so a
  component swapped for a link after the resolution is refused too.
- **Regular files only, decided on the opened descriptor** (``fstat``): a FIFO, socket or device is refused. The
  open itself uses ``O_NONBLOCK``, so opening a FIFO never waits for a writer.
- **Caps**: :meth:`SafeFile.read_all` refuses a file over its cap before reading; :meth:`SafeFile.lines` yields
  lines of at most ``max_line`` bytes, skipping (and counting) longer ones without holding them, and stops at
  ``max_bytes``.

Errors: :class:`Refused` (an ``OSError`` subclass) says why a file was not read; other ``OSError`` as raised.
Standard library only. On a platform without ``dir_fd`` support (Windows) the walk falls back to a plain open
with the same type and size checks.
"""
from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import stat
from dataclasses import dataclass, field
from typing import Iterator

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_WALK = os.open in os.supports_dir_fd and bool(_NOFOLLOW)

CHUNK = 1 << 20
MAX_LINE = 4 << 20  # a console or JSONL line longer than this is skipped and counted (a verl step line is ~10 KB)

# (lexical absolute path, real path) of the folder being read, or None
_ANCHOR: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("grpo_debug_read_anchor", default=None)


class Refused(OSError):
    """A file or folder that is not read, and why (a symlink, a FIFO/device/socket, over a size cap, outside the
    folder being read). ``str(e)`` is the reason; ``e.filename`` the path."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(errno.EPERM, why, path)
        self.why = why

    def __str__(self) -> str:
        return f"{self.filename}: {self.why}"


def describe_mode(mode: int) -> str:
    """'a FIFO', 'a socket', 'a character device', ... for an ``st_mode`` that is not a regular file."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"


@contextlib.contextmanager
def anchored(folder: str | os.PathLike) -> Iterator[str]:
    """Within the block, files under ``folder`` are opened by a walk from ``folder`` itself that follows no link
    (``folder`` may be reached through links: the user named it). An anchor already set that holds ``folder``
    stays (the outer folder is the stricter one). Yields the folder's real path."""
    lex = os.path.abspath(os.fspath(folder))
    cur = _ANCHOR.get()
    if cur is not None and (_within(lex, cur[0]) or _within(lex, cur[1])):
        yield cur[1]
        return
    token = _ANCHOR.set((lex, os.path.realpath(lex)))
    try:
        yield _ANCHOR.get()[1]  # type: ignore[index]
    finally:
        _ANCHOR.reset(token)


def _within(p: str, root: str) -> bool:
    return p == root or p.startswith(root.rstrip(os.sep) + os.sep)


def _components(path: str) -> tuple[str, list[str]]:
    """(real start folder, the components to walk from it with O_NOFOLLOW)."""
    lex = os.path.abspath(os.fspath(path))
    anchor = _ANCHOR.get()
    if anchor is not None:
        for base in anchor:
            if _within(lex, base):
                rel = os.path.relpath(lex, base)
                parts = [] if rel == "." else rel.split(os.sep)
                return anchor[1], parts
    real = os.path.realpath(lex)
    return os.sep, [p for p in real.split(os.sep) if p]


def _open_walk(path: str, last_flags: int) -> int:
    """An fd for ``path`` opened one component at a time without following links; the last one with
    ``last_flags``. Raises Refused for a link, OSError otherwise."""
    start, parts = _components(path)
    fd = os.open(start, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for i, comp in enumerate(parts):
            if comp in ("..", ""):
                raise Refused(path, "a '..' component; not read")
            last = i == len(parts) - 1
            flags = last_flags if last else os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
            try:
                nfd = os.open(comp, flags, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.EMLINK) or (
                        e.errno == errno.ENOTDIR and os.path.islink(os.path.join(start, *parts[:i + 1]))):
                    raise Refused(path, "a symbolic link; not followed") from None
                raise
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_fd(path: str, directory: bool = False) -> int:
    if _WALK:
        flags = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | (_DIRECTORY if directory else _NONBLOCK)
        return _open_walk(path, flags)
    return os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC)  # pragma: no cover - Windows


@dataclass
class LineStats:
    """What :meth:`SafeFile.lines` left out: ``long`` lines over ``max_line`` (their numbers, first 5), and
    whether it stopped at ``max_bytes`` (``stopped_at``: the line number it stopped at)."""
    long: int = 0
    long_lines: list[int] = field(default_factory=list)
    stopped_at: int | None = None
    bytes_read: int = 0

    def notes(self, label: str, max_line: int, max_bytes: int | None, size: int) -> list[str]:
        out = []
        if self.long:
            out.append(f"{label}: {self.long} line(s) over {max_line} bytes skipped (line "
                       + ", ".join(map(str, self.long_lines)) + (" ..." if self.long > len(self.long_lines) else "") + ")")
        if self.stopped_at is not None:
            out.append(f"{label}: stopped at line {self.stopped_at} (byte {self.bytes_read} of {size}; "
                       f"max_bytes {max_bytes})")
        return out


class SafeFile:
    """A regular file opened by :func:`open_file`. ``size`` is its size at open (bytes); ``path`` as given.
    Use as a context manager; :meth:`fileobj` hands the descriptor to a buffered reader (then close that)."""

    def __init__(self, fd: int, path: str, size: int) -> None:
        self.fd, self.path, self.size = fd, path, size
        self._closed = False

    def __enter__(self) -> "SafeFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self.fd)

    def fileobj(self, buffering: int = CHUNK):
        """A binary buffered reader over the descriptor (it owns the descriptor from now on); its ``name`` is the
        path, so code that reads the file back later by name (evidence lines) opens it again through this module."""
        self._closed = True
        f = os.fdopen(self.fd, "rb", buffering=buffering)
        try:
            f.raw.name = self.path
        except (AttributeError, TypeError):  # pragma: no cover
            pass
        return f

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes from the current position."""
        return os.read(self.fd, n)

    def head(self, n: int) -> bytes:
        """The first ``n`` bytes (or fewer)."""
        return os.pread(self.fd, n, 0) if hasattr(os, "pread") else self.read(n)

    def read_all(self, cap: int) -> bytes:
        """The whole file; Refused when it holds more than ``cap`` bytes (checked on the size before reading, and
        again while reading: a file that grows is cut at the cap and refused)."""
        if self.size > cap:
            raise Refused(self.path, f"{self.size} bytes, over the {cap}-byte limit for a whole-file read; not read")
        chunks, n = [], 0
        while True:
            b = os.read(self.fd, min(CHUNK, cap + 1 - n))
            if not b:
                break
            chunks.append(b)
            n += len(b)
            if n > cap:
                raise Refused(self.path, f"more than {cap} bytes (it grew while read); not read")
        return b"".join(chunks)

    def lines(self, max_line: int = MAX_LINE, max_bytes: int | None = None,
              stats: LineStats | None = None) -> Iterator[tuple[int, bytes]]:
        """(line number from 1, line without its newline) of the file, streamed in 1 MiB reads. A line over
        ``max_line`` bytes is skipped without being held (counted in ``stats``); reading stops before
        ``max_bytes`` are passed. A last line without a newline is yielded too."""
        st = stats if stats is not None else LineStats()
        buf, n, dropping, used = b"", 0, False, 0
        while True:
            want = CHUNK if max_bytes is None else min(CHUNK, max_bytes - used)
            if want <= 0:
                if os.read(self.fd, 1):  # more than max_bytes: stop before the line that passes it
                    st.stopped_at, st.bytes_read = n + 1, used - len(buf)
                    return
                break
            chunk = os.read(self.fd, want)
            if not chunk:
                break
            used += len(chunk)
            start = 0
            while True:
                nl = chunk.find(b"\n", start)
                if nl < 0:
                    break
                n += 1
                if dropping:
                    dropping = False
                    self._long(st, n)
                elif len(buf) + nl - start > max_line:
                    self._long(st, n)
                else:
                    line = buf + chunk[start:nl] if buf else chunk[start:nl]
                    yield n, line.rstrip(b"\r")
                buf, start = b"", nl + 1
            rest = chunk[start:]
            if not dropping:
                if len(buf) + len(rest) > max_line:
                    buf, dropping = b"", True
                else:
                    buf += rest
        st.bytes_read = used
        if dropping:
            self._long(st, n + 1)
        elif buf:
            yield n + 1, buf.rstrip(b"\r")

    @staticmethod
    def _long(st: LineStats, n: int) -> None:
        st.long += 1
        if len(st.long_lines) < 5:
            st.long_lines.append(n)


def open_file(path: str | os.PathLike) -> SafeFile:
    """Open a regular file for reading without following links (see the module docstring). Raises Refused (a
    link, a FIFO/device/socket, a folder) or OSError (missing, no permission)."""
    p = os.fspath(path)
    fd = _open_fd(p)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(p, describe_mode(st.st_mode) + "; not read")
        return SafeFile(fd, p, st.st_size)
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike, cap: int) -> bytes:
    """The whole regular file at ``path`` (Refused when over ``cap`` bytes, a link or not regular)."""
    with open_file(path) as f:
        return f.read_all(cap)


def head(path: str | os.PathLike, n: int) -> bytes:
    """The first ``n`` bytes of a regular file, or b'' when it cannot be read safely (missing, a link, a FIFO)."""
    try:
        with open_file(path) as f:
            return f.head(n)
    except OSError:
        return b""


def kind(path: str | os.PathLike) -> str:
    """'file', 'dir', 'link', 'other' (FIFO, socket, device) or 'missing', without following a final link."""
    try:
        st = os.lstat(os.fspath(path))
    except OSError:
        return "missing"
    if stat.S_ISLNK(st.st_mode):
        return "link"
    if stat.S_ISREG(st.st_mode):
        return "file"
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    return "other"


@dataclass(frozen=True)
class Entry:
    """One entry of a folder listed by :func:`scandir`: ``kind`` as :func:`kind` says (a link is never 'file' or
    'dir'), ``size`` in bytes for a regular file (else 0)."""
    name: str
    path: str
    kind: str
    size: int = 0

    def is_file(self) -> bool:
        return self.kind == "file"

    def is_dir(self) -> bool:
        return self.kind == "dir"


def scandir(folder: str | os.PathLike, limit: int | None = None) -> list[Entry]:
    """The entries of ``folder`` in name order, listed from a descriptor opened without following links (a
    folder swapped for a link is refused, never listed). ``limit``: at most this many entries are looked at
    (Refused beyond, so a folder of a million files costs a bounded read). Raises Refused / OSError."""
    p = os.fspath(folder)
    fd = _open_fd(p, directory=True) if _WALK else None
    out: list[Entry] = []
    try:
        it = os.scandir(fd if fd is not None else p)
        with it:
            for e in it:
                if limit is not None and len(out) >= limit:
                    raise Refused(p, f"more than {limit} entries; not listed")
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                mode = st.st_mode
                k = ("link" if stat.S_ISLNK(mode) else "file" if stat.S_ISREG(mode) else
                     "dir" if stat.S_ISDIR(mode) else "other")
                out.append(Entry(e.name, os.path.join(p, e.name), k, st.st_size if k == "file" else 0))
    finally:
        if fd is not None:
            os.close(fd)
    out.sort(key=lambda e: e.name)
    return out


def listdir(folder: str | os.PathLike, limit: int | None = None) -> list[str]:
    """Names in ``folder`` (see :func:`scandir`); [] when it cannot be listed safely."""
    try:
        return [e.name for e in scandir(folder, limit)]
    except OSError:
        return []


def regular_files(folder: str | os.PathLike, limit: int | None = None) -> list[Entry]:
    """The regular files (no links, FIFOs, devices) directly in ``folder``; [] when it cannot be listed."""
    try:
        return [e for e in scandir(folder, limit) if e.kind == "file"]
    except OSError:
        return []
