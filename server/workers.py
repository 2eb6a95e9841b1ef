"""Heavy MCP calls in worker processes that can be stopped (the process side of server/limits.py's HeavyPool).

A thread blocked in ``open()`` on a FIFO or inside SQLite's C code cannot be interrupted, so each heavy call runs
in a worker PROCESS, killed (SIGKILL, its whole process group) at the call's deadline or when the client leaves:

- a *zygote*: one ``python -I`` child (probes/base.child_argv: nothing is imported from the working directory)
  that imports the engine, loads the rules and runs one small triage (regexes compiled), then forks a worker on
  each request. It is single-threaded (BLAS threads off), so its fork is safe; the server process, which has
  threads, never forks;
- a *worker*: forked from the zygote, its own process group (its tokenizer / numerics children die with it),
  ``RLIMIT_DATA`` = ``mem_mb`` (``$GRPO_DEBUG_WORKER_MEM_MB``, default 512) and a per-job ``RLIMIT_CPU``
  backstop; it dies with the zygote (PR_SET_PDEATHSIG) and the zygote with the server (its control socket
  closes). It takes jobs over its own socket: ``(function, args, kwargs, environ, cwd, sys.path, cpu_s)`` pickled, the
  function by reference (module-level); it answers ``("progress", done, total, phase)`` frames, then one
  ``("ok", result)`` / ``("err", exception)`` / ``("mem", None)``. After a MemoryError it exits.

Idle workers are kept (at most :data:`MAX_IDLE`) and reused by every pool of the process; a killed one is simply
dropped and the next job forks a fresh one (milliseconds), so the pool never stays full. Each job carries the
server's environment and working directory (tests set variables after the workers started); module attributes
patched in the server after the zygote started are NOT seen by the workers (use ``GRPO_DEBUG_POOL=thread``).
"""
from __future__ import annotations

import importlib
import logging
import os
import pickle
import resource
import signal
import socket
import struct
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any, Callable

MEM_ENV = "GRPO_DEBUG_WORKER_MEM_MB"
DEFAULT_MEM_MB = 512
MAX_IDLE = 8
START_TIMEOUT_S = 120.0
#: What the zygote imports before it forks (names, so this module's import graph stays the server's own).
PRELOAD = ("grpo_debug.server.app", "grpo_debug.tools.rundir", "grpo_debug.tools.triage", "grpo_debug.tools.suggest",
           "grpo_debug.tools.families", "grpo_debug.tools.probe_report", "grpo_debug.tools.check_config", "numpy")
#: BLAS / OpenMP pools off in the zygote: a process with threads must not fork.
SINGLE_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                     "NUMEXPR_NUM_THREADS": "1", "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
log = logging.getLogger("grpo_debug.server")


class WorkerMemoryError(Exception):
    """The call needed more memory than a worker may use (MemoryError in the worker, or the worker was killed)."""


class WorkerKilled(Exception):
    """The worker was killed on purpose (deadline, client left): the caller knows why."""


class WorkerStartError(RuntimeError):
    """The zygote could not be started (the caller runs the call in a thread instead)."""


def memory_message(mem_mb: int, died: bool = False) -> str:
    how = "its worker process was killed" if died else "it ran out of memory"
    return (f"the input needed more than {mem_mb} MB ({how}; ${MEM_ENV} sets the per-call limit of this server's "
            "workers); give a smaller input, e.g. the part of the log around the first error, or ask the server's "
            "owner to raise the limit. The server keeps answering")


# ------------------------------------------------------------------------------------------- the child side

_CONN: Connection | None = None


class ChildProgress:
    """The ``progress(done, total, phase)`` callback a job gets in a worker: forwarded to the server as a frame."""

    def __call__(self, done: float, total: float | None = None, phase: str = "reading") -> None:
        if _CONN is not None:
            try:
                _CONN.send_bytes(pickle.dumps(("progress", done, total, phase)))
            except (OSError, ValueError, pickle.PicklingError):
                pass


def _set_soft(which: int, value: int) -> None:
    """Lower (or raise, up to the hard limit) one soft rlimit; the hard limit stays so children may set theirs."""
    try:
        _soft, hard = resource.getrlimit(which)
        resource.setrlimit(which, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))
    except (ValueError, OSError):
        pass


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def _apply(env: dict[str, str], cwd: str, path: list[str]) -> None:
    """The server's environment, working directory and import path (appended: never ahead of what the worker
    has) for this job; the rule caches follow GRPO_DEBUG_RULES."""
    sys.path.extend(p for p in path if p not in sys.path)
    rules_before = os.environ.get("GRPO_DEBUG_RULES")
    if dict(os.environ) != env:
        os.environ.clear()
        os.environ.update(env)
    if os.environ.get("GRPO_DEBUG_RULES") != rules_before:
        from grpo_debug.skills import loader

        for name in ("default_rules", "probe_rules", "load_rules"):
            getattr(getattr(loader, name, None), "cache_clear", lambda: None)()
    try:
        if os.getcwd() != cwd:
            os.chdir(cwd)
    except OSError:
        pass


