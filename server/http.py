"""Serving MCP over streamable HTTP: the bound address's Host/Origin validation, bearer-token auth, the
request-body limit, and the bounds on connections (server/http_conn.py) and sessions (server/http_sessions.py)."""
from __future__ import annotations

import ipaddress
import json
from typing import Any, Iterable

from mcp.server.mcpserver import MCPServer

from grpo_debug.server.http_conn import ConnectionGuard, GuardCaps, bearer_ok, gate_sockets, guarded_protocol

HTTP_MAX_BODY_BYTES = 24 * 2**20  # room for 16 MiB of text plus JSON escaping; above it the transport says 413

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
TOKEN_ENV = "GRPO_DEBUG_TOKEN"
MIN_TOKEN_CHARS = 32  # the whole policy (and 128 bits of estimated entropy): server/token_policy.py


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_form(name: str) -> str:
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


def transport_security_for(host: str, names: Iterable[str] = ()) -> Any:
    """Host/Origin validation for the bound address. Loopback: the SDK's own list (127.0.0.1, localhost, ::1,
    any port). Other addresses: the bound host, the machine's names for a wildcard bind, and ``names``
    (``--allow-host``); a request whose Host is none of these gets 421, an Origin none of these 403."""
    import socket

    from mcp.server.transport_security import TransportSecuritySettings

    allowed = list(LOOPBACK_NAMES) + [host.strip("[]")] + [n for n in names if n]
    if host in ("0.0.0.0", "::", ""):
        for fn in (socket.gethostname, socket.getfqdn):
            try:
                allowed.append(fn())
            except OSError:
                pass
        try:
            allowed += [ai[4][0] for ai in socket.getaddrinfo(socket.gethostname(), None)]
        except OSError:
            pass
    allowed = list(dict.fromkeys(a for a in allowed if a and a not in ("0.0.0.0", "::")))
    hosts, origins = [], []
    for a in allowed:
        h = _host_form(a)
        hosts += [h, f"{h}:*"]
        origins += [f"http://{h}", f"http://{h}:*", f"https://{h}", f"https://{h}:*"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


async def json_reply(send, status: int, payload: dict, headers: list[tuple[bytes, bytes]] = ()) -> None:
    """Answer an ASGI HTTP request with ``status`` and ``payload`` as JSON (plus ``headers``)."""
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), *headers,
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>`` (401 otherwise,
    compared in constant time). Lifespan and other non-HTTP scopes pass through."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._token = token.encode("utf-8")

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if not bearer_ok(scope.get("headers"), self._token):
            await json_reply(send, 401, {"error": "unauthorized", "message": "missing or wrong bearer token: send "
                                         "'Authorization: Bearer <token>'"},
                             [(b"www-authenticate", b'Bearer realm="grpo-debug"')])
            return
        await self.app(scope, receive, send)


# ---- bounds on sessions and connections (environment; defaults in parentheses) -----------------------------
SESSION_IDLE_ENV = "GRPO_DEBUG_SESSION_IDLE_TIMEOUT"  # seconds a session may go without a request (300)
MAX_SESSIONS_ENV = "GRPO_DEBUG_MAX_SESSIONS"          # open sessions; beyond, an idle one is evicted (1000)
MAX_PEER_SESSIONS_ENV = "GRPO_DEBUG_MAX_PEER_SESSIONS"  # open sessions of one address; beyond, likewise (256)
IDLE_TIMEOUT_ENV = "GRPO_DEBUG_IDLE_TIMEOUT"          # seconds a connection may send nothing while awaited (30)
HEAD_TIMEOUT_ENV = "GRPO_DEBUG_HEAD_TIMEOUT"          # seconds from accept to a complete request head (10)
BODY_TIMEOUT_ENV = "GRPO_DEBUG_BODY_TIMEOUT"          # seconds from accept to a complete request body (60)
MAX_CONNECTIONS_ENV = "GRPO_DEBUG_MAX_CONNECTIONS"    # requests served at once; beyond, 503 (512)
MAX_PEER_REQUESTS_ENV = "GRPO_DEBUG_MAX_PEER_REQUESTS"  # requests of one address served at once; 503 (256)
MAX_PEER_PENDING_ENV = "GRPO_DEBUG_MAX_PEER_PENDING"  # connections of one address without an authorized head;
                                                      # beyond, its oldest is closed (128)


def _env_limit(name: str, default: float) -> float:
    import os

    raw = os.environ.get(name, "").strip()
    try:
        v = float(raw) if raw else default
    except ValueError:
        raise ValueError(f"${name}={raw!r} is not a number of seconds or a count") from None
    if not v > 0:
        raise ValueError(f"${name}={raw!r} must be positive")
    return v


