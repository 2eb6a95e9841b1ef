"""Plots of a run's metrics: Unicode sparklines for a terminal, and small multiples as a PNG.

    from grpo_debug.tools.rundir.plot import plot_run
    out = plot_run(path="outputs/run7", metrics=["grad_norm"], png=True)   # PlotOut(text, png bytes, png_path)

Series shown: the ``metrics`` asked for (canonical names or raw keys), else the run's canonical series in a
fixed order of interest (grad_norm, loss, reward, entropy, KL, ...), at most ``MAX_PANELS``. Each sparkline
is the series cut into at most ``width`` buckets (mean of the finite values of a bucket; ``×`` where a bucket
holds a NaN/inf), followed by min/max/last, the steps covered and the first non-finite step. The PNG
(matplotlib, the optional ``plot`` extra, imported inside :func:`render_png` with the Agg backend) is one
panel per series, at most 1200x800 pixels, with each non-finite step marked by a red dotted line and each
finding's start (the first step its evidence names) by a dashed line labelled with its symptom.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from grpo_debug.tools.errors import InputError

MAX_PANELS = 9
BLOCKS = "▁▂▃▄▅▆▇█"
NONFINITE = "×"
ORDER = ("grad_norm", "loss", "pg_loss", "reward_mean", "score_mean", "reward", "entropy", "kl", "ppo_kl",
         "response_length_mean", "response_length", "clip_frac", "pg_clipfrac", "lr", "learning_rate")
INSTALL_HINT = "matplotlib is not installed: pip install 'grpo-debug[plot]' (or pip install 'matplotlib>=3.8')"


@dataclass
class PlotOut:
    """``text``: sparklines and notes; ``png``: PNG bytes or None; ``png_path``: where the PNG was saved."""

    text: str
    png: bytes | None = None
    png_path: str | None = None
    series: list[str] = field(default_factory=list)
    marks: list[tuple[str, float]] = field(default_factory=list)


def pick_series(run, metrics: list[str] | None = None, limit: int = MAX_PANELS) -> tuple[list, list[str]]:
    """(series to show, names asked for that the run lacks)."""
    if metrics:
        found = [(m, run.series_of(m)) for m in metrics]
        return [s for _, s in found if s is not None][:limit], [m for m, s in found if s is None]
    canon = [s for s in run.series.values() if s.canonical and len(s.points) > 1]
    rank = {n: i for i, n in enumerate(ORDER)}
    canon.sort(key=lambda s: (rank.get(s.name, len(ORDER)), s.name))
    if len(canon) < limit:  # fill with the raw series that have the most points
        rest = [s for s in run.series.values() if not s.canonical and len(s.points) > 1]
        canon += sorted(rest, key=lambda s: -len(s.points))[:limit - len(canon)]
    return canon[:limit], []


def sparkline(values: list[float], width: int = 48) -> str:
    """Values as block characters, at most ``width`` wide; a bucket holding NaN/inf shows ``×``."""
    if not values:
        return ""
    n = len(values)
    k = max(1, math.ceil(n / width))
    buckets = [values[i:i + k] for i in range(0, n, k)]
    fin = [v for v in values if math.isfinite(v)]
    lo, hi = (min(fin), max(fin)) if fin else (0.0, 0.0)
    out = []
    for b in buckets:
        if any(not math.isfinite(v) for v in b):
            out.append(NONFINITE)
            continue
        m = sum(b) / len(b)
        out.append(BLOCKS[0] if hi == lo else BLOCKS[min(7, int((m - lo) / (hi - lo) * 8))])
    return "".join(out)


def _g(v: float) -> str:
    return f"{v:.4g}" if math.isfinite(v) else str(v).lower()


def sparkline_row(s, width: int = 48, name_width: int = 16) -> str:
    """``name  ▁▂▃█×  min .. max .. last .. (N pts, step a-b; non-finite from step X)``."""
    vals = s.values()
    fin = [v for v in vals if math.isfinite(v)]
    bad = s.first_nonfinite()
    stats = (f"min {_g(min(fin))} max {_g(max(fin))} last {_g(vals[-1])}" if fin else "no finite value")
    steps = f"{len(vals)} pts, {s.axis} {s.points[0].step:g}-{s.points[-1].step:g}" if vals else "0 pts"
    tail = f"; non-finite from {s.axis} {bad.step:g}" if bad is not None else ""
    return f"{s.name[:name_width]:<{name_width}} {sparkline(vals, width):<{width}}  {stats} ({steps}{tail})"


def finding_marks(analysis) -> list[tuple[str, float]]:
    """(symptom, start step) per finding: the smallest step of its evidence lines that are metric lines, else the
    smallest step named by its other evidence lines (the last metric line before each; merged numbering). A
    warning printed during step N comes before step N's metric line, so it is only used without a metric line."""
    out = []
    for f in analysis.result.findings:
        steps = [st for e in f.evidence if (st := analysis.step_of_line(e.line)) is not None]
        exact = [st for e in f.evidence if (st := analysis.step_at_line(e.line)) is not None]
        if exact or steps:
            out.append((f.symptom, min(exact or steps)))
    return out


