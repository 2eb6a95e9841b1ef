"""Several runs in one input (issue 23 item 4): tools/rundir/runs.py, runs_split.py, runs_compare.py.

Pastes and folders are generated here: verl console lines (``step:N - key:value``) with noisy series, a launch
line per run; rank logs from bench/gen_real_log.py.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo_debug.tools.rundir import triage_any
from grpo_debug.tools.rundir.runs_split import split_text

ROOT = Path(__file__).resolve().parents[1]


def verl_run(steps: int = 40, seed: int = 0, gn: float = 0.3, lr: float = 1e-6, ecoef: float = 0.001,
             entropy_climbs: bool = False, prefix: str = "", launch: bool = True, nan_from: int | None = None,
             name: str | None = None) -> list[str]:
    """A verl GRPO run's console lines: its launch line, then one metric line per step (noise ~15% on grad norm)."""
    rng = random.Random(seed)
    out = []
    if launch:
        out.append(prefix + "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
                   "data.train_files=/data/gsm8k/train.parquet data.train_batch_size=256 "
                   f"actor_rollout_ref.actor.optim.lr={lr} actor_rollout_ref.actor.entropy_coeff={ecoef} "
                   "actor_rollout_ref.rollout.n=8 actor_rollout_ref.actor.ppo_mini_batch_size=64 "
                   f"trainer.n_gpus_per_node=8 trainer.nnodes=1 trainer.experiment_name={name or f'exp_{seed}'}")
    ent = 0.9
    for s in range(1, steps + 1):
        g = gn * (1 + 0.15 * rng.gauss(0, 1))
        ent = ent * 1.12 if entropy_climbs and s > steps // 3 else 0.9 * (1 + 0.03 * rng.gauss(0, 1))
        gtxt = "nan" if nan_from is not None and s >= nan_from else f"{g:.4f}"
        out.append(prefix + f"step:{s} - actor/grad_norm:{gtxt} - actor/entropy:{ent:.4f} - "
                   f"actor/pg_loss:{0.01 * rng.gauss(0, 1):.4f} - actor/kl_loss:{0.001 * abs(rng.gauss(1, 0.2)):.5f} - "
                   f"critic/score/mean:{0.3 + 0.01 * s + 0.02 * rng.gauss(0, 1):.4f} - "
                   f"response_length/mean:{300 + 20 * rng.gauss(0, 1):.1f}")
    return out


def _ab_paste() -> str:
    a = verl_run(seed=1, prefix="[A] ")
    b = verl_run(seed=2, gn=60.0, lr=1e-4, prefix="[B] ")
    return "two runs, same script, other commit\n" + "\n".join(x for pair in zip(a, b) for x in pair) + "\n"


def test_ab_paste_is_two_runs_and_the_200x_grad_norm_gap_flags_b():
    text = _ab_paste()
    lines = text.splitlines()
    res = triage_any(text=text)
    assert [r.name for r in res.runs] == ["B", "A"]  # broken first
    gap = next(f for f in res.findings if f.causes and f.causes[0].rule_id == "runs:outlier")
    assert res.findings[0] is gap and gap.run == "B" and gap.symptom == "grad_norm_spike"
    assert gap.confidence == "medium" and "grad_norm" in gap.title and "x" in gap.title
    assert "actor_rollout_ref.actor.optim.lr" in gap.fix and "1e-06" in gap.fix  # the config difference named
    cited = [e.line for e in gap.evidence]
    assert lines[cited[0] - 1].startswith("[B] step:")  # the paste's own line numbers
    assert lines[cited[1] - 1].startswith("[A] step:")
    assert res.runs[0].verdict in ("not_healthy", None) and res.runs[0].config["lr"] == 1e-4
    assert not any(f.run == "A" and f.confidence != "low" for f in res.findings)
    assert res.verdict == "not_healthy"
    merged = triage_any(text=text, runs="one")  # --one-run: one series, no runs, no gap
    assert merged.runs == [] and not any(f.run for f in merged.findings)


def test_two_runs_of_the_same_scale_are_no_outlier():
    a = verl_run(seed=1, prefix="[A] ")
    b = verl_run(seed=2, gn=0.5, prefix="[B] ")  # 1.7x apart: seeds/lr neighbours, not an outlier
    res = triage_any(text="\n".join(a + b))
    assert len(res.runs) == 2
    assert not any(f.causes and f.causes[0].rule_id.startswith("runs:") for f in res.findings)
    assert not any(f.confidence != "low" for f in res.findings)


