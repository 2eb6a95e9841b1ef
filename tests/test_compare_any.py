"""compare_runs on any two runs (issue 26; issue 23 item 4): two pastes, one paste holding both ([A]/[B] labels, a
second launch line, "same script, other commit"), several runs, 1-step runs, steps that do not overlap, two files,
two folders, one folder of runs, and the errors for inputs that do not make two runs; the engine, the CLI and the
MCP tool (in-process SDK client, as tests/test_mcp_families.py).

The runs are verl console lines as verl's ``concat_dict_to_str`` prints them (``step:N - key:value - ...``,
verl/utils/tracking.py), behind Ray's ``(TaskRunner pid=N)`` prefix, with noisy series; every expected number
is computed from the generated values, not written down.
"""
from __future__ import annotations

import json
import random
import statistics

import pytest

from grpo_debug.tools.errors import InputError
from grpo_debug.tools.rundir.compare import COMPARE_BYTES, bound_compare, compare_runs


def verl(steps: int = 30, seed: int = 0, gn: float = 0.3, lr: float = 1e-6, start: int = 1, climb_from=None,
         prefix: str = "", launch: bool = True, name: str = "gsm8k") -> list[str]:
    """A verl GRPO run: its launch line, then one metric line per step (grad norm noise ~15 %)."""
    rng = random.Random(seed)
    out = []
    if launch:
        out.append(prefix + "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=256 "
                   f"actor_rollout_ref.actor.optim.lr={lr} actor_rollout_ref.rollout.n=8 "
                   f"trainer.experiment_name={name}_{seed}")
    for s in range(start, start + steps):
        g = gn * (1 + 0.15 * rng.gauss(0, 1))
        if climb_from is not None and s >= climb_from:
            g *= 1.5 ** (s - climb_from + 1)
        out.append(prefix + f"(TaskRunner pid=2231) step:{s} - actor/grad_norm:{g:.4f} - "
                   f"actor/entropy:{0.9 * (1 + 0.03 * rng.gauss(0, 1)):.4f} - actor/pg_loss:{0.01 * rng.gauss(0, 1):.4f}"
                   f" - critic/score/mean:{0.3 + 0.01 * (s - start) + 0.02 * rng.gauss(0, 1):.4f} - "
                   f"response_length/mean:{300 + 20 * rng.gauss(0, 1):.1f}")
    return out


def grad_norms(lines: list[str]) -> list[float]:
    return [float(ln.split("actor/grad_norm:")[1].split()[0]) for ln in lines if "actor/grad_norm:" in ln]


def level(res, metric: str) -> dict:
    return next(r for r in res.levels if r["metric"] == metric)


def expected_factor(a: list[str], b: list[str]) -> float:
    ma, mb = statistics.median(grad_norms(a)), statistics.median(grad_norms(b))
    return max(ma, mb) / min(ma, mb)


# ---- one paste holding both runs

def test_ab_labelled_paste_names_the_200x_grad_norm_gap_the_broken_run_and_the_lr():
    a, b = verl(seed=1, prefix="[A] "), verl(seed=2, gn=60.0, lr=1e-4, prefix="[B] ")
    paste = "two runs, same script, other commit\n" + "\n".join(x for pair in zip(a, b) for x in pair)
    res = compare_runs(a_text=paste)
    assert res.broken == "B" and "B looks broken" in res.summary
    g = level(res, "grad_norm")
    assert g["far"] and g["higher"] == "B" and g["factor"] == pytest.approx(expected_factor(a, b), rel=0.01)
    assert res.levels[0]["metric"] == "grad_norm"  # the largest factor first
    assert f"({g['factor']:.3g}x higher in B)" in res.summary
    assert {"key": "lr", "a": 1e-6, "b": 1e-4} in res.config_diff
    assert res.aligned == "step" and res.first_divergence["metric"] == "grad_norm"
    assert res.first_divergence["step"] == 1  # apart from the first step (B's own jitter does not hide a 200x gap)
    lines = paste.split("\n")
    cited = res.first_divergence["lines"]  # in the paste's own numbering
    assert lines[cited["a"] - 1].startswith("[A] (TaskRunner pid=2231) step:1 ")
    assert lines[cited["b"] - 1].startswith("[B] (TaskRunner pid=2231) step:1 ")
    assert res.a == "<text> A (lines 2-62)" and res.b == "<text> B (lines 3-63)"  # its own lines, not the header
    assert "2 runs, split by line labels" in res.summary
    assert all(not r["metric"].startswith("timing") for r in res.levels)


