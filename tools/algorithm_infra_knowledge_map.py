#!/usr/bin/env python3
"""Algorithm-infra knowledge map (seed tool 5): theory|bug|decision|rtx4090|proof|cross.

Usage: python3 tools/algorithm_infra_knowledge_map.py OPERATION [INPUT ...] [--text T] [--gpu G] [--format text|json]
INPUT is a file (config, launch script, log, Python snippet) or words (symptoms, a bug number, a rule id).
Same as `grpo-debug knowledge_map ...` and the MCP tool `knowledge_map`; a shim over tools/_seed_entry.py.
"""
if __name__ == "__main__":  # run as a script: this folder is sys.path[0]
    from _seed_entry import run
    raise SystemExit(run("knowledge_map"))
