#!/usr/bin/env python3
"""Benchmark: MCP `triage` of a large log over stdio against the CLI on the same file (issue 15: within 1.2x).

Both contenders are timed from process launch to the answer, in the same run, on the same file:
- CLI: ``grpo-debug triage FILE --format json`` (stdout read to the end);
- MCP: ``grpo-debug serve --allow DIR`` driven over stdio with raw JSON-RPC (initialize, initialized,
  tools/call triage {path}) until the call's reply; the call sends a progressToken, as an agent showing
  progress would, and the progress notifications are counted.
Each is run ``--runs`` times, interleaved (after one untimed warm-up of each); the medians and their ratio are
printed with PASS/FAIL at ``--target`` (default 1.2), and both answers' top findings are compared. The MCP
figure includes the server's start (the SDK's import, about half a second: a fixed cost, paid once per agent
session); the call alone (tools/call sent to its reply) is reported next to it.

The log: ``--log PATH``, else a generated one under $TMPDIR (``--mb``, default 50): the realistic generator
(bench/gen_real_log.py) when present, else bench/gen_log.py.

Usage: python bench/bench_mcp.py [--log PATH | --mb 50] [--runs 3] [--target 1.2] [--no-progress] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def grpo_debug_argv() -> list[str]:
    """The installed ``grpo-debug`` script next to this interpreter (the one a user runs), else the module."""
    script = Path(sys.executable).with_name("grpo-debug")
    if script.exists():
        return [str(script)]
    found = shutil.which("grpo-debug")
    return [found] if found else [sys.executable, "-c", "from grpo_debug.server.cli import main; main()"]


def make_log(mb: float) -> str:
    """A generated log of about ``mb`` MB under $TMPDIR (kept between runs): realistic when the generator exists."""
    real = (HERE / "gen_real_log.py").exists()
    log = os.path.join(tempfile.gettempdir(), f"grpo_debug_bench_mcp_{'real' if real else 'gen'}_{int(mb)}mb.log")
    if not Path(log).exists():
        print(f"generating {mb:g} MB {'realistic ' if real else ''}log at {log} ...", flush=True)
        if real:
            from gen_real_log import generate
        else:
            from gen_log import generate
        generate(log, mb)
    return log


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's waited-for children so far."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _proc_cpu(pid: int) -> float | None:
    """CPU seconds a running process has used (Linux /proc), or None where it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def run_cli(base: list[str], log: str) -> tuple[dict, dict]:
    """Wall and CPU seconds from launch to exit of ``triage LOG --format json``, and its JSON answer."""
    cpu, t = _children_cpu(), time.perf_counter()
    p = subprocess.run([*base, "triage", log, "--format", "json"], capture_output=True, text=True)
    m = {"wall": time.perf_counter() - t, "cpu": _children_cpu() - cpu}
    if p.returncode not in (0, 1):  # 1: findings of error severity
        raise SystemExit(f"CLI failed (rc {p.returncode}): {p.stderr[-500:]}")
    return m, json.loads(p.stdout)


def _send(p: subprocess.Popen, *msgs: dict) -> None:
    p.stdin.write("".join(json.dumps(m) + "\n" for m in msgs))
    p.stdin.flush()


def _reply(p: subprocess.Popen, rid: int) -> tuple[dict, int]:
    """Read until the reply to request ``rid``; returns it and how many progress notifications came first."""
    notes = 0
    while True:
        line = p.stdout.readline()
        if not line:
            raise SystemExit("the MCP server closed stdout before answering")
        msg = json.loads(line)
        if msg.get("method") == "notifications/progress":
            notes += 1
        elif msg.get("id") == rid:
            return msg, notes


