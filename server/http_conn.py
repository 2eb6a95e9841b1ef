"""Connections of the HTTP server: absolute deadlines for the request head and body, and per-address caps.

A slow client cannot hold a connection by sending a byte now and then: from accept (or from the end of the
previous response on a kept-alive connection) the request head must be complete within ``head_s`` seconds and
the body within ``body_s``, whatever arrives in between; past the deadline the server answers 408 and closes.
``idle_s`` still closes a connection that sends nothing for that long while the server waits for it.

A connection is *pending* while the server waits for it: a fresh one, one sending its head or body, a kept-alive
one between requests. Pending connections are cheap to make, so they are capped per peer address and overall,
and a new one beyond a cap closes the *oldest* pending one (it answers 503): a flood of slow connections only
evicts itself, while a client that sends its head at once is past pending within milliseconds (and a kept-alive
connection that becomes pending again is the newest). A request is *authorized* when the server has no token or
its head carries the right ``Authorization: Bearer``; an unauthorized one goes straight to the 401 of the bearer
middleware, before any session work, and does not count against the request caps. Authorized requests being
served are capped per peer and overall; beyond, 503 with Retry-After. The caps (``GuardCaps``, environment in
server/http.py):

==================  =======  ==============================================================================
cap                 default  meaning
==================  =======  ==============================================================================
pending_per_peer      128    pending connections of one address; a new one beyond closes that address' oldest
pending_total        1024    pending connections of all addresses; beyond, the oldest of the address with
                             the most pending is closed
peer_connections     1024    open connections of one address; beyond, its oldest pending one is closed, or
                             (none pending) the new one is refused
requests_per_peer     256    requests of one address being served at once (an open SSE stream counts); 503
requests_total        512    requests being served at once; 503
evictions_per_peer_s  128/s  evictions one address may cause past its pending cap (burst: the cap); beyond,
                             its new connections are refused at accept (503, closed), before any read
==================  =======  ==============================================================================

Refusal happens in the listening socket itself (:class:`GateSocket`, from :func:`gate_socket`): a flood that
reopens each connection as soon as it is closed costs the server an accept and a close per attempt, not an HTTP
protocol, a transport and an eviction, and at most ``ACCEPTS_PER_TICK`` connections are taken per event-loop
tick, so another address's request goes on between them. (Measured, tests/test_hostile_http.py: 1000 slow
connections reopened nonstop from one address had another address wait 2.2-2.9 s per request at p95; now 0.2 s.)

50 clients on one address (the soak on loopback) each with a POST and a GET stream in flight are 100 requests
and at most 100 pending connections at the same instant, inside every cap.
"""
from __future__ import annotations

import collections
import hmac
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable

_REFUSE_503 = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nretry-after: 1\r\n"
               b"connection: close\r\ncontent-length: 48\r\n\r\ntoo many slow connections from your address; retry")
_TIMEOUT_408 = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
                b"content-length: 45\r\n\r\nthe request was not complete within the limit")


def bearer_ok(headers: Any, token: bytes) -> bool:
    """Whether ASGI/h11 ``headers`` (pairs of bytes) carry ``Authorization: Bearer <token>`` (constant time)."""
    got = b""
    for k, v in headers or ():
        if k.lower() == b"authorization":
            got = v
            break
    scheme, _, cred = got.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(cred.strip(), token)


@dataclass
class GuardCaps:
    """The caps of the module docstring's table (counts). The environment sets requests_total, requests_per_peer
    and pending_per_peer (server/http.py ``connection_guard``); the others are fixed."""

    pending_per_peer: int = 128
    pending_total: int = 1024
    peer_connections: int = 1024
    requests_per_peer: int = 256
    requests_total: int = 512
    #: evictions per second one address may cause by opening connections past its pending cap (a token bucket,
    #: burst ``pending_per_peer``); past it, its new connections are refused at accept, before any read
    evictions_per_peer_s: float = 128.0


