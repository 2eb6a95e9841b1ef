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


def http_app(server: MCPServer, *, host: str = "127.0.0.1", stateless: bool = False, token: str | None = None,
             allow_hosts: Iterable[str] = (), json_response: bool | None = None) -> Any:
    """The streamable-HTTP ASGI app at /mcp with Host/Origin validation and, with a token, bearer auth.
    ``stateless`` (replicas behind a load balancer): no sessions, plain JSON responses."""
    app = server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=stateless,
        json_response=stateless if json_response is None else json_response,
        transport_security=transport_security_for(host, allow_hosts), host=host,
        max_request_body_size=HTTP_MAX_BODY_BYTES)
    return BearerAuth(app, token) if token else app


def run_http(server: MCPServer, *, host: str, port: int, **kw: Any) -> None:
    import uvicorn

    app = http_app(server, host=host, **kw)
    uvicorn.run(app, host=host.strip("[]"), port=port, log_level="warning", timeout_graceful_shutdown=5)
