"""Serving over HTTP and the MCP surface's safety limits: Host/Origin validation, the bearer token,
refusing a non-loopback bind without one, stateless mode, path confinement, the pasted-text limit, bounded
answer sizes, completion and logging/setLevel."""
from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.types import ResourceTemplateReference

from grpo_debug.server.app import MAX_TEXT_BYTES, build_server
from grpo_debug.server.paths import PathNotAllowed, default_roots, resolve_path

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # real servers on real sockets

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
TOKEN = "9f2c41d7b08e5a63c1f47e2d90b8a5c3e7d16f04a29b8c5e3f71d0a6b4c92e58"  # 256 bits, as `openssl rand -hex 32`


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _text(r) -> str:
    return r.content[0].text if r.content else ""


# ---------------------------------------------------------------------------- a server in a subprocess

def _post(port: int, body=INIT, **headers) -> httpx.Response:
    return httpx.post(f"http://127.0.0.1:{port}/mcp", json=body, headers={**HEADERS, **headers}, timeout=30)


def test_loopback_validates_host_and_origin(serve_http):
    with serve_http() as (port, _):
        ok = _post(port)
        assert ok.status_code == 200, ok.text
        assert ok.headers.get("mcp-session-id")
        assert _post(port, Host=f"evil.example:{port}").status_code == 421
        assert _post(port, Origin="http://evil.example").status_code == 403
        assert _post(port, Origin="http://localhost:6274").status_code == 200
        assert _post(port, Host=f"localhost:{port}").status_code == 200


def test_non_loopback_bind_without_token_refuses_to_start(tmp_path):
    env = {**os.environ}
    env.pop("GRPO_DEBUG_TOKEN", None)
    for host in ("0.0.0.0", "192.0.2.10"):
        p = subprocess.run([sys.executable, "-m", "grpo_debug.server.cli", "serve", "--transport", "http",
                            "--host", host, "--port", str(free_port())], capture_output=True, text=True,
                           timeout=60, env=env)
        assert p.returncode == 2, p.stderr
        assert "needs a bearer token" in p.stderr and "--token-file" in p.stderr and "GRPO_DEBUG_TOKEN" in p.stderr
    bad = tmp_path / "short"
    bad.write_text("abc\n")
    p = subprocess.run([sys.executable, "-m", "grpo_debug.server.cli", "serve", "--transport", "http", "--host",
                        "0.0.0.0", "--token-file", str(bad)], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2 and "at least 32 characters" in p.stderr and "openssl rand -hex 32" in p.stderr, p.stderr
    p = subprocess.run([sys.executable, "-m", "grpo_debug.server.cli", "serve", "--transport", "http", "--host",
                        "0.0.0.0", "--token-file", str(tmp_path / "missing")], capture_output=True, text=True,
                       timeout=60, env=env)
    assert p.returncode == 2 and "cannot read" in p.stderr, p.stderr


def test_token_is_required_on_every_request(tmp_path, serve_http):
    tf = tmp_path / "token"
    tf.write_text(TOKEN + "\n")
    tf.chmod(0o600)
    with serve_http("--host", "0.0.0.0", "--token-file", str(tf), "--allow-host", "mcp.example") as (port, _):
        assert _post(port).status_code == 401
        assert _post(port, Authorization="Bearer wrong-token-wrong-token").status_code == 401
        assert _post(port, Authorization=TOKEN).status_code == 401  # no scheme
        r = _post(port, Authorization=f"Bearer {TOKEN}")
        assert r.status_code == 200, r.text
        assert httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=10).status_code == 401
        # a non-loopback bind still validates Host (against the bound host, the machine's names, --allow-host)
        assert _post(port, Authorization=f"Bearer {TOKEN}", Host=f"evil.example:{port}").status_code == 421
        assert _post(port, Authorization=f"Bearer {TOKEN}", Host=f"mcp.example:{port}").status_code == 200
        assert _post(port, Authorization=f"Bearer {TOKEN}", Origin="http://evil.example").status_code == 403


