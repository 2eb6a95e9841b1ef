"""Fleet triage (issue 13 part 5): many runs or log files, one JSON line per run and a summary grouped by rule.

    grpo-debug triage logs/*.log --jobs 2            # a local process pool
    grpo-debug triage /tmp/ray/session_latest/logs --ray-address auto   # one task per Ray node

Each PATH is one run (a log, a store file or a run folder); a single folder given with ``--jobs`` or
``--ray-address`` is a folder of runs: its entries are the runs (:func:`expand`). Local: a
``multiprocessing`` pool of N workers, each loading the rule base (and compiling its patterns) once in its
initializer; a worker reads its file itself, only the compact result (:func:`compact`) comes back, in the order
runs finish. Ray: one task per alive node (``NodeAffinitySchedulingStrategy(node_id, soft=False)``), each
expanding the paths *on its node* (logs on node-local disks such as ``/tmp/ray/session_*/logs``), loading the
rules once and triaging every run there; only the compact results travel, never file bytes.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Iterable, Iterator

_RULES = None


def expand(paths: list[str]) -> list[str]:
    """The runs of the arguments (see the module docstring); missing paths are kept (their line says so)."""
    if len(paths) == 1 and os.path.isdir(paths[0]):
        d = paths[0]
        return [os.path.join(d, n) for n in sorted(os.listdir(d)) if not n.startswith(".")
                and not os.path.islink(os.path.join(d, n))]
    return list(paths)


def compact(path: str, result=None, error: str | None = None, seconds: float = 0.0) -> dict[str, Any]:
    """One run's JSON line: path, top symptom, findings (symptom, rule, title, confidence, first evidence)."""
    if result is None:
        return {"path": path, "ok": False, "error": error, "seconds": round(seconds, 3)}
    fs = [{"symptom": f.symptom, "rule": f.causes[0].rule_id if f.causes else None, "title": f.title,
           "confidence": f.confidence,
           "evidence": (f"{f.evidence[0].source + ' ' if f.evidence[0].source else ''}line {f.evidence[0].line}: "
                        f"{f.evidence[0].text[:160]}") if f.evidence else None} for f in result.findings[:5]]
    row = {"path": path, "ok": True, "top": fs[0]["symptom"] if fs else None, "findings": fs,
           "verdict": getattr(result, "verdict", None), "lines_read": result.coverage.lines_read,
           "seconds": round(seconds, 3)}
    if getattr(result, "runs", None):  # the path itself held several runs (tools/rundir/runs.py)
        for f, full in zip(fs, result.findings):
            f["run"] = full.run
        row["runs"] = [{"name": r.name, "verdict": r.verdict, "top": r.findings[0]["symptom"] if r.findings else None}
                       for r in result.runs[:50]]
    return row


def _init() -> None:
    """Worker initializer: the rule base loaded (and its regexes compiled) once per worker."""
    global _RULES
    from grpo_debug.skills.loader import default_rules

    _RULES = default_rules()


def triage_one(path: str) -> dict[str, Any]:
    """Triage one run in this process (rules of the worker); never raises."""
    from grpo_debug.tools.rundir.analyze import triage_any

    t0 = time.perf_counter()
    try:
        res = triage_any(path=path, rules=_RULES, max_findings=5)
        return compact(path, res, seconds=time.perf_counter() - t0)
    except Exception as e:  # noqa: BLE001 - one unreadable run is a line, not the end of the fleet
        return compact(path, error=f"{type(e).__name__}: {str(e)[:300]}", seconds=time.perf_counter() - t0)


