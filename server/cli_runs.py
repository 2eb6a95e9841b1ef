"""The run commands of the ``grpo-debug`` command line: ``plot RUN``, ``compare A B`` and fleet triage
(``triage PATH... --jobs N`` / ``--ray-address ADDR``), all over tools/rundir/.

Registered by ``server/cli.py``'s ``build_parser`` through :func:`add_run_parsers`; engines imported on use.
"""
from __future__ import annotations

import argparse
import json
import sys

PROG = "grpo-debug"


def _say(s: str, *, err: bool = False, as_json: bool = False) -> None:
    from grpo_debug.tools.render.safe import json_safe, terminal_safe

    s = json_safe(s) if as_json else terminal_safe(s)
    (sys.stderr if err else sys.stdout).write(s if s.endswith("\n") else s + "\n")


def _input(arg: str) -> dict:
    """{'text': stdin} for '-', else {'path': arg}."""
    if arg == "-":
        return {"text": sys.stdin.buffer.read().decode("utf-8", errors="replace")}
    return {"path": arg}


PLOT_INSTALL = "pip install 'grpo-debug[plot]'"


def cmd_plot(args: argparse.Namespace) -> int:
    """Sparklines of a run's metrics in the terminal (several RUNs: overlaid); ``--png FILE`` writes the
    small-multiples PNG. Exit 2 for an input error, and for ``--png`` without matplotlib (checked before the
    input is read; the message holds the install line)."""
    from grpo_debug.tools.errors import InputError
    from grpo_debug.tools.rundir.plot import plot_run

    if args.png:
        try:
            import matplotlib  # noqa: F401 - only whether it imports
        except ImportError:
            _say(f"{PROG}: error: --png {args.png}: matplotlib is not installed; {PLOT_INSTALL}", err=True)
            return 2
    more = list(getattr(args, "more", None) or [])
    if "-" in more:
        _say(f"{PROG}: error: '-' (stdin) can only be the first RUN; give the other runs as files or folders",
             err=True)
        return 2
    metrics = [m.strip() for m in (args.metrics or "").split(",") if m.strip()] or None
    try:
        out = plot_run(**_input(args.run), metrics=metrics, png=bool(args.png), png_path=args.png,
                       width=args.width, also=more or None)
    except InputError as e:
        _say(f"{PROG}: error: {e}", err=True)
        return 2
    _say(out.text)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """What differs between run A and run B: the broken run, levels, first diverging step, config facts, findings
    one run lacks (B omitted: A holds both runs, a paste, a file or a folder)."""
    from grpo_debug.tools.errors import InputError
    from grpo_debug.tools.rundir.compare import compare_runs

    a = _input(args.a)
    b = _input(args.b) if args.b else {}
    kw = {f"a_{k}": v for k, v in a.items()} | {f"b_{k}": v for k, v in b.items()}
    try:
        res = compare_runs(**kw)
    except InputError as e:
        _say(f"{PROG}: error: {e}", err=True)
        return 2
    if args.format == "json":
        _say(json.dumps(res.model_dump(mode="json"), indent=2, ensure_ascii=False), as_json=True)
        return 0
    _say(render_compare(res))
    return 0


def render_compare(res) -> str:
    """The comparison as text for a person (tools/rundir/compare_text.render)."""
    from grpo_debug.tools.rundir.compare_text import render

    return render(res)


def cmd_fleet(args: argparse.Namespace) -> int:
    """Fleet triage: one JSON line per run as it finishes, then ``{"summary": ...}`` grouped by rule."""
    from grpo_debug.tools.rundir.fleet import fleet

    paths = [args.path, *args.more]
    if "-" in paths:
        _say(f"{PROG}: error: '-' (stdin) cannot be one of several runs; give files or folders", err=True)
        return 2
    summary = fleet(paths, jobs=max(1, args.jobs or 1), ray_address=args.ray_address,
                    emit=lambda line: _say(line, as_json=True))
    _say(json.dumps({"summary": summary}, ensure_ascii=False), as_json=True)
    return 0 if summary["runs"] and not summary["failed"] else 1


def _extend_triage(sub) -> None:
    """``triage PATH... --jobs N [--ray-address ADDR]``: the triage sub-command takes more paths; with several,
    or with --jobs / --ray-address, it runs fleet triage (tools/rundir/fleet.py), else the single triage."""
    t = sub.choices.get("triage")
    if t is None:
        return
    t.add_argument("more", nargs="*", metavar="PATH", help="more runs: fleet triage, one JSON line per run")
    t.add_argument("--jobs", type=int, metavar="N", help="fleet triage on N worker processes")
    t.add_argument("--ray-address", metavar="ADDR", help="fleet triage on a Ray cluster, one task per node")
    single = t.get_default("func")

    def route(args: argparse.Namespace) -> int:
        if args.path and (args.more or args.jobs or args.ray_address):
            return cmd_fleet(args)
        return single(args)

    t.set_defaults(func=route)


def add_run_parsers(sub) -> None:
    """The ``plot`` and ``compare`` sub-commands, and fleet triage on the ``triage`` one."""
    _extend_triage(sub)
    pl = sub.add_parser("plot", help="sparklines of a run's metrics; --png FILE writes a PNG (matplotlib)",
                        description="Unicode sparklines of a run's canonical metrics (min/max/last, non-finite "
                                    "steps marked); --png FILE writes small multiples with each finding's onset, "
                                    "log y where a series spans more than two decades. Several RUNs, a folder of "
                                    "runs or a paste of [A]/[B] runs are overlaid, one colour per run.")
    pl.add_argument("run", metavar="RUN", help="a log, metric store or run folder, or '-' for stdin")
    pl.add_argument("more", nargs="*", metavar="RUN2", help="more runs to overlay (files or folders)")
    pl.add_argument("--metrics", metavar="A,B", help="metric names (canonical or raw keys), comma-separated")
    pl.add_argument("--png", metavar="FILE", help="write the PNG here (needs pip install 'grpo-debug[plot]')")
    pl.add_argument("--width", type=int, default=48, help="sparkline width in characters (default 48)")
    pl.set_defaults(func=cmd_plot)
    c = sub.add_parser("compare", help="compare two runs: the broken one, levels, first divergence, config facts",
                       description="Compare run A and run B (files, run folders or '-'), of any lengths: the run "
                                   "that looks broken, series levels apart (medians), the first step they diverge "
                                   "(by position when the steps do not overlap), config facts, findings one run "
                                   "lacks. With B omitted, A holds the runs: a paste or file ([A]/[B] prefixes, "
                                   "'=== run B ===' headers, a second launch line) or a folder of runs; with more "
                                   "than two, the most broken is compared with its nearest healthy sibling.")
    c.add_argument("a", metavar="A", help="run A: a log, metric store or run folder, or '-' for stdin")
    c.add_argument("b", metavar="B", nargs="?", help="run B likewise (omit when A holds both)")
    c.add_argument("--format", choices=("text", "json"), default="text")
    c.set_defaults(func=cmd_compare)
