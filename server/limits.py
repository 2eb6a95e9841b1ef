"""Bounds on the work one MCP call can make the server do.

Heavy tools (triage, check_config, probe_host, the families) run in a small pool of worker threads
(``workers``, default min(4, CPUs)) with a bounded queue (``queue``): a call that finds every worker busy and
the queue full gets an immediate, clear "busy" answer instead of waiting behind someone else's 13-minute job.
Each call has a deadline (``call_timeout`` seconds of running): past it, the call's work is cancelled and the
answer says so; a client that leaves (cancels, disconnects) cancels its call too, queued or running.

Cancellation raises :class:`Cancelled` inside the worker thread (``PyThreadState_SetAsyncExc``): the engine
is pure Python over bounded lines (linear regexes), so the exception lands within milliseconds; no engine
code has to poll. Cancelled derives from BaseException so that no ``except Exception`` in the engine
swallows it; every job ends in one idempotent ``_finish``, so a late delivery cannot lose a job.

Settings (the server's environment): GRPO_DEBUG_WORKERS, GRPO_DEBUG_QUEUE, GRPO_DEBUG_CALL_TIMEOUT; or
``build_server(limits=Limits(...))``.
"""
from __future__ import annotations

import collections
import ctypes
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

WORKERS_ENV, QUEUE_ENV, TIMEOUT_ENV = "GRPO_DEBUG_WORKERS", "GRPO_DEBUG_QUEUE", "GRPO_DEBUG_CALL_TIMEOUT"
IDLE_THREAD_S = 30.0


class Cancelled(BaseException):
    """Raised inside a worker thread to stop a call past its deadline or whose client left."""


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


@dataclass
class Limits:
    workers: int = field(default_factory=lambda: max(1, min(4, os.cpu_count() or 2)))
    queue: int = 64
    call_timeout: float = 120.0

    @classmethod
    def from_env(cls, **given: Any) -> "Limits":
        """Limits from ``given`` (None = not given), else the environment, else defaults."""
        d = cls()
        vals = {"workers": _env_num(WORKERS_ENV, d.workers, int), "queue": _env_num(QUEUE_ENV, d.queue, int),
                "call_timeout": _env_num(TIMEOUT_ENV, d.call_timeout)}
        vals.update({k: v for k, v in given.items() if v is not None})
        return cls(workers=max(1, int(vals["workers"])), queue=max(0, int(vals["queue"])),
                   call_timeout=float(vals["call_timeout"]))


class _Job:
    __slots__ = ("fn", "lock", "state", "done", "result", "error", "thread_id", "started", "injected", "reason")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
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
    """A few worker threads with a bounded queue; see the module docstring."""

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

    def _worker(self) -> None:
        while True:
            job = None
            try:
                _inject(threading.get_ident(), None)  # drop a cancellation aimed at the previous job
                job = self._next()
                if job is None:
                    return
                try:
                    result, error = job.fn(), None
                except BaseException as e:  # noqa: BLE001 - Cancelled and native panics end the job, not the thread
                    result, error = None, e
                self._finish(job, result, error)
                del result, error
                _trim()
            except Cancelled:
                if job is not None:
                    self._finish(job, None, Cancelled())

    # ---- caller side
    def submit(self, fn: Callable[[], Any]) -> _Job:
        """Queue ``fn``; Busy when every worker is busy and the queue is full."""
        job = _Job(fn)
        with self._cv:
            waiting = sum(1 for j in self._queue if j.state == "queued")
            if len(self._active) + waiting >= self.limits.workers and waiting >= self.limits.queue:
                raise Busy(f"busy: {len(self._active)} heavy calls are running and {waiting} are waiting (this "
                           f"server runs {self.limits.workers} at a time with a queue of {self.limits.queue}); "
                           "retry in a few seconds")
            self._queue.append(job)
            if self._threads < self.limits.workers and self._threads < len(self._active) + waiting + 1:
                self._threads += 1
                threading.Thread(target=self._worker, name="grpo-debug-heavy", daemon=True).start()
            self._cv.notify()
        return job

    def cancel(self, job: _Job, reason: str) -> None:
        """Stop ``job``: dropped from the queue, or Cancelled raised in its worker thread."""
        with job.lock:
            if job.state == "queued":
                job.state, job.reason, job.error = "done", reason, Cancelled(reason)
                job.done.set()
            elif job.state == "running" and not job.injected:
                job.injected, job.reason = True, reason
                _inject(job.thread_id, Cancelled)

    async def run(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` in the pool and return its result (or raise its exception). Raises Busy (no room, or
        queued past the deadline) or DeadlineExceeded (ran past ``call_timeout``: cancelled). When the awaiting
        task is cancelled (the client left), the job is cancelled too."""
        import anyio

        job = self.submit(fn)
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
                        break  # the cancellation has not landed (a long native call): answer anyway
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
