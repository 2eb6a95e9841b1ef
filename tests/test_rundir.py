"""Run folders (issue 13 parts 2-4): folder triage per metric-store kind (the planted fault: grad_norm flat to step
39, climbing from 40, NaN at 60), what a folder read covers and skips, plots (sparklines; the PNG as MCP image
content), and run comparison (config facts that differ, the first diverging step) on files and one paste."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from grpo_debug.tools.errors import InputError
from grpo_debug.tools.rundir import analyze, triage_any, triage_folder
from grpo_debug.tools.rundir.compare import compare_runs, diverge, split_two_runs, step_noise
from grpo_debug.tools.rundir.plot import NONFINITE, plot_run, sparkline

STORES = Path(__file__).parent / "data" / "stores"
KINDS = ["tensorboard", "wandb_run", "wandb_legacy_run", "mlflow", "trackio", "verl", "trainer_state", "deepspeed"]


def _steps(finding) -> set[int]:
    return {int(m) for e in finding.evidence for m in re.findall(r"step[\s:=]+(\d+)", e.text)}


@pytest.mark.parametrize("kind", KINDS)
def test_folder_triage_names_the_planted_climb_and_its_step(kind):
    res = triage_folder(STORES / kind)
    top = res.findings[:3]
    spike = next(f for f in top if f.symptom == "grad_norm_spike")
    assert any(abs(s - 40) <= 5 for s in _steps(spike)), [e.text[:60] for e in spike.evidence]
    assert any(f.symptom == "nan_inf" for f in top)
    ev = next(e for e in spike.evidence if re.search(r"step[\s:]+40\b", e.text))
    assert ev.source and "grad_norm" in ev.text  # the file, the series and the step
    assert "store" in " ".join(res.coverage.files)  # the summary's evidence names its file: the top finding's
    assert any(f"Evidence: {e.source} line" in res.summary for e in top[0].evidence if e.source)  # (NaN first: it ended the run)


def test_folder_triage_does_not_read_the_answer(tmp_path):
    """The scorer's expected.json is not what finds the step: the same result without it."""
    d = tmp_path / "tb"
    shutil.copytree(STORES / "tensorboard", d, ignore=shutil.ignore_patterns("expected.json"))
    spike = next(f for f in triage_folder(d).findings if f.symptom == "grad_norm_spike")
    assert 40 in _steps(spike)


def test_folder_merges_log_config_script_and_store_and_maps_lines_back(tmp_path):
    (tmp_path / "train.log").write_text("starting\nstep:1 - actor/grad_norm:1.0\nTraceback (most recent call last):\n"
                                        '  File "x.py", line 1, in <module>\nRuntimeError: CUDA out of memory. '
                                        "Tried to allocate 2.00 GiB\n")
    (tmp_path / "config.yaml").write_text("actor_rollout_ref:\n  rollout:\n    n: 1\n")
    (tmp_path / "run.sh").write_text("python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=8\n")
    shutil.copy(STORES / "verl" / "metrics.jsonl", tmp_path / "metrics.jsonl")
    (tmp_path / "model.safetensors").write_bytes(b"\x00\x01" * 100)
    (tmp_path / "tokenizer.json").write_text("{}")
    os.symlink("/etc/hostname", tmp_path / "outside.log")
    res = triage_folder(tmp_path)
    files = " | ".join(res.coverage.files)
    for name in ("train.log", "config.yaml", "run.sh", "metrics.jsonl: verl_jsonl store"):
        assert name in files, files
    assert "outside.log" not in files and any("tokenizer.json" in s for s in res.coverage.skipped)
    oom = next(f for f in res.findings if f.symptom == "cuda_oom")
    ev = next(e for e in oom.evidence if "out of memory" in e.text)
    assert (ev.line, ev.source) == (5, "train.log")  # the file's own line
    assert any(f.symptom == "grad_norm_spike" for f in res.findings)


def test_folder_edit_rewrites_the_config_file_not_the_dict_the_log_printed(tmp_path):
    """A run folder's config.yaml sets clip_grad 0.0 and the log echoes the config dict at start-up (as verl's
    trainer prints it): the edit rewrites config.yaml's line, and every setting and note names its file (a
    newcomer's folder got 'could not rewrite line 18 in place', a merged line number in neither file)."""
    (tmp_path / "config.yaml").write_text(
        "actor_rollout_ref:\n  actor:\n    optim:\n      lr: 1e-5\n      clip_grad: 0.0\n")
    (tmp_path / "train.log").write_text(
        "start\n(TaskRunner pid=1) {'actor_rollout_ref': {'actor': {'optim': {'lr': 1e-05, 'clip_grad': 0.0}}}}\n"
        "(TaskRunner pid=1) step:1 - actor/grad_norm:0.5 - actor/pg_loss:0.1\n")
    res = triage_folder(tmp_path)
    f = next(f for f in res.findings if any("clip" in c.rule_id for c in f.causes))
    ed = next(e for e in f.edits if "clip_grad" in e.key)
    assert (ed.line, ed.old.strip(), ed.new.strip()) == (5, "clip_grad: 0.0", "clip_grad: 1.0") and "config.yaml" in ed.note
    assert all(s.source in ("config.yaml", "train.log") for s in f.settings)
    assert not any(re.search(r"\bline (\d+)\b", e.note or "") and "of " not in e.note for e in f.edits)