def _answer(kind: str, value: Any) -> bytes:
    try:
        return pickle.dumps((kind, value))
    except Exception as e:  # noqa: BLE001 - an unpicklable result or exception: say what it was
        return pickle.dumps(("err", RuntimeError(f"{type(value).__name__} could not be sent back: {str(e)[:200]}")))


def _worker_main(fd: int, mem_mb: int) -> None:
    """A worker's life: take jobs until the server closes the socket (or a MemoryError)."""
    global _CONN
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the zygote ignores it; subprocess.run needs it back
    _die_with_parent()
    try:
        os.setpgid(0, 0)  # killed as a group: a hung tokenizer or torch child goes with it
    except OSError:
        pass
    _set_soft(resource.RLIMIT_DATA, mem_mb * 2**20)
    _CONN = conn = Connection(fd)
    while True:
        try:
            raw = conn.recv_bytes()
        except (EOFError, OSError):
            os._exit(0)
        try:
            fn, args, kwargs, env, cwd, path, cpu_s = pickle.loads(raw)
        except Exception as e:  # noqa: BLE001 - e.g. the function's module does not import here
            conn.send_bytes(_answer("err", RuntimeError(f"the job could not be read in the worker: "
                                                        f"{type(e).__name__}: {str(e)[:200]}")))
            continue
        del raw
        _apply(env, cwd, path)
        used = resource.getrusage(resource.RUSAGE_SELF)
        _set_soft(resource.RLIMIT_CPU, int(used.ru_utime + used.ru_stime + cpu_s) + 1)
        mem = False
        try:
            out = _answer("ok", fn(*args, **kwargs))
        except MemoryError:
            mem, out = True, pickle.dumps(("mem", None))
        except BaseException as e:  # noqa: BLE001 - every failure is the job's answer, not the worker's end
            out = _answer("err", e)
        del fn, args, kwargs
        try:
            conn.send_bytes(out)
        except (OSError, ValueError):
            os._exit(0)
        if mem:
            os._exit(0)  # a heap that hit its limit is not trusted with the next job


def _warm() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an optional module (numpy) or a broken one: the job will say
            pass
    try:
        from grpo_debug.skills.loader import default_rules
        from grpo_debug.tools.triage import triage

        default_rules()
        triage(text="step:1 - actor/grad_norm:0.5 - actor/pg_loss:0.1\n")  # compiles the prefilter once
    except Exception:  # noqa: BLE001 - warming is best-effort
        pass


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        b = sock.recv(n - len(buf))
        if not b:
            raise EOFError("closed")
        buf += b
    return buf


def zygote_main(ctl_fd: int) -> int:
    """The zygote: warm up, say 'R', then fork one worker per request (4-byte mem_mb + the worker's socket fd),
    answering each with the worker's pid; ends when the server closes the control socket."""
    ctl = socket.socket(fileno=ctl_fd)
    os.environ.update(SINGLE_THREAD_ENV)
    _warm()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped by the kernel
    ctl.sendall(b"R")
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(ctl, 4, 1)
        except OSError:
            return 0
        if len(msg) < 4 or not fds:
            return 0
        (mem_mb,) = struct.unpack("!I", msg)
        pid = os.fork()
        if pid == 0:
            try:
                ctl.close()
                _worker_main(fds[0], mem_mb)
            finally:
                os._exit(0)
        os.close(fds[0])
        ctl.sendall(struct.pack("!I", pid))


# ------------------------------------------------------------------------------------------- the server side

class _Proc:
    """One worker process as the server sees it."""

    def __init__(self, pid: int, conn: Connection, mem_mb: int) -> None:
        self.pid, self.conn, self.mem_mb = pid, conn, mem_mb
        self.killed: str | None = None
        self.dead = False

    def kill(self, reason: str) -> None:
        """SIGKILL the worker's process group (its children included); the job's read then ends at once."""
        if self.killed is None:
            self.killed = reason
        if self.dead:
            return
        for send in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
            try:
                send()
            except (ProcessLookupError, PermissionError, OSError):
                pass

    def close(self) -> None:
        self.dead = True
        try:
            self.conn.close()
        except OSError:
            pass