def test_header_split_and_log_levels_are_not_labels():
    text = "\n".join(["Run A (commit 3f2a91c):", *verl_run(seed=3), "", "Run B (commit 77be0d2):",
                      *verl_run(seed=4, gn=40.0)])
    segs = split_text(text)
    assert [s.name for s in segs] == ["A", "B"] and segs[1].nos[0] == 44
    levels = "\n".join(f"[{lv}] step:{i} - loss:0.1" for i in range(6) for lv in "IW")
    assert split_text(levels) is None


def test_same_script_other_commit_restart_is_split_and_the_config_difference_named():
    run1 = verl_run(steps=12, seed=5, nan_from=6)
    run2 = verl_run(steps=12, seed=6, launch=False)
    text = "\n".join(run1 + ["", "# same script, only trainer.n_gpus_per_node=1"] + run2)
    res = triage_any(text=text)
    assert [r.name for r in res.runs] == ["run 1", "run 2"]
    assert res.findings[0].run == "run 1" and res.findings[0].symptom == "nan_inf"
    diff = next(f for f in res.findings if f.causes and f.causes[0].rule_id == "runs:config_difference")
    assert "trainer.n_gpus_per_node=8" in diff.title and "1" in diff.title
    lines = text.splitlines()
    assert any("n_gpus_per_node=1" in lines[e.line - 1] for e in diff.evidence)
    relaunch = verl_run(steps=8, seed=7) + verl_run(steps=8, seed=8, lr=1e-5)  # a second launch line: a second run
    segs = split_text("\n".join(relaunch))
    assert [s.where() for s in segs] == ["lines 1-9", "lines 10-18"]
    resumed = verl_run(steps=16, seed=7)
    assert split_text("\n".join(resumed[:9] + resumed[:1] + resumed[9:])) is None  # relaunched, steps go on
    # an epoch-wise step counter with no separator is one run; --split-runs cuts it anyway
    epochs = "\n".join(verl_run(steps=8, seed=7) + verl_run(steps=8, seed=8, launch=False))
    assert split_text(epochs) is None and len(split_text(epochs, force=True)) == 2


def _sweep(d: Path, n: int = 6, bad: int = 3) -> None:
    d.mkdir()
    lrs = [1e-6, 2e-6, 5e-6]
    for i in range(n):
        lines = verl_run(steps=60, seed=10 + i, lr=lrs[i % 3], ecoef=-0.01 if i == bad else 0.001,
                         entropy_climbs=i == bad, name=f"sweep_{i}")
        (d / f"sweep_{i}.log").write_text("\n".join(lines) + "\n")


def test_sweep_folder_is_one_run_per_log_the_bad_one_first_with_its_config_difference(tmp_path):
    _sweep(tmp_path / "sweep")
    res = triage_any(path=str(tmp_path / "sweep"))
    assert len(res.runs) == 6 and res.runs[0].name == "sweep_3.log"
    assert res.findings[0].run == "sweep_3.log" and res.findings[0].confidence in ("medium", "high")
    diff = next(f for f in res.findings if f.causes and f.causes[0].rule_id == "runs:config_difference")
    assert diff.run == "sweep_3.log" and "entropy_coeff=-0.01" in diff.title
    assert {e.source for e in diff.evidence} >= {"sweep_3.log"} and all(e.line == 1 for e in diff.evidence)
    assert res.runs[0].config["entropy_coeff"] == -0.01
    assert all(f.confidence == "low" for f in res.findings if f.run != "sweep_3.log")
    assert "sweep_3.log" in res.summary.split("No medium/high finding")[0]
    one = triage_any(path=str(tmp_path / "sweep"), runs="one")
    assert one.runs == []


def test_rank_logs_of_one_run_stay_one_run(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    from gen_real_log import generate

    for name in ("ranks", "numbered"):
        d = tmp_path / name
        d.mkdir()
        for i in range(4):
            f = d / (f"rank{i}.log" if name == "ranks" else f"{i}.log")
            generate(str(f), mb=0.2, seed=i)
            os.remove(str(f) + ".planted.json")
        res = triage_any(path=str(d))
        assert res.runs == [] and not any(f.run for f in res.findings), name
        assert {"nan_inf"} <= {f.symptom for f in res.findings}


def test_a_single_ordinary_log_is_unchanged(tmp_path):
    from grpo_debug.tools.triage import triage

    p = tmp_path / "train.log"
    p.write_text("\n".join(verl_run(steps=30, seed=9, nan_from=20)) + "\n")
    got, want = triage_any(path=str(p)), triage(path=str(p))
    assert got.runs == [] and got.model_dump() == want.model_dump()
    (tmp_path / "config.yaml").write_text("actor_rollout_ref:\n  actor:\n    optim:\n      lr: 1.0e-6\n")
    folder = triage_any(path=str(tmp_path))  # one log and its config: one run folder
    assert folder.runs == []


def test_cli_flags_override_grouping(tmp_path):
    p = tmp_path / "ab.log"
    p.write_text(_ab_paste())
    from grpo_debug.server.cli import build_parser

    args = build_parser().parse_args(["triage", str(p), "--one-run"])
    assert args.runs == "one"
    assert build_parser().parse_args(["triage", str(p), "--split-runs"]).runs == "split"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["triage", str(p), "--one-run", "--split-runs"])


