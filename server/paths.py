"""Path confinement for the MCP server: a path given to a tool must lie under one of the allowed roots.

The MCP tools read files on the *server's* machine on behalf of a client that may be remote (HTTP), so
every path a tool takes goes through :func:`resolve_path` first. It refuses ``..`` escapes, absolute
paths outside the roots, symlinks that point out of them, devices, FIFOs and sockets, and missing
paths, each with a message that names the path and what to do. The CLI is the user's own shell and
does not use this.

Roots: ``GRPO_DEBUG_ALLOW`` (``os.pathsep``-separated) and ``--allow DIR`` (see :func:`default_roots`), plus,
over stdio (and for an in-process client), the server's working directory as an *implicit* root and the folders
the client declares as its MCP roots (:func:`client_roots`, per call through ``CLIENT_ROOTS``). A server reached
over HTTP has the explicit folders only: never its working directory, never the client's roots. The working
directory is never an implicit root when it is ``/``, ``$HOME`` (or a folder above it, ``/home``) or a system
folder (:func:`unsafe_implicit_root`: a systemd unit or a Docker image without WORKDIR starts there); the server
then says at start to pass ``--allow DIR``. ``/proc``, ``/sys`` and ``/dev`` are never readable, whatever the
roots (``--allow /`` included): ``/proc/self/environ`` holds the server's tokens. Every path is still confined
the same way under the union.

A client's declared roots follow the working directory's policy (:func:`unsafe_client_root`): ``/``, ``$HOME`` or a
folder above it, and system folders are not accepted (a client declaring ``/`` would otherwise read the whole
tree); a path then refused says which declared root was not accepted, why, and that ``--allow DIR`` grants it.
"""
from __future__ import annotations

import contextvars
import logging
import os
import stat
import warnings
from pathlib import Path
from typing import Callable, Iterable, Literal

ALLOW_ENV = "GRPO_DEBUG_ALLOW"
Kind = Literal["file", "dir", "any"]


class PathNotAllowed(ValueError):
    """A path a tool may not read: outside the allowed roots, missing, or not a regular file/folder."""


#: Never readable, whatever the roots: the kernel's views of processes, devices and the system.
NEVER_READ = (Path("/proc"), Path("/sys"), Path("/dev"))
#: System folders: never an implicit root, nor anything under them.
SYSTEM_TREES = (*NEVER_READ, Path("/etc"), Path("/usr"), Path("/bin"), Path("/sbin"), Path("/lib"), Path("/lib32"),
                Path("/lib64"), Path("/libx32"), Path("/boot"), Path("/run"), Path("/snap"))
#: System folders that are never an implicit root themselves (a folder of an application below them may be).
SYSTEM_FOLDERS = (Path("/"), Path("/var"), Path("/var/lib"), Path("/var/log"), Path("/var/run"), Path("/var/cache"),
                  Path("/var/spool"), Path("/var/mail"), Path("/root"), Path("/home"), Path("/Users"), Path("/mnt"),
                  Path("/media"), Path("/private"), Path("/private/var"), Path("/System"), Path("/Library"))
Transport = Literal["stdio", "http"]
log = logging.getLogger("grpo_debug.server")


def _home(env) -> Path | None:
    """$HOME resolved (else the account's home folder); None when neither is known."""
    h = env.get("HOME") or ""
    if not h.strip():
        try:
            import pwd

            h = pwd.getpwuid(os.getuid()).pw_dir
        except (ImportError, KeyError, OSError):
            return None
    try:
        return Path(h).resolve()
    except (OSError, RuntimeError, ValueError):
        return None


def never_readable(real: Path) -> bool:
    """Whether a path lies under /proc, /sys or /dev (refused under any root, ``--allow /`` included)."""
    return any(_under(real, n) for n in NEVER_READ)


def unsafe_implicit_root(folder: str | os.PathLike, env: dict[str, str] | None = None) -> str | None:
    """Why ``folder`` (the working directory) must not be an implicit root, or None when it may: it is ``/``, a
    system folder or under one (``/etc``, ``/usr``, ``/proc``...), or ``$HOME`` or a folder above it (the
    user's whole tree: SSH keys, cloud credentials)."""
    env = os.environ if env is None else env
    try:
        real = Path(folder).resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        return "it cannot be resolved"
    if real == Path(real.anchor):
        return f"{real} is the whole file system"
    if real in SYSTEM_FOLDERS or any(_under(real, t) for t in SYSTEM_TREES):
        return f"{real} is a system folder"
    home = _home(env)
    if home is not None and _under(home, real):
        return f"{real} is the home folder" if real == home else f"{real} holds the home folder {home}"
    return None


