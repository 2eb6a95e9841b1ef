"""The MCP face of ``grpo-debug watch``: the resource template ``grpo-debug://watch/{+path}`` and its subscription.

- ``resources/read`` of ``grpo-debug://watch/runs/train.log`` (a path relative to the server's working directory;
  an absolute one as ``grpo-debug://watch//abs/train.log``) answers the watcher's current findings of that file or
  run folder as JSON: each medium/high finding once, with its onset line and step (tools/watch.py ``Watch``). A
  followed path answers from its live follower; another is read once, up to ``READ_S`` seconds of scanning.
- Handshake-era clients (protocol 2025-11-25 and before): ``resources/subscribe`` with that URI starts a
  background follower (one thread per real path, shared by every subscriber); each new or worsened medium/high
  finding sends ``notifications/resources/updated`` with the URI; the client reads the resource again.
  ``resources/unsubscribe`` or the end of the session stops it (the connection's ``exit_stack``).
- 2026-07-28 clients: ``subscriptions/listen`` with ``resourceSubscriptions: [URI]`` starts the same follower for
  the life of that listen stream; the update is published on the server's subscription bus (the SDK's
  ``ListenHandler`` delivers it, stamped and filtered, on that stream).

Paths are confined to the server's allowed roots exactly as the path-taking tools confine them
(server/paths.py ``resolve_path``; the client's declared roots are not added here). Bounds: at most
``MAX_PER_SESSION`` watched URIs a session (or a listen stream) and ``MAX_FOLLOWERS`` followed paths for the
whole server; each follower's state is the watcher's (bounded whatever the file's size). Nothing in this module
runs a command (``--on-alert`` is CLI only).
"""
from __future__ import annotations

import io
import json
import logging
import threading
import time
from pathlib import Path

TEMPLATE = "grpo-debug://watch/{+path}"
PREFIX = "grpo-debug://watch/"
MAX_PER_SESSION = 8
MAX_FOLLOWERS = 16
READ_S = 20.0            # a read of a path nobody follows scans at most this long
POLL_S = 0.2             # the followers' poll period (the CLI's)
INTERVAL_S = 10.0        # the followers' rule interval (the CLI's --interval default)
_STATE_KEY = "grpo_debug.watch"
log = logging.getLogger("grpo_debug.watch_resource")


class _Followed:
    """One followed real path: a Watch (tools/watch.py) in a daemon thread, its listeners by token."""

    def __init__(self, real: str, rules):
        from grpo_debug.tools.watch import Options, Watch

        self.real = real
        self.w = Watch(Options(paths=[real], interval=INTERVAL_S, poll=POLL_S), rules=rules, out=io.StringIO())
        self.w.sink = self._said
        self.w.discover()
        self.listeners: dict[object, object] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"watch {real[-60:]}", daemon=True)

    def _run(self) -> None:
        from grpo_debug.tools.watch import follow

        try:
            follow(self.w, self.stop)
        except Exception:  # noqa: BLE001 - a follower that fails says so in its reads, the server goes on
            log.exception("watch follower for %s failed", self.real)
            self.w.followers_error = "the follower stopped on an internal error"  # type: ignore[attr-defined]
        finally:
            self.w.finish()

    def _said(self, event: str, rec: dict) -> None:
        with self.lock:
            listeners = list(self.listeners.values())
        for notify in listeners:
            try:
                notify(event, rec)
            except Exception:  # noqa: BLE001 - one dead session must not stop the others' notifications
                log.debug("a watch listener failed", exc_info=True)


