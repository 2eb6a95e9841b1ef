"""The PNG of a plot: one panel per metric, each run a line of its own colour (matplotlib, the optional ``plot``
extra, imported inside :func:`build_figure` with the Agg backend).

- y scale per panel (:func:`y_scale`): log when the panel's positive finite values span more than two decades
  (max/min > 100) and every finite value is positive; symlog (linear within the smallest positive value) when
  they span that much and some value is zero or negative; else linear.
- marks: each finding's onset on its series' panel, a dashed vertical line labelled ``symptom @ step`` (with
  several runs, ``run: symptom @ step`` in the run's colour); non-finite steps as red dotted lines.
- one legend for the figure, to the right of the panels (never over the data): the runs, then the marks, at most
  ``MAX_LEGEND`` entries.
- at most 1200x800 pixels; at most ``MAX_DRAWN`` points per line (:func:`thin`: each bucket's min and max).
Names reach the figure as plain text (control characters dropped, ``parse_math=False``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

MAX_DRAWN = 4000  # points drawn per line: more are thinned to each bucket's min and max (a 2M-point series)
MAX_LEGEND = 24
LEGEND_RIGHT = 0.80  # the panels take the figure's left 80 %, the legend the rest


@dataclass
class Trace:
    """One run's series on a panel: ``series`` (tools/run/model.Series), ``run`` (name or None for a lone run),
    ``marks`` ((symptom, step) to draw on this panel), ``colour`` (the run's index)."""

    series: Any
    run: str | None = None
    marks: list[tuple[str, float]] = field(default_factory=list)
    colour: int = 0


def label(text: str) -> str:
    """A name as plain text for a title or legend: control characters dropped (never drawn as math markup:
    the callers pass parse_math=False)."""
    return "".join(ch for ch in str(text) if ch.isprintable())[:120]


def thin(points: list[tuple[float, float]], limit: int = MAX_DRAWN) -> list[tuple[float, float]]:
    """``points`` (step order) cut to about ``limit``: each bucket keeps its min and max in step order, so a spike
    or a climb looks as it does in the full series."""
    if len(points) <= limit:
        return points
    per = math.ceil(len(points) / (limit // 2))
    out = []
    for i in range(0, len(points), per):
        b = points[i:i + per]
        lo, hi = min(b, key=lambda p: p[1]), max(b, key=lambda p: p[1])
        out += sorted({lo, hi})
    return out


def y_scale(values: list[float]) -> tuple[str, float | None]:
    """('linear' | 'log' | 'symlog', linthresh for symlog) for a panel's values (module docstring)."""
    fin = [v for v in values if math.isfinite(v)]
    pos = [v for v in fin if v > 0]
    if not pos or max(pos) / min(pos) <= 100:
        return "linear", None
    return ("log", None) if len(pos) == len(fin) else ("symlog", min(pos))


def build_figure(panels: list[tuple[str, list[Trace]]], title: str = ""):
    """The matplotlib Figure (Agg) of ``panels`` ((panel title, traces) each). Raises ImportError without
    matplotlib. The caller closes it (``matplotlib.pyplot.close``)."""
    import warnings

    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    with warnings.catch_warnings():  # a metric name's control bytes must not reach stderr through a warning
        warnings.simplefilter("ignore")
        n = max(1, len(panels))
        cols = 1 if n == 1 else (2 if n <= 4 else 3)
        rows = math.ceil(n / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(12, min(8, 2.4 * rows + 0.6)), dpi=100, squeeze=False)
        for ax in axes.flat[n:]:
            ax.set_visible(False)
        for ax, (name, traces) in zip(axes.flat, panels):
            _panel(ax, name, traces)
        if title:
            fig.suptitle(label(title[-120:]), fontsize=10, parse_math=False)
        handles = _legend_entries(axes.flat[:n])
        fig.tight_layout(rect=(0, 0, LEGEND_RIGHT if handles else 1, 0.96 if title else 1))
        if handles:
            fig.legend(list(handles.values()), list(handles), loc="upper left", fontsize=7, frameon=False,
                       bbox_to_anchor=(LEGEND_RIGHT + 0.005, 0.96 if title else 1.0), borderaxespad=0.2)
        return fig


def render_figure(panels: list[tuple[str, list[Trace]]], title: str = "") -> bytes:
    """PNG bytes of :func:`build_figure` (at most 1200x800). Raises ImportError without matplotlib."""
    import io
    import warnings

    fig = build_figure(panels, title)
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fig.savefig(buf, format="png", dpi=100)
    finally:
        plt.close(fig)
    return buf.getvalue()


def _legend_entries(axes) -> dict:
    """label -> handle over every panel, first seen first, at most MAX_LEGEND (runs first: they are drawn first)."""
    out: dict = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab and not lab.startswith("_") and lab not in out and len(out) < MAX_LEGEND:
                out[lab] = h
    return out


def _panel(ax, name: str, traces: list[Trace]) -> None:
    many = len({t.run for t in traces}) > 1 or any(t.run for t in traces)
    values = []
    for t in traces:
        fin = thin([(p.step, p.value) for p in t.series.points if math.isfinite(p.value)])
        values += [v for _, v in fin]
        if fin:
            ax.plot([x for x, _ in fin], [v for _, v in fin], lw=1.2, color=f"C{t.colour % 10}",
                    label=label(t.run) if many else None)
    scale, lin = y_scale(values)
    if scale == "symlog":
        ax.set_yscale("symlog", linthresh=lin)
    elif scale == "log":
        ax.set_yscale("log")
    for t in traces:
        bad = [p.step for p in t.series.points if not math.isfinite(p.value)]
        for i, x in enumerate(bad[:200]):
            ax.axvline(x, color="red", ls=":", lw=0.8, label="non-finite" if i == 0 else None)
        pts = t.series.points
        lo, hi = (pts[0].step, pts[-1].step) if pts else (0, 0)
        for i, (sym, x) in enumerate(t.marks):
            if min(lo, hi) <= x <= max(lo, hi):
                colour = f"C{t.colour % 10}" if many else f"C{1 + i % 8}"
                ax.axvline(x, color=colour, ls="--", lw=1.0,
                           label=label(f"{t.run}: {sym} @ {x:g}" if many else f"{sym} @ {x:g}"))
    ax.set_title(label(name) + (" (log y)" if scale == "log" else " (symlog y)" if scale == "symlog" else ""),
                 fontsize=9, parse_math=False)
    axis = traces[0].series.axis if traces else "step"
    ax.set_xlabel(label(axis), fontsize=8, parse_math=False)
    ax.tick_params(labelsize=7)
