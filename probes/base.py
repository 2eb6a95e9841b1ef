"""Shared pieces of the on-host probes: the "unknown" value, a command runner that never raises, and a
decorator that turns any exception of a probe into an Unknown with its reason.

Every probe returns a value or :class:`Unknown`; no probe raises for a missing tool, library, device or
permission (the torch collect_env model, with its gaps fixed: typed results, timeouts, shell=False).
"""
from __future__ import annotations

import functools
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Literal, TypeVar

from pydantic import BaseModel

T = TypeVar("T")


class Unknown(BaseModel):
    """A fact that could not be read, and why (e.g. 'nvidia-ml-py not installed', 'no NVIDIA driver')."""

    unknown: Literal[True] = True
    reason: str


Runner = Callable[[list[str], float], tuple[int, str, str]]
"""(argv, timeout seconds) -> (return code, stdout, stderr). Injected in tests."""


def run_cmd(argv: list[str], timeout: float = 5.0) -> tuple[int, str, str]:
    """Run argv without a shell; a missing program or a timeout is a non-zero return code, never an exception."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, shell=False)
        return p.returncode, p.stdout, p.stderr
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, "", f"{argv[0]}: timed out after {timeout:g} s"
    except OSError as e:
        return 126, "", f"{argv[0]}: {e}"


def child_argv(module: str, *args: str) -> list[str]:
    """argv that runs ``python -m module args...`` without the working directory on the import path.

    ``python -I`` (isolated mode) drops the script directory / working directory, the user site-packages and
    every ``PYTHON*`` environment variable from the child, so a planted ``torch/`` or ``grpo_debug/`` folder
    in the server's working directory is never imported. The parent's own import path (minus ``''`` and the
    working directory) is handed over explicitly so an editable or ``PYTHONPATH`` install still resolves.
    """
    cwd = os.path.realpath(os.getcwd())
    keep = [p for p in sys.path if p and os.path.realpath(p) != cwd]
    boot = ("import sys, json, runpy; sys.path[:] = json.loads(sys.argv.pop(1)); "
            f"sys.argv[0] = {module!r}; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
    return [sys.executable, "-I", "-c", boot, json.dumps(keep), *args]


def probe(fn: Callable[..., T]) -> Callable[..., T | Unknown]:
    """Decorator: any exception raised by the probe becomes Unknown(reason=...)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T | Unknown:
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the contract: probes never raise
            return Unknown(reason=f"{type(e).__name__}: {e}")
    return wrapper


# ---- reading files of a probed folder (checkpoint, tokenizer) ------------------------------------------------

class RefusedFile(ValueError):
    """A file of a probed folder that is not read: a link out of the folder, not a regular file, or too big."""


