"""Canonical names through the alias table (``skills/aliases.yaml`` read by ``skills/aliases.py``).

This module only forwards: ``canonical_metric(raw_key, framework) -> str | None`` and
``canonical_config(raw_key, framework) -> str | None``. While the alias module is absent (or raises on a
key) the answer is None and the caller keeps the raw key. There is deliberately no second alias table here.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable


@lru_cache(maxsize=1)
def _table() -> tuple[Callable | None, Callable | None]:
    try:
        from grpo_debug.skills import aliases
    except Exception:  # noqa: BLE001 - a broken or absent table must not break triage
        return None, None
    return getattr(aliases, "canonical_metric", None), getattr(aliases, "canonical_config", None)


def _ask(fn: Callable | None, key: str, framework: str | None) -> str | None:
    if fn is None:
        return None
    try:
        out = fn(key, framework)
    except TypeError:
        try:
            out = fn(key)
        except Exception:  # noqa: BLE001
            return None
    except Exception:  # noqa: BLE001
        return None
    return out if isinstance(out, str) and out else None


@lru_cache(maxsize=8192)
def metric_name(raw_key: str, framework: str | None = None) -> str | None:
    """Canonical metric name of ``raw_key`` for ``framework`` (None: any), or None when the table lacks it."""
    return _ask(_table()[0], raw_key, framework)


@lru_cache(maxsize=8192)
def config_name(raw_key: str, framework: str | None = None) -> str | None:
    """Canonical config name of ``raw_key`` for ``framework``, or None."""
    return _ask(_table()[1], raw_key, framework)


def clear() -> None:
    """Forget cached answers (tests that swap the alias module)."""
    _table.cache_clear()
    metric_name.cache_clear()
    config_name.cache_clear()