def test_token_from_env_on_loopback_is_enforced_too(serve_http):
    with serve_http(env={"GRPO_DEBUG_TOKEN": TOKEN}) as (port, _):
        assert _post(port).status_code == 401
        assert _post(port, Authorization=f"Bearer {TOKEN}").status_code == 200


async def test_sdk_client_over_http_with_token(tmp_path, serve_http):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    log = tmp_path / "run.log"
    log.write_text("step:1 - actor/grad_norm:nan\n")
    with serve_http("--allow", str(tmp_path), env={"GRPO_DEBUG_TOKEN": TOKEN}) as (port, _):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as hc:
            async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=hc)) as c:
                names = {t.name for t in (await c.list_tools()).tools}
                assert {"triage", "probe_host", "suggest"} <= names
                r = await c.call_tool("triage", {"path": str(log)})
                assert not r.is_error, _text(r)
                r = await c.call_tool("triage", {"path": "/etc/passwd"})
                assert r.is_error and "outside the allowed roots" in _text(r)


def test_stateless_answers_without_a_session(serve_http):
    with serve_http("--stateless") as (port, _):
        r = _post(port, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("application/json")
        assert "mcp-session-id" not in r.headers
        assert any(t["name"] == "triage" for t in r.json()["result"]["tools"])


def test_serve_flags_need_http():
    from grpo_debug.server.cli import main

    assert main(["serve", "--port", "9999"]) == 2


# ---------------------------------------------------------------------------- paths

def test_resolve_path_refusals(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "a.log").write_text("x")
    (tmp_path / "outside.log").write_text("secret")
    (root / "link_in").symlink_to(root / "a.log")
    (root / "link_out").symlink_to(tmp_path / "outside.log")
    (root / "dir_out").symlink_to(tmp_path)
    os.mkfifo(root / "fifo")
    roots = [root]

    assert resolve_path(root / "a.log", roots) == (root / "a.log").resolve()
    assert resolve_path("a.log", roots, base=root) == (root / "a.log").resolve()
    assert resolve_path(root / "link_in", roots) == (root / "a.log").resolve()
    assert resolve_path(root / "sub", roots, kind="dir") == (root / "sub").resolve()
    assert resolve_path(root / "sub", roots, kind="any") == (root / "sub").resolve()

    def refused(p, match, **kw):
        with pytest.raises(PathNotAllowed, match=match):
            resolve_path(p, roots, **kw)

    refused(str(root / ".." / "outside.log"), r"'\.\.' climbs out")
    refused("../outside.log", r"'\.\.' climbs out", base=root)
    refused("sub/../../outside.log", r"'\.\.' climbs out", base=root)
    refused(str(tmp_path / "outside.log"), "outside the allowed roots")
    refused("/etc/passwd", "outside the allowed roots")
    refused(root / "link_out", "symlink pointing outside")
    refused(root / "dir_out" / "outside.log", "symlink pointing outside")
    refused(root / "fifo", "FIFO")
    refused(root / "missing.log", "missing.log: no such file")
    refused(root / "sub", "is a directory, not a regular file")
    refused(root / "a.log", "not a folder", kind="dir")
    refused("", "empty")
    refused("a\x00b", "NUL")
    with pytest.raises(PathNotAllowed, match="a device"):
        resolve_path("/dev/null", [Path("/dev")])
    sock_path = root / "s.sock"
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(sock_path))
        assert stat.S_ISSOCK(os.stat(sock_path).st_mode)
        refused(sock_path, "a socket", kind="any")
    finally:
        s.close()
    # ".." that stays inside is fine
    assert resolve_path("sub/../a.log", roots, base=root) == (root / "a.log").resolve()


