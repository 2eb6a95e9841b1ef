"""Quantities derived from a run's config facts that the metric detectors need.

:func:`updates_per_rollout`: how many optimizer steps one rollout batch feeds. With more than one, the policy
has moved before the later mini-batches of the very first step are scored, so KL to the reference, ``ppo_kl``
and the importance ratio are legitimately non-zero / not 1 at step 1. Read from, per framework:

- verl: ``data.train_batch_size / actor.ppo_mini_batch_size x actor.ppo_epochs`` (both batch sizes in prompts;
  verl/workers/actor/dp_actor.py ``update_policy`` splits the batch into ppo_mini_batch_size mini-batches and
  loops ``ppo_epochs`` times);
- slime / Relax: ``--num-steps-per-rollout``, else ``rollout_batch_size x n_samples_per_prompt / global_batch_size``
  (slime/utils/arguments.py);
- TRL GRPO: ``num_iterations`` (GRPOConfig: "Number of iterations per batch (denoted as mu in the algorithm)") and
  ``steps_per_generation / gradient_accumulation_steps``;
- OpenRLHF: ``max_epochs`` and ``rollout_batch_size x n_samples_per_prompt / train_batch_size``;
- SkyRL: ``trainer.update_epochs_per_batch`` and ``train_batch_size / policy_mini_batch_size``.

Keys are matched by their dotted suffix (``Run.fact``), so a YAML path, a Hydra override and a ``--flag`` all count.
"""
from __future__ import annotations

from grpo_debug.tools.run.model import ConfigFact, Run


def _num(run: Run, *names: str) -> tuple[float | None, ConfigFact | None]:
    for n in names:
        f = run.fact(n)
        if f is None:
            continue
        v = f.value[0] if isinstance(f.value, list) and f.value else f.value
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            return float(v), f
    return None, None


def _ratio(run: Run, num: tuple[str, ...], den: tuple[str, ...], extra: tuple[str, ...] = ()) -> tuple[float | None, list]:
    a, fa = _num(run, *num)
    b, fb = _num(run, *den)
    if a is None or b is None:
        return None, []
    out = a / b
    facts = [fa, fb]
    for names in extra:
        m, fm = _num(run, names)
        if m is not None:
            out *= m
            facts.append(fm)
    return out, facts


def updates_per_rollout(run: Run) -> tuple[float, list[ConfigFact]] | None:
    """(optimizer steps per rollout batch, the facts read) when the config states it, else None."""
    found: list[tuple[float, list]] = []
    n, f = _num(run, "num_steps_per_rollout")
    if n is not None:
        found.append((n, [f]))
    for names in (("actor.ppo_epochs", "ppo_epochs"), ("num_iterations",), ("max_epochs",), ("update_epochs_per_batch",)):
        n, f = _num(run, *names)
        if n is not None and n > 1:
            found.append((n, [f]))
    for num, den in ((("data.train_batch_size",), ("actor.ppo_mini_batch_size",)),
                     (("trainer.train_batch_size",), ("trainer.policy_mini_batch_size",)),
                     (("steps_per_generation",), ("gradient_accumulation_steps",))):
        r, facts = _ratio(run, num, den)
        if r is not None:
            found.append((r, facts))
    for den in ("global_batch_size", "train_batch_size"):
        r, facts = _ratio(run, ("rollout_batch_size",), (den,), ("n_samples_per_prompt",))
        if r is not None and (den != "train_batch_size" or run.fact("n_samples_per_prompt") is not None):
            found.append((r, facts))
            break
    if not found:
        return None
    n, facts = max(found, key=lambda t: t[0])
    return n, [f for f in facts if f is not None]
