"""The probe surface: grpo-debug probe / MCP probe_host, and rules over host facts."""
from __future__ import annotations

import json

import pytest
from mcp import Client

from grpo_debug.server.app import build_server
from grpo_debug.server.cli import main
from grpo_debug.tools.probe_report import findings_from_probe_facts, run_probe


def test_probe_cli_json_has_facts_or_reasons(capsys):
    assert main(["probe", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["facts"]["probe.python"].count(".") == 2
    assert isinstance(d["facts"]["probe.ulimit_nofile"], int)
    gpus = d["host"]["gpus"]
    assert gpus["available"] or gpus["reason"], "no GPU must come with its reason"


def test_rules_over_host_facts():
    ids = lambda fs: {c.rule_id for f in fs for c in f.causes}  # noqa: E731
    assert "host-open-files-limit-low" in ids(findings_from_probe_facts({"probe.ulimit_nofile": 1024}))
    assert not ids(findings_from_probe_facts({"probe.ulimit_nofile": 1048576, "probe.dev_shm_gib": 32.0}))
    assert "dev-shm-too-small" in ids(findings_from_probe_facts({"probe.dev_shm_gib": 0.0625}))
    fs = findings_from_probe_facts({"probe.gpu_bf16": False}, config_text='{\n  "bf16": {"enabled": true}\n}\n')
    assert "bf16-config-on-gpu-without-bf16" in ids(fs)
    assert fs[0].evidence and fs[0].evidence[0].line == 2


def test_probe_extras_checkpoint_and_estimate(tmp_path):
    (tmp_path / "iter_0000100").mkdir()
    res = run_probe(host=False, checkpoint=str(tmp_path), estimate={"params_b": 7, "gpu": "rtx4090"})
    assert any("latest_checkpointed_iteration" in i["message"] for i in res.checkpoint["issues"])
    assert res.memory["fits"] is False and "rtx4090" in json.dumps(res.memory)


@pytest.mark.anyio
async def test_probe_host_over_mcp():
    async with Client(build_server()) as c:
        r = await c.call_tool("probe_host", {})
        assert not r.is_error and "probe.python" in r.structured_content["facts"]
        r = await c.call_tool("probe_host", {"tokenizer": "/nonexistent"})
        assert r.is_error and "stop" in r.content[0].text


@pytest.mark.gpu
def test_numerics_on_a_free_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    res = run_probe(numerics=True, device="cuda")
    cuda = (res.host["numerics"] or {}).get("results", {}).get("cuda")
    skipped = (res.host["numerics"] or {}).get("skipped", {})
    assert cuda or skipped, res.host["numerics"]
    if cuda and not cuda.get("unknown"):
        assert abs(cuda["fp16_exp_overflow"] - 11.09) < 0.02
