"""Canonical names through the alias table (``skills/aliases.yaml`` read by ``skills/aliases.py``).

This module forwards ``canonical_metric(raw_key, framework) -> str | None`` and
``canonical_config(raw_key, framework) -> str | None``. While the alias module is absent (or raises on a
key) the answer is None and the caller keeps the raw key. There is deliberately no second alias table here.

It also holds the one table of *fallback spellings* (:data:`FALLBACK_KEYS`): for a canonical metric, the regex
a detector's default selection uses over raw keys the alias table does not map (a critic's ``critic/grad_norm``,
an unprefixed ``entropy_loss``, a console ``lm loss`` without a known framework). The table detectors
(``tools/engine/detectors.py``) and the run-model detectors (``tools/engine/series``) read it instead of each
keeping its own copy. A rule names ``metric: <canonical id>`` rather than one of these regexes
(``tests/test_signal_kinds.py`` counts the rules that still use raw-key regexes).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable

# canonical metric id -> regex (re.I, searched) over raw keys: the default series of a detector when no metric
# or keys is given; patterns as the detectors used them before this table (issue 22), unchanged
FALLBACK_KEYS: dict[str, str] = {
    "grad_norm": r"grad.?norm",
    "entropy": r"(?<!val-)entropy(?!_coe?f)",
    "kl": r"(?:^|/|_)(?:ppo_)?kl(?:_loss)?$|objective/kl$|approxkl",
    "reward_mean": r"(?:^|/)(?:reward|rewards|score|raw_reward)(?:/mean|_mean)?$|critic/score/mean|critic/rewards/mean"
                   r"|reward_mean$",
    "zero_std_frac": r"frac_reward_zero_std|zero_std|no_signal_frac|zero_adv_group_frac",
    "response_length_clip_ratio": r"clip_ratio$|clipped_ratio|truncated(?:_ratio|_rate)?$|response_length/clip_ratio",
    "loss": r"(?:^|/)(?:pg_loss|policy_loss|loss|lm loss)$",
}

# raw keys of the series that matter most for a diagnosis (a streamed log's series store keeps 4x the points of
# these, its notes list them first): one regex, read by tools/engine/series_store.IMPORTANT
IMPORTANT_KEYS = r"grad.?norm|loss|kl|entropy|reward|score|log_?prob|probs_diff|mismatch|clip|length"


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