def test_same_script_other_commit_second_launch_line_dates_the_divergence():
    a = verl(seed=3)
    b = verl(seed=4, climb_from=20)
    paste = "\n".join(a + ["", "# same script, other commit (3f2a91c)"] + b)
    res = compare_runs(a_text=paste)
    assert [(r["name"], r["role"], r["broken"]) for r in res.runs] == [("run 2", "B", True), ("run 1", "A", False)]
    assert res.aligned == "step"
    fd = res.first_divergence
    assert fd["metric"] == "grad_norm" and 20 <= fd["step"] <= 22, fd
    assert res.broken == "B" and "grad_norm" in res.summary
    g = level(res, "grad_norm")  # a late blow-up: the medians stay close, the maxima do not
    assert not g["far"] and g["peak_far"] and g["peak_higher"] == "B"
    assert g["peak_factor"] == pytest.approx(max(grad_norms(b)) / max(grad_norms(a)), rel=1e-3)
    assert f"peaks apart: grad_norm max A {max(grad_norms(a)):.4g} vs B {max(grad_norms(b)):.4g}" in res.summary
    assert [d["key"] for d in res.config_diff] == ["trainer.experiment_name"]  # same script: an identifier only
    assert res.config_diff[0]["identifier"] and "no config fact differs but identifiers" in res.summary
    # without a second launch line, run B reads run A's launch line as its own (the same config)
    same = compare_runs(a_text="\n".join(a + ["=== run B (commit 77be0d2) ==="] + b[1:]))
    assert same.first_divergence["metric"] == "grad_norm" and not same.config_diff
    assert same.a.startswith("<text> run 1") and "run B (commit 77be0d2)" in same.b


def test_several_runs_in_one_paste_compare_the_broken_one_with_a_healthy_one():
    runs = [verl(seed=10 + i, prefix=f"[{c}] ", gn=90.0 if c == "C" else 0.3) for i, c in enumerate("ABCG")]
    res = compare_runs(a_text="\n".join(ln for r in runs for ln in r))
    assert [r["name"] for r in res.runs] == ["C", "A", "B", "G"]  # broken first ([D] would be a log level)
    assert [r["broken"] for r in res.runs] == [True, False, False, False]
    roles = {r["name"]: r["role"] for r in res.runs}
    assert roles["C"] == "B" and roles["A"] == "A" and "C as B" in res.summary
    assert res.broken == "B" and level(res, "grad_norm")["far"]


def test_two_healthy_seeds_of_one_setup_do_not_diverge_and_nothing_looks_broken():
    for seed in range(12):
        a, b = verl(steps=60, seed=100 + seed, prefix="[A] "), verl(steps=60, seed=200 + seed, prefix="[B] ")
        res = compare_runs(a_text="\n".join(a + b))
        assert res.first_divergence is None and res.broken == "", seed
        assert not any(r["far"] or r.get("peak_far") for r in res.levels), seed
        assert "neither run looks broken" in res.summary.lower()
        assert level(res, "loss")["note"] == "crosses zero"  # a policy loss around 0 has no level ratio


def test_a_reward_at_zero_in_one_run_is_named_and_that_run_is_broken():
    a = verl(seed=1)
    b = [ln.replace("critic/score/mean:", "critic/score/mean:0.0 - critic/score/raw:") for ln in verl(seed=2)]
    res = compare_runs(a_text="\n".join(a), b_text="\n".join(b))
    med = statistics.median(float(ln.split("critic/score/mean:")[1].split()[0]) for ln in a[1:])
    assert level(res, "score_mean")["note"] == "zero" and f"score_mean median 0 in B (A {med:.4g})" in res.summary
    assert res.broken == "B" and res.first_divergence["metric"] == "score_mean"
    assert any(x.startswith("reward_zero") for x in res.only_in_b)


