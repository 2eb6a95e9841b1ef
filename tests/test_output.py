"""Answers a person can read: concise by default (--verbose for the rest), hints not repeated, metric names
never broken, `check` headed as check, binary input refused, `serve` in a terminal says what it waits for,
a bad enum value over MCP answered with the allowed values."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from mcp import Client

from grpo_debug.server.app import build_server
from grpo_debug.server.cli import main
from grpo_debug.tools.models import Coverage, Finding, SeriesSummary, TriageResult
from grpo_debug.tools.render.triage import render_triage_text

LOG = "\n".join([f"step:{i} - actor/grad_norm:{0.5 if i < 6 else 'nan'} - actor/pg_loss:{0.1 * i} - "
                 f"actor/entropy:{1.0 - 0.01 * i}" for i in range(1, 12)]) + "\n"


def _finding(n: int) -> Finding:
    return Finding(symptom="nan_inf", title=f"finding {n}", confidence="high", fix="set x",
                   next_checks=["pip list | grep -i torch", f"check {n}"], sharpen=["the pip list output"])


def test_concise_by_default_and_hints_once():
    res = TriageResult(summary="s", coverage=Coverage(input="<text>"), findings=[_finding(1), _finding(2)])
    concise = render_triage_text(res, verbose=False)
    full = render_triage_text(res, verbose=True)
    assert len(concise.splitlines()) < len(full.splitlines()) and "--verbose" in concise
    assert full.count("pip list | grep -i torch") == 1 and full.count("the pip list output") == 1


def test_metric_names_are_never_broken():
    name = "actor/rollout_corr/very_long_metric_name_for_the_table"
    res = TriageResult(summary="s", coverage=Coverage(input="<text>"),
                       metrics={name: SeriesSummary(points=3, first=1.0, last=2.0, min=1.0, max=2.0)})
    assert any(name in line for line in render_triage_text(res, width=70).splitlines())


def test_check_is_headed_check(tmp_path, capsys):
    cfg = tmp_path / "ds.json"
    cfg.write_text('{"fp16": {"enabled": true}, "bf16": {"enabled": true}}\n')
    assert main(["check", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("grpo-debug check:") and "grpo-debug triage:" not in out


def test_triage_text_is_concise_unless_verbose(tmp_path, capsys):
    log = tmp_path / "run.log"
    log.write_text(LOG)
    assert main(["triage", str(log)]) == 0
    short = capsys.readouterr().out
    assert main(["triage", str(log), "--verbose"]) == 0
    assert len(short.splitlines()) <= len(capsys.readouterr().out.splitlines())


def test_binary_input_is_refused(tmp_path, capsys):
    lib = tmp_path / "libnccl.so.2"
    lib.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 64 + b"NCCL WARN Call to ibv_reg_mr failed\n")
    assert main(["triage", str(lib)]) == 2
    cap = capsys.readouterr()
    assert "shared library" in cap.err and "collective" not in cap.out + cap.err and "\x7f" not in cap.err
    assert main(["nan_guide", "check", str(lib)]) == 2


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_serve_in_a_terminal_says_it_waits_for_a_client():
    master, slave = os.openpty()
    p = subprocess.Popen([sys.executable, "-m", "grpo_debug.server.cli", "serve"], stdin=slave,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 30
        err = b""
        os.set_blocking(p.stderr.fileno(), False)
        while time.time() < deadline and b"waiting for an MCP client" not in err:
            time.sleep(0.2)
            err += p.stderr.read() or b""
    finally:
        p.kill()
        p.wait()
        os.close(master)
        os.close(slave)
    assert b"waiting for an MCP client" in err and b"mcp add" in err, err


@pytest.mark.anyio
async def test_bad_enum_over_mcp_lists_the_allowed_values():
    async with Client(build_server()) as c:
        r = await c.call_tool("playbook", {"operation": "explode"})
    text = r.content[0].text
    assert r.is_error and "'explode' is not allowed" in text and "symptoms" in text
    assert "pydantic" not in text and "validation error" not in text


def test_metric_table_shows_a_series_that_ended_non_finite():
    """The JSON summary maps NaN/Inf to null; the table says the last value was non-finite instead of '-', and a
    float NaN/Inf (an in-process summary) is spelled out."""
    from grpo_debug.tools.triage import triage_text

    res = triage_text(LOG)  # grad_norm turns nan at step 6 and stays so
    assert res.metrics["actor/grad_norm"].last is None
    row = next(ln for ln in render_triage_text(res, verbose=True, width=140).splitlines() if ln.startswith("actor/grad_norm"))
    assert row.split()[3:5] == ["0.5", "nan/inf"], row
    res = TriageResult(summary="s", coverage=Coverage(input="<text>"), metrics={
        "loss": SeriesSummary(points=2, first=1.0, last=float("inf"), min=1.0, max=1.0, first_nonfinite_step=2),
        "kl": SeriesSummary(points=2, first=0.1, last=None, min=0.1, max=0.1)})  # a last value not known: '-'
    rows = {ln.split()[0]: ln.split() for ln in render_triage_text(res, width=140).splitlines() if ln.startswith(("loss", "kl "))}
    assert rows["loss"][4] == "inf" and rows["kl"][4] == "-"