def render_png(series: list, marks: list[tuple[str, float]], title: str = "") -> bytes:
    """Small multiples PNG (at most 1200x800). Raises ImportError without matplotlib."""
    import io

    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    import warnings

    with warnings.catch_warnings():  # a metric name's control bytes must not reach stderr through a warning
        warnings.simplefilter("ignore")
        return _render(plt, series, marks, title)


def _render(plt, series: list, marks: list[tuple[str, float]], title: str) -> bytes:
    import io

    n = max(1, len(series))
    cols = 1 if n == 1 else (2 if n <= 4 else 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(12, min(8, 2.4 * rows + 0.6)), dpi=100, squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for ax, s in zip(axes.flat, series):
        _panel(ax, s, marks)
    if title:
        fig.suptitle(_label(title[-120:]), fontsize=10, parse_math=False)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


MAX_DRAWN = 4000  # points drawn per panel: more are thinned to each bucket's min and max (a 2M-point series)


def _label(text: str) -> str:
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


def _panel(ax, s, marks) -> None:
    fin = thin([(p.step, p.value) for p in s.points if math.isfinite(p.value)])
    if fin:
        ax.plot([x for x, _ in fin], [v for _, v in fin], lw=1.2, color="#1f77b4")
        vals = [v for _, v in fin]
        if min(vals) > 0 and max(vals) / min(vals) > 1e3:
            ax.set_yscale("log")
    bad = [p.step for p in s.points if not math.isfinite(p.value)]
    for i, x in enumerate(bad[:200]):
        ax.axvline(x, color="red", ls=":", lw=0.8, label="non-finite" if i == 0 else None)
    lo = s.points[0].step if s.points else 0
    hi = s.points[-1].step if s.points else 0
    for i, (sym, x) in enumerate(marks):
        if lo <= x <= hi:
            ax.axvline(x, color=f"C{1 + i % 8}", ls="--", lw=1.0, label=_label(f"{sym} @ {x:g}"))
    ax.set_title(_label(s.name), fontsize=9, parse_math=False)
    ax.set_xlabel(_label(s.axis), fontsize=8, parse_math=False)
    ax.tick_params(labelsize=7)
    if bad or marks:
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            ax.legend(fontsize=6, loc="upper left")


_TMP: list[str] = []
KEEP_PNGS = 50


def save_png(png: bytes, path: str | None = None) -> str:
    """Write the PNG to ``path``, or into this process's temporary folder (one, made on first use; the oldest
    files beyond ``KEEP_PNGS`` removed, so a long-running server does not fill /tmp); returns the path. The
    file is written through an exclusively created temporary file and a rename (tools/safe_write.py); raises
    ``UnsafeWrite`` (an OSError) when ``path`` is a symlink or not a regular file."""
    if path is None:
        import tempfile
        import time

        if not _TMP:
            _TMP.append(tempfile.mkdtemp(prefix="grpo-debug-plot-"))
        old = sorted((os.path.join(_TMP[0], n) for n in os.listdir(_TMP[0])), key=os.path.getmtime)
        for p in old[:max(0, len(old) - KEEP_PNGS + 1)]:
            os.unlink(p)
        path = os.path.join(_TMP[0], f"run-{time.time_ns()}.png")
    from grpo_debug.tools.safe_write import replace_file

    replace_file(path, png)  # exclusive temp file + rename: an existing link at path is refused, never followed
    return path


def plot_run(text: str | None = None, path: str | None = None, metrics: list[str] | None = None, *, png: bool = True,
             png_path: str | None = None, width: int = 48) -> PlotOut:
    """Sparklines of the run's series (always) and, with ``png``, the PNG (saved to ``png_path`` or a temp
    folder). Without matplotlib the text says how to install it and ``png`` is None."""
    from grpo_debug.tools.rundir.analyze import analyze

    a = analyze(text=text, path=path)
    series, missing = pick_series(a.run, metrics)
    marks = finding_marks(a)
    rows = [sparkline_row(s, width) for s in series]
    head = f"{a.label}: {len(series)} of {len(a.run.series)} series"
    if marks:
        head += "; findings start at " + ", ".join(f"{sym} {x:g}" for sym, x in marks[:5])
    notes = [f"no series named {m!r} (known: {', '.join(list(a.run.series)[:12])})" for m in missing]
    if not series and missing:
        raise InputError("; ".join(notes) + "; give --metrics / metrics from the known names")
    if not series:
        notes.append("no metric series found in the input")
    out = PlotOut(text="\n".join([head, *rows, *notes]), series=[s.name for s in series], marks=marks)
    if png and series:
        try:
            out.png = render_png(series, marks, a.label)
        except ImportError:
            out.text += "\n" + INSTALL_HINT
            return out
        try:
            out.png_path = save_png(out.png, png_path)
        except OSError as e:
            raise InputError(f"cannot write the PNG to {png_path}: {e.strerror or e}; give a path in an "
                             "existing, writable folder (a regular file or a new name, not a link)") from None
        out.text += f"\nPNG ({len(series)} panels): {out.png_path}"
    return out