# ---- any length

def test_one_step_runs_are_compared_by_level():
    a, b = verl(steps=1, seed=5), verl(steps=1, seed=6, gn=60.0)
    res = compare_runs(a_text="\n".join(a), b_text="\n".join(b))
    assert res.aligned == "few" and res.first_divergence is None and not res.divergence
    g = level(res, "grad_norm")
    assert g["a"]["n"] == g["b"]["n"] == 1
    assert g["factor"] == pytest.approx(grad_norms(b)[0] / grad_norms(a)[0], rel=1e-3)
    assert "too few to date a divergence" in res.summary and res.broken == "B"


def test_two_common_steps_date_nothing_and_a_run_that_stopped_is_not_stretched():
    a, b = verl(steps=40, seed=7), verl(steps=2, seed=8)
    res = compare_runs(a_text="\n".join(a), b_text="\n".join(b))
    assert res.aligned == "few" and res.first_divergence is None and "only 2 common steps" in res.summary
    assert level(res, "grad_norm")["b"]["n"] == 2 and res.broken == ""


def test_disjoint_steps_are_aligned_by_position_and_said_not_to_overlap():
    a = verl(steps=30, seed=9)
    b = verl(steps=30, seed=10, start=101, climb_from=111)  # B's 11th point climbs
    res = compare_runs(a_text="\n".join(a), b_text="\n".join(b))
    assert res.aligned == "position" and "do not overlap" in res.summary and "A steps 1-30, B steps 101-130" in res.summary
    fd = res.first_divergence
    assert fd["metric"] == "grad_norm" and fd["by"] == "position" and 11 <= fd["step"] <= 13, fd
    far = verl(steps=90, seed=11, start=1001)  # three times as long: relative progress
    res2 = compare_runs(a_text="\n".join(a), b_text="\n".join(far))
    assert res2.aligned == "progress" and res2.broken == "" and "relative progress" in res2.summary
    # the score climbs 0.01 a step in both: at equal progress the 90-step run is further on; grad norm is not apart
    assert {d["metric"] for d in res2.divergence} == {"score_mean"}


# ---- files and folders

def test_two_files_and_two_folders(tmp_path):
    fa, fb = tmp_path / "a.log", tmp_path / "b.log"
    a, b = verl(seed=12), verl(seed=13, gn=60.0, lr=1e-4)
    fa.write_text("\n".join(a) + "\n")
    fb.write_text("\n".join(b) + "\n")
    res = compare_runs(a_path=str(fa), b_path=str(fb))
    assert res.broken == "B" and {"key": "lr", "a": 1e-6, "b": 1e-4} in res.config_diff
    for d, lines in (("ra", a), ("rb", b)):
        (tmp_path / d).mkdir()
        (tmp_path / d / "train.log").write_text("\n".join(lines[1:]) + "\n")
        (tmp_path / d / "run.sh").write_text(lines[0] + "\n")
    res2 = compare_runs(a_path=str(tmp_path / "ra"), b_path=str(tmp_path / "rb"))
    assert res2.broken == "B" and level(res2, "grad_norm")["factor"] == pytest.approx(
        level(res, "grad_norm")["factor"]) and {"key": "lr", "a": 1e-6, "b": 1e-4} in res2.config_diff


def test_two_configs_compare_their_facts_only(tmp_path):
    body = "actor_rollout_ref:\n  actor:\n    entropy_coeff: {}\n    ppo_mini_batch_size: 64\n"
    (tmp_path / "a.yaml").write_text(body.format(0.0))
    (tmp_path / "b.yaml").write_text(body.format(-0.01))
    res = compare_runs(a_path=str(tmp_path / "a.yaml"), b_path=str(tmp_path / "b.yaml"))
    assert res.aligned == "none" and not res.levels and res.first_divergence is None
    assert [(d["key"], d["a"], d["b"]) for d in res.config_diff] == [("entropy_coeff", 0.0, -0.01)]
    assert "no metric series that both runs log" in res.summary and "entropy_coeff 0 -> -0.01" in res.summary


