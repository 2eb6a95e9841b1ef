"""A family operation's ``text`` as a filter (issue 26): entries ranked by relevance to it with the free-text
ranking of tools/search.py, the ones that do not match dropped, and an answer that says so when none does
("No entry matches 'x'; closest: ...") instead of the unfiltered list. Also the order of causes by the
input's framework: the framework the text names (or a pasted log shows) ranks its own causes first.
"""
from __future__ import annotations

import re

from grpo_debug.skills.schema import Rule
from grpo_debug.tools.search import FRAMEWORK_WORDS, best, framework_terms, rank_rules_for_query

#: The lowest top score that counts as a match: one word of a few rules' titles (``muon``, ``lora``, ``fp16``)
#: scores 1.1-1.3, a word only a config value or a rule's prose holds (``true``) about 0.8; below it the filter
#: matches nothing and the answer names the closest entries instead.
MIN_MATCH = 1.0
#: Entries scoring below this share of the best are the loose tail of a ranking, dropped from a filtered answer.
REL = 0.5


def filter_rules(text: str, rules: list[Rule], implied: tuple[str, ...] = (), k: int = 8,
                 rel: float = REL) -> tuple[list[tuple[float, Rule]], bool]:
    """(ranking, matched) of ``rules`` for the filter ``text``: the best ``k`` within ``rel`` of the top when
    the top scores at least MIN_MATCH (matched), else the three closest (not matched; may be empty).
    ``implied`` terms (a family's own symptom) order the ranking but never make a match on their own: the
    text alone must reach MIN_MATCH, its words' rarity counted over the whole rule base."""
    from grpo_debug.skills.loader import default_rules

    ranked = rank_rules_for_query(text, rules, implied=implied)
    alone = rank_rules_for_query(text, rules, idf_rules=list(default_rules()))
    if not ranked or not alone or alone[0][0] < MIN_MATCH:
        return (alone or ranked)[:3], False
    return best(ranked, k=k, rel=rel), True


def no_match(text: str, what: str, closest: list[str]) -> str:
    """The summary of a filtered answer with no entry: the filter, and the closest entries when there are any."""
    return (f"No {what} matches {text.strip()[:80]!r}" + (f"; closest: {', '.join(closest[:3])}" if closest else "")
            + ". Try other words, a rule id or a symptom code, or no text for the whole view.")


def _names_in(text: str) -> set[str]:
    low = text.lower().replace("-", " ").replace("_", " ")
    return {fw for w, fws in FRAMEWORK_WORDS.items() if re.search(rf"\b{re.escape(w.replace('-', ' '))}\b", low)
            for fw in fws}


def input_frameworks(text: str) -> set[str]:
    """The applies_to framework names of the input: those its words name (search.framework_terms), else the
    ones a pasted log shows (tools/run/frameworks.detect over its lines: module paths, metric formats)."""
    named = framework_terms(text or "")
    if named or "\n" not in (text or "").strip():
        return named
    from grpo_debug.tools.engine.metrics import extract_metrics
    from grpo_debug.tools.engine.normalize import normalize
    from grpo_debug.tools.run.frameworks import detect

    lines = normalize(text[:256 * 1024])
    hits = detect(lines, None, extract_metrics(lines).formats)
    return {fw for h in hits[:1] for fw in FRAMEWORK_WORDS.get(h.name, {h.name})}


def own_framework(r: Rule, fws: set[str]) -> bool:
    """True when rule ``r`` is a cause of one of the frameworks ``fws``: it applies to one of them (or to any
    framework) and its id and title name no other framework only (``megatron-muon-...`` is Megatron's cause,
    even where it lists verl, whose Megatron backend it reaches)."""
    applies = {f.lower() for f in r.applies_to.frameworks}
    if applies and not applies & fws:
        return False
    named = _names_in(r.id + " " + r.title) - {"ray", "nccl", "vllm", "sglang"}  # engines every trainer runs on
    return not named or bool(named & fws)


def framework_first(ranked: list[tuple[float, Rule]], fws: set[str]) -> list[tuple[float, Rule]]:
    """``ranked`` with the causes of the input's frameworks first (stable: each part keeps its order)."""
    if not fws:
        return ranked
    return sorted(ranked, key=lambda x: not own_framework(x[1], fws))


#: The size a filtered answer is cut to (its JSON, bytes): a few kB, whatever the filter matched.
FILTERED_BYTES = 4500


def _clip(v, n: int):
    if isinstance(v, str):
        return v if len(v) <= n else v[:n - 3].rstrip() + "..."
    if isinstance(v, list):
        return [_clip(x, n) for x in v]
    if isinstance(v, dict):
        return {k: _clip(x, n) for k, x in v.items()}
    return v


def bound_filtered(rep, text: str, budget: int = FILTERED_BYTES):
    """``rep`` (a FamilyReport answering the filter ``text``) cut to ``budget`` bytes of JSON: long texts of
    its items shortened, then items dropped from the end (one always stays); each cut said in ``notes``."""
    size = lambda: len(rep.model_dump_json())  # noqa: E731
    if size() <= budget:
        return rep
    for it in rep.items:
        it.body, it.fields = _clip(it.body, 400), _clip(it.fields, 240)
    rep.notes.append("long texts shortened: explain_rule ID gives a whole rule")
    n = len(rep.items)
    while len(rep.items) > 1 and size() > budget:
        rep.items.pop()
    if len(rep.items) < n:
        rep.summary += f" (the first {len(rep.items)} of {n} shown)"
        rep.notes.append(f"{n - len(rep.items)} more entries match {text.strip()[:60]!r}: narrow the filter to see them")
    return rep
