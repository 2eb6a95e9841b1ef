"""Load over loopback HTTP: 50 concurrent MCP clients (the SDK client over streamable HTTP, one session
each) make 20 `triage` calls each against one `grpo-debug serve --transport http`. Asserts 0 errors and
bounded server memory growth (VmRSS of the server process); prints p50/p95 latency."""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

CLIENTS = 50
CALLS_EACH = 20
MAX_RSS_GROWTH_MB = 300
SMALL_LOG = """\
(TaskRunner pid=2210) step:1 - actor/pg_loss:0.12 - actor/grad_norm:0.41 - critic/score/mean:0.10
(TaskRunner pid=2210) step:2 - actor/pg_loss:0.10 - actor/grad_norm:0.57 - critic/score/mean:0.12
(TaskRunner pid=2210) step:3 - actor/pg_loss:nan - actor/grad_norm:nan - critic/score/mean:0.11
(TaskRunner pid=2210) WARN: rank 0 grad_norm is not finite: nan
"""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def case_log(shared_root) -> str:
    if shared_root:
        p = shared_root / "cases" / "verl-nan-gradnorm-microbatch" / "input.log"
        if p.is_file():
            return p.read_text(encoding="utf-8")
    return SMALL_LOG


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc to read the server's RSS")
async def test_50_clients_20_triage_calls_each(shared_root, serve_http):
    text = case_log(shared_root)
    latencies: list[float] = []
    errors: list[str] = []
    with serve_http() as (port, proc):
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url) as c:  # warm up: imports, rule base, first triage
            r = await c.call_tool("triage", {"text": text})
            assert not r.is_error, r.content
            expected = [f["symptom"] for f in r.structured_content["findings"]]
        rss_before = rss_mb(proc.pid)

        async def one_client(i: int) -> None:
            try:
                async with Client(url) as c:
                    for _ in range(CALLS_EACH):
                        t = time.perf_counter()
                        r = await c.call_tool("triage", {"text": text})
                        latencies.append(time.perf_counter() - t)
                        if r.is_error:
                            errors.append(f"client {i}: {r.content[0].text[:200]}")
                        elif [f["symptom"] for f in r.structured_content["findings"]] != expected:
                            errors.append(f"client {i}: different findings")
            except Exception as e:  # noqa: BLE001 - a transport failure is an error of this test
                errors.append(f"client {i}: {type(e).__name__}: {e}")

        t0 = time.perf_counter()
        with anyio.fail_after(600):
            async with anyio.create_task_group() as tg:
                for i in range(CLIENTS):
                    tg.start_soon(one_client, i)
        wall = time.perf_counter() - t0
        rss_after = rss_mb(proc.pid)
        assert proc.poll() is None, "the server died under load"

    n = len(latencies)
    p50, p95 = pct(latencies, 0.50), pct(latencies, 0.95)
    print(f"\nload: {CLIENTS} clients x {CALLS_EACH} triage calls = {n} calls in {wall:.1f} s "
          f"({n / wall:.0f} calls/s), {len(errors)} errors; latency p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
          f"max {max(latencies) * 1000:.0f} ms, mean {statistics.mean(latencies) * 1000:.0f} ms; "
          f"server RSS {rss_before:.0f} -> {rss_after:.0f} MB (+{rss_after - rss_before:.0f} MB); input {len(text)} bytes")
    assert not errors, errors[:5]
    assert n == CLIENTS * CALLS_EACH
    assert rss_after - rss_before < MAX_RSS_GROWTH_MB, (rss_before, rss_after)