class ProcessWorkers:
    """The zygote and the idle workers of this server process (one instance, shared by every pool)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the zygote's start and its fork requests
        self._idle_lock = threading.Lock()
        self._zygote: subprocess.Popen | None = None
        self._ctl: socket.socket | None = None
        self._idle: list[_Proc] = []
        self.broken: str | None = None

    def _start(self) -> None:
        from grpo_debug.probes.base import child_argv

        ours, theirs = socket.socketpair()
        try:
            argv = child_argv("grpo_debug.server.workers", "--zygote", str(theirs.fileno()))
            self._zygote = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, env={**os.environ, **SINGLE_THREAD_ENV})
        finally:
            theirs.close()
        ours.settimeout(START_TIMEOUT_S)
        try:
            if _recv_exact(ours, 1) != b"R":
                raise EOFError("no ready byte")
        except (EOFError, OSError) as e:
            ours.close()
            self._zygote.kill()
            self._zygote.wait()
            raise WorkerStartError(f"the worker processes did not start ({e})") from None
        ours.settimeout(None)
        self._ctl = ours

    def _fork(self, mem_mb: int) -> _Proc:
        with self._lock:
            for attempt in (0, 1):
                if self._ctl is None or (self._zygote is not None and self._zygote.poll() is not None):
                    self._ctl = None
                    self._start()
                ours, theirs = socket.socketpair()
                try:
                    socket.send_fds(self._ctl, [struct.pack("!I", mem_mb)], [theirs.fileno()])
                    (pid,) = struct.unpack("!I", _recv_exact(self._ctl, 4))
                    return _Proc(pid, Connection(ours.detach()), mem_mb)
                except (OSError, EOFError):
                    ours.close()
                    self._ctl = None  # the zygote died: start it again, once
                    if attempt:
                        raise WorkerStartError("the worker processes stopped answering") from None
                finally:
                    theirs.close()
        raise AssertionError("unreachable")

    def acquire(self, mem_mb: int) -> _Proc:
        """An idle worker with this memory limit, else a freshly forked one. WorkerStartError when none starts."""
        with self._idle_lock:
            while self._idle:
                p = self._idle.pop()
                if p.mem_mb == mem_mb and not p.conn.poll(0):  # an idle worker that is readable has died
                    return p
                p.close()
        return self._fork(mem_mb)

    def release(self, proc: _Proc) -> None:
        """Give back a worker after a job; dead or killed ones (and any beyond MAX_IDLE) are closed."""
        if proc.dead or proc.killed is not None:
            proc.close()
            return
        with self._idle_lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(proc)
                return
        proc.close()

    def call(self, proc: _Proc, payload: bytes, progress: Callable[..., None] | None) -> Any:
        """Send one job to ``proc``, forward its progress frames, return its result or raise its exception;
        WorkerKilled when it was killed on purpose, WorkerMemoryError when it ran out of memory or died."""
        try:
            proc.conn.send_bytes(payload)
            while True:
                kind, *rest = pickle.loads(proc.conn.recv_bytes())
                if kind == "progress":
                    if progress is not None:
                        try:
                            progress(*rest)
                        except Exception:  # noqa: BLE001 - progress is best-effort
                            pass
                    continue
                if kind == "ok":
                    return rest[0]
                if kind == "err":
                    raise rest[0]
                proc.dead = True  # "mem": the worker exits
                raise WorkerMemoryError(memory_message(proc.mem_mb))
        except (EOFError, OSError, pickle.UnpicklingError) as e:
            proc.dead = True
            if proc.killed is not None:
                raise WorkerKilled(proc.killed) from None
            if isinstance(e, pickle.UnpicklingError):
                raise RuntimeError(f"the worker's answer could not be read: {str(e)[:200]}") from None
            raise WorkerMemoryError(memory_message(proc.mem_mb, died=True)) from None

    def pids(self) -> list[int]:
        """The zygote's pid and the idle workers' (for measurements and tests)."""
        with self._idle_lock:
            out = [p.pid for p in self._idle]
        return ([self._zygote.pid] if self._zygote is not None and self._zygote.poll() is None else []) + out


WORKERS = ProcessWorkers()


def job_payload(fn: Callable[..., Any], args: tuple, kwargs: dict, cpu_s: float) -> bytes:
    """The job as the worker reads it. Raises pickle.PicklingError / TypeError / AttributeError when ``fn`` or
    an argument cannot cross the process boundary (a lambda, a closure, an open file)."""
    cwd = os.getcwd()
    path = [p for p in sys.path if p and os.path.realpath(p) != os.path.realpath(cwd)]  # as probes' child_argv
    return pickle.dumps((fn, args, kwargs, dict(os.environ), cwd, path, cpu_s), protocol=pickle.HIGHEST_PROTOCOL)


if __name__ == "__main__" and sys.argv[1:2] == ["--zygote"]:
    from grpo_debug.server.workers import zygote_main as _main  # the real module, not __main__'s copy

    sys.exit(_main(int(sys.argv[2])))
