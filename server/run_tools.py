"""MCP tools over whole runs (tools/rundir/): ``plot`` (sparklines plus a ``resource_link`` to the PNG kept in
memory, server/plot_store.py; the image content too with ``inline``) and ``compare_runs``. Registered by
``server/app.py``'s ``build_server`` through :func:`register_run_tools`, which passes in the app's guard,
heavy-call pool runner and path confinement (this module does not import app.py).

``plot`` has no output schema on purpose: a client drops a tool's content blocks when structured content is
present, and the link (or the PNG as ``ImageContent``) must arrive.
"""
from __future__ import annotations

import base64
import re
from typing import Annotated

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ImageContent, ResourceLink, TextContent
from pydantic import Field

from grpo_debug.server.schemas import OptStr
from grpo_debug.tools.rundir.compare import CompareResult  # the tool's return annotation (light: pydantic only)

def register_run_tools(server, inputs, guard, heavy, annotations) -> None:
    """Register ``plot`` and ``compare_runs`` on ``server``."""
    _register_plot(server, inputs, guard, heavy, annotations)
    _register_compare(server, inputs, guard, heavy, annotations)


def _register_plot(server, inputs, guard, heavy, annotations) -> None:
    from grpo_debug.server.plot_store import PlotStore, register_plot_resource

    store = server.plot_store = PlotStore()  # the PNGs, in this process's memory (server/plot_store.py)
    register_plot_resource(server, store)

    @server.tool(name="plot", title="Plot a run's metrics", annotations=annotations, structured_output=False,
                 description="A run's metrics as sparklines plus a PNG link (log y, onsets marked, runs "
                             "overlaid). Give `path` or `text`.")
    async def plot_tool(
        text: Annotated[OptStr, Field(description="A pasted log.")] = "",
        path: Annotated[OptStr, Field(description="A log, metric store or run folder.")] = "",
        metrics: Annotated[list[str], Field(description="Default: canonical ones.",
                                            max_length=12)] = [],  # noqa: B006 - the SDK copies defaults
        also: Annotated[list[str], Field(description="Paths of runs to overlay.", max_length=7)] = [],  # noqa: B006
        inline: Annotated[bool, Field(description="PNG inline too.")] = False,
    ) -> list[TextContent | ImageContent | ResourceLink]:
        out = await heavy(inputs.pool, "plot", _plot, inputs, guard, text, path, metrics, also)  # by reference: a worker
        return _plot_answer(store, out, inline)


def _plot_answer(store, out, inline: bool) -> list[TextContent | ImageContent | ResourceLink]:
    """The sparklines, then the link to the stored PNG, then (``inline``) the PNG itself."""
    from grpo_debug.server.plot_store import link

    blocks: list[TextContent | ImageContent | ResourceLink] = [TextContent(type="text", text=out.text)]
    if out.png:
        what = f"{len(out.series)} panels" + (f", {len(out.runs)} runs" if len(out.runs) > 1 else "")
        blocks.append(link(store, store.put(out.png), len(out.png), what))
        if inline:
            blocks.append(ImageContent(type="image", data=base64.b64encode(out.png).decode("ascii"),
                                       mime_type="image/png"))
    return blocks


def _plot(inputs, guard, text, path, metrics, also=()):
    """The worker's part: confine the paths, plot (tools/rundir/plot.py); returns the PlotOut (PNG bytes, no file)."""
    from grpo_debug.tools.errors import InputError
    from grpo_debug.tools.rundir.plot import plot_run

    with guard("plot"):
        text, path = inputs.text_or_path(text, path, required=True, kind="any")
        names = [str(m)[:200] for m in (metrics or [])][:12] or None
        more = [inputs.confined(str(p), "also", "any") for p in (also or [])][:7] or None
        try:
            return plot_run(text=text, path=path, metrics=names, png=True, also=more)
        except InputError as e:
            raise ToolError(f"plot: {e}") from None


def _register_compare(server, inputs, guard, heavy, annotations) -> None:
    @server.tool(name="compare_runs", title="Compare two runs", annotations=annotations,
                 description="Run A vs B (any lengths): broken run, levels, divergence, config.")
    async def compare_tool(
        a: Annotated[OptStr, Field(description="Path or paste (may hold both runs).")] = "",
        b: Annotated[OptStr, Field(description="Run B likewise.")] = "",
    ) -> CompareResult:
        return _compare_answer(await heavy(inputs.pool, "compare_runs", _compare, inputs, guard, a, b))


def _compare_answer(res: CompareResult) -> CallToolResult:
    """The (bounded, redacted) comparison as structured content, with its text rendering as the text block (the
    same facts, about half the characters of the indented JSON)."""
    from grpo_debug.tools.rundir.compare_text import render

    return CallToolResult(content=[TextContent(type="text", text=render(res))],
                          structured_content=res.model_dump(mode="json"))


_ONE_LINE_LOG = re.compile(r"\w[:=]\s*-?(?:\d|nan|inf)[^/]*\s-\s|^\s*\{['\"]\w", re.I)


def _side(inputs, value: str, arg: str) -> dict:
    """{'text': value} for pasted text (several lines, or one metric line: ``step:1 - key:value - ...``, a
    printed dict), else {'path': confined}."""
    from grpo_debug.server.budget import _check_text

    if "\n" in value or len(value) > 4096 or _ONE_LINE_LOG.search(value):
        _check_text(value)
        return {"text": value}
    return {"path": inputs.confined(value, arg, "any")}


def _compare(inputs, guard, a: str, b: str):
    from grpo_debug.tools.errors import InputError
    from grpo_debug.tools.rundir.compare import COMPARE_BYTES, bound_compare, compare_runs

    with guard("compare_runs"):
        if not a:
            raise ToolError("compare_runs: give `a` (and `b`), each a path or pasted text")
        kw = {f"a_{k}": v for k, v in _side(inputs, a, "a").items()}
        if b:
            kw |= {f"b_{k}": v for k, v in _side(inputs, b, "b").items()}
        try:
            return bound_compare(compare_runs(**kw), COMPARE_BYTES)  # redacted by compare_runs, then cut
        except InputError as e:
            raise ToolError(f"compare_runs: {e}") from None
