"""Bounds on the work one MCP call can make the server do.

Heavy tools (triage, check_config, probe_host, the families, plot, compare_runs, suggest) run in a small pool
(``workers``, default min(4, CPUs)) with a bounded queue (``queue``): a call that finds every worker busy and
the queue full gets an immediate, clear "busy" answer instead of waiting behind someone else's 13-minute job.
Each call has a deadline (``call_timeout`` seconds of running): past it, the call's work is stopped and the
answer says so; a client that leaves (cancels, disconnects) stops its call too, queued or running.

Two ways to run a call (``pool``, ``$GRPO_DEBUG_POOL``):

- ``process`` (the default where fork and fd passing exist: Linux, macOS): the call is sent as (function
  reference, arguments) to a worker process (server/workers.py) under memory and CPU rlimits
  (``mem_mb``, ``$GRPO_DEBUG_WORKER_MEM_MB``); stopping it is SIGKILL, which lands even when the work is blocked
  in ``open()`` on a FIFO or inside SQLite's C code, and the next call gets a fresh worker. A call that runs out
  of memory is answered :class:`WorkerMemoryError` ("the input needed more than N MB"). A function that cannot
  cross the process boundary (a lambda or closure) runs in a thread instead (logged);
- ``thread``: the call runs in one of the pool's threads, stopped by raising :class:`Cancelled` inside it
  (``PyThreadState_SetAsyncExc``); pure-Python work stops within milliseconds, a blocked native call never.
  For tests that patch module attributes, and platforms without fork.

Either way one thread per running call (at most ``workers``) dispatches it; Cancelled derives from
BaseException so that no ``except Exception`` in the engine swallows it; every job ends in one idempotent
``_finish``, so a late delivery cannot lose a job.

Settings (the server's environment): GRPO_DEBUG_WORKERS, GRPO_DEBUG_QUEUE, GRPO_DEBUG_CALL_TIMEOUT,
GRPO_DEBUG_POOL, GRPO_DEBUG_WORKER_MEM_MB; or ``build_server(limits=Limits(...))``.
"""
from __future__ import annotations

import collections
import ctypes
import logging
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from grpo_debug.server.workers import (DEFAULT_MEM_MB, MEM_ENV, WORKERS, ChildProgress, WorkerKilled,
                                       WorkerMemoryError, WorkerStartError, job_payload)

WORKERS_ENV, QUEUE_ENV, TIMEOUT_ENV, POOL_ENV = ("GRPO_DEBUG_WORKERS", "GRPO_DEBUG_QUEUE", "GRPO_DEBUG_CALL_TIMEOUT",
                                                 "GRPO_DEBUG_POOL")
IDLE_THREAD_S = 30.0
log = logging.getLogger("grpo_debug.server")
__all__ = ["Busy", "Cancelled", "DeadlineExceeded", "HeavyPool", "Limits", "WorkerMemoryError"]


class Cancelled(BaseException):
    """Raised inside a worker thread (or for a killed worker process) to stop a call past its deadline or whose
    client left."""


class Busy(Exception):
    """Every worker is busy and the queue is full (or the call waited in the queue past its deadline)."""


class DeadlineExceeded(Exception):
    """The call ran past its deadline; its work was cancelled."""


def _env_num(name: str, default: float, cast=float):
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        v = cast(raw)
    except ValueError:
        raise ValueError(f"${name}={raw!r} is not a number") from None
    if v < 0 or (cast is float and not v > 0):
        raise ValueError(f"${name}={raw!r} must be positive")
    return v


def default_pool() -> Literal["process", "thread"]:
    """'process' where worker processes work (fork and fd passing: Linux, macOS), else 'thread'."""
    return "process" if hasattr(os, "fork") and hasattr(socket, "send_fds") and sys.platform != "win32" else "thread"


def _env_pool() -> Literal["process", "thread"]:
    raw = os.environ.get(POOL_ENV, "").strip().lower()
    if raw and raw not in ("process", "thread"):
        raise ValueError(f"${POOL_ENV}={raw[:40]!r}: use process or thread")
    return raw or default_pool()  # type: ignore[return-value]


