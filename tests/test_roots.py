"""MCP roots: a client that declares roots may have files under them read (still confined: no '..' escape,
no symlink out, the server's own --allow roots still readable); a server reached over HTTP ignores them.
Driven through the SDK client (mcp 2.x ``Client`` with ``list_roots_callback``)."""
from __future__ import annotations

import warnings

import pytest
from mcp import Client, types

from grpo_debug.server.app import build_server

pytestmark = pytest.mark.anyio

LOG = "step:1 - actor/grad_norm:0.4 - actor/pg_loss:0.1\nstep:2 - actor/grad_norm:nan - actor/pg_loss:nan\n"


def _client(server, roots):
    async def list_roots(_ctx):
        return types.ListRootsResult(roots=[types.Root(uri=r.as_uri()) for r in roots])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the roots capability is deprecated from the 2026-07-28 spec on
        # roots live on handshake-era connections (what stdio clients speak today): mode="legacy"
        return Client(server, mode="legacy", list_roots_callback=list_roots) if roots is not None else \
            Client(server, mode="legacy")


@pytest.fixture
def dirs(tmp_path):
    served, logs, outside = tmp_path / "served", tmp_path / "logs", tmp_path / "outside"
    for d in (served, logs, outside):
        d.mkdir()
    (logs / "run.log").write_text(LOG)
    (outside / "secret.log").write_text(LOG)
    (logs / "link.log").symlink_to(outside / "secret.log")
    (served / "own.log").write_text(LOG)
    return served, logs, outside


async def test_declared_roots_are_readable(dirs):
    served, logs, _ = dirs
    async with _client(build_server(allowed_roots=[served]), [logs]) as c:
        r = await c.call_tool("triage", {"path": str(logs / "run.log")})
        assert not r.is_error, r.content
        assert r.structured_content["findings"]
        r = await c.call_tool("triage", {"path": str(served / "own.log")})  # the server's own roots still apply
        assert not r.is_error, r.content


async def test_roots_stay_confined(dirs):
    served, logs, outside = dirs
    async with _client(build_server(allowed_roots=[served]), [logs]) as c:
        for p in (outside / "secret.log", logs / "link.log", logs / ".." / "outside" / "secret.log"):
            r = await c.call_tool("triage", {"path": str(p)})
            assert r.is_error and ("outside the allowed roots" in r.content[0].text
                                   or "symlink" in r.content[0].text or "climbs out" in r.content[0].text), p


async def test_without_roots_the_file_is_refused_and_the_error_says_where(dirs):
    served, logs, _ = dirs
    async with _client(build_server(allowed_roots=[served]), None) as c:
        r = await c.call_tool("triage", {"path": str(logs / "run.log")})
    assert r.is_error and "allowed roots" in r.content[0].text


async def test_a_server_over_http_ignores_client_roots(dirs):
    served, logs, _ = dirs
    server = build_server(allowed_roots=[served])
    server.streamable_http_app()  # what `serve --transport http` builds: the owner's roots only
    async with _client(server, [logs]) as c:
        r = await c.call_tool("triage", {"path": str(logs / "run.log")})
    assert r.is_error


async def test_path_descriptions_say_where_paths_may_point():
    async with Client(build_server()) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    for name in ("triage", "check_config", "nan_guide"):
        desc = tools[name].input_schema["properties"]["path"].get("description", "")
        assert "--allow" in desc and "roots" in desc, (name, desc)


async def test_a_client_that_never_answers_roots_list_does_not_hold_the_call(dirs, monkeypatch):
    """A client that declares roots but never answers roots/list (a client bug a newcomer's script had) gets its
    answer after ROOTS_TIMEOUT_S, with the server's own roots only."""
    import anyio

    from grpo_debug.server import paths

    monkeypatch.setattr(paths, "ROOTS_TIMEOUT_S", 0.3)
    served, logs, _ = dirs

    async def never(_ctx):
        await anyio.sleep_forever()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        client = Client(build_server(allowed_roots=[served]), mode="legacy", list_roots_callback=never)
    with anyio.fail_after(20):
        async with client as c:
            r = await c.call_tool("triage", {"path": str(served / "own.log")})
            assert not r.is_error and r.structured_content["findings"]
            r = await c.call_tool("triage", {"path": str(logs / "run.log")})  # not a root without the answer
            assert r.is_error and "allowed roots" in r.content[0].text
