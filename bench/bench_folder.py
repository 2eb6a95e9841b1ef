#!/usr/bin/env python3
"""Benchmark of ``grpo-debug triage DIR`` against the same logs concatenated into one file (issues 21 and 22).

Cases, generated here:
  - ``sweep``: bench/gen_big_cases.py's sweep (30 verl logs x 1.4 MB, run17 launched with an entropy bonus): the
    folder is split into 30 runs, each triaged on its own;
  - ``ranks60``, ``ranks199``: bench/gen_real_log.py logs of ~1.43 MB each as ``rank0.log`` .. ``rankN.log`` (the
    rank logs of one run, read as one run; each log has its planted OOM, NCCL timeout and grad-norm NaN).

For each case the CLI (``python -m grpo_debug.server.cli triage X --format json``) runs in a child process on the
folder and on the concatenation (folder and file alternate, ``--repeat`` times; the median is kept). Reported:
wall seconds, CPU seconds (user+sys of the child), peak RSS (the child's own ``VmHWM`` from /proc/self/status at
exit), the folder/file ratios of wall and CPU time (the baseline is the file measured in the same run), and
whether the planted answer is found (sweep: ``entropy_anomaly`` in run17.log; rank logs: ``nan_inf`` and
``cuda_oom``). Targets: folder <= 1.5x the file (CPU time, the figure a loaded machine does not move much; wall
printed beside it), peak RSS <= 512 MB.

Usage: python bench/bench_folder.py [--cases sweep,ranks60,ranks199] [--repeat 1] [--work DIR] [--json OUT]
Exit status 1 when a target is missed.
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
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

TIME_RATIO, RSS_MB = 1.5, 512
# the child: the CLI as a module, its own VmHWM written to a file at exit (sys.exit included)
_CHILD = ("import atexit, runpy, sys\n"
          "def _hwm(out=sys.argv[1]):\n"
          "    with open('/proc/self/status') as fh:\n"
          "        kb = next(int(ln.split()[1]) for ln in fh if ln.startswith('VmHWM:'))\n"
          "    with open(out, 'w') as fh:\n"
          "        fh.write(str(kb))\n"
          "atexit.register(_hwm)\n"
          "sys.argv = ['grpo-debug'] + sys.argv[2:]\n"
          "runpy.run_module('grpo_debug.server.cli', run_name='__main__')\n")


def measure(target: Path, timeout: float = 1800) -> dict:
    """One CLI triage of ``target`` in a child: wall and CPU seconds, peak RSS (MB), the JSON answer."""
    with tempfile.NamedTemporaryFile("r", suffix=".hwm", delete=False) as fh:
        hwm = fh.name
    cmd = [sys.executable, "-c", _CHILD, hwm, "triage", str(target), "--format", "json"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    wall = time.perf_counter() - t0
    try:
        with open(hwm) as fh:
            rss = int(fh.read() or 0) / 1024
    except (OSError, ValueError):
        rss = None
    finally:
        os.unlink(hwm)
    try:
        answer = json.loads(out)
    except ValueError:
        answer = None
    return {"wall_s": round(wall, 2), "cpu_s": None, "rss_mb": None if rss is None else round(rss, 1),
            "rc": proc.returncode, "answer": answer, "stderr": err.decode("utf-8", "replace")[-400:]}


def _timed(target: Path) -> dict:
    """:func:`measure` with the child's CPU time (RUSAGE_CHILDREN before and after)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = measure(target)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    r["cpu_s"] = round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2)
    return r


def make_sweep(work: Path) -> tuple[Path, Path]:
    """The sweep folder (gen_big_cases) and its logs concatenated in name order."""
    from gen_big_cases import main as gen

    folder = work / "sweep-30-one-entropy-bonus" / "input.run"
    if not folder.is_dir():
        gen([str(work), "--only", "sweep"])
    return folder, _concat(folder, work / "sweep.log")


def make_ranks(work: Path, n: int) -> tuple[Path, Path]:
    """``n`` gen_real_log logs of ~1.43 MB (seeds 0..n-1) as rank0.log .. rank{n-1}.log, and their concatenation."""
    from gen_real_log import generate

    folder = work / f"ranks{n}"
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        p = folder / f"rank{i}.log"
        if not p.exists():
            generate(str(p), mb=1.43, seed=i)
            os.remove(f"{p}.planted.json")
    return folder, _concat(folder, work / f"ranks{n}.log")


