#!/usr/bin/env python3
"""Benchmark: the multi-pattern prefilter engines against grep and against a plain Python regex loop, all over
the same file in one run (issue 15, "Without hyperscan").

Contenders, each over the whole file (read once into the page cache first):

- ``grep -cE`` with the engine's patterns as one POSIX ERE (bench/bench_triage.py's translation), byte-wise
  (``LC_ALL=C``, as bench_triage.py: in a UTF-8 locale GNU grep is 10-50x slower on a non-ASCII log);
- each importable engine (tools/engine/prefilter.py ``_Engine(kind=...)``), ``line_hits`` over 4 MiB chunks cut
  at a newline, with every pattern large-log streaming scans for (markers, event patterns, every rule regex);
- baseline (a): ``for line in fh: if rx.search(line): n += 1`` with rx = ``rb"Error|Traceback|step:|nan"``, the
  small regex a user would write;
- baseline (b): the same loop with all the engine's patterns as one alternation (``--b-mb``: over the first
  MiB only when given, its time scaled to the file, since it is slow).

Targets (issue 15): RE2 <= 6x grep; pure Python <= 2x baseline (a). When a pattern matches a quarter of the
file's lines or more (routine chatter a rule regex matches: streaming stops scanning for it), the pure-Python
engine is also timed without those patterns, for information. Printed as ratios measured in this run,
with PASS/FAIL, the load average, and the number of matching lines each contender reports (the engines give
lines where a pattern matches; grep -c counts lines too, over the relaxed patterns).

With ``--triage``, the whole triage CLI with the pure-Python engine forced (``GRPO_DEBUG_PREFILTER_ENGINE=python``,
bench_triage.triage_runs: wall time and peak RSS) is timed on the same file against baseline (a) (issue 15: pure
Python <= 2x a plain regex loop; bench_triage.py's ``triage_over_plain_loop`` divides by the same baseline (a)).

Usage: python bench/bench_prefilter.py [--log PATH | --mb 160] [--runs 1] [--b-mb 16] [--triage] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CHUNK = 4 * 2**20
USER_RX = rb"Error|Traceback|step:|nan"


def patterns() -> list[tuple[str, bool]]:
    """Every (pattern, caseless) pair large-log streaming scans for."""
    from grpo_debug.skills.loader import default_rules
    from grpo_debug.tools.engine.large_logs import build_patterns
    from grpo_debug.tools.triage import rule_patterns

    return build_patterns([p for p, _ in rule_patterns(default_rules())])


def run_engine(kind: str, path: str, pats: list[tuple[str, bool]]) -> tuple[float, int, list[str], dict[int, int]]:
    """(seconds, matching lines, unprefiltered patterns, lines per pattern id) of one engine over the file,
    chunk by chunk. The seconds are the engine's build, the reads and ``line_hits``; counting the lines per
    pattern (for the flood figure) is not timed."""
    from grpo_debug.tools.engine.prefilter import _Engine

    t = time.perf_counter()
    eng = _Engine(pats, kind=kind)
    n, carry, per, untimed = 0, b"", {}, 0.0

    def take(buf: bytes) -> int:
        nonlocal untimed
        starts, ids = eng.line_hits(buf)
        u = time.perf_counter()
        for pids in ids:
            for i in pids:
                per[i] = per.get(i, 0) + 1
        untimed += time.perf_counter() - u
        return len(starts)
    with open(path, "rb") as fh:
        while True:
            block = fh.read(CHUNK)
            buf = carry + block
            if not block:
                n += take(buf) if buf else 0
                break
            cut = buf.rfind(b"\n") + 1
            chunk, carry = buf[:cut], buf[cut:]
            n += take(chunk)
    return time.perf_counter() - t - untimed, n, list(eng.unprefiltered), per


def loop(path: str, rx: re.Pattern, max_bytes: int | None = None) -> tuple[float, int, int]:
    """(seconds, matching lines, bytes read) of the plain line loop."""
    t = time.perf_counter()
    n = read = 0
    with open(path, "rb") as fh:
        for line in fh:
            if rx.search(line):
                n += 1
            read += len(line)
            if max_bytes is not None and read >= max_bytes:
                break
    return time.perf_counter() - t, n, read


def all_in_one(pats: list[tuple[str, bool]]) -> re.Pattern:
    """Baseline (b)'s regex: the patterns (grep's relaxed forms, so group numbers need not shift) as one
    alternation, caseless ones in (?i:...)."""
    from grpo_debug.tools.engine.prefilter import _relax

    parts = []
    for p, ci in pats:
        q = _relax(p)
        if q is None:
            continue
        try:
            re.compile(q)
        except re.error:
            continue
        parts.append(f"(?i:{q})" if ci or "(?i" in p else f"(?:{q})")
    return re.compile("|".join(parts).encode("utf-8"))


def _median(fn, runs: int):
    res = [fn() for _ in range(runs)]
    return statistics.median(r[0] for r in res), res[-1]


def _verdict(ratio: float, limit: float) -> str:
    return f"{ratio:.2f}x (target <= {limit:g}x: {'PASS' if ratio <= limit else 'FAIL'})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log", help="the log to scan (default: generate a realistic one with bench/gen_real_log.py)")
    ap.add_argument("--mb", type=float, default=160, help="size of the generated log (MiB)")
    ap.add_argument("--runs", type=int, default=1, help="runs per contender (median)")
    ap.add_argument("--b-mb", type=float, default=None, help="baseline (b) over the first MiB only, scaled")
    ap.add_argument("--triage", action="store_true", help="also the triage CLI with the pure-Python engine vs (a)")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    log = a.log
    if not log:
        from gen_real_log import generate
        log = f"/tmp/grpo_debug_bench_prefilter_{int(a.mb)}mb.log"
        if not Path(log).exists():
            print(f"generating {a.mb:g} MiB realistic log at {log} ...", flush=True)
            generate(log, a.mb)
    size = os.path.getsize(log)
    pats = patterns()
    from bench_triage import engine_patterns, grep_pattern
    from grpo_debug.tools.engine.prefilter import installed_engines

    subprocess.run(["cat", log], stdout=subprocess.DEVNULL, check=False)  # page cache warm for everyone
    res: dict = {"log": log, "log_bytes": size, "patterns": len(pats), "engines_installed": installed_engines()}

    def grep():
        t = time.perf_counter()
        p = subprocess.run(["grep", "-cE", grep_pattern(engine_patterns()), log], capture_output=True, text=True,
                           env={**os.environ, "LC_ALL": "C"})  # byte-wise, as bench_triage.py (a UTF-8 locale: 10-50x slower)
        return time.perf_counter() - t, int(p.stdout.strip() or 0)
    res["grep_s"], (_, res["grep_lines"]) = _median(grep, a.runs)
    res["baseline_a_s"], (_, res["baseline_a_lines"], _) = _median(lambda: loop(log, re.compile(USER_RX)), a.runs)
    per: dict[int, int] = {}
    for kind in installed_engines():
        t, (_, n, unpre, per) = _median(lambda: run_engine(kind, log, pats), a.runs)
        res[f"{kind}_s"], res[f"{kind}_lines"], res[f"{kind}_unprefiltered"] = round(t, 3), n, len(unpre)
    # what streaming does with a pattern that matches routine chatter (large_logs: no longer scanned for):
    # the pure-Python engine again without the patterns that match a quarter of the file's lines or more
    with open(log, "rb") as fh:
        total = sum(block.count(b"\n") for block in iter(lambda: fh.read(CHUNK), b""))
    flood = {i for i, c in per.items() if c * 4 >= total}
    res["flood_patterns"] = [pats[i][0] for i in sorted(flood)]
    if flood:
        rest = [pt for i, pt in enumerate(pats) if i not in flood]
        t, (_, n, _, _) = _median(lambda: run_engine("python", log, rest), a.runs)
        res["python_without_flood_s"], res["python_without_flood_lines"] = round(t, 3), n
    b_bytes = int(a.b_mb * 2**20) if a.b_mb else None
    t_b, n_b, read_b = loop(log, all_in_one(pats), b_bytes)
    res["baseline_b_s"] = round(t_b * size / max(read_b, 1), 3)
    res["baseline_b_measured_bytes"] = read_b
    if a.triage:
        from bench_triage import triage_runs
        tr = triage_runs(log, a.runs, "python")
        res["triage_python_s"], res["triage_python_rss_mb"] = tr["triage_s"], tr["peak_rss_mb"]
    res["load_average"] = os.getloadavg()
    for k in ("grep_s", "baseline_a_s"):
        res[k] = round(res[k], 3)
    _report(res)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
    ok = ("re2_s" not in res or res["re2_s"] <= 6 * res["grep_s"]) and res["python_s"] <= 2 * res["baseline_a_s"]
    return 0 if ok else 1


def _report(res: dict) -> None:
    mb = res["log_bytes"] / 2**20
    print(f"log {res['log']} ({mb:.0f} MiB), {res['patterns']} patterns, load average "
          + " ".join(f"{x:.2f}" for x in res["load_average"]))
    rows = [("grep -cE", res["grep_s"], res["grep_lines"]),
            ("baseline (a) user regex loop", res["baseline_a_s"], res["baseline_a_lines"])]
    rows += [(f"engine {k}", res[f"{k}_s"], res[f"{k}_lines"]) for k in res["engines_installed"]]
    scaled = "" if res["baseline_b_measured_bytes"] >= res["log_bytes"] else \
        f" (first {res['baseline_b_measured_bytes'] / 2**20:.0f} MiB, scaled)"
    rows.append(("baseline (b) all-patterns loop" + scaled, res["baseline_b_s"], None))
    for name, s, n in rows:
        print(f"  {name:<48} {s:8.2f} s  {mb / s:7.1f} MiB/s" + (f"  {n} lines" if n is not None else ""))
    if "re2_s" in res:
        print("  RE2 / grep:          " + _verdict(res["re2_s"] / res["grep_s"], 6))
    if "hyperscan_s" in res:
        print(f"  hyperscan / grep:    {res['hyperscan_s'] / res['grep_s']:.2f}x")
    print("  python / baseline a: " + _verdict(res["python_s"] / res["baseline_a_s"], 2))
    if "python_without_flood_s" in res:
        print(f"  python without the {len(res['flood_patterns'])} pattern(s) matching >= 1/4 of the lines (as streaming "
              f"sets chatter patterns aside: {'; '.join(p[:40] for p in res['flood_patterns'])}): "
              f"{res['python_without_flood_s']:.2f} s, {res['python_without_flood_s'] / res['baseline_a_s']:.2f}x baseline a")
    print(f"  python / baseline b: {res['python_s'] / res['baseline_b_s']:.2f}x")
    if "triage_python_s" in res:
        print(f"  triage CLI, python engine: {res['triage_python_s']:.2f} s, peak RSS {res['triage_python_rss_mb']} MB; "
              "/ baseline a: " + _verdict(res["triage_python_s"] / res["baseline_a_s"], 2))


if __name__ == "__main__":
    raise SystemExit(main())
