"""The grpo-debug CLI (server/cli.py) and the text renderers (tools/render/triage.py)."""
from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_debug.server.cli import main
from grpo_debug.tools.models import Cause, Coverage, Evidence, Finding, SeriesSummary, TriageResult

LOG = """\
(TaskRunner pid=1234) step:1 - actor/entropy:0.912 - actor/pg_loss:0.012 - actor/grad_norm:0.412 - critic/score/mean:0.281
(TaskRunner pid=1234) step:2 - actor/entropy:0.905 - actor/pg_loss:-0.004 - actor/grad_norm:3.184 - critic/score/mean:0.266
(WorkerDict pid=1240) WARN: rank 0 grad_norm is not finite: nan
(TaskRunner pid=1234) step:3 - actor/entropy:0.921 - actor/pg_loss:0.009 - actor/grad_norm:nan - critic/score/mean:0.273
"""


@pytest.fixture
def log_file(tmp_path) -> Path:
    p = tmp_path / "run.log"
    p.write_text(LOG, encoding="utf-8")
    return p


def _stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


# ---------------------------------------------------------------------------- triage

def test_triage_json_is_the_model_dump(log_file, capsys):
    assert main(["triage", str(log_file), "--format", "json"]) == 0
    out = capsys.readouterr().out
    result = TriageResult.model_validate_json(out)
    assert out == result.model_dump_json(indent=2) + "\n"
    data = json.loads(out)
    assert {"summary", "findings", "metrics", "coverage"} <= set(data)