class WatchHub:
    """The server's followed paths (a follower per real path, stopped when its last listener leaves)."""

    def __init__(self, roots: list[Path], base: str):
        self.roots, self.base = roots, base
        self.followed: dict[str, _Followed] = {}
        self.lock = threading.Lock()
        self._rules = None

    def rules(self):
        if self._rules is None:
            from grpo_debug.skills.loader import default_rules

            self._rules = default_rules()
        return self._rules

    def resolve_path(self, path: str) -> str:
        """The real path of ``path`` confined to the roots (server/paths.py); raises ValueError (PathNotAllowed)."""
        from grpo_debug.server.paths import resolve_path

        return str(resolve_path(path, self.roots, kind="any", base=self.base))

    def listen(self, real: str, notify) -> object:
        """Add ``notify(event, record)`` to the follower of ``real`` (started when new); returns a token for
        :meth:`unlisten`. Raises ValueError when MAX_FOLLOWERS paths are followed already."""
        token = object()
        with self.lock:
            f = self.followed.get(real)
            if f is None:
                if len(self.followed) >= MAX_FOLLOWERS:
                    raise ValueError(f"the server follows {MAX_FOLLOWERS} paths already; unsubscribe one first")
                from grpo_debug.tools.watch import WatchError

                try:
                    f = _Followed(real, self.rules())
                except WatchError as e:
                    raise ValueError(str(e)) from None
                self.followed[real] = f
                f.thread.start()
            with f.lock:
                f.listeners[token] = notify
        return token

    def unlisten(self, real: str, token: object) -> None:
        """Remove a listener; the follower stops (its thread ends within a poll) when none is left."""
        with self.lock:
            f = self.followed.get(real)
            if f is None:
                return
            with f.lock:
                f.listeners.pop(token, None)
                if f.listeners:
                    return
            del self.followed[real]
            f.stop.set()

    def close(self) -> None:
        with self.lock:
            for f in self.followed.values():
                f.stop.set()
            self.followed.clear()

    def read_path(self, path: str, uri: str) -> str:
        """The resource's JSON text: the current findings of the path's watcher (module docstring). Raises
        ValueError for a path outside the roots or not readable."""
        real = self.resolve_path(path)
        f = self.followed.get(real)
        if f is not None:
            w, following, note = f.w, True, None
        else:
            w, note = self._read_once(real), None
            following = False
            if w.cut:
                note = f"read {w.cut} of its bytes in {READ_S:g} s; subscribe to follow it to the end"
        return _payload(uri, real, w, following, note)

    def _read_once(self, real: str):
        from grpo_debug.tools.watch import Options, Watch, WatchError

        try:
            w = Watch(Options(paths=[real], until_eof=True, idle=0.01), rules=self.rules(), out=io.StringIO())
            w.sink = lambda event, rec: None
            w.discover()
        except WatchError as e:
            raise ValueError(str(e)) from None
        t_end, w.cut = time.monotonic() + READ_S, None
        try:
            while True:
                new, _ = w.poll_all()
                if not new:
                    break
                if time.monotonic() > t_end:
                    w.cut = f"{sum(x.bytes_read for x in w.followers.values()):,}"
                    break
            now = time.monotonic()
            for path in list(w.followers):
                if w.due(path, now, False, final=True):
                    w.evaluate(path)
        finally:
            w.finish()
        return w


def _payload(uri: str, real: str, w, following: bool, note: str | None) -> str:
    """The JSON of a read: what was read, and each finding (symptom, rule, confidence, onset, evidence, fix)."""
    from grpo_debug.tools.redact import redact_mapping

    found = []
    for rec in sorted(list(w.current.values()), key=lambda r: (-{"high": 2, "medium": 1}.get(r["confidence"], 0),
                                                                r["onset_line"] or 0)):
        fd = rec["finding"]
        found.append({"symptom": rec["symptom"], "rule": rec["rule"], "confidence": rec["confidence"],
                      "title": fd["title"], "file": rec["file"], "onset_line": rec["onset_line"],
                      "onset_step": rec["onset_step"], "onset": fd.get("onset"),
                      "evidence": [{"line": e["line"], "text": e["text"][:300]} for e in fd["evidence"][:3]],
                      "fix": fd["fix"][:500]})
    fs = list(w.followers.values())
    d = {"uri": uri, "path": real, "following": following, "bytes_read": sum(f.bytes_read for f in fs),
         "lines": sum(f.counts()[0] for f in fs), "evaluations": w.evals, "findings": found,
         "note": note or getattr(w, "followers_error", None),
         "hint": "the findings at medium or high confidence so far; triage the path for the full answer"}
    return json.dumps(redact_mapping(d), indent=1)


def _mcp_error(msg: str):
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS

    return MCPError(INVALID_PARAMS, msg[:600])


def _path_of(uri: str) -> str:
    """The path a watch URI names (decoded as the resource template decodes it); raises MCPError when it is not
    one."""
    from mcp.shared.uri_template import UriTemplate

    m = UriTemplate.parse(TEMPLATE).match(uri) if isinstance(uri, str) else None
    if not m or not isinstance(m.get("path"), str):
        raise _mcp_error(f"{str(uri)[:120]!r} is not a watch URI; subscribe to {TEMPLATE} (a log file or run folder "
                         "under the server's allowed roots)")
    return m["path"]


