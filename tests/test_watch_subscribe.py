"""The MCP face of watch (server/watch_resource.py) through the SDK's own client: a handshake-era client subscribes
to ``grpo-debug://watch/{+path}`` (resources/subscribe) and a 2026-07-28 client listens (subscriptions/listen);
lines with a NaN are appended to the log; the update arrives within seconds; the read shows nan_inf at its onset."""
from __future__ import annotations

import json
import time
import warnings

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from grpo_debug.server.app import build_server
from grpo_debug.server.watch_resource import MAX_PER_SESSION, PREFIX
from tests.test_watch import HEADER, healthy_body, nan_tail

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module", autouse=True)
def _warm():
    from grpo_debug.skills.loader import default_rules

    default_rules()  # loaded once (a follower's first evaluation would load them)


def _write(path, lines) -> None:
    with open(path, "a") as fh:
        fh.write("".join(lines))


async def _updated_within(got: list, uri: str, seconds: float) -> float:
    t0 = time.monotonic()
    with anyio.fail_after(seconds):
        while uri not in got:
            await anyio.sleep(0.05)
    return time.monotonic() - t0


def _findings(result) -> dict:
    return json.loads(result.contents[0].text)


async def test_legacy_subscribe_is_told_of_the_nan_and_the_read_shows_its_onset(tmp_path):
    log = tmp_path / "train.log"
    body = HEADER + healthy_body(60)
    log.write_text("".join(body))
    server = build_server(allowed_roots=[tmp_path])
    uri = PREFIX + str(log)  # an absolute path: grpo-debug://watch//tmp/.../train.log
    got: list[str] = []

    async def on_message(msg):
        root = getattr(msg, "root", msg)
        if getattr(root, "method", "") == "notifications/resources/updated":
            got.append(str(root.params.uri))

    async with Client(server, mode="legacy", message_handler=on_message) as c:
        caps = c.session.get_server_capabilities() if hasattr(c.session, "get_server_capabilities") else None
        if caps is not None:
            assert caps.resources.subscribe is True
        before = _findings(await c.read_resource(uri))
        assert before["findings"] == [] and before["following"] is False
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await c.subscribe_resource(uri)
        await anyio.sleep(0.5)  # the follower reads and evaluates the healthy history: no update for it
        assert got == []
        nan_line = len(body) + 1
        _write(log, nan_tail(61))
        took = await _updated_within(got, uri, 8.0)
        assert took < 5.0
        now = _findings(await c.read_resource(uri))
        assert now["following"] is True and now["bytes_read"] == log.stat().st_size
        nan = [f for f in now["findings"] if f["symptom"] == "nan_inf"]
        assert nan and nan[0]["onset_line"] == nan_line and nan[0]["onset_step"] == 60  # the NaN warning follows step 60
        assert nan[0]["confidence"] in ("medium", "high")
        hub = server.watch_hub
        assert str(log) in hub.followed
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await c.unsubscribe_resource(uri)
        assert hub.followed == {}  # the last subscriber left: the follower stopped


async def test_session_end_stops_followers_and_the_per_session_bound_holds(tmp_path):
    logs = []
    for i in range(MAX_PER_SESSION + 1):
        p = tmp_path / f"rank{i}.log"
        p.write_text("".join(HEADER))
        logs.append(p)
    server = build_server(allowed_roots=[tmp_path])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        async with Client(server, mode="legacy") as c:
            for p in logs[:MAX_PER_SESSION]:
                await c.subscribe_resource(PREFIX + str(p))
            with pytest.raises(MCPError, match="unsubscribe one"):
                await c.subscribe_resource(PREFIX + str(logs[-1]))
            assert len(server.watch_hub.followed) == MAX_PER_SESSION
            with pytest.raises(MCPError, match="outside the allowed roots"):
                await c.subscribe_resource(PREFIX + "/etc/hostname")
            with pytest.raises(MCPError, match="not a watch URI"):
                await c.subscribe_resource("rule://nan_inf")
        await anyio.sleep(0.1)
    assert server.watch_hub.followed == {}  # the session ended: every follower stopped


async def test_a_path_outside_the_roots_is_not_read(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "secret.log").write_text("".join(HEADER))
    server = build_server(allowed_roots=[tmp_path / "runs"])
    async with Client(server, mode="legacy") as c:
        with pytest.raises(MCPError, match="outside the allowed roots|\\.\\."):
            await c.read_resource(PREFIX + str(tmp_path / "runs" / ".." / "secret.log"))


async def test_modern_listen_gets_the_update_on_its_stream(tmp_path):
    log = tmp_path / "train.log"
    body = HEADER + healthy_body(40)
    log.write_text("".join(body))
    server = build_server(allowed_roots=[tmp_path])
    uri = PREFIX + str(log)
    async with Client(server) as c:
        assert c.protocol_version == "2026-07-28"
        async with c.listen(resource_subscriptions=[uri]) as sub:
            await anyio.sleep(0.5)
            _write(log, nan_tail(41))
            with anyio.fail_after(8.0):
                async for event in sub:
                    assert event.uri == uri
                    break
            now = _findings(await c.read_resource(uri))
            nan = [f for f in now["findings"] if f["symptom"] == "nan_inf"]
            assert nan and nan[0]["onset_line"] == len(body) + 1 and now["following"] is True
        await anyio.sleep(0.1)
    assert server.watch_hub.followed == {}  # the stream ended: the follower stopped
