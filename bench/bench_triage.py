#!/usr/bin/env python3
"""Benchmark: triage of a large log against grep, MCP cold start against the SDK's minimal server, CLI
triage of a small log, and the tools/list size. Every figure is measured in the same run, and targets are
reported as ratios against the baseline measured here.

Usage: python bench/bench_triage.py [--mb 1024] [--log PATH] [--runs 3] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def engine_patterns() -> list[str]:
    """The patterns the triage prefilter uses (tools/engine/large_logs.py): the grep baseline uses the same set."""
    from grpo_debug.skills.loader import default_rules
    from grpo_debug.tools.engine.large_logs import build_patterns
    from grpo_debug.tools.engine.prefilter import _relax

    rule_pats = [s.pattern for r in default_rules() for s in r.match.signals() if s.kind == "regex"]
    return [q for p, _ in build_patterns(rule_pats) if (q := _relax(p)) is not None]


def _ere(p: str) -> str:
    """One Python regex to POSIX ERE (GNU grep -E): classes inside and outside brackets, (?:...) groups."""
    cls_in = {"d": "0-9", "s": "[:space:]", "w": "[:alnum:]_"}
    cls_out = {"d": "[0-9]", "s": "[[:space:]]", "w": "[[:alnum:]_]", "D": "[^0-9]", "S": "[^[:space:]]", "W": "[^[:alnum:]_]"}
    out, i, in_br = [], 0, False
    while i < len(p):
        c = p[i]
        if c == "\\" and i + 1 < len(p):
            n = p[i + 1]
            out.append((cls_in if in_br else cls_out).get(n, "\\" + n) if n in "dswDSW" else "\\" + n)
            i += 2
            continue
        if c == "[" and not in_br:
            in_br = True
        elif c == "]" and in_br and out and out[-1] not in ("[", "[^"):
            in_br = False
        if not in_br and p.startswith("(?:", i):
            out.append("(")
            i += 3
            continue
        out.append(c)
        i += 1
    return re.sub(r"\(\?[a-z]+\)", "", "".join(out))


def grep_pattern(pats: list[str]) -> str:
    """The engine's patterns as one POSIX ERE alternation for grep -E."""
    return "|".join(f"({_ere(p)})" for p in pats)


def timed(argv: list[str], **kw) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    return time.perf_counter() - t, p


def peak_rss_kb(argv: list[str]) -> tuple[float, int, str]:
    """Wall time, peak RSS (KiB) and stdout of a command, via /usr/bin/time when present."""
    if Path("/usr/bin/time").exists():
        t, p = timed(["/usr/bin/time", "-f", "%M", *argv])
        rss = int((p.stderr.strip().splitlines() or ["0"])[-1] or 0)
        return t, rss, p.stdout
    t, p = timed(argv)
    return t, 0, p.stdout


MINIMAL_SERVER = textwrap.dedent('''
    from mcp.server.mcpserver import MCPServer
    mcp = MCPServer("minimal")

    @mcp.tool()
    def ping() -> str:
        """ping"""
        return "pong"

    mcp.run()
''')


def cold_start(argv: list[str], runs: int) -> float:
    """Median seconds from launch to the tools/list reply over stdio (raw JSON-RPC, no SDK client)."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
    inited = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    lst = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    times = []
    for i in range(runs + 1):
        t = time.perf_counter()
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        p.stdin.write(json.dumps(init) + "\n")
        p.stdin.flush()
        p.stdout.readline()
        p.stdin.write(json.dumps(inited) + "\n" + json.dumps(lst) + "\n")
        p.stdin.flush()
        line = p.stdout.readline()
        dt = time.perf_counter() - t
        p.kill()
        p.wait()
        if i:  # the first run warms the .pyc caches
            times.append(dt)
        size = len(line)
    cold_start.last_size = size  # type: ignore[attr-defined]
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=1024)
    ap.add_argument("--log", help="use this log instead of generating one")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    py = sys.executable
    res: dict = {}

    from gen_log import generate

    if a.log:
        log = a.log
        planted = json.loads(Path(log + ".planted.json").read_text()) if Path(log + ".planted.json").exists() else {}
    else:
        log = os.path.join(tempfile.gettempdir(), f"grpo_debug_bench_{int(a.mb)}mb.log")
        if not Path(log).exists() or not Path(log + ".planted.json").exists():
            print(f"generating {a.mb:g} MB log at {log} ...", flush=True)
            generate(log, a.mb)
        planted = json.loads(Path(log + ".planted.json").read_text())
    size = os.path.getsize(log)
    res["log_bytes"] = size

    pats = engine_patterns()
    # grep -E (the baseline) with the same patterns, translated to POSIX ERE
    grep_argv = ["grep", "-cE", grep_pattern(pats), log]
    subprocess.run(["cat", log], stdout=subprocess.DEVNULL)  # warm the page cache for both contenders
    g = [timed(grep_argv) for _ in range(a.runs)]
    if any(p.returncode == 2 for _, p in g):
        raise SystemExit(f"grep failed: {g[0][1].stderr[:300]}")
    g_times = [t for t, _ in g]
    res["grep_mode"] = grep_argv[1]
    res["grep_count"] = int(g[0][1].stdout.strip() or 0)
    res["grep_s"] = round(statistics.median(g_times), 3)
    t_runs = [peak_rss_kb([py, "-m", "grpo_debug.server.cli", "triage", log, "--format", "json"]) for _ in range(a.runs)]
    res["triage_s"] = round(statistics.median(t for t, _, _ in t_runs), 3)
    res["triage_peak_rss_mb"] = round(max(r for _, r, _ in t_runs) / 1024, 1)
    res["triage_over_grep"] = round(res["triage_s"] / res["grep_s"], 2)
    out = json.loads(t_runs[-1][2])
    cited = {e["line"] for f in out["findings"] for e in f["evidence"]}
    res["planted_found"] = {k: (v in cited) for k, v in planted.items() if k.endswith("_line")}

    res["mcp_cold_start_s"] = round(cold_start([py, "-m", "grpo_debug.server.cli", "serve"], a.runs + 2), 3)
    res["tools_list_bytes"] = cold_start.last_size  # type: ignore[attr-defined]
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(MINIMAL_SERVER)
    res["sdk_minimal_cold_start_s"] = round(cold_start([py, fh.name], a.runs + 2), 3)
    res["cold_start_ratio"] = round(res["mcp_cold_start_s"] / res["sdk_minimal_cold_start_s"], 2)
    os.unlink(fh.name)

    case = Path(__file__).resolve().parents[2] / "shared" / "cases" / "verl-nan-gradnorm-microbatch" / "input.log"
    small = str(case) if case.exists() else str(Path(__file__).resolve().parents[1] / "tools" / "examples" / "verl_grpo_nan.log")
    res["cli_small_triage_s"] = round(statistics.median(timed([py, "-m", "grpo_debug.server.cli", "triage", small,
                                                                "--format", "json"])[0] for _ in range(a.runs)), 3)
    res["python_startup_s"] = round(statistics.median(timed([py, "-c", "pass"])[0] for _ in range(a.runs)), 3)

    print(json.dumps(res, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
    ok = all(res["planted_found"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