@dataclass
class Limits:
    workers: int = field(default_factory=lambda: max(1, min(4, os.cpu_count() or 2)))
    queue: int = 64
    call_timeout: float = 120.0
    pool: Literal["process", "thread"] = field(default_factory=default_pool)
    mem_mb: int = DEFAULT_MEM_MB

    @classmethod
    def from_env(cls, **given: Any) -> "Limits":
        """Limits from ``given`` (None = not given), else the environment, else defaults. ValueError names a bad
        variable."""
        d = cls()
        vals = {"workers": _env_num(WORKERS_ENV, d.workers, int), "queue": _env_num(QUEUE_ENV, d.queue, int),
                "call_timeout": _env_num(TIMEOUT_ENV, d.call_timeout), "pool": _env_pool(),
                "mem_mb": _env_num(MEM_ENV, d.mem_mb, int)}
        vals.update({k: v for k, v in given.items() if v is not None})
        return cls(workers=max(1, int(vals["workers"])), queue=max(0, int(vals["queue"])),
                   call_timeout=float(vals["call_timeout"]), pool=vals["pool"], mem_mb=max(64, int(vals["mem_mb"])))


class _Job:
    __slots__ = ("fn", "args", "kwargs", "progress", "payload", "proc", "lock", "state", "done", "result", "error",
                 "thread_id", "started", "injected", "reason")

    def __init__(self, fn: Callable[..., Any], args: tuple = (), kwargs: dict | None = None,
                 progress: Callable[..., None] | None = None) -> None:
        self.fn, self.args, self.kwargs, self.progress = fn, args, kwargs or {}, progress
        self.payload: bytes | None = None  # set: the job runs in a worker process
        self.proc = None
        self.lock = threading.Lock()
        self.state = "queued"  # queued -> running -> done | queued -> done (cancelled before it ran)
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread_id: int | None = None
        self.started: float | None = None
        self.injected = False
        self.reason = ""


