"""The heavy-call pool's worker processes (server/limits.py HeavyPool, server/workers.py): a job blocked in native
code (``open()`` on a FIFO) is killed at its deadline and the next job runs; a job that allocates 2 GB gets a
clear memory error within seconds while the process tree stays small; cancel kills; progress crosses the
process boundary; a real MCP server answers after two blocked calls. The job functions are module-level (they
are sent by reference to the workers, which import this module)."""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

sys.path.append(str(Path(__file__).parent))  # the workers import the jobs by name (appended: shadows nothing)
import pool_jobs as J  # noqa: E402

from grpo_debug.server.limits import Busy, Cancelled, DeadlineExceeded, HeavyPool, Limits, WorkerMemoryError
from grpo_debug.server.workers import WORKERS

pytestmark = pytest.mark.anyio


# ---- helpers

def _pool(**kw) -> HeavyPool:
    return HeavyPool(Limits(**{"workers": 2, "queue": 4, "call_timeout": 30.0, "pool": "process", **kw}))


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _dies(pid: int, within_s: float = 5.0) -> bool:
    end = time.monotonic() + within_s
    while _alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    return not _alive(pid)


def _tree_rss_mb(root: int) -> dict[int, float]:
    """VmRSS (MB) of ``root`` and every descendant, from /proc."""
    from tests.hostile.procs import tree_rss_mb

    return tree_rss_mb(root)


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "never.fifo"
    os.mkfifo(p)
    return str(p)


# ---- tests

async def test_a_job_runs_in_a_worker_process_and_the_worker_is_reused():
    pool = _pool()
    a = await pool.run(J.add, 1, 2)
    b = await pool.run(J.add, 3, b=4)
    assert a["sum"] == 3 and b["sum"] == 7
    assert a["pid"] != os.getpid() and a["pid"] == b["pid"]  # a warm worker takes the next job


async def test_a_job_blocked_on_a_fifo_is_killed_at_its_deadline_and_the_next_job_runs(fifo):
    pool = _pool(workers=1, queue=0, call_timeout=2.0)
    first = await pool.run(J.add, 0, 0)  # a warm worker first, so the deadline measures the blocked job alone
    t0 = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="2 s deadline"):
        await pool.run(J.open_fifo, fifo)
    assert time.monotonic() - t0 < 6.0
    assert _dies(first["pid"]), "the blocked worker is still alive"
    after = await pool.run(J.add, 2, 3)  # one worker, queue 0: a stuck slot would answer Busy here
    assert after["sum"] == 5 and after["pid"] != first["pid"]


async def test_two_blocked_jobs_do_not_fill_the_pool(fifo):
    pool = _pool(workers=2, queue=0, call_timeout=1.5)
    errors: list[BaseException] = []

    async def blocked() -> None:
        try:
            await pool.run(J.open_fifo, fifo)
        except BaseException as e:  # noqa: BLE001 - collected and checked below
            errors.append(e)

    async with anyio.create_task_group() as tg:
        tg.start_soon(blocked)
        tg.start_soon(blocked)
        await anyio.sleep(0.5)
        with pytest.raises(Busy):  # both workers are blocked now: the pool is full while they are
            pool.submit(J.add, 1, 1)
    assert len(errors) == 2 and all(isinstance(e, DeadlineExceeded) for e in errors), errors
    assert (await pool.run(J.add, 1, 1))["sum"] == 2


async def test_a_2gb_allocation_is_a_clear_memory_error_within_seconds_and_rss_stays_bounded():
    pool = _pool(workers=1, mem_mb=512, call_timeout=60.0)
    await pool.run(J.add, 0, 0)
    peak: dict[int, float] = {}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for pid, mb in _tree_rss_mb(os.getpid()).items():
                peak[pid] = max(peak.get(pid, 0.0), mb)
            time.sleep(0.02)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(WorkerMemoryError, match="more than 512 MB"):
            await pool.run(J.grow, 2048)
    finally:
        stop.set()
        t.join()
    assert time.monotonic() - t0 < 10.0
    children = {pid: mb for pid, mb in peak.items() if pid != os.getpid()}
    assert children and max(children.values()) < 512, children  # no worker went past its limit
    assert (await pool.run(J.add, 1, 1))["sum"] == 2  # the server keeps answering


