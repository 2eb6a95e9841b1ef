"""Free-text search over the rule base: rank rules for a question, a symptom description or a bug number."""
from __future__ import annotations

import re

from grpo_debug.skills.schema import QuerySignal, Rule


def words(text: str) -> set[str]:
    """The searchable words of a text: lower-case, two characters or more, common words dropped."""
    return {w for w in re.findall(r"[a-z0-9_#.+-]{2,}", text.lower()) if w not in STOP}


STOP = {"the", "and", "for", "with", "in", "on", "of", "to", "is", "my", "a", "an", "at", "it", "after", "when",
        "what", "why", "how", "does", "do", "run", "training", "train", "grpo", "i", "we", "our", "be", "are"}


def rank_rules_for_query(text: str, rules: list[Rule]) -> list[tuple[float, Rule]]:
    """Score rules against free text: query-signal phrases (x3), seed bug numbers and ids (x4), then
    word overlap with title/what/tags. Highest first; zero scores dropped."""
    low = text.lower()
    query_words = words(text)
    out = []
    for r in rules:
        score = 0.0
        for s in r.match.signals():
            if isinstance(s, QuerySignal):
                score += 3 * sum(1 for t in s.terms if t.lower() in low)
        if r.id in low:
            score += 6
        nums = {n for src in r.sources for n in re.findall(r"(?:#|/(?:issues|pull)/)(\d{2,6})\b", src.ref + " " + src.note)}
        nums |= {n for ref in r.seed_refs for n in re.findall(r"#(\d{2,6})", ref)}
        score += 4 * sum(1 for n in nums if re.search(rf"(?<![\w.]){n}(?!\d)", low))
        score += len(query_words & words(r.title + " " + r.what + " " + " ".join(r.tags)))
        if score > 0:
            out.append((score, r))
    out.sort(key=lambda x: (-x[0], x[1].id))
    return out
