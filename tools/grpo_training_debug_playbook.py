#!/usr/bin/env python3
"""GRPO training debug playbook (seed tool 1): playbook|symptoms|fixes|rtx4090.

Usage: python3 tools/grpo_training_debug_playbook.py OPERATION [INPUT ...] [--text T] [--gpu G] [--format text|json]
INPUT is a file (config, launch script, log, Python snippet) or words (symptoms, a bug number, a rule id).
Same as `grpo-debug playbook ...` and the MCP tool `playbook`; a shim over tools/_seed_entry.py.
"""
if __name__ == "__main__":  # run as a script: this folder is sys.path[0]
    from _seed_entry import run
    raise SystemExit(run("playbook"))
