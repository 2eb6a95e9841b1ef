"""Load a repository script (scripts/, bench/) as a module by its path, for tests of files that are not packages."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_script(rel: str):
    """The module at ``ROOT / rel`` (e.g. ``scripts/calibrate.py``), executed once per call."""
    path = ROOT / rel
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
