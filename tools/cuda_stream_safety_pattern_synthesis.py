#!/usr/bin/env python3
"""CUDA stream safety pattern synthesis (seed tool 4): map|analyze|compare|rtx4090.

Usage: python3 tools/cuda_stream_safety_pattern_synthesis.py OPERATION [INPUT ...] [--text T] [--gpu G] [--format text|json]
INPUT is a file (config, launch script, log, Python snippet) or words (symptoms, a bug number, a rule id).
Same as `grpo-debug stream_safety ...` and the MCP tool `stream_safety`; a thin entry over grpo_debug.tools.families.
"""
import os
import sys

if __package__ in (None, ""):  # run as a script from a checkout
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _bootstrap  # noqa: F401  (maps the checkout to grpo_debug.* when not installed)

from grpo_debug.server.cli import main  # noqa: E402


def run(argv=None) -> int:
    return main(["stream_safety", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(run())
