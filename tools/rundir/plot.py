"""Plots of a run's metrics: Unicode sparklines for a terminal, and small multiples as a PNG.

    from grpo_debug.tools.rundir.plot import plot_run
    out = plot_run(path="outputs/run7", metrics=["grad_norm"])        # PlotOut(text, png bytes; no file)
    out = plot_run(path="a.log", also=["b.log"], png_path="ab.png")     # two runs overlaid, written to ab.png

Series shown: the ``metrics`` asked for (canonical names or raw keys), else the run's canonical series in a
fixed order of interest (grad_norm, loss, reward, entropy, KL, ...), at most ``MAX_PANELS``. Each sparkline
is the series cut into at most ``width`` buckets (mean of the finite values of a bucket; ``×`` where a bucket
holds a NaN/inf), followed by min/max/last, the steps covered and the first non-finite step. The PNG
(matplotlib, the optional ``plot`` extra, imported inside plot_render.py with the Agg backend) is one panel per
metric, every run overlaid in its own colour (plot_runs.py: which runs), log y where a series spans more than
two decades, each finding's onset a dashed line on its series' panel, the legend beside the panels
(plot_render.py). The PNG is returned as bytes; a file is written only to ``png_path`` (tools/safe_write.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from grpo_debug.tools.errors import InputError
from grpo_debug.tools.rundir.plot_render import MAX_DRAWN, thin  # noqa: F401 - re-exported (callers, tests)

MAX_PANELS = 9
BLOCKS = "▁▂▃▄▅▆▇█"
NONFINITE = "×"
ORDER = ("grad_norm", "loss", "pg_loss", "reward_mean", "score_mean", "reward", "entropy", "kl", "ppo_kl",
         "response_length_mean", "response_length", "clip_frac", "pg_clipfrac", "lr", "learning_rate")
INSTALL_HINT = "matplotlib is not installed: pip install 'grpo-debug[plot]' (or pip install 'matplotlib>=3.8')"


@dataclass
class PlotOut:
    """``text``: sparklines and notes; ``png``: PNG bytes or None; ``png_path``: where the PNG was saved (only
    when asked); ``series``: the panels' metrics; ``marks``: (symptom, step); ``runs``: the overlaid runs' names."""

    text: str
    png: bytes | None = None
    png_path: str | None = None
    series: list[str] = field(default_factory=list)
    marks: list[tuple[str, float]] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)


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


def sparkline_row(s, width: int = 48, name_width: int = 16, label: str | None = None) -> str:
    """``name  ▁▂▃█×  min .. max .. last .. (N pts, step a-b; non-finite from step X)``; ``label`` replaces the
    series name (``grad_norm[run B]`` in an overlay: then up to 32 characters)."""
    vals = s.values()
    fin = [v for v in vals if math.isfinite(v)]
    bad = s.first_nonfinite()
    stats = (f"min {_g(min(fin))} max {_g(max(fin))} last {_g(vals[-1])}" if fin else "no finite value")
    steps = f"{len(vals)} pts, {s.axis} {s.points[0].step:g}-{s.points[-1].step:g}" if vals else "0 pts"
    tail = f"; non-finite from {s.axis} {bad.step:g}" if bad is not None else ""
    name = s.name[:name_width] if label is None else label[:max(name_width, 32)]
    return f"{name:<{name_width}} {sparkline(vals, width):<{width}}  {stats} ({steps}{tail})"


def finding_marks(analysis) -> list[tuple[str, float]]:
    """(symptom, start step) per finding: its ``onset.step`` when it has one, else the smallest step its evidence
    lines name (the metric line itself, else the last metric line before it: a warning printed during step N
    comes before step N's metric line). tools/rundir/plot_runs.marks_of keeps each onset's series too."""
    from grpo_debug.tools.rundir.plot_runs import marks_of

    return [(sym, x) for sym, x, _ in marks_of(analysis)]


def render_png(series: list, marks: list[tuple], title: str = "") -> bytes:
    """Small multiples PNG of one run (at most 1200x800): ``marks`` (symptom, step) or (symptom, step, series
    name) drawn on every panel, or on that series' panel. Raises ImportError without matplotlib."""
    from grpo_debug.tools.rundir.plot_render import Trace, render_figure
    from grpo_debug.tools.rundir.plot_runs import on_panel

    full = [(m[0], m[1], m[2] if len(m) > 2 else None) for m in marks]
    return render_figure([(s.name, [Trace(s, None, on_panel(full, s))]) for s in series], title)


def save_png(png: bytes, path: str) -> str:
    """Write the PNG to ``path`` (the CLI's ``--png FILE``; nothing else writes one) through an exclusively
    created temporary file and a rename (tools/safe_write.py); returns the path. Raises ``UnsafeWrite`` (an
    OSError) when ``path`` is a symlink or not a regular file, OSError when its folder is not writable."""
    from grpo_debug.tools.safe_write import replace_file

    replace_file(path, png)  # exclusive temp file + rename: an existing link at path is refused, never followed
    return path


def _panels(runs: list, metrics: list[str] | None) -> tuple[list, list[str]]:
    """(panels: (metric, traces) each, in the first run's order of interest; names asked for that no run has)."""
    from grpo_debug.tools.rundir.plot_render import Trace
    from grpo_debug.tools.rundir.plot_runs import on_panel

    picked = [pick_series(r.analysis.run, metrics)[0] for r in runs]
    names = list(dict.fromkeys(s.name for ss in picked for s in ss))[:MAX_PANELS]
    missing = [m for m in (metrics or []) if all(r.analysis.run.series_of(m) is None for r in runs)]
    panels = []
    for name in names:
        traces = [Trace(s, r.name, on_panel(r.marks, s), i) for i, (r, ss) in enumerate(zip(runs, picked))
                  for s in ss if s.name == name]
        panels.append((name, traces))
    return panels, missing


def _starts(r) -> str:
    marks = [(sym, x) for sym, x, _ in r.marks]
    return "findings start at " + ", ".join(f"{sym} {x:g}" for sym, x in marks[:5]) if marks else ""


def _text(runs: list, panels: list, how: str, width: int) -> list[str]:
    """The head line(s) and one sparkline row per (metric, run)."""
    if len(runs) == 1:
        a, st = runs[0].analysis, _starts(runs[0])
        head = [f"{a.label}: {len(panels)} of {len(a.run.series)} series" + (f"; {st}" if st else "")]
    else:
        head = [f"{len(runs)} runs overlaid ({how}): {', '.join(str(r.name) for r in runs)}; {len(panels)} metrics"]
        head += [f"[{r.name}] {st}" for r in runs if (st := _starts(r))]
    labels = [(t, f"{name}[{t.run}]" if t.run else name) for name, traces in panels for t in traces]
    nw = min(32, max([16, *(len(lab) for _, lab in labels)]))
    rows = [sparkline_row(t.series, width, nw, label=lab) for t, lab in labels]
    return head + rows


def prepare(text: str | None = None, path: str | None = None, metrics: list[str] | None = None,
            also: list[str] | None = None) -> tuple[list, str, list, list[str]]:
    """(runs (plot_runs.RunPlot, marks set), how they were found, panels for plot_render.build_figure, metric
    names no run has): what :func:`plot_run` draws. Raises InputError as ``analyze`` does."""
    from grpo_debug.tools.rundir.plot_runs import load_runs, marks_of

    runs, how = load_runs(text, path, also)
    for r in runs:
        r.marks = marks_of(r.analysis)
    return (runs, how, *_panels(runs, metrics))


def plot_run(text: str | None = None, path: str | None = None, metrics: list[str] | None = None, *, png: bool = True,
             png_path: str | None = None, width: int = 48, also: list[str] | None = None) -> PlotOut:
    """Sparklines of the run's series (always) and, with ``png``, the PNG bytes (``out.png``), written to a file
    only when ``png_path`` is given. Several runs (``also``: more paths; or a folder / paste that splits into
    runs, tools/rundir/plot_runs.py) are overlaid, one colour per run. Without matplotlib the text says how to
    install it and ``png`` is None. Raises InputError for an unreadable input, metrics no run has, or a
    ``png_path`` that cannot be written."""
    runs, how, panels, missing = prepare(text, path, metrics, also)
    known = list(dict.fromkeys(n for r in runs for n in r.analysis.run.series))
    notes = [f"no series named {m!r} (known: {', '.join(known[:12])})" for m in missing]
    if not panels and missing:
        raise InputError("; ".join(notes) + "; give --metrics / metrics from the known names")
    if not panels:
        notes.append("no metric series found in the input")
    out = PlotOut(text="\n".join([*_text(runs, panels, how, width), *notes]), series=[n for n, _ in panels],
                  marks=[(sym, x) for r in runs for sym, x, _ in r.marks], runs=[r.name for r in runs if r.name])
    if not (png and panels):
        return out
    try:
        from grpo_debug.tools.rundir.plot_render import render_figure

        out.png = render_figure(panels, runs[0].analysis.label if len(runs) == 1 else
                                f"{len(runs)} runs: " + ", ".join(str(r.name) for r in runs))
    except ImportError:
        out.text += "\n" + INSTALL_HINT
        return out
    if png_path is not None:
        try:
            out.png_path = save_png(out.png, png_path)
        except OSError as e:
            raise InputError(f"cannot write the PNG to {png_path}: {e.strerror or e}; give a path in an "
                             "existing, writable folder (a regular file or a new name, not a link)") from None
        out.text += f"\nPNG ({len(panels)} panels): {out.png_path}"
    return out
