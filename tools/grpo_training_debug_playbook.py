#!/usr/bin/env python3
"""GRPO training debug playbook (seed tool 1): playbook|symptoms|fixes|rtx4090.

Usage: python3 tools/grpo_training_debug_playbook.py OPERATION [INPUT ...] [--text T] [--gpu G] [--format text|json]
INPUT is a file (config, launch script, log, Python snippet) or words (symptoms, a bug number, a rule id).
Same as `grpo-debug playbook ...` and the MCP tool `playbook`; a thin entry over grpo_debug.tools.families.
"""
import os
import sys

if __package__ in (None, ""):  # run as a script from a checkout
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _bootstrap  # noqa: F401  (maps the checkout to grpo_debug.* when not installed)

from grpo_debug.server.cli import main  # noqa: E402


def run(argv=None) -> int:
    return main(["playbook", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(run())