async def test_cancel_kills_the_worker(fifo):
    pool = _pool(workers=1)
    warm = await pool.run(J.add, 0, 0)
    job = pool.submit(J.open_fifo, fifo)
    for _ in range(100):
        if job.proc is not None:
            break
        time.sleep(0.02)
    pool.cancel(job, "the client left")
    assert job.done.wait(5.0)
    assert isinstance(job.error, Cancelled)
    assert job.proc.pid == warm["pid"] and _dies(job.proc.pid)
    assert (await pool.run(J.add, 1, 1))["sum"] == 2


async def test_a_client_that_leaves_kills_its_worker(fifo):
    pool = _pool(workers=1)
    warm = await pool.run(J.add, 0, 0)
    with anyio.move_on_after(1.0):
        await pool.run(J.open_fifo, fifo)
    assert _dies(warm["pid"])


async def test_progress_reaches_the_caller_from_the_worker():
    pool = _pool()
    seen: list[tuple] = []
    pid = await pool.run(J.with_progress, 3, progress=lambda *a: seen.append((threading.get_ident(), *a)))
    assert pid != os.getpid()
    assert [s[1:] for s in seen] == [(1, 3, "reading"), (2, 3, "reading"), (3, 3, "reading")]
    assert all(s[0] != threading.get_ident() for s in seen)  # from a dispatcher thread, not the event loop


async def test_exceptions_cross_and_the_worker_stays():
    pool = _pool(workers=1)
    warm = await pool.run(J.add, 0, 0)
    with pytest.raises(ValueError, match="bad input"):
        await pool.run(J.raise_value_error, "bad input")
    assert (await pool.run(J.add, 0, 0))["pid"] == warm["pid"]


async def test_the_servers_environment_travels_with_each_job(monkeypatch):
    pool = _pool()
    await pool.run(J.add, 0, 0)  # the worker started before the variable was set
    monkeypatch.setenv("GRPO_DEBUG_TEST_MARK", "x1")
    assert await pool.run(J.env, "GRPO_DEBUG_TEST_MARK") == "x1"


async def test_a_closure_runs_in_a_thread_and_the_thread_pool_still_works():
    pool = _pool()
    assert await pool.run(lambda: os.getpid()) == os.getpid()
    tpool = _pool(pool="thread")
    seen: list = []
    assert await tpool.run(J.with_progress, 2, progress=lambda *a: seen.append(a)) == os.getpid()
    assert seen == [(1, 2, "reading"), (2, 2, "reading")]


def test_pool_and_memory_are_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("GRPO_DEBUG_POOL", "thread")
    monkeypatch.setenv("GRPO_DEBUG_WORKER_MEM_MB", "700")
    lim = Limits.from_env()
    assert lim.pool == "thread" and lim.mem_mb == 700
    monkeypatch.setenv("GRPO_DEBUG_POOL", "fork-bomb")
    with pytest.raises(ValueError, match="GRPO_DEBUG_POOL"):
        Limits.from_env()


# ---- through a real MCP server

async def test_mcp_server_answers_after_two_blocked_heavy_calls(fifo, example_log):
    from mcp import Client

    from grpo_debug.server.app import _heavy, build_server

    server = build_server(limits=Limits(workers=2, queue=0, call_timeout=2.0, pool="process"))

    @server.tool(name="block_on_fifo")
    async def block_on_fifo(path: str) -> str:
        return await _heavy(server.pool, "block_on_fifo", J.block_tool, path)

    async with Client(server) as c:
        texts: list[str] = []

        async def blocked() -> None:
            r = await c.call_tool("block_on_fifo", {"path": fifo})
            texts.append((r.is_error, " ".join(getattr(x, "text", "") for x in r.content)))

        t0 = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(blocked)
            tg.start_soon(blocked)
        assert time.monotonic() - t0 < 15.0
        assert len(texts) == 2 and all(err and "deadline" in t for err, t in texts), texts
        r = await c.call_tool("triage", {"path": str(example_log)})
        assert not r.is_error and r.structured_content["findings"]
    assert all(_alive(p) for p in WORKERS.pids())  # only live workers are kept idle
