"""A folder of logs costs what its bytes cost as one file (issue 22; issue 21 "scale without hostility").

What made a folder dear, each pinned here: a sweep run's log kept a whole budget of lines (tools/rundir/runs.py
now gives it its share); every head signed through build_run even when the names decide (runs_split); each log
of a folder scanned for the chatter the previous one already showed (engine/chatter_carry.py); a few hundred
kept lines scanned regex by regex (events / rule regexes below the prefilter's size). Each test checks that the
cheaper way gives the same answer as the dear one. Inputs: bench/gen_real_log.py and bench/gen_big_cases.py.
"""
from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def _rank_logs(d: Path, n: int, mb: float = 0.2) -> Path:
    from gen_real_log import generate

    d.mkdir()
    for i in range(n):
        generate(str(d / f"rank{i}.log"), mb=mb, seed=i)
        os.remove(d / f"rank{i}.log.planted.json")
    return d


def _sweep(d: Path, n: int, mb: float, bad: int | None = None) -> Path:
    from gen_big_cases import _console_log, _series

    d.mkdir()
    for i in range(n):
        r = random.Random(1000 + i)
        ser = _series(r, 120, ecoef_climb=40 if i == bad else None)
        _console_log(d / f"run{i:02d}.log", 120, mb, r, ser, lr=["1e-06", "2e-06"][i % 2],
                     ecoef="0.05" if i == bad else "0", nodes=1, name=f"sweep_s{i}")
    return d


def _inventory(d: Path):
    from grpo_debug.tools import safefs
    from grpo_debug.tools.rundir.discover import Limits, find_inputs

    with safefs.anchored(str(d)):
        return find_inputs(str(d), Limits())


def _groups(inv, force=False):
    from grpo_debug.tools.rundir.runs_split import group_folder

    g = group_folder(inv, force=force)
    return None if g is None else [(x.name, [t.rel for t in x.texts]) for x in g]


def _full_decision(inv) -> bool:
    """runs_split's decision with every unit fully signed (the way it was always computed)."""
    from grpo_debug.tools.rundir import runs_split as S

    units = S._units(inv)
    for u in units:
        S._sign(u)
    runs = [u for u in units if u.looks_like_run]
    return len(runs) < 2 or S._one_run(runs)


def test_rank_named_logs_are_one_run_without_reading_a_head(tmp_path, monkeypatch):
    from grpo_debug.tools.rundir import runs_split as S

    d = _rank_logs(tmp_path / "ranks", 4)
    inv = _inventory(d)
    assert _full_decision(inv) is True  # the full signature says: one run
    read = []
    monkeypatch.setattr(S, "_head_text", lambda p, _f=S._head_text: read.append(p) or _f(p))
    assert _groups(inv) is None
    assert read == []  # decided by the names
    assert _groups(inv, force=True) is not None and read  # --split-runs still reads what each log is


def test_sweep_named_logs_are_split_from_their_launch_lines_alone(tmp_path, monkeypatch):
    from grpo_debug.tools.rundir import runs_split as S

    d = _sweep(tmp_path / "sweep", 4, 0.05)
    inv = _inventory(d)
    assert _full_decision(inv) is False
    monkeypatch.setattr(S, "_head_text", lambda p, _f=S._head_text: _f(p))
    built = []
    import grpo_debug.tools.run.build as B

    monkeypatch.setattr(B, "build_run", lambda *a, _f=B.build_run, **k: built.append(1) or _f(*a, **k))
    groups = _groups(inv)
    assert [g[0] for g in groups] == [f"run{i:02d}.log" for i in range(4)]
    assert built == []  # no head went through build_run: each log's launch line said it is a run


def test_a_side_log_is_still_signed_in_full(tmp_path):
    """A log with no launch line (a side log) needs its facts and records: the lazy signature reads them."""
    from grpo_debug.tools.rundir import runs_split as S

    d = _sweep(tmp_path / "sweep", 3, 0.05)
    (d / "notes.log").write_text("starting\nnothing to see\n")
    inv = _inventory(d)
    units = {u.name: u for u in S._units(inv)}
    for u in units.values():
        S._sign(u, full=False)
    assert units["run00.log"].launch and not units["run00.log"].signed
    assert units["notes.log"].signed and not units["notes.log"].looks_like_run
    assert [g[0] for g in _groups(inv)] == ["run00.log", "run01.log", "run02.log"]


