"""Peer-supplied text in errors and logs, cut to a short prefix.

An error answer or a log line that repeats its input in full turns a 5 MB URI into a 10 MB answer, and the SDK's
rich log handler takes minutes (in the event loop, so the whole server stalls) to lay out a traceback whose
message is a 100 KB prompt name. ``clip`` cuts one value; ``clip_log_records`` cuts every log record.
"""
from __future__ import annotations

import logging

ECHO_CHARS = 200   # the most of an input an error repeats
LOG_CHARS = 2000   # the most of a message a log record keeps


def clip(text: object, limit: int = ECHO_CHARS) -> str:
    """``str(text)`` cut to ``limit`` characters plus '...' and the full length when longer."""
    s = str(text)
    return s if len(s) <= limit else f"{s[:limit]}... ({len(s)} characters)"


def _long_exception(exc: BaseException | None) -> bool:
    seen = 0
    while exc is not None and seen < 10:
        try:
            if len(str(exc)) > LOG_CHARS:
                return True
        except Exception:  # noqa: BLE001 - a __str__ that fails is not our concern here
            return False
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


class ClipFilter(logging.Filter):
    """Cuts a record's message to LOG_CHARS; a record whose exception (or a cause) has a longer message loses its
    traceback and keeps the exception's type and clipped message."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string: let the handler report it
            return True
        exc = record.exc_info[1] if record.exc_info else None
        long_exc = _long_exception(exc)
        if len(msg) > LOG_CHARS or long_exc:
            msg = clip(msg, LOG_CHARS)
            if long_exc:
                msg = f"{msg} ({type(exc).__name__}: {clip(exc, ECHO_CHARS)})"
                record.exc_info, record.exc_text = None, None
            record.msg, record.args = msg, None
        return True


def clip_log_records() -> None:
    """Put a ClipFilter on every handler of the root logger and of uvicorn's loggers (idempotent)."""
    for name in ("", "uvicorn", "uvicorn.error", "uvicorn.access"):
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, ClipFilter) for f in handler.filters):
                handler.addFilter(ClipFilter())


async def _short_method_names(ctx, call_next):
    """Server middleware: an unknown method's error says its name in data, whole; a long one is cut here."""
    if len(ctx.method) > ECHO_CHARS:
        from mcp.shared.exceptions import MCPError
        from mcp.types import METHOD_NOT_FOUND

        raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=clip(ctx.method))
    return await call_next(ctx)


class ShortErrors:
    """Mixin for an MCPServer subclass (before MCPServer in the bases): the SDK's errors for an unknown tool,
    prompt or resource repeat the name or URI in full (message and the ``data.uri`` field); here they say a
    short prefix, and so does the answer to an unknown method with a long name. A URI over 1000 characters (none
    of ours is) is refused before any lookup."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.middleware.append(_short_method_names)  # type: ignore[attr-defined]

    async def call_tool(self, name, arguments, context=None):
        from mcp.server.mcpserver.exceptions import ToolError

        try:
            return await super().call_tool(name, arguments, context)  # type: ignore[misc]
        except ToolError as e:
            if str(e).startswith("Unknown tool: ") and len(str(e)) > ECHO_CHARS:
                raise ToolError(f"Unknown tool: {clip(name)}; tools/list names the tools") from None
            raise

    async def get_prompt(self, *args, **kwargs):
        try:
            return await super().get_prompt(*args, **kwargs)  # type: ignore[misc]
        except ValueError as e:  # 'Unknown prompt: <name>'
            if len(str(e)) > ECHO_CHARS:
                raise ValueError(clip(e)) from None
            raise

    async def read_resource(self, uri, context=None):
        from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
        from mcp.shared.exceptions import MCPError
        from mcp.types import INTERNAL_ERROR, INVALID_PARAMS

        text = str(uri)
        try:
            if len(text) > 1000:
                raise ResourceNotFoundError(f"unknown resource {clip(text, 60)}; resources are rule://{{rule_id}}, "
                                            "symptoms://codes and skill://grpo-debug/SKILL.md")
            return await super().read_resource(uri, context)  # type: ignore[misc]
        except ResourceError as e:  # the SDK answers with data={"uri": the whole URI}
            raise MCPError(code=INVALID_PARAMS if isinstance(e, ResourceNotFoundError) else INTERNAL_ERROR,
                           message=clip(e, 2 * ECHO_CHARS), data={"uri": clip(text)}) from None
