"""Ranking of triage findings: the one place that decides which finding comes first.

Order: by score (rule confidence + signal kinds + priority + supporting causes, tools/engine/match.py), except
that what ended or broke the run comes before every medium- or low-confidence finding. A finding does that when
its symptom is *terminal* (the run stops or is ruined: an OOM, a dead actor, a blocked collective, a non-finite
loss, ...) and it is high-confidence because the input states that symptom outright (:func:`direct_evidence`: an
event of the symptom's own kind, or the non-finite detector). A medium finding about the same run (a log-prob gap,
a slow climb) may explain how it got there, but an agent must first see what stopped it.
"""
from __future__ import annotations

from collections.abc import Iterable

# Event kinds (engine/events.py) that state a symptom outright: a finding backed by one of them is certain about
# the symptom (its cause may still be uncertain; see each cause's own confidence).
DIRECT_EVENTS: dict[str, frozenset[str]] = {
    "cuda_oom": frozenset({"cuda_oom"}), "ray_host_oom": frozenset({"host_oom"}),
    "illegal_memory_access": frozenset({"illegal_memory_access"}), "nccl_timeout": frozenset({"collective_hang"}),
    "port_in_use": frozenset({"port_conflict"}), "context_length": frozenset({"context_overflow"}),
    "ray_unschedulable": frozenset({"ray_resources_pending"}), "ray_actor_died": frozenset({"ray_actor_died"}),
    "compile_cache_error": frozenset({"compile_cache_error"}), "nan_reported": frozenset({"nan_inf"}),
    "checkpoint_error": frozenset({"checkpoint_load_error"})}

# Symptoms (shared/symptoms.md) that end or break a run: it crashes, hangs, or its weights are poisoned. The
# others (grad_norm_spike, loss_plateau, logprob_mismatch, reward_zero, entropy_anomaly, length_blowup,
# garbled_rollout, config_error) describe a run that is unhealthy or misconfigured but may go on.
TERMINAL: frozenset[str] = frozenset().union(*DIRECT_EVENTS.values())

_LIFT = 0.001  # how far above the best medium/low finding a terminal one is placed

# A rank that crashes never reaches the next collective, so the others time out in it: a crash logged before a
# collective timeout is the first thing to fix (nccl-watchdog-timeout's own advice: find the rank that did not
# reach the collective). Not a dead actor: Ray's driver often prints the ActorDiedError of a worker the watchdog
# itself took down before that worker's own timeout lines arrive.
CRASHES: frozenset[str] = frozenset({"cuda_oom", "illegal_memory_access", "host_oom"})


def direct_evidence(symptom: str, results: Iterable) -> bool:
    """Whether signal results (``SignalResult``: ``kind``, ``note``) state ``symptom`` outright: an event whose kind
    (the note's first word) means that symptom, or, for nan_inf, the non-finite detector's hit."""
    for r in results:
        if r.kind == "event" and symptom in DIRECT_EVENTS.get(r.note.split(" ", 1)[0], ()):
            return True
        if r.kind == "detector" and symptom == "nan_inf" and "non-finite" in r.note:
            return True
    return False


def is_terminal(finding, direct: bool) -> bool:
    """A high-confidence finding, backed by direct evidence (``direct``), of a symptom that ends or breaks a run."""
    return direct and finding.confidence == "high" and finding.symptom in TERMINAL


def rank(items: list, direct: set[int]) -> list:
    """``items`` ((Finding, key line) pairs) most likely first. ``direct``: ``id()`` of the findings backed by direct
    evidence (:func:`direct_evidence`). A terminal finding (:func:`is_terminal`) whose score is below the best
    medium/low finding's gets a score just above it (scores are for ordering only, tools/models.Finding), so the
    returned order and the scores agree; otherwise the order is by score, ties kept in input order."""
    items = sorted(items, key=lambda fk: -fk[0].score)
    weak = [f.score for f, _ in items if f.confidence != "high"]
    if weak:
        lifted = [f for f, _ in items if is_terminal(f, id(f) in direct) and f.score <= max(weak)]
        for i, f in enumerate(lifted):  # their own order kept: the first lifted highest
            f.score = round(max(weak) + _LIFT * (len(lifted) - i), 3)
    _crash_before_hang(items, direct)
    return sorted(items, key=lambda fk: -fk[0].score)


def _crash_before_hang(items: list, direct: set[int]) -> None:
    """A terminal crash (``CRASHES``) logged before a collective timeout goes just above the timeout, which then
    names it as the rank to look at first (``next_checks``)."""
    hang = next(((f, k) for f, k in items if f.symptom == "collective_hang" and k is not None), None)
    if hang is None:
        return
    crashes = [(f, k) for f, k in items if f.symptom in CRASHES and k is not None and k < hang[1]
               and is_terminal(f, id(f) in direct)]
    if not crashes:
        return
    crash, line = min(crashes, key=lambda fk: fk[1])
    if crash.score <= hang[0].score:
        crash.score = round(hang[0].score + _LIFT / 2, 4)
    hang[0].next_checks.insert(0, f"{crash.symptom} (line {line}) comes {hang[1] - line:,} lines before the timeout: "
                                  "a rank that crashed never reaches the collective, so fix that first")


# ---- risk vs diagnosis ----

# Signal kinds that observe the run itself: a log event, a metric series, a host fact. A ``regex`` signal observes the
# run when it matched a line that is not a setting (a log line); ``config``, ``check`` (arithmetic over settings) and
# ``query`` (the user's words) do not.
OBSERVING = frozenset({"event", "detector", "probe"})

# The one symptom a configuration shows by itself: options that conflict or do not divide are errors in the config,
# observed there. Every other symptom happens at run time, so a config-only match of it is a risk.
IN_CONFIG = frozenset({"config_error"})


def observed(results: Iterable, config_lines: set[int] | frozenset[int]) -> bool:
    """Whether signal results (``SignalResult``: ``kind``, ``lines``) observe the run: an event, a detector or probe
    hit, or a regex hit on a line outside ``config_lines`` (the settings' lines: facts, launch commands, config
    blocks)."""
    for r in results:
        if r.kind in OBSERVING or (r.kind == "regex" and any(n not in config_lines for n in r.lines)):
            return True
    return False


def is_risk(symptom: str, results: Iterable, config_lines: set[int] | frozenset[int]) -> bool:
    """A risk, not a diagnosis: a run-time ``symptom`` (not in ``IN_CONFIG``) that no result observes
    (:func:`observed`). Such a finding is low confidence and listed after the diagnosed ones (tools/engine/chain.py)."""
    return symptom not in IN_CONFIG and not observed(results, config_lines)
