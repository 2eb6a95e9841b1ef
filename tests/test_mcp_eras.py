"""The server as clients of both MCP eras see it (issue 26): the SDK's ``Client`` in handshake mode (``legacy``:
initialize, roots), pinned to the 2026-07-28 protocol (no handshake, no roots, no server-to-client requests) and
``auto``, in process and over stateless HTTP. The same tools answer the same way; ``--allow`` / ``allowed_roots`` is
the primary grant; a modern request never waits on ``roots/list``, even from a client whose roots callback would
never answer."""
from __future__ import annotations

import json
import time
import warnings

import anyio
import pytest
from mcp import Client

from grpo_debug.server.app import build_server

pytestmark = pytest.mark.anyio
MODERN = "2026-07-28"
LOG = "".join(f"step:{s} - actor/grad_norm:{0.3 + 0.01 * s:.3f} - actor/pg_loss:0.01\n" for s in range(1, 20)) + \
      "step:20 - actor/grad_norm:nan - actor/pg_loss:nan\n"


def _text(r) -> str:
    return "".join(getattr(c, "text", "") for c in r.content)


async def _never_answers(context):  # a roots callback that never returns: a client bug the server must survive
    await anyio.sleep(3600)


@pytest.mark.parametrize("mode", ["legacy", MODERN, "auto"])
async def test_both_eras_list_the_same_tools_and_triage_a_granted_file(tmp_path, mode):
    (tmp_path / "run.log").write_text(LOG)
    server = build_server(allowed_roots=[tmp_path])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # roots and the handshake are deprecated from 2026-07-28 on
        async with Client(server, mode=mode) as c:
            names = sorted(t.name for t in (await c.list_tools()).tools)
            assert {"triage", "check_config", "compare_runs", "suggest"} <= set(names)
            r = await c.call_tool("triage", {"path": str(tmp_path / "run.log")})
            assert not r.is_error, _text(r)
            assert "nan_inf" in _text(r)
            sc = r.structured_content or {}
            assert sc.get("findings") and sc["findings"][0]["symptom"] == "nan_inf"
            refused = await c.call_tool("triage", {"path": "/etc/hostname"})
            assert refused.is_error and "allowed" in _text(refused)


async def test_the_tool_list_is_the_same_in_both_eras():
    lists = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mode in ("legacy", MODERN):
            async with Client(build_server(), mode=mode) as c:
                lists[mode] = json.dumps(sorted((t.name, t.description) for t in (await c.list_tools()).tools))
    assert lists["legacy"] == lists[MODERN]


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
async def test_a_request_never_waits_on_a_roots_callback_that_never_answers(tmp_path, mode, monkeypatch):
    """Modern: no roots/list is sent at all (a 5 s roots timeout would show as a 5 s call). Legacy: the server
    gives up on the silent client after its roots timeout and answers."""
    from grpo_debug.server import paths

    # modern: a long roots timeout, so any wait on roots/list would show; legacy: a short one, bounded below
    monkeypatch.setattr(paths, "ROOTS_TIMEOUT_S", 5.0 if mode == MODERN else 0.5)
    (tmp_path / "run.log").write_text(LOG)
    server = build_server(allowed_roots=[tmp_path])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        async with Client(server, mode=mode, list_roots_callback=_never_answers) as c:
            await c.call_tool("triage", {"text": LOG})  # warm the rules once
            t = time.monotonic()
            with anyio.fail_after(30):
                r = await c.call_tool("triage", {"path": str(tmp_path / "run.log")})
            took = time.monotonic() - t
    assert not r.is_error, _text(r)
    limit = 2.0 if mode == MODERN else 2.0 + paths.ROOTS_TIMEOUT_S
    assert took < limit, f"{mode}: {took:.2f} s"


async def test_modern_client_over_stateless_http_with_allow(tmp_path, serve_http):
    (tmp_path / "run.log").write_text(LOG)
    with serve_http("--stateless", "--allow", str(tmp_path)) as (port, _):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            async with Client(f"http://127.0.0.1:{port}/mcp", mode=MODERN) as c:
                names = {t.name for t in (await c.list_tools()).tools}
                assert "triage" in names
                r = await c.call_tool("triage", {"path": str(tmp_path / "run.log")})
                assert not r.is_error, _text(r)
                assert "nan_inf" in _text(r)
