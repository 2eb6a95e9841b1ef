"""Issue 21's blocking and runaway attacks through a real MCP server (in-process SDK client) whose heavy calls
run in worker processes: each is answered within 15 s with a clear error or an "unknown", the process tree
stays small, and the server answers another call afterwards. Inputs (FIFOs, links to /dev/zero, a tokenizer.json
whose normalizer multiplies its input) are made at test time."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from grpo_debug.server.app import build_server
from grpo_debug.server.limits import Limits

pytestmark = [pytest.mark.slow, pytest.mark.anyio]
BUDGET_S = 15.0


def _text(r) -> str:
    return " ".join(getattr(x, "text", "") for x in r.content)


def _server(root: Path, **kw):
    return build_server(allowed_roots=[root], limits=Limits(**{"workers": 2, "queue": 2, "call_timeout": 5.0,
                                                               "pool": "process", **kw}))


def _children_rss_mb() -> list[float]:
    """VmRSS (MB) of each descendant of this process (the zygote, the workers, their children)."""
    from tests.hostile.procs import tree_rss_mb

    return list(tree_rss_mb(os.getpid(), include_root=False).values())


async def _timed(c, tool: str, args: dict) -> tuple[object, float]:
    t = time.monotonic()
    r = await c.call_tool(tool, args)
    return r, time.monotonic() - t


async def test_estimate_config_json_fifo_or_dev_zero_is_unknown_at_once(tmp_path):
    os.mkfifo(tmp_path / "config.json")
    zero = tmp_path / "zero"
    zero.mkdir()
    (zero / "config.json").symlink_to("/dev/zero")
    async with Client(_server(tmp_path)) as c:
        for target, words in ((tmp_path / "config.json", "FIFO"), (zero, "device")):
            r, took = await _timed(c, "probe_host", {"estimate": {"config_json": str(target), "zero_stage": 3}})
            assert took < BUDGET_S
            text = json.dumps(r.structured_content) if r.structured_content else _text(r)
            assert words in text and "not a regular file" in text, text[:800]
        r = await c.call_tool("triage", {"text": "step:1 - actor/grad_norm:nan\n"})
        assert not r.is_error


async def test_tokenizer_whose_normalizer_multiplies_the_stop_string_is_unknown(tmp_path):
    pytest.importorskip("tokenizers")
    norm = {"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"String": "a"},
                                                 "content": "a" * 10}] * 12}
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": norm,
           "pre_tokenizer": None, "post_processor": None, "decoder": None,
           "model": {"type": "WordLevel", "vocab": {"a": 0, "[UNK]": 1}, "unk_token": "[UNK]"}}
    (tmp_path / "tokenizer.json").write_text(json.dumps(tok, separators=(",", ":")))
    peak: list[float] = []
    async with Client(_server(tmp_path, call_timeout=30.0)) as c:
        async def sample() -> None:
            while True:
                peak.extend(_children_rss_mb())
                await anyio.sleep(0.05)

        async with anyio.create_task_group() as tg:
            tg.start_soon(sample)
            r, took = await _timed(c, "probe_host", {"tokenizer": str(tmp_path), "stop": ["</a>"]})
            tg.cancel_scope.cancel()
        assert took < BUDGET_S, took
        tokr = (r.structured_content or {}).get("tokenizer") or {}
        assert tokr.get("unknown") and "memory limit" in tokr.get("reason", ""), (r.structured_content or _text(r))
        assert peak and max(peak) < 512 + 64, max(peak)
        r = await c.call_tool("suggest", {"text": "loss is nan"})
        assert not r.is_error


async def test_a_12_mib_suggest_is_cut_and_answers_in_seconds(tmp_path):
    async with Client(_server(tmp_path)) as c:
        r, took = await _timed(c, "suggest", {"text": "reward collapse after step 40 " * (12 * 2**20 // 30)})
        assert not r.is_error and took < BUDGET_S, (took, _text(r)[:300])
        assert "only the first 65536" in r.structured_content["summary"]


async def test_fifos_in_a_run_folder_never_fill_the_pool(tmp_path):
    """Two triage calls on run folders whose metric store holds a FIFO; whether the readers refuse it or block on
    it, the answers come within the budget and a third call is served."""
    run = tmp_path / "mlruns" / "0" / "abc123"
    for sub in ("params", "metrics"):
        (run / sub).mkdir(parents=True)
    (run / "meta.yaml").write_text("run_id: abc123\nstatus: 3\n")
    (run / "metrics" / "loss").write_text("1700000000000 0.5 1\n1700000001000 nan 2\n")
    os.mkfifo(run / "params" / "lr")
    os.mkfifo(run / "metrics" / "grad_norm")
    async with Client(_server(tmp_path)) as c:
        out: list = []

        async def one() -> None:
            out.append(await _timed(c, "triage", {"path": str(tmp_path / "mlruns")}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
        assert len(out) == 2 and all(took < BUDGET_S for _, took in out), [t for _, t in out]
        r, took = await _timed(c, "triage", {"text": "step:1 - actor/grad_norm:nan\n"})
        assert not r.is_error and took < BUDGET_S


FOLDER_ATTACKS = ["fifo_in_mlflow_params", "fifo_csv_in_deepspeed", "mlflow_db_endless_view", "mlflow_db_generated_column",
                  "tensorboard_huge_length", "mlflow_metric_huge_line", "verl_jsonl_huge_line", "wandb_huge_summary",
                  "jsonl_bad_step_after_nan", "jsonl_deeply_nested_beside_log", "jsonl_million_keys", "gz_newline_bombs"]


@pytest.mark.parametrize("name", FOLDER_ATTACKS)
async def test_each_folder_attack_over_mcp_answers_in_bounds_and_the_server_goes_on(tmp_path, name):
    """Issue 21's folder and store attacks through a real MCP server (process pool, SDK client): each triage answers
    within 15 s, no worker passes 512 MB, and another call is answered right after."""
    from tests.hostile import folders as H

    path = H.ATTACKS[name](tmp_path)
    peak = [0.0]

    async def watch_rss():
        while True:
            peak[0] = max([peak[0], *_children_rss_mb()])
            await anyio.sleep(0.1)

    async with Client(_server(tmp_path, call_timeout=30.0)) as c:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_rss)
            r, took = await _timed(c, "triage", {"path": str(path)})
            tg.cancel_scope.cancel()
        assert not r.is_error, _text(r)[:300]
        assert took < BUDGET_S, f"{name}: {took:.1f} s"
        assert peak[0] < 512, f"{name}: a worker reached {peak[0]:.0f} MB"
        r2, took2 = await _timed(c, "triage", {"text": "step:1 - actor/grad_norm:nan\n"})
        assert not r2.is_error and took2 < BUDGET_S
