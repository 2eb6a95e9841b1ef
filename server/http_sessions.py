"""Sessions of the HTTP server: a cap per peer address and overall, made room for by evicting idle sessions.

The MCP SDK's session manager refuses a new session with 503 once ``max_sessions`` are open, so one client
opening sessions in a loop locked every other client out until the idle timeout (renewed by opening more).
``SessionGuard`` sits between the bearer check and the SDK app and keeps a book of the sessions it saw opened:
the address that opened each, when it was last used, how many requests it had and how many are in flight.
Before a request that opens a session, it makes room:

- the address already holds ``per_peer`` sessions: evict one of *its own*;
- all addresses together hold ``total``: evict one of the address holding the most.

The victim is an idle session (no request in flight, so no open GET stream): first those that never got past
the handshake (initialize and its notification: abandoned or flooded), oldest first, then the least recently
used. An evicted session ends as an expired one does (its ID answers 404; a client initializes again). Only when
every candidate is busy does the new session get the SDK's 503.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

HANDSHAKE_REQUESTS = 2  # initialize + notifications/initialized


@dataclass
class _Session:
    peer: str
    last: float = field(default_factory=time.monotonic)
    requests: int = 1
    in_flight: int = 0


class SessionGuard:
    """ASGI middleware over the SDK's streamable-HTTP app (see the module docstring). ``manager``: the SDK's
    ``StreamableHTTPSessionManager``; ``total`` / ``per_peer``: the session caps (positive counts)."""

    def __init__(self, app: Any, manager: Any, *, total: int, per_peer: int) -> None:
        self.app, self.manager, self.total, self.per_peer = app, manager, total, per_peer
        self.sessions: dict[str, _Session] = {}
        self.evicted = 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        sid = next((v.decode("latin-1") for k, v in scope.get("headers") or () if k == b"mcp-session-id"), None)
        if sid is None:
            return await self._open(scope, receive, send)
        rec = self.sessions.get(sid)
        if rec is None:
            return await self.app(scope, receive, send)
        rec.requests += 1
        rec.in_flight += 1
        rec.last = time.monotonic()
        try:
            await self.app(scope, receive, send)
        finally:
            rec.in_flight -= 1
            rec.last = time.monotonic()

    async def _open(self, scope, receive, send) -> None:
        peer = (scope.get("client") or ("?",))[0]
        await self._make_room(peer)

        async def watch(message) -> None:
            if message["type"] == "http.response.start" and message.get("status", 500) < 400:
                for k, v in message.get("headers") or ():
                    if k.lower() == b"mcp-session-id":
                        self.sessions[v.decode("latin-1")] = _Session(peer)
            await send(message)

        await self.app(scope, receive, watch)

    def _live(self) -> dict:
        live = getattr(self.manager, "_server_instances", None)
        if not isinstance(live, dict):
            return {}
        for sid in [s for s in self.sessions if s not in live]:  # expired or deleted since
            del self.sessions[sid]
        return live

    async def _make_room(self, peer: str) -> None:
        live = self._live()
        if not live:
            return
        counts: dict[str, int] = {}
        for rec in self.sessions.values():
            counts[rec.peer] = counts.get(rec.peer, 0) + 1
        if counts.get(peer, 0) >= self.per_peer:
            await self._evict_one(peer, live)
        if len(live) >= self.total and counts:
            await self._evict_one(max(counts, key=counts.__getitem__), live)

    async def _evict_one(self, peer: str, live: dict) -> bool:
        idle = [(rec.requests > HANDSHAKE_REQUESTS, rec.last, sid) for sid, rec in self.sessions.items()
                if rec.peer == peer and rec.in_flight == 0 and sid in live]
        if not idle:
            return False
        sid = min(idle)[2]
        transport = live.get(sid)
        self.sessions.pop(sid, None)
        self.evicted += 1
        discard = getattr(self.manager, "_discard_session", None)
        if discard is not None:
            await discard(sid, transport)
        elif getattr(transport, "idle_scope", None) is not None:
            transport.idle_scope.cancel()
        return True