def test_triage_text(log_file, capsys):
    assert main(["triage", str(log_file)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("grpo-debug triage: ")
    assert "Coverage: " in out
    assert "\x1b[" not in out  # no colour when stdout is not a TTY


def test_triage_stdin(monkeypatch, capsys):
    _stdin(monkeypatch, LOG.encode())
    assert main(["triage", "-", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["coverage"]["input"] == "<text>"


def test_triage_stdin_bad_utf8_is_not_a_crash(monkeypatch, capsys):
    _stdin(monkeypatch, b"step:1 - actor/grad_norm:\xff\xfe nan\n")
    assert main(["triage", "-", "--format", "json"]) == 0
    json.loads(capsys.readouterr().out)


def test_triage_example(capsys):
    assert main(["triage", "--example", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["coverage"]["input"].endswith("verl_grpo_nan.log")


def test_triage_example_unknown(capsys):
    assert main(["triage", "--example", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("grpo-debug: error: ") and "verl_grpo_nan" in err


@pytest.mark.parametrize("argv", [["triage"], ["triage", "x.log", "--example"]])
def test_triage_needs_exactly_one_input(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("grpo-debug: error: ") and "PATH" in err and "--example" in err


@pytest.mark.parametrize("bad", ["0", "101", "x"])
def test_max_findings_is_bounded(bad, capsys):
    with pytest.raises(SystemExit) as e:
        main(["triage", "-", "--max-findings", bad])
    assert e.value.code == 2


def test_input_error_is_one_line(monkeypatch, capsys):
    from grpo_debug.tools import triage as triage_mod

    def boom(*a, **k):
        raise triage_mod.InputError("/x/run.log does not exist; check the path")

    monkeypatch.setattr(triage_mod, "triage", boom)
    assert main(["triage", "/x/run.log"]) == 2
    err = capsys.readouterr().err
    assert err == "grpo-debug: error: /x/run.log does not exist; check the path\n"


@pytest.mark.parametrize("exc, words", [(FileNotFoundError(2, "No such file"), "does not exist"),
                                        (IsADirectoryError(21, "Is a directory"), "is a folder"),
                                        (PermissionError(13, "Permission denied"), "permission denied")])
def test_os_errors_from_the_engine_are_one_line(monkeypatch, capsys, exc, words):
    from grpo_debug.tools import triage as triage_mod

    def boom(*a, **k):
        raise exc

    monkeypatch.setattr(triage_mod, "triage", boom)
    assert main(["triage", "/x/run.log"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("grpo-debug: error: /x/run.log ") and words in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_internal_error_has_no_traceback(monkeypatch, capsys):
    from grpo_debug.tools import triage as triage_mod

    def boom(*a, **k):
        raise RuntimeError("kaput")

    monkeypatch.setattr(triage_mod, "triage", boom)
    assert main(["triage", "/x/run.log"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("grpo-debug: internal error: RuntimeError: kaput") and "Traceback" not in err
    with pytest.raises(RuntimeError):
        main(["--debug", "triage", "/x/run.log"])


@pytest.mark.engine
def test_triage_missing_path(tmp_path, capsys):
    missing = tmp_path / "nope.log"
    assert main(["triage", str(missing)]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err.startswith("grpo-debug: error: ") and str(missing) in cap.err
    assert cap.err.count("\n") == 1 and "Traceback" not in cap.err


@pytest.mark.engine
def test_triage_directory(tmp_path, capsys):
    assert main(["triage", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("grpo-debug: error: ") and str(tmp_path) in err


@pytest.mark.engine
def test_example_finds_the_nan(example_log, capsys):
    """The bundled example: grad_norm climbs then turns nan at step 9 (verl WARN line + metric line)."""
    lines = example_log.read_text(encoding="utf-8").splitlines()
    nan_lines = {i for i, s in enumerate(lines, 1) if "not finite: nan" in s or "actor/grad_norm:nan" in s}
    assert main(["triage", "--example", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    top = data["findings"][:3]
    assert any(f["symptom"] == "nan_inf" for f in top), [f["symptom"] for f in top]
    cited = {e["line"] for f in top for e in f["evidence"]}
    assert cited & nan_lines
    gn = data["metrics"].get("actor/grad_norm")
    assert gn and gn["first_nonfinite_step"] == 9


@pytest.mark.engine
def test_shared_case_nan(shared_case, capsys):
    assert main(["triage", str(shared_case), "--format", "json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"][:3]
    assert any(f["symptom"] == "nan_inf" for f in findings)


# ---------------------------------------------------------------------------- rules

def test_rule_page_text_and_json(rule_pack, capsys):
    assert main(["rule", rule_pack]) == 0
    out = capsys.readouterr().out
    for words in (rule_pack, "symptom: nan_inf", "confidence: high", "What:", "Why:", "Fix:", "1. first step",
                  "Safety: review", "Applies to: verl", "[unverified] https://example.invalid/fixture",
                  "Examples: 2 (1 match, 1 no_match)"):
        assert words in out, words
    assert main(["rule", rule_pack, "--format", "json"]) == 0
    page = json.loads(capsys.readouterr().out)
    assert page["id"] == rule_pack and page["sources"][0]["status"] == "unverified"
    assert page["patch"] == {"actor_rollout_ref.actor.optim.clip_grad": 1.0}
    assert {e["expect"] for e in page["examples"]} == {"match", "no_match"}


def test_rule_unknown_lists_close_ids(rule_pack, capsys):
    assert main(["rule", rule_pack[:-3]]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err.startswith("grpo-debug: error: unknown rule id") and rule_pack in cap.err


def test_rules_list(rule_pack, capsys):
    assert main(["rules"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(rule_pack))
    assert "nan_inf" in row and "Fixture rule" in row
    assert main(["rules", "--symptom", "nan_inf", "--format", "json"]) == 0
    ids = [r["id"] for r in json.loads(capsys.readouterr().out)]
    assert rule_pack in ids
    assert main(["rules", "--symptom", "bogus"]) == 2


def test_every_packaged_rule_renders():
    from grpo_debug.skills.loader import load_rules
    from grpo_debug.tools.render.rule import render_rule_markdown, render_rule_text

    rules = list(load_rules(include_env=False))
    if not rules:
        pytest.skip("no packaged rules yet")
    for r in rules:
        assert r.id in render_rule_text(r)
        assert render_rule_markdown(r).startswith(f"# {r.id}: ")


# ---------------------------------------------------------------------------- render

def _result() -> TriageResult:
    return TriageResult(
        summary="actor/grad_norm climbed from 0.41 to 24.7, then went nan at step 9.",
        findings=[Finding(
            symptom="nan_inf", title="Gradient norm is nan from step 9", confidence="high",
            evidence=[Evidence(line=55, text="WARN: rank 0 grad_norm is not finite: nan", source="WorkerDict pid=1"),
                      Evidence(line=56, text="WARN: rank 8 [repeated 63x across cluster] [bold]x[/bold]")],
            causes=[Cause(rule_id="some-rule", title="t", why="the mechanism", fix="f", verified=False)],
            fix="Set actor_rollout_ref.actor.optim.lr=1e-6", patch={"actor_rollout_ref.actor.optim.lr": 1e-6},
            next_checks=["grpo-debug rule some-rule"], sharpen=["the full launch command"])],
        metrics={"actor/grad_norm": SeriesSummary(points=10, first_step=1, last_step=10, first=0.412,
                                                  last=float("nan"), min=0.412, max=24.733,
                                                  first_nonfinite_step=9, first_nonfinite_line=57),
                 "actor/entropy": SeriesSummary(points=10, first_step=1, last_step=10, first=0.912, last=2.694,
                                                min=0.905, max=2.71)},
        coverage=Coverage(input="run.log", bytes_read=9000, lines_read=61, formats=["verl", "ray"], metric_lines=11,
                          lines_not_understood=3, skipped=["2 binary lines"]))


def test_render_triage_text():
    from grpo_debug.tools.render.triage import render_triage_text

    out = render_triage_text(_result())
    for words in ("1. [nan_inf] Gradient norm is nan from step 9  (confidence: high)",
                  "L55: WARN: rank 0 grad_norm is not finite: nan  (WorkerDict pid=1)",
                  "[repeated 63x across cluster] [bold]x[/bold]",  # log text is never read as markup
                  "- some-rule: the mechanism [unverified source]", "Fix: Set actor_rollout_ref.actor.optim.lr=1e-6",
                  "Next checks:", "Would sharpen this:", "Metrics", "step 9 (L57)", "Coverage: 61 lines",
                  "skipped: 2 binary lines"):
        assert words in out, words
    assert out.index("actor/grad_norm") < out.index("actor/entropy")  # non-finite series first
    assert "\x1b[" not in out
    assert "\x1b[" in render_triage_text(_result(), color=True)


def test_render_empty_result():
    from grpo_debug.tools.render.triage import render_triage_text

    out = render_triage_text(TriageResult(summary="nothing", coverage=Coverage(input="<text>")))
    assert "0 findings" in out and "Metrics" not in out


def test_fmt_num():
    from grpo_debug.tools.render.text import fmt_num

    assert [fmt_num(x) for x in (None, float("nan"), float("-inf"), 3.0, 0.41234, 123456.7, 2e-6)] == \
        ["-", "nan", "-inf", "3", "0.4123", "1.23e+05", "2e-06"]


# ---------------------------------------------------------------------------- process-level

def _console_script() -> str | None:
    cand = Path(sys.executable).parent / "grpo-debug"
    return str(cand) if cand.is_file() else shutil.which("grpo-debug")


def test_version_console_script(tmp_path):
    exe = _console_script()
    if exe is None:
        pytest.skip("grpo-debug console script not installed")
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.startswith("grpo-debug ") and proc.stdout.split()[1][0].isdigit()


def test_cli_import_is_lean(tmp_path):
    code = ("import sys, grpo_debug.server.cli; "
            "print(sorted(m for m in ('torch', 'ray', 'pynvml', 'mcp', 'rich') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_console_script_usage_error_is_one_line(tmp_path):
    exe = _console_script()
    if exe is None:
        pytest.skip("grpo-debug console script not installed")
    proc = subprocess.run([exe, "triage"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("grpo-debug: error: ")


@pytest.mark.parametrize("word", ["ds_confg.json", "/nope/ds.json", "./missing.sh", "~/run.log"])
def test_family_input_that_can_only_be_a_missing_file_is_an_error(word, capsys):
    """A mistyped file name was read as symptom words and answered 'no risk matched', exit 0."""
    assert main(["nan_guide", "check", word]) == 2
    assert "no such file" in capsys.readouterr().err


def test_family_input_words_with_a_slash_stay_words(capsys):
    assert main(["nan_guide", "diagnose", "actor/entropy"]) == 0
    assert "metric-nonfinite" in capsys.readouterr().out