def run_mcp(base: list[str], log: str, progress: bool) -> tuple[dict, dict]:
    """Wall and CPU seconds from launching ``serve`` to the tools/call reply (``wall``, ``cpu``: the server's
    whole life), of that from sending the call to its reply (``call``, ``call_cpu``), the progress notifications
    that came before the reply (``notes``), and the structured answer."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench_mcp", "version": "0"}}}
    params: dict = {"name": "triage", "arguments": {"path": log}}
    if progress:
        params["_meta"] = {"progressToken": "bench"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
    cpu, t = _children_cpu(), time.perf_counter()
    p = subprocess.Popen([*base, "serve", "--allow", str(Path(log).resolve().parent)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
    try:
        _send(p, init)
        _reply(p, 1)
        t_call, cpu_call = time.perf_counter(), _proc_cpu(p.pid)
        _send(p, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call)
        msg, notes = _reply(p, 2)
        end, cpu_end = time.perf_counter(), _proc_cpu(p.pid)
    finally:
        p.kill()
        p.wait()
    res = msg.get("result") or {}
    if "error" in msg or res.get("isError"):
        raise SystemExit(f"MCP triage failed: {json.dumps(msg)[:500]}")
    m = {"wall": end - t, "cpu": _children_cpu() - cpu, "call": end - t_call, "notes": notes,
         "call_cpu": cpu_end - cpu_call if cpu_call is not None and cpu_end is not None else None}
    return m, res.get("structuredContent") or {}


def top(answer: dict) -> list[tuple]:
    """The first findings as (symptom, first evidence line): what both faces must agree on."""
    out = []
    for f in answer.get("findings", [])[:5]:
        ev = f.get("evidence") or [{}]
        out.append((f.get("symptom"), ev[0].get("line")))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", help="use this log instead of generating one")
    ap.add_argument("--mb", type=float, default=50)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--target", type=float, default=1.2)
    ap.add_argument("--no-progress", action="store_true", help="the MCP call sends no progressToken")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    log = a.log or make_log(a.mb)
    base = grpo_debug_argv()
    subprocess.run(["cat", log], stdout=subprocess.DEVNULL)  # warm the page cache for both contenders
    with tempfile.TemporaryDirectory() as tmp:  # untimed warm-up of both (.pyc and rule caches) on the log's head
        head = os.path.join(tmp, "head.log")
        with open(log, "rb") as src, open(head, "wb") as dst:
            dst.write(src.read(2**20))
        run_cli(base, head)
        run_mcp(base, head, not a.no_progress)
    cli, mcp = [], []
    for _ in range(a.runs):  # interleaved: a load change on the box hits both alike
        r, cli_ans = run_cli(base, log)
        cli.append(r)
        r, mcp_ans = run_mcp(base, log, not a.no_progress)
        mcp.append(r)

    def med(runs: list[dict], key: str) -> float | None:
        vals = [r[key] for r in runs if r.get(key) is not None]
        return round(statistics.median(vals), 3) if vals else None

    cli_s, mcp_s, call_s = med(cli, "wall"), med(mcp, "wall"), med(mcp, "call")
    ratio = mcp_s / cli_s
    # the MCP answer is cut to its byte budget (server/budget.py): its findings are the CLI's first ones
    c, m = top(cli_ans), top(mcp_ans)
    same = bool(m) == bool(c) and m == c[:len(m)] and (len(m) == len(c) or bool(mcp_ans.get("truncated")))
    res = {"log": log, "log_bytes": os.path.getsize(log), "runs": a.runs, "cli_s": cli_s, "mcp_s": mcp_s,
           "mcp_call_s": call_s, "ratio": round(ratio, 3), "call_ratio": round(call_s / cli_s, 3), "target": a.target,
           "pass": ratio <= a.target, "cli_cpu_s": med(cli, "cpu"), "mcp_cpu_s": med(mcp, "cpu"),
           "mcp_call_cpu_s": med(mcp, "call_cpu"), "progress_notifications": [r["notes"] for r in mcp],
           "same_top_findings": same, "cli_all_s": [round(r["wall"], 3) for r in cli],
           "mcp_all_s": [round(r["wall"], 3) for r in mcp], "loadavg": [round(x, 2) for x in os.getloadavg()]}
    print(f"log: {log} ({res['log_bytes'] / 2**20:.1f} MiB)")
    print(f"CLI triage --format json   median {cli_s:.2f} s  {res['cli_all_s']}  CPU {res['cli_cpu_s']} s")
    print(f"MCP stdio, launch to reply median {mcp_s:.2f} s  {res['mcp_all_s']}  CPU {res['mcp_cpu_s']} s  "
          f"progress notifications {res['progress_notifications']}")
    print(f"  of which tools/call to reply    {call_s:.2f} s  CPU {res['mcp_call_cpu_s']} s (the rest: server start "
          "and the handshake)")
    verdict = "PASS" if res["pass"] else "FAIL"
    print(f"MCP / CLI = {ratio:.2f}x  (target <= {a.target}x, server start included)  {verdict}")
    print(f"MCP call alone / CLI = {res['call_ratio']:.2f}x  (a server already running, as an agent's is)")
    print(f"same top findings: {same}  CLI {c}" + ("" if m == c else f" vs MCP {m} (MCP truncated: "
                                                   f"{mcp_ans.get('truncated')})"))
    print(f"load average: {res['loadavg']}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
    return 0 if res["pass"] and same else 1


if __name__ == "__main__":
    sys.exit(main())