class ConnectionGuard:
    """The shared book of connections and requests per peer address (one per server; event-loop thread only)."""

    def __init__(self, caps: GuardCaps | None = None) -> None:
        self.caps = caps or GuardCaps()
        self._pending: collections.OrderedDict[Any, None] = collections.OrderedDict()
        self._pending_by_peer: dict[str, collections.OrderedDict[Any, None]] = {}
        self._open: collections.Counter[str] = collections.Counter()
        self._serving: collections.Counter[str] = collections.Counter()
        self._budget: dict[str, tuple[float, float]] = {}  # peer -> (eviction tokens, when counted)
        self.serving_total = 0
        self.evicted = 0
        self.refused = 0

    # ---- connections
    def admit(self, peer: str) -> bool:
        """Whether a connection just accepted from ``peer`` gets a protocol (then :meth:`opened` books it), decided
        before anything is read or built for it. False, refused at accept: the address is at ``pending_per_peer``
        and has spent its eviction budget (``evictions_per_peer_s``, burst ``pending_per_peer``: a flood that
        reopens as fast as it is closed, where evicting its oldest for each newcomer made every reconnect cost a
        full HTTP protocol and starved everyone), or it holds ``peer_connections`` open and none pending. Within
        the budget a newcomer evicts the address's oldest pending one (:meth:`opened`), so a client sharing the
        address of a pile of stale slow connections is still served. At ``pending_total``, an address holding
        its share of it (the total over the addresses with pending connections) or more is refused too, so a
        flood from several addresses costs accepts and closes, and an address under its share still gets in."""
        caps, mine = self.caps, self._pending_by_peer.get(peer)
        if len(self._pending) >= caps.pending_total and mine and \
                len(mine) >= caps.pending_total // len(self._pending_by_peer):
            self.refused += 1  # at the total cap, an address holding its share or more waits: room is kept for the
            return False       # others (an address under its share gets in, evicting from the one holding most)
        if mine and len(mine) >= caps.pending_per_peer:
            now = time.monotonic()
            tokens, then = self._budget.get(peer, (float(caps.pending_per_peer), now))
            tokens = min(float(caps.pending_per_peer), tokens + (now - then) * caps.evictions_per_peer_s)
            if tokens < 1.0:
                self._budget[peer] = (tokens, now)
                self.refused += 1
                return False
            self._budget[peer] = (tokens - 1.0, now)
        if not mine and self._open[peer] >= caps.peer_connections:
            self.refused += 1
            return False
        return True

    def opened(self, conn: Any) -> bool:
        """Book a new pending connection of ``conn.peer``, evicting old pending ones past the caps. False: refuse
        it (its address holds ``peer_connections`` and none of them is pending)."""
        peer, caps = conn.peer, self.caps
        self._open[peer] += 1
        self.set_pending(conn, True)
        mine = self._pending_by_peer[peer]
        while len(mine) > caps.pending_per_peer:
            self._evict(next(iter(mine)))
        while len(self._pending) > caps.pending_total:  # the oldest of the address holding the most
            busiest = max(self._pending_by_peer.values(), key=len)
            self._evict(next(iter(busiest)))
        if self._open[peer] > caps.peer_connections:
            victim = next((c for c in mine if c is not conn), None)
            if victim is None:
                self.refused += 1
                return False
            self._evict(victim)
        return True

    def closed(self, conn: Any) -> None:
        """Forget ``conn`` (idempotent)."""
        if getattr(conn, "_guard_closed", False):
            return
        conn._guard_closed = True
        self.set_pending(conn, False)
        self._open[conn.peer] -= 1
        if self._open[conn.peer] <= 0:
            del self._open[conn.peer]
            self._budget.pop(conn.peer, None)  # (an address with nothing open starts again with a full budget)

    def set_pending(self, conn: Any, pending: bool) -> None:
        """Mark ``conn`` pending (evictable, newest last) or not."""
        mine = self._pending_by_peer.get(conn.peer)
        if pending and not getattr(conn, "_guard_closed", False):
            if conn not in self._pending:
                self._pending[conn] = None
                self._pending_by_peer.setdefault(conn.peer, collections.OrderedDict())[conn] = None
        elif conn in self._pending:
            del self._pending[conn]
            if mine is not None:
                mine.pop(conn, None)
                if not mine:
                    del self._pending_by_peer[conn.peer]

    def _evict(self, conn: Any) -> None:
        self.evicted += 1
        conn.close_with(_REFUSE_503)
        self.closed(conn)

    def open_count(self, peer: str | None = None) -> int:
        """Open connections of ``peer`` (all addresses when None)."""
        return sum(self._open.values()) if peer is None else self._open.get(peer, 0)

    def pending_count(self, peer: str | None = None) -> int:
        """Pending connections of ``peer`` (all addresses when None)."""
        return len(self._pending) if peer is None else len(self._pending_by_peer.get(peer, ()))

    # ---- requests
    async def serve(self, conn: Any, app: Any, scope: dict, receive: Any, send: Any) -> None:
        """Run ``app`` for one request of ``conn``: an unauthorized one goes straight on (the bearer middleware
        answers 401 without touching a session); an authorized one within the request caps, else 503."""
        if not conn.trusted or scope.get("type") != "http":
            return await app(scope, receive, send)
        peer = conn.peer
        if self.serving_total >= self.caps.requests_total or self._serving[peer] >= self.caps.requests_per_peer:
            body = b'{"error": "busy", "message": "too many requests in flight; retry in a second"}'
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json"), (b"retry-after", b"1"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        self.serving_total += 1
        self._serving[peer] += 1
        try:
            await app(scope, receive, send)
        finally:
            self.serving_total -= 1
            self._serving[peer] -= 1
            if self._serving[peer] <= 0:
                del self._serving[peer]


