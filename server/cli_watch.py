"""``grpo-debug watch PATH...``: the command line of tools/watch.py (follow a live run, alert at the onset).

Exit codes: 1 at the first alert of a ``--fail-on`` symptom; 0 when ``--until-eof`` and the input stopped
growing for ``--idle`` seconds (or on Ctrl-C); 2 for usage or input errors (one line on stderr).
"""
from __future__ import annotations

import argparse
import os
import sys


def _seconds(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s[:40]!r} is not a number of seconds") from None
    if not 0 < v <= 86_400:
        raise argparse.ArgumentTypeError(f"{s[:40]!r}: give seconds between 0 and 86400")
    return v


def add_watch_parser(sub) -> None:
    """The ``watch`` sub-command's arguments."""
    w = sub.add_parser("watch", help="follow a live run (logs, run folders) and alert when a finding appears",
                       description="Follow growing logs and metric stores (console logs, verl JSONL, TensorBoard "
                                   "events; rotation and truncation handled) and print each finding once, when it "
                                   "first reaches medium or high confidence, with its onset line and step.")
    w.add_argument("paths", nargs="+", metavar="PATH", help="a log file, a metric store file or a run folder")
    w.add_argument("--from-end", action="store_true", help="skip what the files already hold")
    w.add_argument("--fail-on", metavar="CODES", help="exit 1 at the first alert of these symptom codes "
                                                      "(comma separated) or 'any'")
    w.add_argument("--format", choices=("text", "jsonl"), default="text",
                   help="jsonl: one JSON object a line (event, onset, and the finding in the triage schema)")
    w.add_argument("--status-every", type=_seconds, metavar="S", help="print a status line every S seconds")
    w.add_argument("--until-eof", action="store_true", help="exit 0 when no new bytes came for --idle seconds")
    w.add_argument("--idle", type=_seconds, default=5.0, metavar="S", help="seconds of no growth that end "
                                                                          "--until-eof (default 5)")
    w.add_argument("--interval", type=_seconds, default=10.0, metavar="S",
                   help="evaluate the rules every S seconds while metric or rule-matched lines arrive (default "
                        "10), backing off to 6xS while nothing new is found; a new kind of error, event or "
                        "non-finite line is evaluated at once")
    w.add_argument("--on-alert", metavar="CMD", help="run CMD (split like a shell, run without one) once per "
                                                     "alert, the finding as JSON on stdin, 30 s timeout")
    w.add_argument("--state", metavar="FILE", help="save offsets and alerts here; a restart does not repeat them")
    w.set_defaults(func=cmd_watch)


def cmd_watch(args: argparse.Namespace) -> int:
    """Run the watcher; a WatchError is one line on stderr and exit 2 (as the CLI's CliError); an internal error exit
    3, so that exit 1 always means an alert of --fail-on."""
    from grpo_debug.tools.watch import Options, WatchError, parse_fail_on, watch

    if "-" in args.paths:
        print("grpo-debug: error: watch follows files and folders, not stdin: write the log to a file (tee) and "
              "watch that; `grpo-debug triage -` reads stdin once", file=sys.stderr)
        return 2
    try:
        opts = Options(paths=list(args.paths), from_end=args.from_end, fail_on=parse_fail_on(args.fail_on),
                       fmt=args.format, status_every=args.status_every, until_eof=args.until_eof, idle=args.idle,
                       on_alert=args.on_alert, state=args.state, interval=args.interval)
        return watch(opts, out=sys.stdout)
    except WatchError as e:
        print(f"grpo-debug: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:  # e.g. piped into head: the reader left, as the other commands treat it
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except Exception as e:  # noqa: BLE001 - an internal error must not read as an alert (exit 1) to a watchdog
        print(f"grpo-debug: internal error in watch: {type(e).__name__}: {str(e)[:200]}; please report it",
              file=sys.stderr)
        return 3
