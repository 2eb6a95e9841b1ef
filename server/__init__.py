"""The faces of grpo-debug: the CLI (cli.py) and the MCP server (app.py, with budget.py, schemas.py,
http.py and paths.py). Engines never import from here.

This module holds what both faces look up: the installed version, the shipped SKILL.md and the bundled
example logs.
"""
from __future__ import annotations

from pathlib import Path

EXAMPLES_PACKAGE = "grpo_debug.tools"  # the example logs are package data under tools/examples/


def version() -> str:
    """The installed distribution's version, or "unknown" in a source tree that is not installed."""
    from importlib.metadata import PackageNotFoundError, version as _version

    try:
        return _version("grpo-debug")
    except PackageNotFoundError:
        return "unknown"


def find_skill_md() -> Path | None:
    """SKILL.md shipped with the package (or at the top of a source/editable checkout), if any."""
    from importlib.resources import files

    candidates = []
    for pkg in ("grpo_debug.server", "grpo_debug.skills"):
        try:
            candidates.append(Path(str(files(pkg).joinpath("SKILL.md"))))
        except (ModuleNotFoundError, TypeError):
            pass
    candidates.append(Path(__file__).resolve().parent.parent / "SKILL.md")
    return next((p for p in candidates if p.is_file()), None)


def examples_dir() -> Path | None:
    """The folder of bundled example logs (package data, on disk for source, editable and wheel installs)."""
    from importlib.resources import files

    try:
        p = Path(str(files(EXAMPLES_PACKAGE).joinpath("examples"))).resolve()
    except (ModuleNotFoundError, TypeError, OSError):
        return None
    return p if p.is_dir() else None


def example_names() -> list[str]:
    """The bundled example logs by name (file name without ``.log``)."""
    root = examples_dir()
    return sorted(p.name[:-4] for p in root.iterdir() if p.name.endswith(".log")) if root else []


def example_path(name: str) -> Path | None:
    """The path of a bundled example log (by name, with or without .log); None when there is no such example."""
    stem = name[:-4] if name.endswith(".log") else name
    root = examples_dir()
    if root is None or stem not in example_names():
        return None
    return root / f"{stem}.log"
