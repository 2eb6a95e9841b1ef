#!/usr/bin/env python3
"""Calibration of triage confidence: is a ``high`` finding right >= 95% of the time, a ``medium`` one >= 70%?

Runs the engine in process (``tools.rundir.analyze.triage_any``, the entry ``grpo-debug triage`` uses) over every
case folder (one ``input*`` file or folder plus ``expected.yaml``) and every healthy folder, and counts EVERY
finding at high and at medium confidence (not only the first three):

- on a case, a finding is right when its symptom is the expected ``symptom``, one of ``also_accepted``, the
  expected ``chain: root`` or one of ``chain: consequences`` (a consequence the expected chain lists is right);
- on a healthy input (expected symptom none) every medium/high finding is wrong.

It also reports the verdict's accuracy: on a healthy input ``healthy`` or ``cannot_tell`` is right (not alarmed),
``not_healthy`` is wrong; on a case ``not_healthy`` is right. ``--prefixes`` triages each healthy log (not a
config or script) cut at 10 points (10%, 20%, ... 90% of its lines, and whole) and counts the prefixes that get a
medium/high finding: every prefix of a healthy run is a short paste of a healthy run too.

``--windows`` does the same with tails (from 10%, 20%, ... to the end) and short windows (a tenth of the lines,
at least 3): a paste often starts mid-run.

Usage: ``python scripts/calibrate.py [--prefixes] [--windows] [--json FILE] [ROOT ...]``.
Roots default to tests/data/corpus*/cases, tests/data/cases_heldout, tests/data/cases_config_heldout,
/work/shared/cases (cases) and tests/data/corpus*/healthy, /work/shared/healthy (healthy). Deterministic: folders
sorted, one process, no randomness. Exit status 0 (it measures; tests/test_calibration.py asserts).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path("/work/shared")
LEVELS = ("high", "medium")
CONFIG_EXT = (".yaml", ".yml", ".json", ".sh", ".toml", ".py", ".cfg", ".ini")
MAX_FINDINGS = 200  # all findings, not the CLI's first 10


def default_roots() -> tuple[list[Path], list[Path]]:
    """(case roots, healthy roots) that exist on this machine."""
    data = REPO / "tests" / "data"
    cases = sorted(data.glob("corpus*/cases")) + [data / "cases_heldout", data / "cases_config_heldout",
                                                  SHARED / "cases"]
    healthy = sorted(data.glob("corpus*/healthy")) + [SHARED / "healthy"]
    return [p for p in cases if p.is_dir()], [p for p in healthy if p.is_dir()]


def folders(root: Path) -> list[Path]:
    """Folders under ``root`` holding an expected.yaml and an ``input*`` entry, sorted by name."""
    return sorted(d for d in root.iterdir() if d.is_dir() and (d / "expected.yaml").is_file() and input_of(d))


def input_of(case: Path) -> Path | None:
    """The case's input: the first entry named ``input*`` (a file, or a folder for a run-folder case)."""
    return next(iter(sorted(p for p in case.iterdir() if p.name.startswith("input"))), None)


def accepted(exp: dict) -> set[str]:
    """Symptom codes counted right for a case's expected.yaml: symptom, also_accepted, chain root/consequences."""
    codes = {exp.get("symptom"), *(exp.get("also_accepted") or [])}
    chain = exp.get("chain") or {}
    if isinstance(chain, dict):
        codes.add(chain.get("root"))
        codes.update(chain.get("consequences") or [])
    codes.discard(None)
    codes.discard("none")
    return codes


def run_engine(text: str | None = None, path: Path | None = None):
    """One in-process triage (the CLI's entry) with every finding kept; raises what the engine raises."""
    from grpo_debug.tools.rundir.analyze import triage_any

    return triage_any(text=text, path=None if path is None else str(path), max_findings=MAX_FINDINGS)


def rule_of(f) -> str:
    """The finding's first cause's rule id, or '-' (a detector-only finding)."""
    return f.causes[0].rule_id if f.causes else "-"


