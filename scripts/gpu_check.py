#!/usr/bin/env python3
"""Run every GPU probe and every GPU-marked test on a machine with an NVIDIA GPU, and print a summary.

Usage (from the repository root, in the project's venv):  python scripts/gpu_check.py [--timeout 480]
Safe next to a training job: numerics run on a GPU only when it is free (probes/numerics.py gate);
use --force to override. Exit status 0 when every step ran, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def step(name: str, argv: list[str], timeout: float) -> dict:
    t0 = time.time()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = 124, "", f"timed out after {timeout:g} s"
    dt = time.time() - t0
    print(f"== {name}: rc={rc} in {dt:.1f} s", flush=True)
    return {"name": name, "rc": rc, "seconds": round(dt, 1), "stdout": out, "stderr": err}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=float, default=480)
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    py = sys.executable
    res = [step("probe (host, NVML)", [py, "-m", "grpo_debug.server.cli", "probe", "--format", "json"], 120),
           step("probe --numerics --device cuda", [py, "-m", "grpo_debug.server.cli", "probe", "--numerics", "--device",
                                                    "cuda", "--format", "json"] + (["--force"] if a.force else []), 240),
           step("pytest -m gpu", [py, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"], a.timeout)]
    print("\n=== SUMMARY")
    try:
        host = json.loads(res[0]["stdout"])
        f = host["facts"]
        print(f"GPUs: {f.get('probe.gpu_count')} {f.get('probe.gpu_names')}; driver {f.get('probe.driver_version')}; "
              f"torch {f.get('probe.torch_version')} (CUDA {f.get('probe.torch_cuda')}); bf16 {f.get('probe.gpu_bf16')}; "
              f"busy {f.get('probe.gpu_busy')}")
        print("findings:", [x["rule_id"] for fd in host["findings"] for x in fd["causes"]])
    except (ValueError, KeyError) as e:
        print("host probe output not readable:", e, res[0]["stderr"][-500:])
    try:
        num = json.loads(res[1]["stdout"])["host"]["numerics"]
        for dev, r in (num or {}).get("results", {}).items():
            print(f"numerics[{dev}]:", json.dumps(r)[:600])
        for dev, why in (num or {}).get("skipped", {}).items():
            print(f"numerics[{dev}] skipped: {why}")
    except (ValueError, KeyError, TypeError) as e:
        print("numerics output not readable:", e, res[1]["stderr"][-500:])
    print("pytest -m gpu:", (res[2]["stdout"].strip().splitlines() or ["(no output)"])[-1])
    return 0 if all(r["rc"] == 0 for r in res) else 1


if __name__ == "__main__":
    raise SystemExit(main())
