#!/usr/bin/env python3
"""GRPO NaN debugging guide (seed tool 2): check|diagnose|avoid|rtx4090.

Usage: python3 tools/grpo_nan_debugging_guide.py OPERATION [INPUT ...] [--text T] [--gpu G] [--format text|json]
INPUT is a file (config, launch script, log, Python snippet) or words (symptoms, a bug number, a rule id).
Same as `grpo-debug nan_guide ...` and the MCP tool `nan_guide`; a shim over tools/_seed_entry.py.
"""
if __name__ == "__main__":  # run as a script: this folder is sys.path[0]
    from _seed_entry import run
    raise SystemExit(run("nan_guide"))