def _concat(folder: Path, out: Path) -> Path:
    if not out.exists():
        with open(out, "wb") as dst:
            for p in sorted(folder.glob("*.log")):
                with open(p, "rb") as src:
                    shutil.copyfileobj(src, dst)
    return out


def planted_found(case: str, answer: dict | None, folder: bool) -> bool | None:
    """The case's planted answer among the findings (module docstring); None where nothing is planted (the sweep's
    logs concatenated)."""
    if not answer:
        return False
    fs = answer.get("findings") or []
    if case == "sweep":
        if not folder:
            return None  # 30 runs' lines in one file are no one run: nothing planted to find there
        hit = [f for f in fs if f.get("symptom") == "entropy_anomaly"]
        return bool(hit) and (not folder or any(f.get("run") == "run17.log" for f in hit))
    return {"nan_inf", "cuda_oom"} <= {f.get("symptom") for f in fs}


def run_case(case: str, work: Path, repeat: int) -> dict:
    """Folder and file of ``case`` measured alternately ``repeat`` times; medians and ratios."""
    folder, file = make_sweep(work) if case == "sweep" else make_ranks(work, int(case[len("ranks"):]))
    runs: dict[str, list[dict]] = {"folder": [], "file": []}
    for _ in range(repeat):
        for kind, target in (("file", file), ("folder", folder)):
            runs[kind].append(_timed(target))
    row: dict = {"case": case, "bytes": file.stat().st_size, "logs": len(list(folder.glob("*.log")))}
    for kind, rs in runs.items():
        row[kind] = {k: statistics.median([r[k] for r in rs if r[k] is not None] or [0])
                     for k in ("wall_s", "cpu_s", "rss_mb")}
        row[kind]["rc"] = max(r["rc"] for r in rs)
        found = [planted_found(case, r["answer"], kind == "folder") for r in rs]
        row[kind]["planted_found"] = None if None in found else all(found)
        if row[kind]["rc"]:
            row[kind]["stderr"] = rs[-1]["stderr"]
    f, g = row["folder"], row["file"]
    row["cpu_ratio"] = round(f["cpu_s"] / g["cpu_s"], 2) if g["cpu_s"] else None
    row["wall_ratio"] = round(f["wall_s"] / g["wall_s"], 2) if g["wall_s"] else None
    row["ok"] = bool(row["cpu_ratio"] is not None and row["cpu_ratio"] <= TIME_RATIO and f["rss_mb"] <= RSS_MB
                     and g["rss_mb"] <= RSS_MB and f["planted_found"] and g["planted_found"] is not False and not f["rc"])
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="sweep,ranks60,ranks199")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--work", default=None, help="where the inputs are generated (kept; default a temporary folder)")
    ap.add_argument("--json", default=None, help="write the rows as JSON here")
    a = ap.parse_args(argv)
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="bench_folder_"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"{'case':10} {'logs':>4} {'MB':>6} | {'file s':>7} {'cpu':>6} {'MB':>6} | {'folder s':>8} {'cpu':>6} "
          f"{'MB':>6} | {'cpu x':>5} {'wall x':>6} planted ok")
    for case in a.cases.split(","):
        r = run_case(case, work, a.repeat)
        rows.append(r)
        f, g = r["folder"], r["file"]
        print(f"{case:10} {r['logs']:>4} {r['bytes'] / 1e6:6.1f} | {g['wall_s']:7.2f} {g['cpu_s']:6.2f} "
              f"{g['rss_mb']:6.0f} | {f['wall_s']:8.2f} {f['cpu_s']:6.2f} {f['rss_mb']:6.0f} | {r['cpu_ratio']:5.2f} "
              f"{r['wall_ratio']:6.2f} {str(f['planted_found'] and g['planted_found'] is not False):7} {r['ok']}", flush=True)
        for kind in ("file", "folder"):
            if r[kind].get("stderr"):
                print(f"  {kind} rc={r[kind]['rc']}: {r[kind]['stderr']}")
    print(f"targets: folder <= {TIME_RATIO}x the file (CPU), peak RSS <= {RSS_MB} MB; inputs in {work}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