def judge(name: str, res, codes: set[str], healthy: bool) -> dict:
    """One input's row: its findings at high/medium, each right or wrong, and its verdict judged."""
    rows = []
    fs = list(res.findings)
    for f in fs:
        if f.confidence not in LEVELS:
            continue
        right = (not healthy) and f.symptom in codes
        rows.append(dict(case=name, rule=rule_of(f), symptom=f.symptom, confidence=f.confidence, right=right,
                         run=f.run, after_right=not right and not healthy and _after_right(f, fs, codes)))
    verdict = getattr(res, "verdict", None)
    ok = verdict in ("healthy", "cannot_tell") if healthy else verdict == "not_healthy"
    return dict(case=name, healthy=healthy, verdict=verdict, verdict_ok=ok, findings=rows,
                want=sorted(codes) if not healthy else ["none"])


def _after_right(f, fs: list, codes: set[str]) -> bool:
    """Whether the engine's own chain (``consequence_of``, an index into ``fs``) leads from ``f`` to a finding of an
    accepted symptom: a consequence the expected chain does not list. Still counted wrong; reported apart."""
    seen = set()
    while f.consequence_of is not None and f.consequence_of not in seen and 0 <= f.consequence_of < len(fs):
        seen.add(f.consequence_of)
        f = fs[f.consequence_of]
        if f.symptom in codes:
            return True
    return False


def measure(case_roots: list[Path], healthy_roots: list[Path], prefixes: bool, windows: bool = False) -> dict:
    """Run everything and return the report (the JSON ``--json`` writes); ``prefixes``/``windows``: also the
    pieces of healthy logs (:func:`prefix_report`)."""
    import yaml

    t0 = time.monotonic()
    inputs, errors = [], []
    for roots, healthy in ((case_roots, False), (healthy_roots, True)):
        for root in roots:
            for d in folders(root):
                name = f"{_short(root)}/{d.name}"
                exp = yaml.safe_load((d / "expected.yaml").read_text()) or {}
                try:
                    res = run_engine(path=input_of(d))
                except Exception as e:  # noqa: BLE001 - a crash is reported, never hidden
                    errors.append(dict(case=name, error=f"{type(e).__name__}: {e}"[:200]))
                    continue
                inputs.append(judge(name, res, set() if healthy else accepted(exp), healthy))
    report = summarise(inputs)
    report["errors"] = errors
    if prefixes:
        report["prefixes"] = prefix_report(healthy_roots)
    if windows:
        report["windows"] = {m: prefix_report(healthy_roots, mode=m) for m in ("suffix", "window")}
    report["seconds"] = round(time.monotonic() - t0, 1)
    return report


def _short(root: Path) -> str:
    parts = root.parts
    return "shared/" + root.name if str(root).startswith(str(SHARED)) else "/".join(parts[-2:])


def summarise(inputs: list[dict]) -> dict:
    """Per level n/right/precision; wrong findings grouped by rule id; verdict accuracy on healthy inputs and cases."""
    levels = {}
    for lv in LEVELS:
        fs = [f for i in inputs for f in i["findings"] if f["confidence"] == lv]
        right = sum(f["right"] for f in fs)
        levels[lv] = dict(n=len(fs), right=right, precision=round(right / len(fs), 3) if fs else None)
    wrong = defaultdict(list)
    for i in inputs:
        for f in i["findings"]:
            if not f["right"]:
                wrong[f["rule"]].append(dict(case=f["case"], symptom=f["symptom"], confidence=f["confidence"],
                                             want=i["want"], after_right=f["after_right"]))
    verdicts = {}
    for key, healthy in (("healthy", True), ("cases", False)):
        xs = [i for i in inputs if i["healthy"] == healthy]
        ok = sum(i["verdict_ok"] for i in xs)
        verdicts[key] = dict(n=len(xs), right=ok, accuracy=round(ok / len(xs), 3) if xs else None)
    loud_healthy = sorted(i["case"] for i in inputs if i["healthy"] and i["findings"])
    by_root: dict = defaultdict(lambda: {lv: [0, 0] for lv in LEVELS})
    for i in inputs:
        for f in i["findings"]:
            c = by_root[i["case"].rsplit("/", 1)[0]][f["confidence"]]
            c[0], c[1] = c[0] + 1, c[1] + f["right"]
    return dict(levels=levels, wrong_by_rule=dict(sorted(wrong.items(), key=lambda kv: (-len(kv[1]), kv[0]))),
                verdicts=verdicts, healthy_alarmed=loud_healthy, inputs=inputs,
                by_root={r: {lv: dict(n=v[lv][0], right=v[lv][1]) for lv in LEVELS} for r, v in sorted(by_root.items())})


