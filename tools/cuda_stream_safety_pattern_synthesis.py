#!/usr/bin/env python3
"""CUDA stream safety pattern synthesis (seed tool 4): map|analyze|compare|rtx4090.

Usage: python3 tools/cuda_stream_safety_pattern_synthesis.py OPERATION [INPUT ...] [--text T] [--gpu G] [--format text|json]
INPUT is a file (config, launch script, log, Python snippet) or words (symptoms, a bug number, a rule id).
Same as `grpo-debug stream_safety ...` and the MCP tool `stream_safety`; a shim over tools/_seed_entry.py.
"""
if __name__ == "__main__":  # run as a script: this folder is sys.path[0]
    from _seed_entry import run
    raise SystemExit(run("stream_safety"))