def http_app(server: MCPServer, *, host: str = "127.0.0.1", stateless: bool = False, token: str | None = None,
             allow_hosts: Iterable[str] = (), json_response: bool | None = None) -> Any:
    """The streamable-HTTP ASGI app at /mcp with Host/Origin validation and, with a token, bearer auth (checked
    first, before any session work). ``stateless`` (replicas behind a load balancer): no sessions, plain JSON
    responses. Sessions expire after ${GRPO_DEBUG_SESSION_IDLE_TIMEOUT} idle seconds; past
    ${GRPO_DEBUG_MAX_SESSIONS} open (or ${GRPO_DEBUG_MAX_PEER_SESSIONS} of one address) an idle one is evicted
    (server/http_sessions.py). Raises ValueError for a malformed setting."""
    from grpo_debug.server.http_sessions import SessionGuard

    total = int(_env_limit(MAX_SESSIONS_ENV, 1000))
    app = server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=stateless,
        json_response=stateless if json_response is None else json_response,
        transport_security=transport_security_for(host, allow_hosts), host=host,
        max_request_body_size=HTTP_MAX_BODY_BYTES,
        session_idle_timeout=_env_limit(SESSION_IDLE_ENV, 300.0), max_sessions=total)
    if not stateless:
        app = SessionGuard(app, server.session_manager, total=total,
                           per_peer=int(_env_limit(MAX_PEER_SESSIONS_ENV, 256)))
    else:
        app = NoStreamInStateless(app)
    return BearerAuth(app, token) if token else app


class NoStreamInStateless:
    """ASGI middleware for ``--stateless``: there are no sessions to stream server messages to, so a GET of the
    endpoint (a readiness check with curl, a client opening its SSE stream) gets 405 with ``Allow: POST`` at once
    (it hung for good: the transport's GET stream waited on a session that never comes)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope.get("method") == "GET":
            await json_reply(send, 405, {"error": "method_not_allowed", "message": "this server is stateless: POST "
                                         "JSON-RPC requests to this endpoint; there is no event stream to GET"},
                             [(b"allow", b"POST, DELETE")])
            return
        await self.app(scope, receive, send)


def connection_guard() -> ConnectionGuard:
    """The per-address connection and request caps from the environment (server/http_conn.py)."""
    return ConnectionGuard(GuardCaps(requests_total=int(_env_limit(MAX_CONNECTIONS_ENV, 512)),
                                     requests_per_peer=int(_env_limit(MAX_PEER_REQUESTS_ENV, 256)),
                                     pending_per_peer=int(_env_limit(MAX_PEER_PENDING_ENV, 128))))


def _raise_fd_limit() -> None:
    """The soft open-file limit up to the hard one: connections hit the 503 limit long before the fd limit."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536) if hard != resource.RLIM_INFINITY else 65536, hard))
    except (ImportError, ValueError, OSError):
        pass


def _few_malloc_arenas() -> None:
    """glibc gives each thread its own malloc arena; with the pool, anyio and uvicorn threads that multiplies the
    peak RSS of a busy server. Two arenas keep it near what the data needs."""
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(-8, 2)  # M_ARENA_MAX
    except (OSError, AttributeError):
        pass


def run_http(server: MCPServer, *, host: str, port: int, token: str | None = None, **kw: Any) -> None:
    """Serve ``server`` over streamable HTTP on ``host``:``port`` until interrupted (uvicorn, h11). Request heads
    must be complete ${GRPO_DEBUG_HEAD_TIMEOUT} s after accept and bodies ${GRPO_DEBUG_BODY_TIMEOUT} s (408 and
    closed otherwise); connections and requests are capped per address (server/http_conn.py). Raises OSError
    when the address cannot be bound, ValueError for a malformed setting."""
    import uvicorn

    from grpo_debug.server.clip import clip_log_records

    _few_malloc_arenas()
    app = http_app(server, host=host, token=token, **kw)
    idle = _env_limit(IDLE_TIMEOUT_ENV, 30.0)
    guard = connection_guard()
    protocol = guarded_protocol(guard, head_s=_env_limit(HEAD_TIMEOUT_ENV, 10.0),
                                body_s=_env_limit(BODY_TIMEOUT_ENV, 60.0), idle_s=idle, token=token)
    _raise_fd_limit()
    clip_log_records()
    socks = gate_sockets(host.strip("[]"), port, guard.admit)  # per-address refusal at accept, before any read
    config = uvicorn.Config(app, host=host.strip("[]"), port=port, log_level="warning", timeout_graceful_shutdown=5,
                            http=protocol, ws="none",  # no WebSocket hand-over: every connection stays in the book
                            timeout_keep_alive=int(min(5, max(1, idle))), h11_max_incomplete_event_size=16384)
    try:
        uvicorn.Server(config).run(sockets=socks)
    finally:
        for sock in socks:
            sock.close()