def _trim() -> None:
    """Hand freed heap back to the OS after a heavy job (glibc keeps it otherwise: RSS stays at the peak)."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _inject(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None)


class HeavyPool:
    """A few dispatcher threads with a bounded queue, each call in a worker process or thread; see the module
    docstring."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._queue: collections.deque[_Job] = collections.deque()
        self._cv = threading.Condition()
        self._active: set[_Job] = set()
        self._threads = 0

    # ---- worker side
    def _next(self) -> _Job | None:
        with self._cv:
            while True:
                while self._queue:
                    job = self._queue.popleft()
                    with job.lock:
                        if job.state != "queued":
                            continue  # cancelled while it waited
                        job.state, job.thread_id, job.started = "running", threading.get_ident(), time.monotonic()
                        self._active.add(job)
                        return job
                if not self._cv.wait(IDLE_THREAD_S) and not self._queue:
                    self._threads -= 1
                    return None

    def _finish(self, job: _Job, result: Any, error: BaseException | None) -> None:
        """Idempotent: a cancellation delivered late (after the job's function returned) may run it twice."""
        with job.lock:
            if job.state != "done":
                job.state, job.result, job.error = "done", result, error
        self._active.discard(job)
        job.done.set()

    def _in_process(self, job: _Job) -> Any:
        """Run ``job`` in a worker process; Cancelled when it was cancelled (the worker killed)."""
        proc = WORKERS.acquire(self.limits.mem_mb)
        with job.lock:
            if job.injected:  # cancelled while a worker was being found
                WORKERS.release(proc)
                raise Cancelled(job.reason)
            job.proc = proc
        try:
            return WORKERS.call(proc, job.payload, job.progress)
        except WorkerKilled as e:
            raise Cancelled(str(e)) from None
        finally:
            WORKERS.release(proc)

    def _execute(self, job: _Job) -> Any:
        if job.payload is not None:
            try:
                return self._in_process(job)
            except WorkerStartError as e:
                log.warning("heavy call runs in a thread: %s", e)
        kwargs = dict(job.kwargs, progress=job.progress) if job.progress is not None else job.kwargs
        return job.fn(*job.args, **kwargs)

    def _worker(self) -> None:
        while True:
            job = None
            try:
                _inject(threading.get_ident(), None)  # drop a cancellation aimed at the previous job
                job = self._next()
                if job is None:
                    return
                try:
                    result, error = self._execute(job), None
                except BaseException as e:  # noqa: BLE001 - Cancelled and native panics end the job, not the thread
                    result, error = None, e
                self._finish(job, result, error)
                del result, error
                if job.payload is None:
                    _trim()
            except Cancelled:
                if job is not None:
                    self._finish(job, None, Cancelled())

    # ---- caller side
    def _payload(self, job: _Job) -> bytes | None:
        if self.limits.pool != "process":
            return None
        kwargs = dict(job.kwargs, progress=ChildProgress()) if job.progress is not None else job.kwargs
        try:
            return job_payload(job.fn, job.args, kwargs, cpu_s=self.limits.call_timeout + 10)
        except Exception as e:  # noqa: BLE001 - PicklingError, TypeError, AttributeError: not a reference
            log.warning("heavy call %s runs in a thread: it cannot be sent to a worker process (%s)",
                        getattr(job.fn, "__qualname__", job.fn), str(e)[:200])
            return None

    def submit(self, fn: Callable[..., Any], *args: Any, progress: Callable[..., None] | None = None,
               **kwargs: Any) -> _Job:
        """Queue ``fn(*args, **kwargs)`` (with ``progress=`` a callback when given: in a worker process it
        forwards to ``progress`` here); Busy when every worker is busy and the queue is full."""
        job = _Job(fn, args, kwargs, progress)
        with self._cv:
            waiting = sum(1 for j in self._queue if j.state == "queued")
            if len(self._active) + waiting >= self.limits.workers and waiting >= self.limits.queue:
                raise Busy(f"busy: {len(self._active)} heavy calls are running and {waiting} are waiting (this "
                           f"server runs {self.limits.workers} at a time with a queue of {self.limits.queue}); "
                           "retry in a few seconds")
        job.payload = self._payload(job)
        with self._cv:
            self._queue.append(job)
            if self._threads < self.limits.workers and self._threads < len(self._active) + waiting + 1:
                self._threads += 1
                threading.Thread(target=self._worker, name="grpo-debug-heavy", daemon=True).start()
            self._cv.notify()
        return job

    def cancel(self, job: _Job, reason: str) -> None:
        """Stop ``job``: dropped from the queue, its worker process killed, or Cancelled raised in its thread."""
        with job.lock:
            if job.state == "queued":
                job.state, job.reason, job.error = "done", reason, Cancelled(reason)
                job.done.set()
            elif job.state == "running" and not job.injected:
                job.injected, job.reason = True, reason
                if job.proc is not None:
                    job.proc.kill(reason)
                elif job.payload is None:
                    _inject(job.thread_id, Cancelled)

    async def run(self, fn: Callable[..., Any], *args: Any, progress: Callable[..., None] | None = None,
                  **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` in the pool and return its result (or raise its exception). Raises Busy
        (no room, or queued past the deadline), DeadlineExceeded (ran past ``call_timeout``: stopped) or
        WorkerMemoryError (a worker process ran out of memory). When the awaiting task is cancelled (the client
        left), the job is cancelled too."""
        import anyio

        job = self.submit(fn, *args, progress=progress, **kwargs)
        limit = self.limits.call_timeout
        queued_at = time.monotonic()
        delay = 0.002
        try:
            while not job.done.is_set():
                now = time.monotonic()
                if job.started is None and now - queued_at > limit:
                    self.cancel(job, "queued past the deadline")
                    if job.started is None:
                        raise Busy(f"busy: this call waited {limit:g} s in the queue without a free worker; retry "
                                   "in a few seconds")
                if job.started is not None and now - job.started > limit:
                    self.cancel(job, "deadline")
                    if now - job.started > limit + 5:
                        break  # the cancellation has not landed (a long native call in a thread): answer anyway
                await anyio.sleep(delay)
                delay = min(0.05, delay * 1.5)
        except BaseException:
            self.cancel(job, "the client left")
            raise
        if not job.done.is_set() or isinstance(job.error, Cancelled):
            raise DeadlineExceeded(f"stopped at its {limit:g} s deadline; the work was cancelled")
        if job.error is not None:
            raise job.error
        return job.result
