"""The one entry behind the seed's five command lines (``python3 tools/<script>.py OPERATION ...``).

Each seed script is a three-line shim that calls :func:`run` with its family. This module is a face, not
an engine: it is the only module under ``tools/`` that reaches the CLI, and it imports it only when called.

From a source checkout where grpo-debug is not installed, it maps the checkout's top-level folders to the
``grpo_debug.*`` package names, as setup.py does for an install; installed, that step does nothing. It
also takes ``tools/`` off ``sys.path`` so that modules here never shadow top-level names.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import types

_HERE = os.path.dirname(os.path.abspath(__file__))


def _bootstrap() -> None:
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    if importlib.util.find_spec("grpo_debug") is not None:
        return
    root = os.path.dirname(_HERE)
    pkg = types.ModuleType("grpo_debug")
    pkg.__path__ = []  # namespace root: subpackages are registered below
    sys.modules["grpo_debug"] = pkg
    for name in ("skills", "tools", "server", "probes"):
        spec = importlib.util.spec_from_file_location(
            f"grpo_debug.{name}", os.path.join(root, name, "__init__.py"),
            submodule_search_locations=[os.path.join(root, name)])
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        setattr(pkg, name, mod)


def run(family: str, argv: list[str] | None = None) -> int:
    """Run ``grpo-debug FAMILY ARGV...`` (ARGV defaults to the script's own arguments); returns the exit code."""
    _bootstrap()
    from grpo_debug.server.cli import main

    return main([family, *(sys.argv[1:] if argv is None else argv)])