def _cuts(lines: list[str], mode: str, cuts: int) -> list[tuple[int, int]]:
    """(start, end) line ranges: ``prefix`` the first k/cuts of the lines (k = 1..cuts), ``suffix`` the last
    ones (from k/cuts, k = 1..cuts-1: a log's tail), ``window`` a tenth (at least 3 lines) ending at k/cuts."""
    n, out = len(lines), []
    for k in range(1, cuts + 1):
        a = max(1, round(n * k / cuts))
        if mode == "prefix":
            out.append((0, a))
        elif mode == "suffix" and k < cuts:
            out.append((a, n))
        elif mode == "window":
            out.append((max(0, a - max(3, n // cuts)), a))
    return [r for r in dict.fromkeys(out) if r[1] > r[0]]


def prefix_report(healthy_roots: list[Path], cuts: int = 10, mode: str = "prefix") -> dict:
    """Each healthy log (not a config or script) cut at ``cuts`` points (:func:`_cuts`; ``mode`` prefix, suffix
    or window) and triaged as a paste: the pieces that get a medium/high finding, with what they got."""
    n, alarmed = 0, []
    for root in healthy_roots:
        for d in folders(root):
            p = input_of(d)
            if p is None or not p.is_file() or p.suffix.lower() in CONFIG_EXT:
                continue
            lines = p.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
            for a, b in _cuts(lines, mode, cuts):
                if not "".join(lines[a:b]).strip():
                    continue
                n += 1
                res = run_engine(text="".join(lines[a:b]))
                loud = [(rule_of(f), f.symptom, f.confidence) for f in res.findings if f.confidence in LEVELS]
                if loud:
                    alarmed.append(dict(case=f"{_short(root)}/{d.name}", lines=f"{a + 1}-{b}", of=len(lines),
                                        found=loud))
    return dict(n=n, alarmed=len(alarmed), which=alarmed)


def table(rep: dict) -> str:
    """The report as text for a person."""
    out = ["level   n    right  precision"]
    for lv, r in rep["levels"].items():
        out.append(f"{lv:7s} {r['n']:<4d} {r['right']:<6d} {r['precision']}")
    for root, v in rep["by_root"].items():
        out.append(f"  {root:32s} " + "  ".join(f"{lv} {v[lv]['right']}/{v[lv]['n']}" for lv in LEVELS))
    for k, v in rep["verdicts"].items():
        out.append(f"verdict on {k}: {v['right']}/{v['n']} ({v['accuracy']})")
    out.append(f"healthy inputs with a medium/high finding: {len(rep['healthy_alarmed'])} {rep['healthy_alarmed']}")
    pieces = [("prefixes", rep.get("prefixes"))] + list((rep.get("windows") or {}).items())
    for what, pr in pieces:
        if pr is None:
            continue
        out.append(f"healthy {what} with a medium/high finding: {pr['alarmed']}/{pr['n']}")
        for w in pr["which"]:
            out.append(f"  {w['case']} [lines {w['lines']} of {w['of']}] {w['found']}")
    out.append("wrong medium/high findings by rule:")
    for rule, ws in rep["wrong_by_rule"].items():
        out.append(f"  {rule} ({len(ws)})")
        for w in ws:
            tag = "  (engine chains it after a right finding)" if w["after_right"] else ""
            out.append(f"      {w['confidence']:6s} {w['symptom']:24s} {w['case']}  want={','.join(w['want'])}{tag}")
    for e in rep["errors"]:
        out.append(f"ERROR {e['case']}: {e['error']}")
    out.append(f"({rep['seconds']} s)")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("roots", nargs="*", help="case or healthy roots (a root named 'healthy' is healthy)")
    ap.add_argument("--prefixes", action="store_true", help="also triage 10 prefixes of each healthy log")
    ap.add_argument("--windows", action="store_true", help="also triage tails and short windows of each healthy log")
    ap.add_argument("--json", metavar="FILE", help="write the full report as JSON")
    a = ap.parse_args(argv)
    if a.roots:
        roots = [Path(r) for r in a.roots]
        cases, healthy = [r for r in roots if r.name != "healthy"], [r for r in roots if r.name == "healthy"]
    else:
        cases, healthy = default_roots()
    rep = measure(cases, healthy, a.prefixes, windows=a.windows)
    print(table(rep))
    if a.json:
        Path(a.json).write_text(json.dumps(rep, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
