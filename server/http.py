"""Serving MCP over streamable HTTP: the bound address's Host/Origin validation, bearer-token auth and
the request-body limit."""
from __future__ import annotations

import hmac
import ipaddress
import json
from typing import Any, Iterable

from mcp.server.mcpserver import MCPServer

HTTP_MAX_BODY_BYTES = 24 * 2**20  # room for 16 MiB of text plus JSON escaping; above it the transport says 413

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
TOKEN_ENV = "GRPO_DEBUG_TOKEN"
MIN_TOKEN_CHARS = 16


def weak_token(token: str) -> str | None:
    """Why a bearer token is guessable (one character repeated, a repeated pattern, under ~40 bits even if
    random over its own characters), or None."""
    import math

    distinct = len(set(token))
    if distinct == 1:
        return "one character repeated"
    for p in range(1, len(token) // 2 + 1):
        if len(token) % p == 0 and token == token[:p] * (len(token) // p):
            return f"a {p}-character pattern repeated"
    if len(token) * math.log2(distinct) < 40:
        return f"only {distinct} distinct characters"
    return None


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


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>`` (401 otherwise,
    compared in constant time). Lifespan and other non-HTTP scopes pass through."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._token = token.encode("utf-8")

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        got = b""
        for k, v in scope.get("headers") or ():
            if k.lower() == b"authorization":
                got = v
                break
        scheme, _, cred = got.partition(b" ")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(cred.strip(), self._token):
            body = json.dumps({"error": "unauthorized", "message": "missing or wrong bearer token: send "
                               "'Authorization: Bearer <token>'"}).encode()
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="grpo-debug"'),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


# ---- bounds on sessions and connections (environment; defaults in parentheses) -----------------------------
SESSION_IDLE_ENV = "GRPO_DEBUG_SESSION_IDLE_TIMEOUT"  # seconds a session may go without a request (300)
MAX_SESSIONS_ENV = "GRPO_DEBUG_MAX_SESSIONS"          # open sessions; beyond, a new one gets 503 (1000)
IDLE_TIMEOUT_ENV = "GRPO_DEBUG_IDLE_TIMEOUT"          # seconds a connection may send nothing while awaited (30)
MAX_CONNECTIONS_ENV = "GRPO_DEBUG_MAX_CONNECTIONS"    # concurrent connections+requests; beyond, 503 (512)


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
    """The streamable-HTTP ASGI app at /mcp with Host/Origin validation and, with a token, bearer auth.
    ``stateless`` (replicas behind a load balancer): no sessions, plain JSON responses. Sessions expire after
    ${GRPO_DEBUG_SESSION_IDLE_TIMEOUT} idle seconds and at most ${GRPO_DEBUG_MAX_SESSIONS} are open at once."""
    app = server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=stateless,
        json_response=stateless if json_response is None else json_response,
        transport_security=transport_security_for(host, allow_hosts), host=host,
        max_request_body_size=HTTP_MAX_BODY_BYTES,
        session_idle_timeout=_env_limit(SESSION_IDLE_ENV, 300.0),
        max_sessions=int(_env_limit(MAX_SESSIONS_ENV, 1000)))
    return BearerAuth(app, token) if token else app


def idle_timeout_protocol(idle: float) -> type:
    """uvicorn's h11 protocol that closes a connection which sends nothing for ``idle`` seconds while the server
    waits for it: a fresh connection without a request, headers that never end, a request body that stops, a
    kept-alive connection. A request being served (an open SSE stream included) is not idle."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class IdleTimeoutH11(H11Protocol):
        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._last_rx = self.loop.time()
            self._idle_handle = self.loop.call_later(idle, self._idle_check)

        def data_received(self, data: bytes) -> None:
            self._last_rx = self.loop.time()
            super().data_received(data)

        def connection_lost(self, exc) -> None:
            handle = getattr(self, "_idle_handle", None)
            if handle is not None:
                handle.cancel()
            super().connection_lost(exc)

        def _idle_check(self) -> None:
            if self.transport.is_closing():
                return
            c = self.cycle
            awaited = c is None or c.response_complete or (c.more_body and not c.response_started)
            quiet = self.loop.time() - self._last_rx
            if awaited and quiet >= idle:
                self.transport.close()
                return
            self._idle_handle = self.loop.call_later(max(0.5, idle - quiet if awaited else idle), self._idle_check)

    return IdleTimeoutH11


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


def run_http(server: MCPServer, *, host: str, port: int, **kw: Any) -> None:
    import uvicorn

    _few_malloc_arenas()
    app = http_app(server, host=host, **kw)
    idle = _env_limit(IDLE_TIMEOUT_ENV, 30.0)
    _raise_fd_limit()
    uvicorn.run(app, host=host.strip("[]"), port=port, log_level="warning", timeout_graceful_shutdown=5,
                http=idle_timeout_protocol(idle), timeout_keep_alive=int(min(5, max(1, idle))),
                limit_concurrency=int(_env_limit(MAX_CONNECTIONS_ENV, 512)))
