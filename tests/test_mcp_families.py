"""The MCP surface of the families: the family tools, suggest and prompts through the SDK client, the size of
tools/list, and the MCP Inspector CLI as a third-party client (skipped without npx)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from mcp import Client

from grpo_debug.server.app import build_server
from grpo_debug.tools.families import OPERATIONS

pytestmark = pytest.mark.anyio


async def test_tools_list_fits_the_context_budget():
    async with Client(build_server()) as c:
        tools = (await c.list_tools()).tools
        size = len(json.dumps([t.model_dump(by_alias=True, exclude_none=True) for t in tools]))
        names = {t.name for t in tools}
    assert names >= {"triage", "playbook", "nan_guide", "muon_clipping", "stream_safety", "knowledge_map",
                     "explain_rule", "suggest"}
    assert size < 16_000, size
    for t in tools:  # plot answers with an image: no output schema (clients drop content beside structured content)
        assert t.annotations.read_only_hint is True and (t.output_schema or t.name == "plot"), t.name
        assert len(t.description) < 300, t.name


async def test_every_family_operation_answers_over_mcp():
    inputs = {"check": "torchrun pretrain_gpt.py --optimizer muon --use-distributed-optimizer --fp16",
              "diagnose": "loss is nan", "avoid": "", "analyze": "with torch.cuda.stream(s):\n    y = x * 2\n",
              "theory": "muon", "bug": "#8061", "decision": "MUST DO 2", "proof": "fp16", "cross": "lora"}
    async with Client(build_server()) as c:
        for family, ops in OPERATIONS.items():
            for op in (*ops, "rtx4090"):
                args = {"operation": op}
                if inputs.get(op):
                    args["text"] = inputs[op]
                r = await c.call_tool(family, args)
                assert not r.is_error, (family, op, r.content)
                sc = r.structured_content
                assert sc["family"] == family and sc["summary"]
                if op in ("gpu", "rtx4090"):
                    assert sc["gpu"]["id"] == "rtx4090"


async def test_family_errors_are_tool_errors_naming_the_argument():
    async with Client(build_server()) as c:
        for family, ops in OPERATIONS.items():  # no text: the whole view, then how to give an input
            for op in ops:
                r = await c.call_tool(family, {"operation": op})
                assert not r.is_error and r.structured_content["items"], (family, op, r.content)
        r = await c.call_tool("playbook", {"operation": "gpu", "gpu": "voodoo5"})
        assert r.is_error and "unknown GPU" in r.content[0].text
        r = await c.call_tool("playbook", {"operation": "explode"})
        assert r.is_error and "operation" in r.content[0].text


async def test_suggest_and_trigger_prompts():
    async with Client(build_server()) as c:
        r = await c.call_tool("suggest", {"text": "GRPO NaN after 200 steps"})
        assert r.structured_content["tools"][0]["tool"] == "nan_guide"
        names = {p.name for p in (await c.list_prompts()).prompts}
        assert names >= {"debug_nan", "debug_loss_plateau", "debug_gradient_explosion", "debug_logprob_mismatch",
                         "debug_reward_zero", "debug_training_crash", "debug_muon_clipping", "debug_stream_safety"}
        p = await c.get_prompt("debug_muon_clipping", {"details": "plateau at step 300"})
        assert "muon_clipping" in p.messages[0].content.text and "plateau at step 300" in p.messages[0].content.text


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("npx") is None, reason="npx (Node.js) not installed")
def test_mcp_inspector_cli_lists_and_calls_tools(tmp_path):
    """A third-party client: @modelcontextprotocol/inspector@2.12.0 --cli (mcp_sdk_notes.md 3.1)."""
    base = ["npx", "-y", "@modelcontextprotocol/inspector@2.12.0", "--cli", sys.executable, "-m",
            "grpo_debug.server.cli", "serve"]
    env = {"HOME": str(tmp_path), "npm_config_cache": str(tmp_path / "npm"), "PATH": __import__("os").environ["PATH"]}
    try:
        out = subprocess.run([*base, "--method", "tools/list", "--format", "json", "-q"], capture_output=True,
                             text=True, timeout=240, env=env)
    except subprocess.TimeoutExpired:
        pytest.skip("npx could not fetch the inspector in time (offline?)")
    if out.returncode != 0 and ("ENOTFOUND" in out.stderr or "EAI_AGAIN" in out.stderr or "network" in out.stderr.lower()):
        pytest.skip("npm registry not reachable")
    assert out.returncode == 0, out.stderr[-800:]
    names = {t["name"] for t in json.loads(out.stdout)["result"]["tools"]}
    assert {"triage", "nan_guide", "knowledge_map"} <= names
    out = subprocess.run([*base, "--method", "tools/call", "--tool-name", "knowledge_map", "--tool-arg",
                          "operation=proof", "text=fp16", "--format", "json", "-q"], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-800:]
    res = json.loads(out.stdout)
    res = res.get("result", res)
    assert res["structuredContent"]["items"][0]["id"] == "fp16-exp-overflow-logit"
