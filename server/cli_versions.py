"""``--versions`` of ``grpo-debug triage`` and ``check``: the run's framework versions
(tools/run/versions.py). Checked when the arguments are parsed, so argparse names the bad item; the
engine imports stay lazy (``grpo-debug --help`` stays fast)."""
from __future__ import annotations

import argparse

HELP = ("the run's framework versions, e.g. verl=0.9.0,deepspeed=0.19.5; the word 'host' adds the releases "
        "installed here. They win over versions the input prints; rules outside their range stay quiet, and with "
        "a version unknown a rule fires one confidence step lower")


def _versions(s: str) -> str:
    from grpo_debug.tools.run.versions import checked_arg

    return checked_arg(s, argparse.ArgumentTypeError)


def add_versions_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--versions", type=_versions, metavar="SPEC", help=HELP)