def test_one_folder_of_runs_and_one_file_of_two_runs(tmp_path):
    d = tmp_path / "sweep"
    d.mkdir()
    for i, lr in enumerate([1e-6, 2e-6, 1e-6, 2e-6]):
        (d / f"sweep_{i}.log").write_text("\n".join(verl(seed=20 + i, lr=lr, gn=80.0 if i == 3 else 0.3)) + "\n")
    res = compare_runs(a_path=str(d))
    assert [r["name"] for r in res.runs] == ["sweep_3.log", "sweep_0.log", "sweep_1.log", "sweep_2.log"]
    roles = {r["name"]: r["role"] for r in res.runs}
    assert roles["sweep_3.log"] == "B" and res.broken == "B"
    # A: the healthy sibling with the same config (lr 2e-6, not the first run's 1e-6): only identifiers differ
    assert roles["sweep_1.log"] == "A" and all(x.get("identifier") for x in res.config_diff)
    both = tmp_path / "both.log"
    both.write_text("\n".join(verl(seed=1) + verl(seed=2, gn=60.0)) + "\n")
    assert compare_runs(a_path=str(both)).broken == "B"


# ---- bad inputs

def test_inputs_that_do_not_make_two_runs_are_clear_errors(tmp_path):
    with pytest.raises(InputError, match=r"holds one run \(31 lines, 30 metric records \(steps 1-30.*\[A\]"):
        compare_runs(a_text="\n".join(verl(seed=1)))
    with pytest.raises(InputError, match=r"holds one run \(.*labels A only\): mark the runs"):
        compare_runs(a_text="\n".join(verl(seed=1, prefix="[A] ")))
    with pytest.raises(InputError, match="empty"):
        compare_runs(a_text=" \n\n")
    with pytest.raises(InputError, match="run B is empty"):
        compare_runs(a_text="\n".join(verl(seed=1)), b_text="")
    with pytest.raises(InputError, match="give two runs"):
        compare_runs()
    with pytest.raises(InputError, match=r"too large to search for several runs \(4\.8 MiB > 4 MiB.*two files"):
        compare_runs(a_text="step:1 - loss:0.1\n" * 280_000)
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "train.log").write_text("\n".join(verl(seed=1)) + "\n")
    with pytest.raises(InputError, match="holds one run"):
        compare_runs(a_path=str(tmp_path / "one"))


# ---- the answer: deterministic and small

def test_the_answer_is_deterministic_and_a_few_kb():
    a, b = verl(seed=1, prefix="[A] "), verl(seed=2, gn=60.0, lr=1e-4, prefix="[B] ")
    paste = "\n".join(a + b)
    one, two = compare_runs(a_text=paste), compare_runs(a_text=paste)
    assert one.model_dump_json() == two.model_dump_json()
    assert len(one.model_dump_json()) < 5000 and len(one.summary) < 1500
    big = bound_compare(one, COMPARE_BYTES)
    assert len(big.model_dump_json()) <= COMPARE_BYTES


# ---- the faces