def default_roots(extra: Iterable[str | os.PathLike] = (), *, env: dict[str, str] | None = None,
                  cwd: str | os.PathLike | None = None, transport: Transport = "stdio",
                  note: Callable[[str], None] | None = None) -> list[Path]:
    """The readable folders: over stdio the working directory (unless :func:`unsafe_implicit_root`), then each
    folder in $GRPO_DEBUG_ALLOW, then ``extra`` (``--allow``); over HTTP only the last two. Resolved, without
    duplicates; folders that do not exist and folders under /proc, /sys or /dev are kept out (nothing under
    them can be read). ``note`` (the CLI's stderr) is told, with what to do, when the working directory is
    left out and no other folder is readable."""
    env = os.environ if env is None else env
    here = cwd if cwd is not None else os.getcwd()
    cands: list[str | os.PathLike] = [p for p in env.get(ALLOW_ENV, "").split(os.pathsep) if p.strip()]
    cands += list(extra)
    why = unsafe_implicit_root(here, env) if transport == "stdio" else "a server reached over HTTP reads only --allow folders"
    if why is None:
        cands.insert(0, here)
    out: list[Path] = []
    for c in cands:
        try:
            r = Path(c).expanduser().resolve(strict=True)
        except (OSError, RuntimeError, ValueError):
            continue
        if r.is_dir() and r not in out and not never_readable(r):
            out.append(r)
    if why is not None and not out and note is not None:
        note(f"grpo-debug: the working directory {here} is not readable by the tools ({why}); start the server "
             f"with --allow DIR (or set {ALLOW_ENV}) for the folders of your runs")
    return out


def _under(p: Path, root: Path) -> bool:
    return p == root or root in p.parents


def _via_link(lexical: Path, real_roots: list[Path]) -> bool:
    """Whether ``lexical`` ('..' already collapsed) names a place under a root through a symlinked folder: an
    allowed folder is stored resolved, and a user writes it as they know it (macOS ``/tmp`` is
    ``/private/tmp``; a home or data folder reached through a link). The strict check of the real path follows."""
    try:
        via = lexical.resolve()  # non-strict: the missing tail of a path stays as written
    except (OSError, RuntimeError):
        return False
    return any(_under(via, r) for r in real_roots)


def resolve_path(path: str | os.PathLike, allowed_roots: Iterable[str | os.PathLike], *, kind: Kind = "file",
                 base: str | os.PathLike | None = None) -> Path:
    """The real path of ``path`` (symlinks resolved) when it may be read; raises :class:`PathNotAllowed`.

    ``kind``: ``"file"`` (a regular file; triage, check), ``"dir"`` (a folder) or ``"any"`` (a regular file or
    a folder; checkpoint and tokenizer). A relative ``path`` is taken relative to ``base`` (default: the
    working directory). The check is done twice: on the path as written (so ``..`` cannot climb out, whether
    or not the target exists) and on the resolved path (so a symlink cannot point out).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise PathNotAllowed(f"path must be a string, got {type(path).__name__}")
    raw = os.fspath(path)
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    shown = raw if len(raw) <= 300 else raw[:300] + "..."
    if not raw.strip():
        raise PathNotAllowed("path is empty; give the path of a file on the server's machine")
    if "\x00" in raw:
        raise PathNotAllowed(f"{shown!r}: path contains a NUL byte")
    roots = list(dict.fromkeys(Path(os.path.abspath(r)) for r in allowed_roots))  # (--allow and a client root may repeat)
    real_roots = []
    for r in roots:
        try:
            real_roots.append(r.resolve())
        except (OSError, RuntimeError):
            pass
    if not roots:
        raise PathNotAllowed(f"{shown}: no folder is allowed (start the server with --allow DIR)")
    where = ", ".join(str(r) for r in roots[:5]) + (f" (+{len(roots) - 5} more)" if len(roots) > 5 else "")
    hint = f"allowed roots: {where}; the server's owner can add one with --allow DIR or {ALLOW_ENV}"

    start = Path(base) if base is not None else Path(os.getcwd())
    lexical = Path(os.path.normpath(start / raw))  # collapses '..' without touching the file system
    if not any(_under(lexical, r) for r in roots + real_roots) and not _via_link(lexical, real_roots):
        if ".." in Path(raw).parts:
            raise PathNotAllowed(f"{shown}: '..' climbs out of the allowed roots ({hint})")
        raise PathNotAllowed(f"{shown}: outside the allowed roots ({hint}){_refused_roots_note(lexical)}")
    try:
        real = (start / raw).resolve(strict=True)
    except FileNotFoundError:
        raise PathNotAllowed(f"{shown}: no such file or directory; give the path of an existing "
                             f"{'folder' if kind == 'dir' else 'file'}") from None
    except (OSError, RuntimeError) as e:  # symlink loop, permission, name too long
        raise PathNotAllowed(f"{shown}: cannot resolve: {getattr(e, 'strerror', None) or e}") from None
    if not any(_under(real, r) for r in real_roots):
        raise PathNotAllowed(f"{shown}: a symlink pointing outside the allowed roots (to {real}; {hint})")
    try:
        mode = real.stat().st_mode
    except OSError as e:
        raise PathNotAllowed(f"{shown}: cannot stat: {e.strerror or e}") from None
    ok = {"file": stat.S_ISREG(mode), "dir": stat.S_ISDIR(mode),
          "any": stat.S_ISREG(mode) or stat.S_ISDIR(mode)}[kind]
    if not ok:
        want = {"file": "a regular file", "dir": "a folder", "any": "a regular file or a folder"}[kind]
        from grpo_debug.probes.base import file_kind

        what = file_kind(mode)
        if stat.S_ISREG(mode):
            what = "a regular file"
        raise PathNotAllowed(f"{shown}: is {what}, not {want}"
                             + ("; pass one log or config file inside it" if stat.S_ISDIR(mode) else ""))
    if never_readable(real) or never_readable(lexical):
        raise PathNotAllowed(f"{shown}: /proc, /sys and /dev are never readable through the server (they hold "
                             "its environment and devices); copy the file you need into an allowed folder")
    return real


class DeclaredRoots(tuple):
    """The client's declared roots the server accepted (the tuple's items, resolved folders), with ``refused``:
    (folder, why) for each declared root it did not accept (:func:`unsafe_client_root`), so that a refused
    path's error can name them. Pickles with its ``refused`` (it travels to worker processes)."""

    refused: tuple[tuple[Path, str], ...] = ()

    def __new__(cls, accepted: Iterable[Path] = (), refused: Iterable[tuple[Path, str]] = ()):
        self = super().__new__(cls, accepted)
        self.refused = tuple(refused)
        return self

    def __reduce__(self):
        return (DeclaredRoots, (tuple(self), self.refused))


