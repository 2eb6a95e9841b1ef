"""Let the seed's scripts run from a source checkout (`python3 tools/<script>.py ...`).

When grpo-debug is installed (editable or wheel) this does nothing. Otherwise it maps the checkout's
top-level folders to the ``grpo_debug.*`` package names, as setup.py does for an install. It also takes
``tools/`` off ``sys.path`` so that modules here never shadow top-level names.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import types

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

if importlib.util.find_spec("grpo_debug") is None:
    root = os.path.dirname(_here)
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