def test_default_roots_from_env_and_allow(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    roots = default_roots([b, tmp_path / "nope"], env={"GRPO_DEBUG_ALLOW": f"{a}{os.pathsep}"}, cwd=tmp_path)
    assert roots == [tmp_path.resolve(), a.resolve(), b.resolve()]


def test_allowed_folder_written_through_a_symlink(tmp_path):
    """An allowed folder is stored resolved; a path written through a symlinked folder that leads into it is
    read (macOS /tmp -> /private/tmp; CI once ran with ../shared a link, and the shared case was refused as
    'outside the allowed roots'), while '..' and links that lead out are still refused."""
    real = tmp_path / "real"
    (real / "runs").mkdir(parents=True)
    (real / "runs" / "a.log").write_text("x")
    (tmp_path / "secret.log").write_text("s")
    alias = tmp_path / "alias"
    alias.symlink_to(real)
    (tmp_path / "out_alias").symlink_to(tmp_path)
    roots = default_roots([alias], cwd=real)
    assert roots == [real.resolve()]
    assert resolve_path(alias / "runs" / "a.log", roots) == (real / "runs" / "a.log").resolve()
    assert resolve_path(alias / "runs", roots, kind="dir") == (real / "runs").resolve()
    with pytest.raises(PathNotAllowed, match="no such file"):
        resolve_path(alias / "runs" / "missing.log", roots)
    for p, why in ((alias / ".." / "secret.log", r"'\.\.' climbs out"), (tmp_path / "out_alias" / "secret.log",
                   "outside the allowed roots"), (alias / "runs" / ".." / ".." / "secret.log", r"'\.\.' climbs out")):
        with pytest.raises(PathNotAllowed, match=why):
            resolve_path(p, roots)


async def test_every_path_taking_tool_is_confined(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside.log").write_text("step:1 - actor/grad_norm:nan\n")
    (root / "ok.log").write_text("step:1 - actor/grad_norm:nan\n")
    (root / "ckpt").mkdir()
    (root / "link").symlink_to(tmp_path / "outside.log")
    out = str(tmp_path / "outside.log")
    async with Client(build_server(allowed_roots=[root])) as c:
        cases = [("triage", {"path": out}, "`path`"), ("check_config", {"path": out}, "`path`"),
                 ("nan_guide", {"operation": "diagnose", "path": out}, "`path`"),
                 ("playbook", {"operation": "symptoms", "path": str(root / "link")}, "symlink"),
                 ("probe_host", {"checkpoint": str(tmp_path)}, "`checkpoint`"),
                 ("probe_host", {"tokenizer": out, "stop": ["</s>"]}, "`tokenizer`"),
                 ("probe_host", {"estimate": {"config_json": out}}, "`estimate.config_json`"),
                 ("triage", {"path": str(root / ".." / "outside.log")}, "climbs out")]
        for tool, args, named in cases:
            r = await c.call_tool(tool, args)
            assert r.is_error, (tool, args)
            assert named in _text(r) and ("outside" in _text(r) or "climbs out" in _text(r)), _text(r)
        r = await c.call_tool("triage", {"path": str(root / "ok.log")})
        assert not r.is_error, _text(r)
        r = await c.call_tool("probe_host", {"checkpoint": str(root / "ckpt")})
        assert not r.is_error, _text(r)
        r = await c.call_tool("triage", {"path": str(root / "missing.log")})
        assert r.is_error and "missing.log: no such file" in _text(r)


def test_cli_is_not_confined(tmp_path):
    """The CLI is the user's own shell: it reads any path."""
    log = tmp_path / "x.log"
    log.write_text("step:1 - actor/grad_norm:nan\n")
    p = subprocess.run([sys.executable, "-m", "grpo_debug.server.cli", "triage", str(log), "--format", "json"],
                       capture_output=True, text=True, timeout=120, cwd="/")
    assert p.returncode in (0, 1), p.stderr
    assert "allowed roots" not in p.stderr


# ---------------------------------------------------------------------------- limits

async def test_pasted_text_above_the_limit_is_refused_naming_it():
    big = "a" * (MAX_TEXT_BYTES + 1)
    async with Client(build_server()) as c:
        for tool, args in (("triage", {"text": big}), ("check_config", {"text": big}),
                           ("nan_guide", {"operation": "diagnose", "text": big}), ("suggest", {"text": big})):
            r = await c.call_tool(tool, args)
            assert r.is_error, tool
            assert "16 MiB" in _text(r) and "`text`" in _text(r), _text(r)
        # multi-byte characters count in bytes: 4.2 M four-byte characters are > 16 MiB
        r = await c.call_tool("triage", {"text": "\U0001F600" * (MAX_TEXT_BYTES // 4 + 1)})
        assert r.is_error and "16 MiB" in _text(r)


async def test_pasted_json_config_is_text_not_an_object():
    """The SDK json-decodes string arguments not typed plain `str`; a pasted JSON config must stay text."""
    cfg = json.dumps({"train_micro_batch_size_per_gpu": 1, "gradient_clipping": 0.0, "fp16": {"enabled": True}})
    async with Client(build_server()) as c:
        for tool, args in (("triage", {"text": cfg}), ("check_config", {"text": cfg}),
                           ("nan_guide", {"operation": "check", "text": cfg})):
            r = await c.call_tool(tool, args)
            assert not r.is_error, (tool, _text(r))
        r = await c.call_tool("triage", {"text": None, "path": None})  # null counts as not given
        assert r.is_error and "`text`" in _text(r)


def _largest_inputs(shared_root) -> list[str]:
    texts = []
    if shared_root:
        files = sorted((shared_root / "cases").glob("*/input.*"))
        texts.append("\n".join(f.read_text(encoding="utf-8", errors="replace") for f in files))
        texts.append(max((f.read_text(encoding="utf-8", errors="replace") for f in files), key=len))
    from grpo_debug.server import examples_dir

    ex = examples_dir()
    texts.append("\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(ex.glob("*.log"))))
    return texts


async def test_largest_answers_stay_under_40kb(shared_root):
    calls = [("playbook", {"operation": "fixes"}), ("playbook", {"operation": "symptoms"}),
             ("playbook", {"operation": "playbook"}), ("knowledge_map", {"operation": "proof"}),
             ("nan_guide", {"operation": "avoid"}), ("stream_safety", {"operation": "compare"}),
             ("probe_host", {}), ("probe_host", {"estimate": {"params_b": 70, "gpu": "h100_sxm"}})]
    for t in _largest_inputs(shared_root):
        calls += [("triage", {"text": t, "max_findings": 100}), ("check_config", {"text": t}),
                  ("playbook", {"operation": "symptoms", "text": t}), ("nan_guide", {"operation": "diagnose", "text": t})]
    sizes = {}
    async with Client(build_server()) as c:
        for tool, args in calls:
            r = await c.call_tool(tool, args)
            if tool == "check_config" and r.is_error and "invalid" in _text(r):
                continue  # a concatenation of mixed files is not one config
            assert not r.is_error, (tool, _text(r))
            n = len(json.dumps(r.structured_content))
            sizes[f"{tool} {args.get('operation', '')} {len(args.get('text', ''))}"] = n
            assert n < 40_000, (tool, args.get("operation"), n)
            assert len(_text(r)) < 40_000, (tool, args.get("operation"), len(_text(r)))
            if tool == "playbook" and args.get("operation") == "fixes":
                assert any(x.startswith("truncated:") for x in r.structured_content["notes"])
    print("answer sizes (bytes of JSON):", json.dumps(sizes, indent=1))


async def test_bounding_keeps_evidence_and_flags_truncation():
    from grpo_debug.server.app import MAX_ANSWER_BYTES, bound_triage
    from grpo_debug.tools.models import Cause, Coverage, Evidence, Finding, TriageResult

    f = Finding(symptom="nan_inf", title="t", confidence="high", fix="x" * 5000,
                evidence=[Evidence(line=i, text="y" * 2000) for i in range(50)],
                causes=[Cause(rule_id="r", title="c", why="w" * 9000, fix="f", verified=False)])
    res = bound_triage(TriageResult(summary="s", findings=[f.model_copy(deep=True) for _ in range(60)],
                                    coverage=Coverage(input="<text>")))
    assert res.truncated and len(res.model_dump_json()) <= MAX_ANSWER_BYTES
    assert all(len(x.evidence) <= 8 and all(len(e.text) <= 300 for e in x.evidence) for x in res.findings)
    assert res.findings and len(res.findings[0].fix) <= 1500


# ---------------------------------------------------------------------------- completion and logging

@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_completion_of_rule_ids_and_set_level():
    from grpo_debug.skills.loader import default_rules

    ids = sorted(r.id for r in default_rules())
    prefix = ids[0][:3]
    async with Client(build_server(), mode="legacy") as c:
        caps = c.server_capabilities
        res = await c.complete(ResourceTemplateReference(type="ref/resource", uri="rule://{rule_id}"),
                               {"name": "rule_id", "value": prefix})
        vals = res.completion.values
        assert vals and all(v.startswith(prefix) for v in vals)
        assert vals == [i for i in ids if i.lower().startswith(prefix.lower())][:100]
        res = await c.complete(ResourceTemplateReference(type="ref/resource", uri="rule://{rule_id}"),
                               {"name": "rule_id", "value": "zzz-no-such"})
        assert res.completion.values == []
        assert (await c.set_logging_level("debug")) is not None
        assert caps.completions is not None and caps.logging is not None


# ---------------------------------------------------------------------------- isolation

async def test_hanging_probe_is_killed_at_its_timeout_while_the_server_answers(monkeypatch):
    """The numerics child hangs (GRPO_DEBUG_NUMERICS_TEST_SLEEP); probe_host returns at the timeout with the
    numerics unknown, and a `suggest` call made meanwhile on the same server answers at once."""
    import importlib.util

    import anyio

    import grpo_debug.probes.collect as collect

    if importlib.util.find_spec("torch") is None:
        pytest.skip("without torch the numerics probe does not start a child")
    timeout = 4.0
    monkeypatch.setenv("GRPO_DEBUG_NUMERICS_TEST_SLEEP", "300")
    orig = collect.run_numerics
    monkeypatch.setattr(collect, "run_numerics", lambda *a, **k: orig(*a, **{**k, "timeout": timeout}))
    monkeypatch.setenv("GRPO_DEBUG_POOL", "thread")  # the patched timeout is seen in-process only (not by workers)
    done: dict[str, float] = {}
    out: dict[str, object] = {}
    async with Client(build_server()) as c:
        t0 = time.perf_counter()

        async def probe():
            out["probe"] = await c.call_tool("probe_host", {"numerics": True})
            done["probe"] = time.perf_counter() - t0

        async def others():
            await anyio.sleep(0.5)
            for i in range(3):
                t = time.perf_counter()
                r = await c.call_tool("suggest", {"text": "GRPO loss is nan after 200 steps"})
                assert not r.is_error and r.structured_content["tools"]
                done[f"suggest{i}"] = time.perf_counter() - t0
                out[f"suggest{i}_s"] = time.perf_counter() - t

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(probe)
                tg.start_soon(others)
    r = out["probe"]
    assert not r.is_error, _text(r)
    cpu = r.structured_content["host"]["numerics"]["results"]["cpu"]
    assert cpu.get("unknown") and f"timed out after {timeout:g} s" in cpu["reason"], cpu
    assert timeout <= done["probe"] < timeout + 20, done
    assert all(done[f"suggest{i}"] < done["probe"] for i in range(3)), done  # answered while the probe hung
    assert max(out[f"suggest{i}_s"] for i in range(3)) < 2.0, out
    print(f"\nisolation: probe_host returned after {done['probe']:.1f} s (timeout {timeout:g} s); suggest answered in "
          + ", ".join(f"{out[f'suggest{i}_s'] * 1000:.0f} ms" for i in range(3)))