def test_cli_compare_one_paste_on_stdin_two_files_and_errors(tmp_path, capsys, monkeypatch):
    import io
    import sys

    from grpo_debug.server.cli import main

    a, b = verl(seed=1, prefix="[A] "), verl(seed=2, gn=60.0, prefix="[B] ")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join(a + b).encode())))
    assert main(["compare", "-"]) == 0
    out = capsys.readouterr().out
    assert "B looks broken" in out and "FAR" in out and "Levels (median" in out
    (tmp_path / "a.log").write_text("\n".join(verl(seed=1)))
    (tmp_path / "b.log").write_text("\n".join(verl(seed=2, gn=60.0)))
    assert main(["compare", str(tmp_path / "a.log"), str(tmp_path / "b.log"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["broken"] == "B" and data["aligned"] == "step"
    assert main(["compare", str(tmp_path / "a.log")]) == 2
    err = capsys.readouterr().err
    assert "holds one run" in err and "[A]" in err


@pytest.mark.anyio
async def test_mcp_compare_runs_paste_files_and_errors(tmp_path):
    from mcp import Client

    from grpo_debug.server.app import build_server

    a, b = verl(seed=1, prefix="[A] "), verl(seed=2, gn=60.0, prefix="[B] ")
    (tmp_path / "a.log").write_text("\n".join(verl(seed=1)))
    (tmp_path / "b.log").write_text("\n".join(verl(seed=2, gn=60.0)))
    async with Client(build_server(allowed_roots=[tmp_path])) as c:
        r = await c.call_tool("compare_runs", {"a": "\n".join(a + b)})
        r2 = await c.call_tool("compare_runs", {"a": "\n".join(a + b)})
        files = await c.call_tool("compare_runs", {"a": str(tmp_path / "a.log"), "b": str(tmp_path / "b.log")})
        one = await c.call_tool("compare_runs", {"a": "\n".join(verl(seed=1))})
        outside = await c.call_tool("compare_runs", {"a": "/etc/passwd", "b": str(tmp_path / "b.log")})
        sweep = tmp_path / "sweep"
        sweep.mkdir()
        for i in range(3):
            (sweep / f"seed{i}.log").write_text("\n".join(verl(seed=30 + i, gn=70.0 if i == 1 else 0.3)))
        folder = await c.call_tool("compare_runs", {"a": str(sweep)})
        lines = await c.call_tool("compare_runs", {"a": verl(steps=1, seed=5, launch=False)[0],
                                                   "b": verl(steps=1, seed=6, gn=60.0, launch=False)[0]})
    sc = r.structured_content
    assert not r.is_error and sc["broken"] == "B" and sc["levels"][0]["metric"] == "grad_norm"
    assert sc == r2.structured_content and len(json.dumps(sc)) <= COMPARE_BYTES
    text = r.content[0].text  # the text block: the rendering (summary, levels, config, divergence), not the JSON
    assert text.startswith("A: <text> A (lines") and sc["summary"] in text and len(text) < 3000
    assert not files.is_error and files.structured_content["broken"] == "B"
    assert one.is_error and "holds one run" in one.content[0].text and "[A]" in one.content[0].text
    assert outside.is_error and "outside the allowed roots" in outside.content[0].text
    roles = {r["name"]: r["role"] for r in folder.structured_content["runs"]}
    assert not folder.is_error and roles == {"seed0.log": "A", "seed1.log": "B", "seed2.log": ""}
    # one metric line each (a 1-step run pasted on one line) is text, not a path
    assert not lines.is_error and lines.structured_content["aligned"] == "few"
    assert lines.structured_content["broken"] == "B"


def test_a_side_holding_several_runs_is_said_not_dropped(tmp_path):
    """Two inputs where B itself holds two runs ([A]/[B] labels): B is compared as one input and the answer says
    so, pointing at comparing B alone."""
    from grpo_debug.tools.rundir.compare import compare_runs

    a = tmp_path / "a.log"
    a.write_text("\n".join(f"step:{s} - actor/grad_norm:{0.3 + 0.001 * s:.4f} - actor/entropy:0.5" for s in range(1, 30)) + "\n")
    b = tmp_path / "b.log"
    b.write_text("".join(f"[A] step:{s} - actor/grad_norm:0.31 - actor/entropy:0.5\n"
                         f"[B] step:{s} - actor/grad_norm:{60 + s} - actor/entropy:0.5\n" for s in range(1, 30)))
    res = compare_runs(a_path=str(a), b_path=str(b))
    assert "B holds 2 runs" in res.summary and "compare B alone" in res.summary
    one = compare_runs(a_path=str(a), b_path=str(a))
    assert "holds" not in one.summary
