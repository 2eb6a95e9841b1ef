"""The causal chain of a triage answer: which finding follows from which, the order an expert reads them in, and
the one sentence that states the chain.

A finding C *follows from* a finding R when R's symptom is a known cause of C's (:data:`CAUSES`) and R starts
strictly before C in the input (its onset line when it has one, else its key line: the first line of the event or
detector that proved it; on the same start line, the one detected first). The pairs are the ones the failure reports show again and again:

- a rank that crashes (CUDA OOM, illegal memory access, host OOM) never reaches the next collective, so the other
  ranks time out in it (``collective_hang``), and Ray reports the dead workers (``ray_actor_died``; an unexplained
  crash, ``process_crash``, too); a blocked collective's watchdog in turn kills its worker (``ray_actor_died``);
- responses that run to the length cap (``length_blowup``) grow the activations and KV cache until the trainer or
  the rollout engine runs out of memory (``cuda_oom``);
- a gradient norm that climbs (``grad_norm_spike``) ends in a non-finite loss or norm (``nan_inf``);
- an entropy that climbs until the output is random (``entropy_anomaly``) makes responses run on
  (``length_blowup``) and read as gibberish (``garbled_rollout``).

Each finding gets at most one parent: among its earlier causes, the latest (so OOM -> timeout -> dead actor reads
as a chain, not a star). A risk (a config-only match, ``Finding.risk``) and a low-confidence finding are never a
parent: a guess does not explain a finding the input states. The answer's order (:func:`order`): the trees of
findings most likely first (a tree ranks by its best member's score, so the ranking of tools/engine/ranking.py
decides which failure is read first), inside a tree the root first and its consequences after it in input order,
risks last; ``consequence_of`` is then the index of the parent in that order (always an earlier index, so cutting
findings from the end never leaves a dangling index).
"""
from __future__ import annotations

import re
from collections.abc import Iterable

CRASH_ROOTS = frozenset({"cuda_oom", "illegal_memory_access", "host_oom", "process_crash"})

#: root symptom -> the symptoms that can follow from it (see the module docstring for the mechanisms).
CAUSES: dict[str, frozenset[str]] = {
    **{c: frozenset({"collective_hang", "ray_actor_died"}) for c in CRASH_ROOTS - {"process_crash"}},
    # an unexplained error kills its actor; it is not said to block the others' collective: an error report's
    # generic header line (Ascend's "EE9999: Inner Error!") is often printed just above the HCCL timeout it belongs to
    "process_crash": frozenset({"ray_actor_died"}),
    "collective_hang": frozenset({"ray_actor_died"}),
    "length_blowup": frozenset({"cuda_oom"}),
    "grad_norm_spike": frozenset({"nan_inf"}),
    "entropy_anomaly": frozenset({"length_blowup", "garbled_rollout"}),
}


def when(finding, key: int | None) -> int | None:
    """The input line where ``finding`` starts: its onset's line (when another part of the engine dated it), else
    ``key`` (its key evidence line), else its first evidence line (later ones may be context added after it, such
    as the last lines of a rank that did not report); None when it cites no line."""
    onset = getattr(finding, "onset", None)
    line = getattr(onset, "line", None) if onset is not None else None
    if isinstance(line, int):
        return line
    if key is not None:
        return key
    return finding.evidence[0].line if finding.evidence else None


def _parent(i: int, findings: list, at: list) -> int | None:
    """Index of the finding ``findings[i]`` follows from, or None (a root). ``at``: each finding's (start line,
    key line): two findings dated to the same start (a NaN dated back to the grad-norm climb that led to it) are
    told apart by where each was detected."""
    f, t = findings[i], at[i]
    if f.risk or t is None:
        return None
    best: int | None = None
    for j, r in enumerate(findings):
        if j == i or r.risk or r.confidence == "low" or at[j] is None or at[j] >= t:
            continue
        if f.symptom in CAUSES.get(r.symptom, ()) and (best is None or at[j] > at[best]):
            best = j
    return best


def order(keyed: list[tuple]) -> list[tuple]:
    """``keyed`` ((Finding, key line) pairs, most likely first) in the answer's order, each finding's
    ``consequence_of`` set to its parent's index in the returned list (None for a root). Risks
    (``Finding.risk``) go last, in their own order. Pure apart from setting ``consequence_of``."""
    findings = [f for f, _ in keyed]
    at = [(s, k if k is not None else s) if (s := when(f, k)) is not None else None for f, k in keyed]
    parent = [_parent(i, findings, at) for i in range(len(findings))]
    children: dict[int, list[int]] = {}
    for i, p in enumerate(parent):
        if p is not None:
            children.setdefault(p, []).append(i)

    def tree(i: int) -> list[int]:
        out = [i]
        for c in sorted(children.get(i, []), key=lambda c: (at[c] or (0, 0), c)):
            out += tree(c)
        return out

    roots = [i for i, p in enumerate(parent) if p is None and not findings[i].risk]
    trees = [tree(r) for r in roots]
    trees.sort(key=lambda t: min(t))  # input is most likely first: a tree ranks by its best member
    seq = [i for t in trees for i in t] + [i for i, f in enumerate(findings) if f.risk]
    pos = {i: n for n, i in enumerate(seq)}
    for i in seq:
        findings[i].consequence_of = pos[parent[i]] if parent[i] is not None else None
    return [keyed[i] for i in seq]