@pytest.mark.slow
def test_a_30_log_sweep_is_triaged_run_by_run_in_bounded_memory(tmp_path):
    """30 logs of ~1.4 MB each (9,000 lines): one run's context at a time, VmHWM < 512 MB, through the CLI."""
    d = tmp_path / "sweep"
    d.mkdir()
    chatter = "(TaskRunner pid=1234) INFO 11-30 12:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: " \
              "1200.0 tokens/s, Running: 64 reqs, Waiting: 0 reqs, GPU KV cache usage: 41.0%\n"
    for i in range(30):
        lines = verl_run(steps=300, seed=100 + i, ecoef=-0.01 if i == 17 else 0.001, entropy_climbs=i == 17,
                         name=f"run{i}")
        with open(d / f"run{i:02d}.log", "w") as fh:
            fh.write(lines[0] + "\n")
            for ln in lines[1:]:
                fh.write(chatter * 30 + ln + "\n")
    code = ("import sys; from grpo_debug.server.cli import main\n"
            "try:\n    rc = main(['triage', sys.argv[1], '--format', 'json'])\nexcept SystemExit as e:\n    rc = e.code\n"
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
            "sys.stderr.write('MAXRSS %s\\n' % hwm); sys.exit(rc or 0)")
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code, str(d)], capture_output=True, text=True, timeout=1200)
    took = time.monotonic() - t
    rss = next(int(ln.split()[1]) / 1024 for ln in r.stderr.splitlines() if ln.startswith("MAXRSS"))
    out = json.loads(r.stdout)
    assert len(out["runs"]) == 30 and out["runs"][0]["name"] == "run17.log", [x["name"] for x in out["runs"][:3]]
    assert rss < 512, f"{rss:.0f} MB ({took:.0f} s)"


def test_fleet_summary_lists_the_broken_runs_first(tmp_path):
    from grpo_debug.tools.rundir.fleet import fleet

    _sweep(tmp_path / "sweep")
    rows: list[str] = []
    summary = fleet([str(tmp_path / "sweep")], jobs=1, emit=rows.append)
    assert summary["runs"] == 6 and summary["broken"] == [str(tmp_path / "sweep" / "sweep_3.log")]
    assert all("verdict" in json.loads(r) for r in rows)


def test_a_folder_of_run_folders_is_one_run_per_folder(tmp_path):
    for name, gn, lr in (("base", 0.3, 1e-6), ("hot", 60.0, 1e-4), ("warm", 0.4, 2e-6)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.log").write_text("\n".join(verl_run(seed=len(name), gn=gn, lr=lr, name=name)) + "\n")
        (tmp_path / name / "notes.txt").write_text("nothing to see\n")
    res = triage_any(path=str(tmp_path))
    assert [r.name for r in res.runs][0] == "hot" and len(res.runs) == 3
    assert res.findings[0].run == "hot" and res.findings[0].symptom == "grad_norm_spike"
    assert res.findings[0].evidence[0].source == os.path.join("hot", "train.log")
    one = tmp_path / "one"  # one run whose log and notes sit in two folders stays one run
    (one / "logs").mkdir(parents=True)
    (one / "logs" / "train.log").write_text("\n".join(verl_run(seed=1)) + "\n")
    (one / "wandb").mkdir()
    (one / "wandb" / "notes.txt").write_text("x\n")
    assert triage_any(path=str(one)).runs == []


def test_a_folder_read_as_one_run_says_so_and_how_to_split(tmp_path):
    """Two logs with the same step grid and no launch lines are one run by default: the answer says they were merged
    and names --split-runs (a newcomer's two runs were merged without a word)."""
    from grpo_debug.tools.rundir.analyze import triage_any

    for name, lr in (("a.log", "1e-05"), ("b.log", "2e-05")):
        (tmp_path / name).write_text("".join(f"step:{i} - actor/grad_norm:0.5 - actor/lr:{lr} - critic/score/mean:0.3\n"
                                             for i in range(1, 13)))
    res = triage_any(path=str(tmp_path))
    assert any("2 logs read as one run" in s and "--split-runs" in s for s in res.coverage.skipped), res.coverage.skipped
    assert not any("read as one run" in s for s in triage_any(path=str(tmp_path), runs="one").coverage.skipped)