def test_triage_any_routes_folders_and_store_files_only():
    assert triage_any(path=str(STORES / "trainer_state" / "checkpoint-70" / "trainer_state.json")).coverage.files
    assert not triage_any(text="step:1 - actor/grad_norm:1.0\n").coverage.files


def test_cli_triage_of_a_folder_prints_json(capsys):
    from grpo_debug.server.cli import main

    assert main(["triage", str(STORES / "verl"), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["findings"][0]["symptom"] in ("grad_norm_spike", "nan_inf") and out["coverage"]["files"]


# ---- plot

def test_sparkline_marks_nonfinite_and_scales():
    s = sparkline([1, 2, 3, 4, float("nan"), 5], width=10)
    assert s[0] == "▁" and s[5] == "█" and s[4] == NONFINITE
    assert len(sparkline(list(range(1000)), width=40)) <= 40


def test_plot_text_has_one_sparkline_per_metric_with_min_max_last():
    out = plot_run(path=str(STORES / "trainer_state"), png=False)
    rows = out.text.splitlines()
    gn = next(r for r in rows if r.startswith("grad_norm"))
    assert NONFINITE in gn and "min 0.98" in gn and "last nan" in gn and "non-finite from" in gn
    assert "grad_norm_spike 40" in rows[0]
    two = "step:1 - actor/grad_norm:1.0\nstep:2 - actor/grad_norm:2.0\n"
    assert plot_run(text=two, metrics=["nope", "grad_norm"], png=False).text.count("no series named 'nope'") == 1
    with pytest.raises(InputError, match="no series named 'nope'"):
        plot_run(text=two, metrics=["nope"], png=False)


def test_plot_without_matplotlib_says_how_to_install(monkeypatch):
    import builtins

    real = builtins.__import__

    def fake(name, *a, **kw):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", fake)
    out = plot_run(path=str(STORES / "verl"))
    assert out.png is None and "pip install 'grpo-debug[plot]'" in out.text


def test_cli_plot_writes_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from grpo_debug.server.cli import main

    png = tmp_path / "p.png"
    assert main(["plot", str(STORES / "mlflow"), "--png", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and str(png) in capsys.readouterr().out


def test_cli_plot_user_errors_exit_2_naming_the_input(tmp_path, capsys):
    """An unknown metric name and an unwritable --png path are the user's to fix: exit 2, never an internal error."""
    from grpo_debug.server.cli import main

    assert main(["plot", str(STORES / "mlflow"), "--metrics", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "nosuch" in err and "known:" in err
    if importlib.util.find_spec("matplotlib"):
        assert main(["plot", str(STORES / "mlflow"), "--png", str(tmp_path / "no" / "dir" / "p.png")]) == 2
        assert "cannot write the PNG" in capsys.readouterr().err


@pytest.mark.anyio
async def test_mcp_plot_returns_a_png_image_and_no_output_schema():
    pytest.importorskip("matplotlib")
    import base64
    import struct

    from mcp import Client
    from mcp.types import ImageContent, TextContent

    from grpo_debug.server.app import build_server

    async with Client(build_server(allowed_roots=[STORES])) as c:
        tool = next(t for t in (await c.list_tools()).tools if t.name == "plot")
        assert tool.output_schema is None
        r = await c.call_tool("plot", {"path": str(STORES / "tensorboard"), "metrics": ["grad_norm", "loss"],
                                       "inline": True})  # (the default answer links it: tests/test_plot_resource.py)
    assert not r.is_error and r.structured_content is None
    text, _link, img = r.content
    assert isinstance(text, TextContent) and isinstance(img, ImageContent) and img.mime_type == "image/png"
    data = base64.b64decode(img.data)
    w, h = struct.unpack(">II", data[16:24])
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and w <= 1200 and h <= 800
    assert "PNG (" not in text.text  # no file written: the image is in the answer and the server's memory


# ---- compare

def _run(lr: str, climb_at: int | None = None, seed: int = 0) -> str:
    import random

    rnd = random.Random(seed)
    out = [f"python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.optim.lr={lr} actor_rollout_ref.rollout.n=8"]
    for s in range(1, 41):
        g = 1.0 + 0.02 * rnd.random()
        if climb_at and s >= climb_at:
            g *= 1.3 ** (s - climb_at + 1)
        out.append(f"step:{s} - actor/grad_norm:{g:.4f} - actor/entropy:{1.2 - 0.005 * s + 0.001 * rnd.random():.4f}")
    return "\n".join(out)


def test_compare_one_paste_two_step_sequences():
    paste = _run("1e-6", seed=1) + "\n\n" + _run("1e-5", climb_at=25, seed=2)
    a, b = split_two_runs(paste)
    assert "lr=1e-6" in a and "lr=1e-5" in b and "lr=1e-5" not in a
    res = compare_runs(a_text=paste)
    assert {"key": "lr", "a": 1e-6, "b": 1e-5} in res.config_diff
    assert res.first_divergence["metric"] == "grad_norm" and res.first_divergence["step"] == 25
    assert any(x.startswith("grad_norm_spike") for x in res.only_in_b) and not res.only_in_a
    assert "lr" in res.summary and "step 25" in res.summary


def test_compare_ab_prefixes_and_same_runs_do_not_diverge():
    a, b = _run("1e-6", seed=1), _run("1e-6", seed=3)
    paste = "\n".join("[A] " + ln for ln in a.splitlines()) + "\n" + "\n".join("[B] " + ln for ln in b.splitlines())
    res = compare_runs(a_text=paste)
    assert res.first_divergence is None and not res.config_diff
    assert split_two_runs(_run("1e-6")) is None


def test_divergence_needs_sustain_and_noise():
    from grpo_debug.tools.run.model import Point, Series

    def ser(vals):
        return Series("x", points=[Point(i + 1, v, "x") for i, v in enumerate(vals)])

    base = [1.0 + 0.01 * (i % 3) for i in range(30)]
    blip = list(base)
    blip[10] = 5.0  # one step far off: not sustained
    assert diverge(ser(base), ser(blip)) is None
    shifted = base[:20] + [v + 1.0 for v in base[20:]]
    assert diverge(ser(base), ser(shifted))["step"] == 21
    assert step_noise([1.0] * 10) == pytest.approx(0.01)


def test_compare_two_store_folders_and_cli(capsys):
    from grpo_debug.server.cli import main

    res = compare_runs(a_path=str(STORES / "verl"), b_path=str(STORES / "tensorboard"))
    # the TensorBoard fixture's second (resumed) file rewrote steps 45..50 with other values
    assert res.first_divergence["metric"] == "grad_norm" and res.first_divergence["step"] == 45
    assert main(["compare", str(STORES / "verl"), str(STORES / "tensorboard")]) == 0
    assert "first divergence: grad_norm at step 45" in capsys.readouterr().out


@pytest.mark.anyio
async def test_mcp_compare_runs_on_a_paste():
    from mcp import Client

    from grpo_debug.server.app import build_server

    paste = _run("1e-6", seed=1) + "\n\n" + _run("1e-5", climb_at=25, seed=2)
    async with Client(build_server()) as c:
        r = await c.call_tool("compare_runs", {"a": paste})
        bad = await c.call_tool("compare_runs", {"a": "/etc/passwd", "b": "/etc/hostname"})
    assert not r.is_error and r.structured_content["first_divergence"]["step"] == 25
    assert bad.is_error and "outside the allowed roots" in bad.content[0].text


@pytest.mark.anyio
async def test_mcp_triage_reads_a_folder_inside_the_roots_only(tmp_path):
    from mcp import Client

    from grpo_debug.server.app import build_server

    async with Client(build_server(allowed_roots=[STORES])) as c:
        r = await c.call_tool("triage", {"path": str(STORES / "trackio")})
        out = await c.call_tool("triage", {"path": str(tmp_path)})
    assert not r.is_error and r.structured_content["findings"][0]["symptom"] in ("grad_norm_spike", "nan_inf")
    assert r.structured_content["coverage"]["files"]
    assert out.is_error and "outside the allowed roots" in out.content[0].text


def test_analyze_of_text_and_folder_share_one_run_model():
    a = analyze(path=str(STORES / "wandb_run"))
    assert a.run.series_of("grad_norm") is not None and a.merged is not None
    assert [p.step for p in a.run.series_of("grad_norm").points][:3] == [1.0, 2.0, 3.0]  # console + store in order


# ---- fleet

def _fleet_dir(tmp_path, n=6) -> Path:
    logs = sorted((Path(__file__).parent / "data").rglob("*.log"))[:3]
    for i in range(n):
        shutil.copy(logs[i % len(logs)], tmp_path / f"run{i}.log")
    return tmp_path


def test_fleet_jobs_writes_one_json_line_per_run_and_a_summary(tmp_path, capsys):
    from grpo_debug.server.cli import main

    d = _fleet_dir(tmp_path)
    (d / "empty").mkdir()
    assert main(["triage", str(d), "--jobs", "2"]) == 1  # the empty folder is a failed run
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    runs, summary = rows[:-1], rows[-1]["summary"]
    assert len(runs) == 7 and summary["runs"] == 7 and summary["failed"] == 1
    assert {r["path"] for r in runs if r["ok"]} == {str(d / f"run{i}.log") for i in range(6)}
    assert all(g["runs"] >= 1 and g["paths"] for g in summary["by_rule"].values())
    assert main(["triage", str(d / "run0.log"), str(d / "run1.log")]) == 0  # several paths: fleet too


@pytest.mark.slow
def test_fleet_on_a_local_ray_instance(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    from grpo_debug.tools.rundir.fleet import fleet

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    d = _fleet_dir(tmp_path, 3)
    lines: list[str] = []
    runs = [str(d / f"run{i}.log") for i in range(3)] + [str(tmp_path / "missing.log")]
    summary = fleet(runs, ray_address="local", emit=lines.append)
    rows = [json.loads(x) for x in lines]
    assert sum(r["ok"] for r in rows) == 3 and all(r.get("node") for r in rows if r["ok"])
    assert any(r["path"].endswith("missing.log") and r["error"] == "not found on any node" for r in rows)
    assert summary["failed"] == 1


@pytest.mark.anyio
async def test_mcp_folder_triage_keeps_to_the_folder(tmp_path):
    """A run folder inside the roots whose entries point out of it, at devices or FIFOs: none is read."""
    from mcp import Client

    from grpo_debug.server.app import build_server

    secret = tmp_path / "secret.log"
    secret.write_text("SECRET-7Q step:1 - actor/grad_norm:nan\n")
    run = tmp_path / "root" / "run"
    (run / "deep").mkdir(parents=True)
    shutil.copy(STORES / "verl" / "metrics.jsonl", run / "metrics.jsonl")
    os.symlink(secret, run / "train.log")
    os.symlink("/dev/zero", run / "zero.log")
    os.symlink(secret.parent, run / "deep" / "up")
    os.mkfifo(run / "fifo.log")
    async with Client(build_server(allowed_roots=[tmp_path / "root"])) as c:
        r = await c.call_tool("triage", {"path": str(run)})
    assert not r.is_error and "SECRET-7Q" not in json.dumps(r.structured_content)
    assert r.structured_content["coverage"]["files"] == [f for f in r.structured_content["coverage"]["files"]
                                                         if f.startswith("metrics.jsonl")]


def test_plot_mark_uses_the_metric_line_step_not_the_warning_printed_before_it(tmp_path):
    """verl prints 'grad_norm is not finite' during step N, before step N's metric line: the nan_inf mark is step N
    (a newcomer's plot said the step before)."""
    rows = [f"(TaskRunner pid=1) step:{i} - actor/grad_norm:{0.5 + i / 10} - actor/pg_loss:0.1" for i in range(1, 5)]
    rows += ["(WorkerDict pid=2) WARN: rank 0 grad_norm is not finite: tensor(nan, device='cuda:0')",
             "(TaskRunner pid=1) step:5 - actor/grad_norm:nan - actor/pg_loss:0.1"]
    p = tmp_path / "run.log"
    p.write_text("\n".join(rows) + "\n")
    from grpo_debug.tools.rundir.analyze import analyze as analyse
    from grpo_debug.tools.rundir.plot import finding_marks

    assert dict(finding_marks(analyse(path=str(p))))["nan_inf"] == 5.0


def test_edit_notes_give_the_files_own_line_numbers():
    """remap: a merged line number in an edit's note becomes the file's own (with the file named once)."""
    from types import SimpleNamespace as NS

    from grpo_debug.tools.models import Edit
    from grpo_debug.tools.rundir.analyze import remap
    from grpo_debug.tools.rundir.merge import Merged, Span, empty_context

    m = Merged(ctx=empty_context())
    m.spans = [Span(1, 15, "train.log", 0), Span(16, 20, "config.yaml", 15)]
    got = []
    for note, line in (("adds actor.clip_grad at line 18", 18), ("could not rewrite line 18 in place", None)):
        ed = Edit(key="k", line=line, new="x", note=note)
        remap(NS(findings=[NS(evidence=[], settings=[], edits=[ed], causes=[], next_checks=[], fix="")],
                 coverage=NS(not_understood_sample=[]), metrics={}), m)
        got.append((ed.line, ed.note))
    assert got == [(3, "adds actor.clip_grad at line 3 (in config.yaml)"),
                   (None, "could not rewrite line 3 of config.yaml in place")]
