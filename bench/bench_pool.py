"""The cost of running heavy MCP calls in worker processes (server/workers.py) instead of threads.

Warm-call latency of a small `triage` (the bundled verl_grpo_nan example, by path) through an in-process MCP
client, process pool vs thread pool, measured in the same run (interleaved rounds, so a busy machine slows both),
and the RSS of the server process plus its zygote and workers. Prints medians, p95 and their ratios.

    python bench/bench_pool.py [--calls 40] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import anyio


def _rss_mb(pid: int, key: str = "Rss:") -> float:
    """Rss (or Pss: shared pages split among their sharers) of ``pid`` in MB, from /proc/PID/smaps_rollup."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


async def _calls(server, path: str, n: int) -> list[float]:
    from mcp import Client

    out = []
    async with Client(server) as c:
        r = await c.call_tool("triage", {"path": path})  # warm: the pool's worker (and zygote) started
        assert not r.is_error, r.content
        for _ in range(n):
            t = time.perf_counter()
            r = await c.call_tool("triage", {"path": path})
            out.append((time.perf_counter() - t) * 1000)
            assert not r.is_error
    return out


def _p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, int(len(xs) * 0.95) - 1)]


async def main(calls: int, rounds: int) -> None:
    from grpo_debug.server import example_path
    from grpo_debug.server.app import build_server
    from grpo_debug.server.limits import Limits
    from grpo_debug.server.workers import WORKERS

    path = str(example_path("verl_grpo_nan"))
    servers = {mode: build_server(limits=Limits(workers=2, pool=mode)) for mode in ("thread", "process")}
    times: dict[str, list[float]] = {"thread": [], "process": []}
    for _ in range(rounds):
        for mode, server in servers.items():
            times[mode] += await _calls(server, path, calls)
    med = {m: statistics.median(v) for m, v in times.items()}
    for m, v in times.items():
        print(f"{m:8s} triage (warm, {len(v)} calls): median {med[m]:7.2f} ms  p95 {_p95(v):7.2f} ms")
    print(f"process / thread: median x{med['process'] / med['thread']:.2f}  "
          f"(+{med['process'] - med['thread']:.2f} ms per call)  p95 x{_p95(times['process']) / _p95(times['thread']):.2f}")
    server_mb = _rss_mb(os.getpid())
    pids = WORKERS.pids()
    worker_mb = [_rss_mb(p) for p in pids]
    print(f"RSS: server {server_mb:.0f} MB; zygote + {len(pids) - 1} idle worker(s): "
          + ", ".join(f"{x:.0f}" for x in worker_mb) + f" MB; total {server_mb + sum(worker_mb):.0f} MB "
          "(workers share the zygote's pages copy-on-write: RSS counts them in each)")
    pss = [_rss_mb(p, "Pss:") for p in [os.getpid(), *pids]]
    print(f"PSS (shared pages split): server {pss[0]:.0f} MB, zygote + workers {sum(pss[1:]):.0f} MB")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    anyio.run(main, a.calls, a.rounds)
