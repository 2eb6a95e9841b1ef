"""What every rich renderer shares: a string-backed console (no TTY needed, colour only on request),
number formatting and the section / row / bullet layouts.

Log text is never parsed as rich markup (lines like ``[repeated 3x across cluster]`` or ``[36m`` stay
as they are): everything goes through :class:`rich.text.Text`.
"""
from __future__ import annotations

import math
from io import StringIO
from typing import Iterable

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from grpo_debug.tools.render.safe import terminal_safe

DEFAULT_WIDTH = 100
CONF_STYLE = {"high": "bold red", "medium": "yellow", "low": "dim"}
STATUS_STYLE = {"verified": "green", "partial": "yellow", "unverified": "dim", "not_found": "red"}


def _console(color: bool, width: int | None) -> Console:
    return Console(file=StringIO(), width=width or DEFAULT_WIDTH, force_terminal=color, no_color=not color,
                   color_system="standard" if color else None, highlight=False, markup=False, emoji=False,
                   force_jupyter=False, force_interactive=False, legacy_windows=False)


def to_str(renderables: Iterable[RenderableType], color: bool, width: int | None) -> str:
    con = _console(color, width)
    for r in renderables:
        con.print(r)
    out = terminal_safe(con.file.getvalue(), keep_sgr=color)  # type: ignore[attr-defined]
    return "\n".join(line.rstrip() for line in out.splitlines()) + "\n"


def fmt_num(v: float | None) -> str:
    """Compact number: 4 significant digits, integers without a point, nan/inf spelled out."""
    if v is None:
        return "-"
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if float(v).is_integer() and abs(v) < 1e9:
        return str(int(v))
    a = abs(v)
    return f"{v:.3g}" if (a >= 1e5 or a < 1e-3) else f"{v:.4g}"


def section(label: str, body: RenderableType | str, indent: int = 3) -> RenderableType:
    if isinstance(body, str):
        return Padding(Text.assemble((f"{label}: ", "bold"), body), (0, 0, 0, indent))
    return Group(Padding(Text(f"{label}:", style="bold"), (0, 0, 0, indent)), Padding(body, (0, 0, 0, indent + 2)))


def marker_rows(rows: Iterable[tuple[str | Text, str | Text]], marker_style: str = "") -> Table:
    """Marker + text rows with a hanging indent: wrapped text stays right of the marker."""
    t = Table.grid(padding=(0, 1, 0, 0))
    t.add_column(no_wrap=True, style=marker_style)
    t.add_column(overflow="fold")
    for marker, text in rows:
        t.add_row(marker, text)
    return t


def bullets(items: Iterable[str | Text]) -> Table:
    return marker_rows(("-", it) for it in items)