def test_chatter_learned_in_one_log_is_not_scanned_for_in_the_next(tmp_path):
    from grpo_debug.skills.loader import default_rules
    from grpo_debug.tools.engine.chatter_carry import carry_chatter
    from grpo_debug.tools.engine.line_quota import keep_lines
    from grpo_debug.tools.streaming import read_streamed

    d = _rank_logs(tmp_path / "ranks", 2, mb=1.1)
    rb = default_rules()
    with keep_lines(200, 100, 2):
        alone = read_streamed(d / "rank1.log", rb)
        with carry_chatter():
            read_streamed(d / "rank0.log", rb)
            after = read_streamed(d / "rank1.log", rb)
    learned = [n for n in after.skipped if "earlier log of the folder" in n]
    assert learned and not [n for n in alone.skipped if "earlier log of the folder" in n], after.skipped[:5]
    assert len(after.lines) < len(alone.lines)
    # what the answer is made of is the same: every metric value, every event
    assert after.ctx.metrics.counts == alone.ctx.metrics.counts
    assert [(e.kind, e.lines, e.text) for e in after.ctx.events] == [(e.kind, e.lines, e.text) for e in alone.ctx.events]


def test_events_through_the_prefilter_equal_the_pattern_by_pattern_scan():
    from grpo_debug.tools.engine.events import extract_events
    from grpo_debug.tools.engine.normalize import normalize

    logs = sorted((ROOT / "tests" / "data").rglob("*.log"))[:60]
    assert logs
    n = 0
    for p in logs:
        text = p.read_text("utf-8", "replace")[:300_000]
        lines = normalize(text)
        a, b = extract_events(lines), extract_events(lines, min_bytes=0)
        assert [(e.kind, e.lines, e.text) for e in a] == [(e.kind, e.lines, e.text) for e in b], p
        n += len(a)
    assert n > 0


def _findings(res):
    return [(f.symptom, [c.rule_id for c in f.causes], f.confidence, [(e.source, e.line) for e in f.evidence],
             None if f.onset is None else (f.onset.step, f.onset.line, f.onset.file), getattr(f, "run", None))
            for f in res.findings]


@pytest.mark.slow
def test_a_big_sweep_shares_one_budget_and_keeps_its_answer(tmp_path, monkeypatch):
    """12 logs of 0.8 MB (over merge.SHARED_TOTAL_BYTES): each run's log keeps its share of one budget, the
    chatter is carried from log to log, and the findings are those of the whole-budget reading."""
    import contextlib

    import grpo_debug.tools.engine.chatter_carry as C
    from grpo_debug.tools.rundir import triage_any

    d = _sweep(tmp_path / "sweep", 12, 0.8, bad=7)
    t = time.process_time()
    now = triage_any(path=str(d))
    took = time.process_time() - t
    kept = [f for f in now.coverage.files if "streamed" in f]
    assert len(kept) == 12 and all(int(f.split("(")[1].split()[0]) <= 2000 for f in kept), kept[:2]
    assert any(f.symptom == "entropy_anomaly" and f.run == "run07.log" for f in now.findings)
    # the dear way: a whole budget per run, no chatter carried
    import grpo_debug.tools.rundir.runs as R

    monkeypatch.setattr(C, "carry_chatter", contextlib.nullcontext)
    orig = R._triage_groups
    monkeypatch.setattr(R, "_triage_groups", lambda g, root, fr, rb, lim, share, kw: orig(g, root, fr, rb, lim, None, kw))
    t = time.process_time()
    before = triage_any(path=str(d))
    took_before = time.process_time() - t
    assert _findings(now) == _findings(before)
    assert took < took_before, (took, took_before)
