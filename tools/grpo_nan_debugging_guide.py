#!/usr/bin/env python3
"""GRPO NaN debugging guide (seed tool 2): check|diagnose|avoid|rtx4090.

Usage: python3 tools/grpo_nan_debugging_guide.py OPERATION [INPUT ...] [--text T] [--gpu G] [--format text|json]
INPUT is a file (config, launch script, log, Python snippet) or words (symptoms, a bug number, a rule id).
Same as `grpo-debug nan_guide ...` and the MCP tool `nan_guide`; a thin entry over grpo_debug.tools.families.
"""
import os
import sys

if __package__ in (None, ""):  # run as a script from a checkout
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _bootstrap  # noqa: F401  (maps the checkout to grpo_debug.* when not installed)

from grpo_debug.server.cli import main  # noqa: E402


def run(argv=None) -> int:
    return main(["nan_guide", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(run())
