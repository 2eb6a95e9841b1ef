"""Benchmark ``grpo-debug watch``: a realistic verl log (bench/gen_real_log.py: an OOM traceback, an NCCL timeout, a
late grad-norm climb and a NaN planted at known lines) written at a set rate while the watcher follows it.

Reports, per planted line: seconds from the write of the deciding line to the watcher's alert (its JSON line
read from the watcher's stdout); the watcher's CPU share of one core (resource.getrusage of the child: user +
system seconds over the wall time it ran), bytes it read per byte written (its own ``bytes_read`` in the last
status line over the file's size), and its peak RSS (VmHWM, sampled from /proc).

Usage: python bench/bench_watch.py [--mb 16] [--rate-mb 1.0] [--interval 10] [--healthy] [--profile FILE]

Measured at 1 MiB/s on the shared 2-core box (load 5-6), before -> after the urgent prefilter and the evaluation
back-off (commit 74b3989 -> now): ``--mb 16`` (plants) 0.147 -> 0.093 of a core, alerts 2.1-3.8 s -> 1.1-1.4 s
after the deciding line, 4 evaluations either way; ``--mb 200 --healthy`` (69 MiB, the steady state)
0.076 -> 0.027 of a core, 8 -> 5 evaluations; 1.0 byte read per byte, RSS 91 MB.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _hwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next(int(ln.split()[1]) for ln in fh if ln.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return 0


def _cpu(pid: int) -> float:
    """User + system CPU seconds of a running process (/proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def run(mb: float, rate: float, interval: float, profile: str | None = None, healthy: bool = False) -> dict:
    """One benchmark run (module docstring); ``healthy``: only the part of the log before its first planted
    line is written (the steady state: chatter and metric lines, no event), and no alert is expected."""
    from gen_real_log import generate

    tmp = tempfile.mkdtemp(prefix="bench-watch-")
    src, log = os.path.join(tmp, "source.log"), os.path.join(tmp, "train.log")
    generate(src, mb=mb)
    planted = json.load(open(src + ".planted.json"))
    data = open(src, "rb").read()
    open(log, "wb").close()
    starts = [0]  # computed before the watcher starts: it ends after --idle 3 s without new bytes
    for ln in data.split(b"\n")[:-1]:
        starts.append(starts[-1] + len(ln) + 1)
    marks = {k: starts[v - 1] for k, v in planted.items() if k.endswith("_line")}  # byte where each planted line starts
    if healthy:
        data, marks = data[:min(marks.values())], {}
    prof = ["-m", "cProfile", "-o", profile] if profile else []
    p = subprocess.Popen([sys.executable, *prof, "-m", "grpo_debug.server.cli", "watch", log, "--format", "jsonl",
                          "--status-every", "1", "--interval", str(interval), "--until-eof", "--idle", "3"],
                         stdout=subprocess.PIPE, text=True, cwd=os.path.dirname(HERE))
    events: list[tuple[float, dict]] = []
    reader = threading.Thread(target=lambda: [events.append((time.monotonic(), json.loads(x))) for x in p.stdout],
                              daemon=True)
    reader.start()
    time.sleep(3.0)  # start-up: rules loaded, the (empty) file opened
    written: dict[str, float] = {}
    cpu0 = _cpu(p.pid)
    t0, block = time.monotonic(), max(4096, int(rate * 2**20 / 20))  # 20 writes a second
    with open(log, "ab") as fh:
        for off in range(0, len(data), block):
            fh.write(data[off:off + block])
            fh.flush()
            now = time.monotonic()
            for k, b in marks.items():
                if k not in written and b < off + block:
                    written[k] = now
            time.sleep(max(0.0, t0 + (off + block) / (rate * 2**20) - time.monotonic()))
    wrote_s = time.monotonic() - t0
    cpu_writing = _cpu(p.pid) - cpu0
    hwm = 0
    while p.poll() is None:
        hwm = max(hwm, _hwm(p.pid))
        time.sleep(0.2)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    reader.join(5)
    alerts = [(t, e) for t, e in events if e["event"] == "alert"]
    status = [e for _, e in events if e["event"] == "status"]
    first = {}
    for t, e in alerts:
        first.setdefault(e["symptom"], (t, e))
    want = {"nan_line": "nan_inf", "oom_line": "cuda_oom", "nccl_line": "collective_hang", "climb_line": "grad_norm_spike"}
    latency = {k: (round(first[s][0] - written[k], 2), first[s][1]["onset_line"], first[s][1]["onset_step"])
               if s in first and k in written else None for k, s in want.items()}
    size = os.path.getsize(log)
    shutil.rmtree(tmp, ignore_errors=True)
    return {"mb": round(size / 2**20, 2), "rate_mb_s": rate, "write_s": round(wrote_s, 1),
            "alert_latency_s (s, onset line, onset step)": latency, "planted": {k: planted[k] for k in marks},
            "alerts": sorted(first), "updates": sum(e["event"] == "update" for _, e in events), "cpu_share_of_one_core_while_writing": round(cpu_writing / wrote_s, 3),
            "cpu_s_total_with_startup": round(ru.ru_utime + ru.ru_stime, 2),
            "bytes_read_per_byte": round(status[-1]["bytes_read"] / size, 3) if status else None,
            "evaluations": status[-1]["evaluations"] if status else None,
            "evaluation_s": status[-1]["evaluation_s"] if status else None, "peak_rss_mb": round(hwm / 1024, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=16, help="log size in MiB (default 16)")
    ap.add_argument("--rate-mb", type=float, default=1.0, help="write rate in MiB/s (default 1)")
    ap.add_argument("--interval", type=float, default=10.0, help="the watcher's --interval (default 10)")
    ap.add_argument("--profile", metavar="FILE", help="run the watcher under cProfile, its stats written to FILE "
                                                        "(read with python -m pstats FILE)")
    ap.add_argument("--healthy", action="store_true", help="write only the log's part before its first planted "
                                                           "line (the steady state; no alert expected)")
    a = ap.parse_args(argv)
    print(json.dumps(run(a.mb, a.rate_mb, a.interval, a.profile, a.healthy), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