class _Guarded:
    """The deadline and cap logic, mixed in before uvicorn's H11Protocol by ``guarded_protocol`` (which sets
    the class attributes)."""

    guard: ConnectionGuard
    head_s = body_s = idle_s = 0.0
    secret: bytes | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        inner, guard = self.app, self.guard

        async def app(scope, receive, send):
            await guard.serve(self, inner, scope, receive, send)

        self.app = app
        self.peer, self.trusted, self.phase = "", False, "head"
        self._seen = self._idle_cycle = None
        self._start = self._last_rx = 0.0
        self._deadline = self._idle_handle = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self.peer = self.client[0] if self.client else "?"
        self._start = self._last_rx = self.loop.time()
        self._deadline = self.loop.call_at(self._start + self.head_s, self._deadline_hit)
        self._idle_handle = self.loop.call_later(self.idle_s, self._idle_check)
        if not self.guard.opened(self):
            self.close_with(_REFUSE_503)

    def data_received(self, data: bytes) -> None:
        self._last_rx = self.loop.time()
        super().data_received(data)  # type: ignore[misc]

    def handle_events(self) -> None:
        super().handle_events()  # type: ignore[misc]
        self._update()

    def on_response_complete(self) -> None:
        self._idle_cycle, self._start = self.cycle, self.loop.time()
        self._enter("head")
        super().on_response_complete()  # type: ignore[misc]

    def connection_lost(self, exc) -> None:
        for h in (self._deadline, self._idle_handle):
            if h is not None:
                h.cancel()
        self.guard.closed(self)
        super().connection_lost(exc)  # type: ignore[misc]

    def close_with(self, raw: bytes) -> None:
        """Answer ``raw`` (when no response is under way) and close."""
        if self.transport is None or self.transport.is_closing():
            return
        c = self.cycle
        if c is None or c is self._idle_cycle or not c.response_started:
            self.transport.write(raw)
        self.transport.close()

    def _update(self) -> None:
        c = self.cycle
        if c is not None and c is not self._seen:  # a new head is complete
            self._seen = c
            self.trusted = self.secret is None or bearer_ok(self.headers, self.secret)
        if c is None or c is self._idle_cycle:
            self._enter("head", rearm=False)
        else:
            self._enter("body" if c.more_body else "serving")

    def _enter(self, phase: str, rearm: bool = True) -> None:
        if phase == self.phase and not (rearm and phase == "head"):
            return
        self.phase = phase
        self.guard.set_pending(self, phase != "serving")
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if phase != "serving":
            limit = self.head_s if phase == "head" else self.body_s
            self._deadline = self.loop.call_at(self._start + limit, self._deadline_hit)

    def _deadline_hit(self) -> None:
        self._deadline = None
        if self.phase != "serving":
            self.close_with(_TIMEOUT_408)

    def _idle_check(self) -> None:
        if self.transport.is_closing():
            return
        c, idle = self.cycle, self.idle_s
        awaited = c is None or c.response_complete or (c.more_body and not c.response_started)
        quiet = self.loop.time() - self._last_rx
        if awaited and quiet >= idle:
            self.transport.close()
            return
        self._idle_handle = self.loop.call_later(max(0.5, idle - quiet if awaited else idle), self._idle_check)