#: The folders the connected client declared as its roots (MCP roots/list), for the call in progress.
CLIENT_ROOTS: contextvars.ContextVar[tuple[Path, ...]] = contextvars.ContextVar("client_roots", default=())


def unsafe_client_root(folder: Path, env: dict[str, str] | None = None) -> str | None:
    """Why a folder a client declared as an MCP root is not accepted, or None when it is: the same policy as the
    server's own implicit root (:func:`unsafe_implicit_root`): not ``/``, not ``$HOME`` or a folder above it, not a
    system folder (``/etc``, ``/usr``, ``/var``, ``/root``...) nor anything under ``/proc``, ``/sys``, ``/dev``,
    ``/etc``, ``/usr``... A project folder under ``$HOME`` is accepted. Only the server's owner can grant more
    (``--allow DIR``): a client's roots are a claim of the client, ``--allow`` the owner's decision."""
    if never_readable(folder):
        return f"{folder} is under /proc, /sys or /dev"
    return unsafe_implicit_root(folder, env)


def _refused_roots_note(lexical: Path) -> str:
    """For a refused path: the declared roots of the call's client that the server did not accept and that hold
    ``lexical`` (else all of them), with why and how to grant one; '' when none was refused."""
    refused = getattr(CLIENT_ROOTS.get(), "refused", ())
    if not refused:
        return ""
    covering = [(r, why) for r, why in refused if _under(lexical, r)] or list(refused)
    shown = "; ".join(f"{r} ({why})" for r, why in covering[:3]) + (" ..." if len(covering) > 3 else "")
    return (f"; your client declared the root {shown}, which the server does not accept as a client root (a "
            "declared root may not be /, the home folder or a folder above it, or a system folder); the server's "
            "owner can grant a folder with --allow DIR (a project folder under the home folder is accepted as a "
            "root)")


#: Seconds to wait for the client's answer to roots/list: a client that declares roots and never answers (a
#: client bug) must not hold the call forever (the per-call deadline starts only when the tool body runs).
ROOTS_TIMEOUT_S = 5.0
_WARNED: set[Path] = set()


async def client_roots(context) -> tuple[Path, ...]:
    """The existing local folders among the roots the client declared (file:// URIs), resolved, as
    :class:`DeclaredRoots`: those :func:`unsafe_client_root` refuses (``/``, ``$HOME`` or above, a system folder)
    are left out and listed in ``refused`` with the reason. () when the client declares no roots capability,
    the request fails or no answer comes within ROOTS_TIMEOUT_S."""
    from urllib.parse import unquote, urlparse

    import anyio

    try:
        caps = context.session.client_capabilities
        if caps is None or caps.roots is None:
            return ()
        with warnings.catch_warnings():  # roots are deprecated from the 2026-07-28 spec; handshake-era clients use them
            warnings.simplefilter("ignore")
            with anyio.fail_after(ROOTS_TIMEOUT_S):
                listed = (await context.session.list_roots()).roots
    except Exception:  # noqa: BLE001 - no back-channel, a client error, no answer in time, a deprecated capability
        return ()
    out: list[Path] = []
    refused: dict[Path, str] = {}
    for r in listed[:64]:
        u = urlparse(str(r.uri))
        if u.scheme != "file" or u.netloc not in ("", "localhost"):
            continue
        try:
            p = Path(unquote(u.path)).resolve(strict=True)
        except (OSError, RuntimeError, ValueError):
            continue
        if not p.is_dir() or p in out or p in refused:
            continue
        why = unsafe_client_root(p)
        if why is None:
            out.append(p)
        else:
            refused[p] = why
            if p not in _WARNED and len(_WARNED) < 256:  # once per folder, not once per call
                _WARNED.add(p)
                log.warning("a client declared the root %s; not accepted: %s (grant it with --allow DIR)", p, why)
    return DeclaredRoots(out, refused.items())
