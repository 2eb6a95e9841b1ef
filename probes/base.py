"""Shared pieces of the on-host probes: the "unknown" value, a command runner that never raises, and a
decorator that turns any exception of a probe into an Unknown with its reason.

Every probe returns a value or :class:`Unknown`; no probe raises for a missing tool, library, device or
permission (the torch collect_env model, with its gaps fixed: typed results, timeouts, shell=False).
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from typing import Any, Callable, Literal, TypeVar

from pydantic import BaseModel

T = TypeVar("T")


class Unknown(BaseModel):
    """A fact that could not be read, and why (e.g. 'nvidia-ml-py not installed', 'no NVIDIA driver')."""

    unknown: Literal[True] = True
    reason: str


Runner = Callable[[list[str], float], tuple[int, str, str]]
"""(argv, timeout seconds) -> (return code, stdout, stderr). Injected in tests."""


def run_cmd(argv: list[str], timeout: float = 5.0) -> tuple[int, str, str]:
    """Run argv without a shell; a missing program or a timeout is a non-zero return code, never an exception."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, shell=False)
        return p.returncode, p.stdout, p.stderr
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, "", f"{argv[0]}: timed out after {timeout:g} s"
    except OSError as e:
        return 126, "", f"{argv[0]}: {e}"


def child_argv(module: str, *args: str) -> list[str]:
    """argv that runs ``python -m module args...`` without the working directory on the import path.

    ``python -I`` (isolated mode) drops the script directory / working directory, the user site-packages and
    every ``PYTHON*`` environment variable from the child, so a planted ``torch/`` or ``grpo_debug/`` folder
    in the server's working directory is never imported. The parent's own import path (minus ``''`` and the
    working directory) is handed over explicitly so an editable or ``PYTHONPATH`` install still resolves.
    """
    cwd = os.path.realpath(os.getcwd())
    keep = [p for p in sys.path if p and os.path.realpath(p) != cwd]
    boot = ("import sys, json, runpy; sys.path[:] = json.loads(sys.argv.pop(1)); "
            f"sys.argv[0] = {module!r}; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
    return [sys.executable, "-I", "-c", boot, json.dumps(keep), *args]


def probe(fn: Callable[..., T]) -> Callable[..., T | Unknown]:
    """Decorator: any exception raised by the probe becomes Unknown(reason=...)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T | Unknown:
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the contract: probes never raise
            return Unknown(reason=f"{type(e).__name__}: {e}")
    return wrapper