def guarded_protocol(guard: ConnectionGuard, *, head_s: float, body_s: float, idle_s: float,
                     token: str | None = None) -> type:
    """uvicorn's h11 protocol class with the deadlines (seconds) and caps of this module's docstring. ``token``:
    the bearer token that makes a head authorized (None: every complete head is)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    return type("GuardedH11", (_Guarded, H11Protocol), {
        "guard": guard, "head_s": head_s, "body_s": body_s, "idle_s": idle_s,
        "secret": token.encode("utf-8") if token else None})


#: Connections accepted (admitted or refused) per event-loop tick at most: asyncio accepts up to the listen
#: backlog (uvicorn: 2048) per tick, and a flood that reopens as fast as it is closed made each tick run
#: hundreds of accepts before another client's next step (its answer took 2-5 s).
ACCEPTS_PER_TICK = 64


class GateSocket(socket.socket):
    """The listening socket, with :meth:`accept` asking ``admit(peer)`` first: a refused connection is answered
    503 (best effort, never blocking) and closed right there, at the cost of an accept and a close, before any
    protocol, transport or read exists for it; at most ``per_tick`` accepts per event-loop tick (the rest wait
    in the kernel's queue for the next tick, after the other connections' ready work). Built by
    :func:`gate_socket`; asyncio's ``create_server(sock=...)`` calls :meth:`accept` in its accept loop."""

    admit: Callable[[str], bool]
    per_tick: int = ACCEPTS_PER_TICK
    _count = 0
    _reset_armed = False

    def _reset(self) -> None:
        self._count, self._reset_armed = 0, False

    def _budget(self) -> None:
        if not self._reset_armed:
            import asyncio

            try:
                asyncio.get_running_loop().call_soon(self._reset)
                self._reset_armed = True
            except RuntimeError:  # no loop (a direct call): no per-tick budget
                self._count = 0
        if self._count >= self.per_tick:
            raise BlockingIOError("the accept budget of this tick is spent")
        self._count += 1

    def accept(self):  # noqa: D102 - socket.accept's contract: (socket, address), BlockingIOError when none waits
        while True:
            self._budget()
            fd, addr = self._accept()
            sock = socket.socket(self.family, self.type, self.proto, fileno=fd)
            peer = addr[0] if isinstance(addr, tuple) and addr else "?"
            if self.admit(peer):
                return sock, addr
            try:
                sock.setblocking(False)
                sock.send(_REFUSE_503)
            except OSError:
                pass
            sock.close()


def gate_sockets(host: str, port: int, admit: Callable[[str], bool], *,
                 per_tick: int = ACCEPTS_PER_TICK) -> list[GateSocket]:
    """:class:`GateSocket` s bound to ``host``:``port``, one per address the host resolves to (``localhost``: IPv4
    and IPv6, as asyncio's ``create_server(host=...)`` binds them), SO_REUSEADDR, IPv6 ones IPv6-only (as asyncio
    sets them), not yet listening (``create_server(sock=...)`` calls ``listen``). Raises OSError when an address
    cannot be bound (the ones already bound are closed)."""
    out: list[GateSocket] = []
    try:
        for family, kind, proto, _, addr in dict.fromkeys(socket.getaddrinfo(
                host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)):
            sock = GateSocket(family, kind, proto)
            out.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(addr)
            sock.admit, sock.per_tick = admit, per_tick
    except OSError:
        for sock in out:
            sock.close()
        raise
    return out


def gate_socket(host: str, port: int, admit: Callable[[str], bool], *,
                per_tick: int = ACCEPTS_PER_TICK) -> GateSocket:
    """The first of :func:`gate_sockets` (the others closed): one listening socket for a numeric address."""
    socks = gate_sockets(host, port, admit, per_tick=per_tick)
    for extra in socks[1:]:
        extra.close()
    return socks[0]
