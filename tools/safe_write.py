"""Writing a user's file without ever writing through a link: ``check --fix`` (server/fix.py) and ``plot --png``.

    from grpo_debug.tools.safe_write import replace_file, read_regular
    text = read_regular("cfg.yaml").decode()                  # the file itself, never what a link points at
    backup = replace_file("cfg.yaml", new.encode(), backup=True)   # "cfg.yaml.orig" (or .orig.1, ...)

Every file this module creates (the temporary file, the ``.orig`` backup) is created exclusively
(``O_CREAT | O_EXCL | O_NOFOLLOW``) in the target's folder, through a descriptor of that folder, so a name
planted in advance (``X.grpo-debug-tmp -> ~/.bashrc``, a dangling ``X.orig`` link) is never opened: the
temporary file has a random name and a taken backup name moves on to the next one. The new content then
replaces the target with ``os.replace`` (a rename: it replaces a link swapped in meanwhile, never writes
through it). The target keeps its permission bits (a 0644 file stays 0644); a target that is a symlink, or
not a regular file, is refused with :class:`UnsafeWrite`.
"""
from __future__ import annotations

import os
import secrets
import stat

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
MAX_BACKUPS = 1000


class UnsafeWrite(OSError):
    """The target cannot be written safely: a symlink, not a regular file, or no free backup name."""


def _split(path: str | os.PathLike) -> tuple[str, str]:
    full = os.path.abspath(os.fspath(path))
    folder, name = os.path.split(full)
    if not name:
        raise UnsafeWrite(f"{os.fspath(path)}: not a file name")
    return folder, name


def _open_dir(folder: str) -> int:
    return os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)


def _target_mode(dfd: int, name: str, shown: str) -> int | None:
    """The permission bits of the existing target (None when it does not exist); UnsafeWrite for a link or a
    non-regular file."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeWrite(f"{shown} is a symbolic link; refusing to write through it: give the real file's path "
                          f"(or remove the link)")
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeWrite(f"{shown} is not a regular file; give the path of a regular file")
    return stat.S_IMODE(st.st_mode)


def _create_exclusive(dfd: int, name: str, mode: int) -> int:
    return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode, dir_fd=dfd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_regular(path: str | os.PathLike, limit: int = 256 * 2**20) -> bytes:
    """The bytes of the regular file at ``path``, opened without following a link at its last component and
    without blocking on a FIFO; UnsafeWrite for a link or a non-regular file, ValueError above ``limit`` bytes."""
    folder, name = _split(path)
    shown = os.fspath(path)
    dfd = _open_dir(folder)
    try:
        try:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC, dir_fd=dfd)
        except OSError as e:
            if os.path.islink(os.path.join(folder, name)):
                raise UnsafeWrite(f"{shown} is a symbolic link; give the real file's path") from None
            raise e
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeWrite(f"{shown} is not a regular file; give the path of a regular file")
        if st.st_size > limit:
            raise ValueError(f"{shown} is {st.st_size} bytes; the limit is {limit}")
        chunks, left = [], limit + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
        if len(data) > limit:
            raise ValueError(f"{shown} grew past {limit} bytes while it was read")
        return data
    finally:
        os.close(fd)


def _backup(dfd: int, name: str, data: bytes, mode: int, st: os.stat_result | None) -> str:
    """Write ``data`` to the first free ``name.orig``, ``name.orig.1``, ... created exclusively; its name."""
    for n in range(MAX_BACKUPS):
        cand = f"{name}.orig" if n == 0 else f"{name}.orig.{n}"
        try:
            fd = _create_exclusive(dfd, cand, mode)
        except FileExistsError:
            continue  # taken, or a link planted there (dangling or not): never opened
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode)
            if st is not None:
                os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))
            os.fsync(fd)
        finally:
            os.close(fd)
        return cand
    raise UnsafeWrite(f"{name}: {MAX_BACKUPS} backup names {name}.orig... are taken; remove old backups")


def replace_file(path: str | os.PathLike, data: bytes, *, backup: bool = False, new_mode: int = 0o666) -> str | None:
    """Replace (or create) the file at ``path`` with ``data`` through an exclusively created temporary file in
    its folder and ``os.replace``; the target keeps its permission bits (a new file gets ``new_mode`` less the
    umask). With ``backup``, the current content is first copied to an exclusively created ``path.orig``
    (``.orig.N`` when taken); returns the backup's path (None without backup). Raises :class:`UnsafeWrite`
    for a target that is a symlink or not a regular file, OSError when the folder is not writable."""
    folder, name = _split(path)
    shown = os.fspath(path)
    dfd = _open_dir(folder)
    tmp = None
    try:
        mode = _target_mode(dfd, name, shown)
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = new_mode & ~umask
        saved = None
        if backup and os.path.lexists(os.path.join(folder, name)):
            old = read_regular(path)
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            saved = os.path.join(os.path.dirname(shown), _backup(dfd, name, old, mode, st))  # as the user wrote it
        tmp = f".{name[:80]}.grpo-debug-{secrets.token_hex(8)}.tmp"
        fd = _create_exclusive(dfd, tmp, 0o600)
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        if _target_mode(dfd, name, shown) is None and saved is not None:
            raise UnsafeWrite(f"{shown} was removed while it was being fixed; nothing written")
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        tmp = None
        return saved
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
        os.close(dfd)
