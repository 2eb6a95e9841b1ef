#!/usr/bin/env python3
"""Benchmark: the size of the MCP `triage` answer as an agent receives it (issue 26: concise by default).

Each input (the shared cases, the corpus cases and healthy runs, and any ``--extra`` path such as a folder of
rank logs) is triaged through the SDK's in-process client; the characters of the text block(s) and of the
structured content (compact JSON) are recorded, and the median and largest printed with PASS/FAIL at
``--median`` (default 4000) and ``--max`` (default 8000) characters. ``--detail full`` measures the full answer.

Usage: python bench/bench_answer_size.py [--detail concise|full] [--extra PATH ...] [--json OUT] [--limit N]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASE_DIRS = (Path("/work/shared/cases"), ROOT / "tests/data/corpus/cases", ROOT / "tests/data/corpus/healthy")


def case_inputs(dirs=CASE_DIRS) -> list[Path]:
    """Every ``input*`` file of each case folder under ``dirs`` (one per case: the first by name)."""
    out = []
    for d in dirs:
        if not d.is_dir():
            continue
        for case in sorted(p for p in d.iterdir() if p.is_dir()):
            files = sorted(case.glob("input*"))
            if files:
                out.append(files[0])
    return out


async def measure(paths: list[Path], detail: str | None) -> list[dict]:
    """One row per path: text and structured characters of the triage answer, the top finding's symptom."""
    from mcp import Client

    from grpo_debug.server.app import build_server

    rows = []
    roots = sorted({str(p.parent if p.is_file() else p) for p in paths} | {"/work/shared", str(ROOT)})
    async with Client(build_server(allowed_roots=roots)) as c:
        for p in paths:
            args = {"path": str(p)}
            if detail:
                args["detail"] = detail
            r = await c.call_tool("triage", args)
            text = "".join(getattr(b, "text", "") for b in r.content)
            sc = r.structured_content or {}
            top = (sc.get("findings") or [{}])[0]
            rows.append({"input": str(p), "error": r.is_error, "text_chars": len(text),
                         "structured_chars": len(json.dumps(sc, separators=(",", ":"))),
                         "top": top.get("symptom")})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--detail", default=None, help="concise (default of the server) or full")
    ap.add_argument("--extra", nargs="*", default=[], help="more inputs (files or run folders)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N case inputs")
    ap.add_argument("--median", type=int, default=4000)
    ap.add_argument("--max", type=int, default=8000)
    ap.add_argument("--json", default=None, help="write the rows here")
    a = ap.parse_args(argv)
    os.environ.setdefault("GRPO_DEBUG_POOL", "thread")
    import anyio

    paths = case_inputs()
    paths = paths[: a.limit] if a.limit else paths
    paths += [Path(x) for x in a.extra]
    rows = anyio.run(measure, paths, a.detail)
    ok = True
    for key in ("text_chars", "structured_chars"):
        vals = [r[key] for r in rows if not r["error"]]
        med, big = statistics.median(vals), max(vals)
        worst = max(rows, key=lambda r: r[key])
        good = med <= a.median and big <= a.max
        ok &= good
        print(f"{key}: n={len(vals)} median={med:.0f} max={big} ({Path(worst['input']).parent.name}/"
              f"{Path(worst['input']).name}) {'PASS' if good else 'FAIL'}")
    for r in rows[len(rows) - len(a.extra):] if a.extra else []:
        print(f"extra {r['input']}: text={r['text_chars']} structured={r['structured_chars']} top={r['top']}")
    errors = [r["input"] for r in rows if r["error"]]
    if errors:
        print("errors:", *errors, sep="\n  ")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
