#!/usr/bin/env python3
"""Benchmark: wall time of ``grpo-debug probe`` (the host probe, no --numerics) as a user runs it, a fresh
process each time. Target: median under 1.5 s on a CPU-only host of this class. Also reports whether the
probe imported torch (it must not: package versions come from package metadata).

Usage: python bench/bench_probe.py [--runs 7] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

TARGET_S = 1.5
PROBE = "import sys; from grpo_debug.server.cli import main; rc = main(['probe']); " \
        "print('TORCH_IMPORTED' if 'torch' in sys.modules else 'no torch', file=sys.stderr); sys.exit(rc)"


def run_once() -> tuple[float, bool, int]:
    """One cold ``grpo-debug probe``: (seconds, torch imported?, exit status)."""
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    return time.perf_counter() - t, "TORCH_IMPORTED" in p.stderr, p.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    a = ap.parse_args()
    run_once()  # warm the page cache and .pyc files: a user's second run, not a first install
    runs = [run_once() for _ in range(a.runs)]
    times = [r[0] for r in runs]
    med = statistics.median(times)
    out = {"runs": a.runs, "median_s": round(med, 3), "min_s": round(min(times), 3), "max_s": round(max(times), 3),
           "torch_imported": any(r[1] for r in runs), "exit_status": sorted({r[2] for r in runs}),
           "target_s": TARGET_S, "meets_target": med < TARGET_S}
    print(f"grpo-debug probe: median {med:.2f} s over {a.runs} runs (min {min(times):.2f}, max {max(times):.2f}); "
          f"target < {TARGET_S} s: {'met' if med < TARGET_S else 'MISSED'}; torch imported: {out['torch_imported']}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=2)
    return 0 if out["meets_target"] and not out["torch_imported"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