def _confined(hub: WatchHub, uri: str) -> str:
    try:
        return hub.resolve_path(_path_of(uri))
    except ValueError as e:
        raise _mcp_error(f"{uri[:160]}: {e}") from None


def register_watch_resource(server, roots: list[Path], base: str) -> WatchHub:
    """Register the ``grpo-debug://watch/{+path}`` template, ``resources/subscribe``/``unsubscribe`` (handshake era)
    and the watch URIs of ``subscriptions/listen`` (2026-07-28) on an MCPServer; returns the hub."""
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError
    from mcp.server.mcpserver.resources.templates import ResourceSecurity

    hub = WatchHub(roots, base)

    @server.resource(TEMPLATE, name="watch", title="Watch a run", mime_type="application/json",
                     description="A log or run folder's findings so far (onset line, step); subscribe for updates.",
                     security=ResourceSecurity(reject_absolute_paths=False))  # confined by server/paths.py instead
    def watch_resource(path: str) -> str:
        try:
            return hub.read_path(path, PREFIX + path)
        except ValueError as e:
            raise ResourceNotFoundError(f"{PREFIX}{path[:160]}: {str(e)[:400]}") from None

    low = server._lowlevel_server
    _register_subscribe(low, hub)
    entry = low._request_handlers.get("subscriptions/listen")
    if entry is not None:
        _wrap_listen(low, entry, hub, server._subscriptions)
    return hub


def _register_subscribe(low, hub: WatchHub) -> None:
    import anyio.from_thread
    import anyio.lowlevel
    from mcp.types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

    async def subscribe(ctx, params: SubscribeRequestParams) -> EmptyResult:
        uri = str(params.uri)
        real = _confined(hub, uri)
        session, token = ctx.session, anyio.lowlevel.current_token()
        conn = getattr(session, "_connection", None)
        subs: dict = conn.state.setdefault(_STATE_KEY, {}) if conn is not None else {}
        if uri in subs:
            return EmptyResult()
        if len(subs) >= MAX_PER_SESSION:
            raise _mcp_error(f"{uri[:160]}: this session watches {MAX_PER_SESSION} URIs already; unsubscribe one")

        def notify(event: str, rec: dict) -> None:
            anyio.from_thread.run(session.send_resource_updated, uri, token=token)

        try:
            subs[uri] = (real, hub.listen(real, notify))
        except ValueError as e:
            raise _mcp_error(f"{uri[:160]}: {e}") from None
        if conn is not None and len(subs) == 1:
            conn.exit_stack.callback(_drop_all, hub, subs)  # the session ended: stop its followers
        return EmptyResult()

    async def unsubscribe(ctx, params: UnsubscribeRequestParams) -> EmptyResult:
        conn = getattr(ctx.session, "_connection", None)
        subs = conn.state.get(_STATE_KEY, {}) if conn is not None else {}
        held = subs.pop(str(params.uri), None)
        if held is not None:
            hub.unlisten(*held)
        return EmptyResult()

    low.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    low.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)


def _drop_all(hub: WatchHub, subs: dict) -> None:
    for real, token in list(subs.values()):
        hub.unlisten(real, token)
    subs.clear()


def _wrap_listen(low, entry, hub: WatchHub, bus) -> None:
    """``subscriptions/listen``: the watch URIs among its resource subscriptions followed while the stream lasts,
    each update published on the bus as ``ResourceUpdated(uri)``; then the SDK's own ListenHandler serves it."""
    import anyio.from_thread
    import anyio.lowlevel
    from mcp.server.subscriptions import ResourceUpdated

    inner = entry.handler

    async def listen(ctx, params):
        uris = [u for u in (params.notifications.resource_subscriptions or []) if str(u).startswith(PREFIX)]
        if len(set(uris)) > MAX_PER_SESSION:
            raise _mcp_error(f"{len(set(uris))} watch URIs in one listen; at most {MAX_PER_SESSION}")
        token, held = anyio.lowlevel.current_token(), []
        try:
            for uri in dict.fromkeys(uris):
                real = _confined(hub, uri)

                def notify(event: str, rec: dict, uri=uri) -> None:
                    anyio.from_thread.run(bus.publish, ResourceUpdated(uri=uri), token=token)

                try:
                    held.append((real, hub.listen(real, notify)))
                except ValueError as e:
                    raise _mcp_error(f"{uri[:160]}: {e}") from None
            return await inner(ctx, params)
        finally:
            for real, tok in held:
                hub.unlisten(real, tok)

    low.add_request_handler("subscriptions/listen", entry.params_type, listen)