# ---- collective timeouts: who did not report ----

_RANK = re.compile(r"\[\s*rank\s*(\d{1,5})\s*\]|\brank[ =:]?\s*(\d{1,5})\b", re.I)
_WORLD = re.compile(r"\bworld[_ ]size\s*[=:]\s*(\d{1,5})\b", re.I)
_WORLD_KEYS = ("world_size", "trainer.world_size")


def raw(ln) -> str:
    """A line as written: normalising strips torch's ``[rankN]:`` prefix with the Ray one (engine/normalize.py)."""
    return getattr(ln, "raw", None) or ln.text


def ranks_in(text: str) -> set[int]:
    """Ranks a line names: torch's ``[rank4]:`` prefix, ``[Rank 4]`` of the NCCL watchdog, ``rank=4``."""
    return {int(a or b) for a, b in _RANK.findall(text)}


def world_size(facts, lines: Iterable) -> int | None:
    """The job's world size: a ``world_size`` setting, ``trainer.nnodes * trainer.n_gpus_per_node`` (verl), or a
    ``world_size=N`` the log prints; None when the input does not say."""
    for k in _WORLD_KEYS:
        f = facts.get(k)
        if f is not None and str(f.value).isdigit():
            return int(f.value)
    nodes, per = facts.get("trainer.nnodes"), facts.get("trainer.n_gpus_per_node")
    if nodes is not None and per is not None and str(nodes.value).isdigit() and str(per.value).isdigit():
        return int(nodes.value) * int(per.value)
    for ln in lines:
        m = _WORLD.search(ln.text) if "world" in ln.text.lower() else None
        if m:
            return int(m.group(1))
    return None


def silent_ranks(timeout_lines: list, all_lines: list, world: int | None) -> tuple[list[int], list[int]]:
    """(ranks that timed out, ranks that did not report a timeout) from the watchdog lines ``timeout_lines``
    (``Line``s). The ranks of the job are ``range(world)`` when the world size is known, else every rank up to the
    highest one the log names (a rank above it that never printed cannot be seen). Both lists are empty when the
    timeout lines name no rank."""
    timed = sorted({r for ln in timeout_lines for r in ranks_in(raw(ln))})
    if not timed:
        return [], []
    seen = {r for ln in all_lines for r in ranks_in(raw(ln))} if world is None else set()
    n = world if world is not None else max(seen | set(timed)) + 1
    if world is not None and max(timed) >= world:  # the world size read is not this group's: do not guess
        return timed, []
    return timed, [r for r in range(n) if r not in set(timed)]


def last_lines_of(rank: int, all_lines: list, n: int = 2) -> list[int]:
    """Numbers of the last ``n`` lines that name ``rank`` (its own prefix), in input order."""
    out: list[int] = []
    for ln in reversed(all_lines):
        if rank in ranks_in(raw(ln)):
            out.append(ln.no)
            if len(out) >= n:
                break
    return sorted(out)


def spans(ranks: list[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` as ``0-2, 5, 7-8``."""
    out: list[str] = []
    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        out.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return ", ".join(out)


def chain_sentence(findings: list, at: dict[int, int | None], detail: dict[int, str] | None = None,
                   keys: dict[int, int | None] | None = None) -> str:
    """The first chain of ``findings`` (already :func:`order`-ed) in one sentence, ``Chain: A (line 12) -> B (line
    40) -> C (line 41).``; '' when no finding follows from another. ``at``: ``id(finding)`` -> its start line;
    ``detail``: ``id(finding)`` -> words to add (e.g. the ranks that did not report); ``keys``: ``id(finding)`` ->
    its key line, said for a consequence dated to the same start as its parent (where it was detected instead)."""
    detail, keys = detail or {}, keys or {}
    at = dict(at)
    for f in findings:
        p = findings[f.consequence_of] if f.consequence_of is not None else None
        if p is not None and at.get(id(f)) == at.get(id(p)) and keys.get(id(f)) is not None:
            at[id(f)] = keys[id(f)]
            detail.setdefault(id(f), "")
            detail[id(f)] = _detected(f) + detail[id(f)]
    if not any(f.consequence_of is not None for f in findings):
        return ""
    root = next(i for i, f in enumerate(findings) if f.consequence_of is None
                and any(g.consequence_of is not None for g in findings))
    members = [root]
    for i, f in enumerate(findings):
        if f.consequence_of in members and i not in members:
            members.append(i)
    # in the answer's order: the root, then each consequence after the one it follows from (engine/chain.order)

    def say(f) -> str:
        where = [f"line {at[id(f)]}"] if at.get(id(f)) is not None else []
        step = getattr(getattr(f, "onset", None), "step", None)
        if step is not None and not detail.get(id(f), "").startswith("detected"):
            where.insert(0, f"step {step:g}" if isinstance(step, float) else f"step {step}")
        if detail.get(id(f)):
            where.append(detail[id(f)])
        return f.symptom + (f" ({', '.join(where)})" if where else "")

    return "Chain: " + " -> ".join(say(findings[i]) for i in members) + "."


def _detected(f) -> str:
    step = getattr(getattr(f, "onset", None), "detected_step", None)
    return f"detected at step {step:g}" if isinstance(step, (int, float)) else "detected"
