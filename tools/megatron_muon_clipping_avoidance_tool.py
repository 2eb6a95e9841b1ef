#!/usr/bin/env python3
"""Megatron Muon clipping avoidance (seed tool 3): check|diagnose|avoid|rtx4090.

Usage: python3 tools/megatron_muon_clipping_avoidance_tool.py OPERATION [INPUT ...] [--text T] [--gpu G] [--format text|json]
INPUT is a file (config, launch script, log, Python snippet) or words (symptoms, a bug number, a rule id).
Same as `grpo-debug muon_clipping ...` and the MCP tool `muon_clipping`; a shim over tools/_seed_entry.py.
"""
if __name__ == "__main__":  # run as a script: this folder is sys.path[0]
    from _seed_entry import run
    raise SystemExit(run("muon_clipping"))
