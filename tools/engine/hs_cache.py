"""A disk cache of compiled hyperscan databases: compiling the ~100 prefilter patterns costs ~0.2 s each time
(four databases per large-log triage: the scan's, its rebuilds without chatter patterns, the event and the rule
regex passes), loading a serialized one costs microseconds.

Where: ``$GRPO_DEBUG_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/grpo-debug``, else ``~/.cache/grpo-debug``; a
``hyperscan/`` folder of ``<sha256>.db`` files, made with mode 0700. The key hashes the hyperscan version, the
machine and every (id, expression, flags) compiled, so a changed rule base or library gives a new file. Setting
``GRPO_DEBUG_CACHE_DIR`` to an empty string turns the cache off. At most ``MAX_FILES`` databases are kept (the
least recently written go).

Every failure (a read-only home, a full disk, a file that does not deserialize: hyperscan checks its own header
and CRC in ``hs_deserialize_database``) falls back to compiling: the cache can make a scan faster, never wrong or
failed. Databases come from ``hyperscan.dumpb`` / ``hyperscan.loadb`` (python-hyperscan >= 0.3).
"""
from __future__ import annotations

import hashlib
import os
import platform
import tempfile
from pathlib import Path
from typing import Callable

CACHE_ENV = "GRPO_DEBUG_CACHE_DIR"
MAX_FILES = 32  # databases kept; the oldest go first (each is 0.1-0.3 MB)


def cache_dir() -> Path | None:
    """The folder compiled databases go to, or None when the cache is off (``GRPO_DEBUG_CACHE_DIR=""``)."""
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        return Path(env) / "hyperscan" if env else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "grpo-debug" / "hyperscan"


def _key(items: list[tuple[int, bytes, int]]) -> str:
    import hyperscan

    h = hashlib.sha256()
    h.update(f"{getattr(hyperscan, '__version__', '?')}|{platform.machine()}|{len(items)}".encode())
    for i, expr, flags in items:
        h.update(b"\0%d\0%d\0" % (i, flags))
        h.update(expr)
    return h.hexdigest()


def load_or_compile(items: list[tuple[int, bytes, int]], compile_db: Callable[[list], object]):
    """The block-mode database of ``items`` ((id, expression bytes, hyperscan flags) triples) with its scratch
    space: loaded from the cache, else ``compile_db(items)`` (whose errors propagate: the caller probes pattern by
    pattern) and stored."""
    import hyperscan

    folder = cache_dir()
    path = folder / f"{_key(items)}.db" if folder is not None else None
    if path is not None:
        try:
            blob = path.read_bytes()
            db = hyperscan.loadb(blob, hyperscan.HS_MODE_BLOCK)
            db.scratch = hyperscan.Scratch(db)
            return db
        except Exception:  # noqa: BLE001 - absent, unreadable or invalid: compile
            pass
    db = compile_db(items)
    if path is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                fh.write(hyperscan.dumpb(db))
            os.replace(tmp, path)
            _prune(folder)
        except Exception:  # noqa: BLE001 - a read-only or full disk: the compiled database still serves
            try:
                os.unlink(tmp)  # type: ignore[possibly-undefined]
            except Exception:  # noqa: BLE001
                pass
    return db


def _prune(folder: Path) -> None:
    """Remove the oldest databases beyond ``MAX_FILES``."""
    files = sorted(folder.glob("*.db"), key=lambda f: f.stat().st_mtime)
    for f in files[:-MAX_FILES]:
        f.unlink(missing_ok=True)