def run_local(paths: list[str], jobs: int = 2) -> Iterator[dict[str, Any]]:
    """Compact results as runs finish, on ``jobs`` worker processes (in this process when jobs == 1)."""
    if jobs <= 1 or len(paths) <= 1:
        _init()
        yield from (triage_one(p) for p in paths)
        return
    import multiprocessing as mp

    fork = "fork" in mp.get_all_start_methods()
    if fork:  # warm here once: the forked workers inherit the rules, compiled patterns and imported engine
        _init()
        from grpo_debug.tools.triage import triage_text

        triage_text("step:1 - actor/grad_norm:1.0\nTraceback (most recent call last):\nRuntimeError: x\n", rules=_RULES)
    ctx = mp.get_context("fork" if fork else "spawn")
    with ctx.Pool(jobs, initializer=None if fork else _init) as pool:
        yield from pool.imap_unordered(triage_one, paths, chunksize=max(1, min(8, len(paths) // (jobs * 8))))


def _node_task(paths: list[str]) -> list[dict[str, Any]]:
    """On one Ray node: expand the paths there, load the rules once, triage every run found on this node."""
    import socket

    _init()
    host = socket.gethostname()
    out = []
    for p in expand(paths):
        if not os.path.exists(p):
            continue
        r = triage_one(p)
        r["node"] = host
        out.append(r)
    return out


def run_ray(paths: list[str], address: str, timeout: float = 600.0) -> Iterator[dict[str, Any]]:
    """Compact results from one task per alive Ray node (module docstring); a node that fails is one line."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    started = not ray.is_initialized()
    if started:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR", include_dashboard=False)
    try:
        task = ray.remote(num_cpus=1)(_node_task)
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        refs = {task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False))
                .remote(paths): n for n in nodes}
        pending = list(refs)
        deadline = time.monotonic() + timeout
        seen: set[str] = set()
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            for ref in ready:
                try:
                    for r in ray.get(ref):
                        seen.add(r["path"])
                        yield r
                except Exception as e:  # noqa: BLE001 - one node's failure is a line
                    yield {"path": None, "ok": False, "node": refs[ref].get("NodeManagerAddress"),
                           "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
        for ref in pending:
            ray.cancel(ref, force=True)
            yield {"path": None, "ok": False, "node": refs[ref].get("NodeManagerAddress"),
                   "error": f"no answer within {timeout:g} s"}
        for p in paths:
            if not pending and not any(x == p or x.startswith(p.rstrip(os.sep) + os.sep) for x in seen):
                yield {"path": p, "ok": False, "error": "not found on any node"}
    finally:
        if started:
            ray.shutdown()


_RANK = {"high": 3, "medium": 2, "low": 1}


def broken_first(rows: list[dict[str, Any]]) -> list[str]:
    """The paths of the runs with a medium/high finding, the most severe first (a high finding, then how many)."""
    def sev(r):
        cs = [_RANK.get(f.get("confidence"), 0) for f in r.get("findings") or []]
        return max(cs, default=0), sum(c >= 2 for c in cs)

    bad = [r for r in rows if r.get("ok") and sev(r)[0] >= 2]
    return [r["path"] for r in sorted(bad, key=lambda r: tuple(-x for x in sev(r)))]


def summarize(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """{runs, failed, seconds, broken (paths of the runs with a medium/high finding, most severe first), by_rule:
    {rule: {symptom, runs, paths (first 5)}}} over the runs' top findings."""
    rows = list(rows)
    by: dict[str, dict[str, Any]] = {}
    for r in rows:
        for f in (r.get("findings") or [])[:3]:
            key = f.get("rule") or f["symptom"]
            g = by.setdefault(key, {"symptom": f["symptom"], "runs": 0, "paths": []})
            g["runs"] += 1
            if len(g["paths"]) < 5:
                g["paths"].append(r["path"])
    return {"runs": len(rows), "failed": sum(not r.get("ok") for r in rows),
            "seconds": round(sum(r.get("seconds", 0) for r in rows), 3), "broken": broken_first(rows)[:50],
            "by_rule": dict(sorted(by.items(), key=lambda kv: -kv[1]["runs"]))}


def fleet(paths: list[str], jobs: int = 2, ray_address: str | None = None,
          emit: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Triage every run; ``emit`` gets one JSON line per run as it finishes; returns the summary."""
    runs = expand(paths) if ray_address is None else paths
    it = run_ray(runs, ray_address) if ray_address else run_local(runs, jobs)
    rows = []
    for r in it:
        rows.append(r)
        if emit:
            emit(json.dumps(r, ensure_ascii=False))
    return summarize(rows)