def file_kind(mode: int) -> str:
    """What a non-regular ``st_mode`` is, for refusals: 'a FIFO (named pipe)', 'a socket', 'a device',
    'a directory', else 'not a regular file'. Shared by the probes and the server's path confinement."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def _describe_mode(mode: int) -> str:
    kind = file_kind(mode)
    return kind if kind == "not a regular file" else f"{kind}, not a regular file"


def confinement_root(folder: str | os.PathLike) -> str:
    """The real path files of ``folder`` must stay under: the folder itself, or for a Hugging Face hub cache
    snapshot (``models--org--name/snapshots/<rev>``, whose files link to ``../../blobs``) the repo folder."""
    real = os.path.realpath(folder)
    parent = os.path.dirname(real)
    if os.path.basename(parent) == "snapshots" and \
            os.path.basename(os.path.dirname(parent)).startswith(("models--", "datasets--", "spaces--")):
        return os.path.dirname(parent)
    return real


class Confined:
    """The files of one probed folder, read only when their real path stays inside it (symlinks resolved) and
    they are regular files; opened with O_NOFOLLOW | O_NONBLOCK (a FIFO never blocks) and read up to a byte
    cap (a link to /dev/zero never grows). What was refused is kept in ``refused`` (relative name -> why)."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)
        self.real = confinement_root(folder)
        self.refused: dict[str, str] = {}

    def _name(self, p: str | os.PathLike) -> str:
        try:
            return str(Path(p).relative_to(self.folder))
        except ValueError:
            return str(p)

    def _refuse(self, p: str | os.PathLike, why: str) -> str:
        self.refused.setdefault(self._name(p), why)
        return why

    def _real(self, p: str | os.PathLike) -> str:
        """The real path of p; RefusedFile when it lies outside the folder."""
        real = os.path.realpath(p)
        root = self.real.rstrip(os.sep) or os.sep
        if real != root and not real.startswith(root + os.sep if root != os.sep else root):
            raise RefusedFile(self._refuse(p, f"a symlink that points outside {self.folder} (to {real[:200]}); not read"))
        return real

    def kind(self, p: str | os.PathLike) -> str:
        """'file' | 'dir' | 'missing' | 'refused' (outside the folder, a device, FIFO or socket)."""
        try:
            real = self._real(p)
        except RefusedFile:
            return "refused"
        try:
            st = os.stat(real)
        except OSError:
            return "missing"
        if stat.S_ISREG(st.st_mode):
            return "file"
        if stat.S_ISDIR(st.st_mode):
            return "dir"
        self._refuse(p, _describe_mode(st.st_mode) + "; not read")
        return "refused"

    def exists(self, p: str | os.PathLike) -> bool:
        return os.path.lexists(p)

    def is_file(self, p: str | os.PathLike) -> bool:
        return self.kind(p) == "file"

    def is_dir(self, p: str | os.PathLike) -> bool:
        return self.kind(p) == "dir"

    def size(self, p: str | os.PathLike) -> int:
        try:
            return os.stat(self._real(p)).st_size if self.is_file(p) else 0
        except (OSError, RefusedFile):
            return 0

    def names(self, p: str | os.PathLike) -> list[str]:
        if not self.is_dir(p):
            return []
        try:
            return sorted(os.listdir(self._real(p)))
        except (OSError, RefusedFile):
            return []

    def read(self, p: str | os.PathLike, limit: int) -> bytes:
        """At most ``limit`` bytes of a regular file inside the folder. RefusedFile (with the reason) for a link
        out, a device/FIFO/socket or a file over ``limit``; OSError when it cannot be opened."""
        real = self._real(p)
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise RefusedFile(self._refuse(p, _describe_mode(st.st_mode) + "; not read"))
            if st.st_size > limit:
                raise RefusedFile(self._refuse(p, f"{st.st_size} bytes, over the {limit} byte limit; not read"))
            chunks, n = [], 0
            while n <= limit:
                b = os.read(fd, min(1 << 20, limit + 1 - n))
                if not b:
                    break
                chunks.append(b)
                n += len(b)
            if n > limit:
                raise RefusedFile(self._refuse(p, f"more than {limit} bytes; not read"))
            return b"".join(chunks)
        finally:
            os.close(fd)

    def text(self, p: str | os.PathLike, limit: int) -> str | None:
        """The file as text, or None when it is missing, refused or unreadable."""
        try:
            return self.read(p, limit).decode("utf-8", errors="replace")
        except (OSError, RefusedFile):
            return None

    def json(self, p: str | os.PathLike, limit: int) -> tuple[Any, str | None]:
        """(data, error): the parsed JSON file, or None and why not (refused, unreadable, invalid, too deep)."""
        name = Path(p).name
        try:
            raw = self.read(p, limit)
        except RefusedFile as e:
            return None, f"{name} is {e}"
        except OSError as e:
            return None, f"{name}: {e.strerror or e}"
        try:
            return json.loads(raw.decode("utf-8")), None
        except RecursionError:
            return None, f"{name}: JSON nested too deeply to parse"
        except (ValueError, UnicodeDecodeError) as e:
            return None, f"{name}: {type(e).__name__}: {str(e)[:200]}"
