"""step1_mismatch: at the first training step, before any update, the passes that score the same tokens must agree.

Checks at the first logged step (step <= 1): KL / ppo_kl / kl_loss == 0 (within ``tol``), the importance ratio
== 1 (within ``ratio_tol``), log_probs == ref_log_probs / old_log_probs (Relax debugging guide, step-1 checks;
slime CI asserts log_probs == ref_log_probs).

The KL and ratio checks hold only when one rollout batch feeds one optimizer step. With several (verl
train_batch_size / ppo_mini_batch_size > 1 or ppo_epochs > 1, slime num_steps_per_rollout > 1, TRL
num_iterations > 1, ...; tools/run/derived.updates_per_rollout), the policy has already moved when the later
mini-batches of step 1 are scored, so a KL > 0 and a ratio != 1 are expected and only the log-prob equality
(computed before any update) is checked.

``step1_table`` reads an engine MetricTable (``series: {raw key: [points with step, value, line]}``);
``step1_mismatch`` reads the run model (its points keep their raw keys) and its config.
"""
from __future__ import annotations

import math
import re
from types import SimpleNamespace

from grpo_debug.tools.engine.hit import Hit
from grpo_debug.tools.engine.series.baseline import fmt
from grpo_debug.tools.run.model import Run

_KL = re.compile(r"(?:^|/|_)(?:ppo_)?kl(?:_loss)?$|kl_loss$|approxkl", re.I)
_RATIO = re.compile(r"ratio_mean$|(?:^|/)ratio$|importance_sampling_ratio/mean", re.I)
_LOGP = re.compile(r"(?<!ref_)(?<!rollout_)(?<!old_)log_probs?(?:\.mean)?$")


def _kl_ratio(series: dict, tol: float, ratio_tol: float, msgs: list[str], lines: list[int]) -> None:
    for k, pts in series.items():
        if not pts or pts[0].step > 1:
            continue
        p = pts[0]
        if not math.isfinite(p.value):
            continue
        if _KL.search(k) and "coef" not in k and abs(p.value) > tol:
            msgs.append(f"{k}={fmt(p.value)} at step {p.step:g} (expected 0)")
            lines.append(p.line)
        elif _RATIO.search(k) and abs(p.value - 1) > ratio_tol:
            msgs.append(f"{k}={fmt(p.value)} at step {p.step:g} (expected 1)")
            lines.append(p.line)


def _logprobs(series: dict, msgs: list[str], lines: list[int]) -> None:
    for k in [k for k in series if _LOGP.search(k)]:
        base = k.rsplit("/", 1)[0] + "/" if "/" in k else ""
        for rk in (f"{base}ref_log_probs", k.replace("log_prob", "ref_log_prob"), k.replace("log_prob", "old_log_prob")):
            if rk in series and rk != k:
                a, b = series[k][0], series[rk][0]
                if a.step <= 1 and math.isfinite(a.value) and math.isfinite(b.value) and abs(a.value - b.value) > 1e-6:
                    msgs.append(f"{k}={fmt(a.value)} vs {rk}={fmt(b.value)} at step {a.step:g} (expected equal)")
                    lines += [a.line, b.line]
                break


def step1_table(t, tol: float = 1e-3, ratio_tol: float = 5e-3, kl: bool = True) -> Hit | None:
    """The step-1 checks over a table's raw-key series; ``kl=False`` leaves out the KL and ratio checks."""
    msgs: list[str] = []
    lines: list[int] = []
    if kl:
        _kl_ratio(t.series, tol, ratio_tol, msgs, lines)
    _logprobs(t.series, msgs, lines)
    if not msgs:
        return None
    return Hit(sorted({n for n in lines if n is not None}), "; ".join(msgs[:4]), [])


def step1_mismatch(run: Run, tol: float = 1e-3, ratio_tol: float = 5e-3) -> Hit | None:
    """The step-1 checks over the run; KL and ratio are checked only when the config does not state more than one
    optimizer step per rollout batch. Only series on a logged step axis count: a record's ordinal (the
    ``log_record`` axis of HF Trainer / TRL console dicts, which print no step) or a counter is not a step, so the
    first record of a paste (a TRL run's first logged line at epoch 0.02, or a log's tail) is not step 1."""
    from grpo_debug.tools.run.build import COUNTER_AXES
    from grpo_debug.tools.run.derived import updates_per_rollout

    by_raw: dict[str, list] = {}
    for s in run.series.values():
        if s.axis in COUNTER_AXES or s.axis == "log_record":
            continue
        for p in s.points:
            by_raw.setdefault(p.raw_key, []).append(p)
    upr = updates_per_rollout(run)
    n = upr[0] if upr is not None else _default_updates(run)
    return step1_table(SimpleNamespace(series=by_raw), tol, ratio_tol, kl=n is None or n <= 1)


# framework -> (rollout batch key, mini-batch key) as tools/run/derived.updates_per_rollout reads them, and the full
# keys of the framework's defaults (skills/defaults/<fw>.json)
_BATCH_KEYS = {"verl": (("data.train_batch_size", "data.train_batch_size"),
                        ("actor.ppo_mini_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size"))}


def _default_updates(run: Run) -> float | None:
    """Optimizer steps per rollout batch when the input leaves the batch sizes to the framework's defaults: the
    input's own value of each key, else the default every release read agrees on (verl 0.3.0-0.9.0:
    data.train_batch_size 1024 / actor.ppo_mini_batch_size 256 = 4, so a step-1 KL > 0 is expected); None when
    the framework or a default is unknown."""
    from grpo_debug.tools.engine.defaults import lookup
    from grpo_debug.tools.run.derived import _num

    keys = _BATCH_KEYS.get(run.framework or "")
    if keys is None:
        return None
    vals = []
    for short, full in keys:
        v, _ = _num(run, short)
        if v is None:
            d = lookup(run.framework, full)
            if d is None or len(d.values) != 1 or not isinstance(d.value, (int, float)) or d.value <= 0:
                return None
            v = float(d.value)
        vals.append(v)
    return vals[0] / vals[1]
