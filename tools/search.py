"""Free-text search over the rule base: rank rules for a question, symptom words, a metric name or a bug number.

A query is read into terms of four kinds, and each kind scores a rule in its own way:

- words, with metric names split into their parts and mapped to canonical metric ids through the alias table
  (``actor/entropy`` -> ``entropy``; ``grad norm`` -> ``grad_norm``), plus a few plain-word synonyms
  (``rewards`` -> ``reward``, ``gradient`` -> ``grad``): overlap with the rule's title, id, tags and what, and
  with the words of its symptom code's description;
- metric names: a rule whose detector watches that series (its ``keys`` regex matches) scores high, one whose
  detector watches every series scores a little;
- framework names (``verl``, ``deepspeed``, ``megatron``, ...; or the framework a metric spelling belongs to):
  rules whose ``applies_to`` names the framework are raised, rules only of other frameworks lowered;
- query-signal phrases, rule ids and bug numbers, as before.

``implied`` terms (a family's own symptom, e.g. ``nan`` for the NaN guide) count as words of the query.
"""
from __future__ import annotations

import math
import re
from functools import lru_cache

from grpo_debug.skills.schema import DetectorSignal, QuerySignal, Rule
from grpo_debug.skills.symptoms import SYMPTOMS


def words(text: str) -> set[str]:
    """The searchable words of a text: lower-case, two characters or more, common words dropped."""
    return {w for w in re.findall(r"[a-z0-9_#.+-]{2,}", text.lower()) if w not in STOP}


STOP = {"the", "and", "for", "with", "in", "on", "of", "to", "is", "my", "a", "an", "at", "it", "after", "when",
        "what", "why", "how", "does", "do", "run", "training", "train", "grpo", "i", "we", "our", "be", "are",
        "all", "step", "steps", "this", "that", "me", "get", "got", "gets", "has", "have", "from", "then", "or",
        "not", "no", "can", "should", "use", "using", "there", "any", "some", "each", "per", "mean", "actor",
        "critic", "rollout_corr", "value", "values", "about"}

#: Plain-word spellings -> the word rules use (a term table, not knowledge about causes).
SYNONYMS = {"rewards": "reward", "gradient": "grad", "gradients": "grad", "grads": "grad", "norms": "norm",
            "nans": "nan", "inf": "nan", "infs": "nan", "non-finite": "nan", "nonfinite": "nan",
            "logprobs": "logprob", "log-prob": "logprob", "log_prob": "logprob", "log_probs": "logprob",
            "log-probs": "logprob", "zeros": "zero", "zeroes": "zero", "plateaus": "plateau", "stalls": "plateau",
            "stuck": "plateau", "spikes": "spike", "explodes": "spike", "explosion": "spike", "exploding": "spike",
            "oom": "memory", "hangs": "hang", "hanging": "hang", "streams": "stream", "clip": "clipping",
            "clipped": "clipping", "lengths": "length", "responses": "response", "rewarded": "reward"}

#: Synonym spellings that stay terms of their own as well (an abbreviation rules use as a word).
_KEEP_SPELLING = {"oom"}

#: Spellings of framework names in questions -> the names rules use in applies_to.frameworks.
FRAMEWORK_WORDS = {"verl": {"verl"}, "slime": {"slime"}, "relax": {"relax"}, "openrlhf": {"openrlhf"},
                   "trl": {"trl"}, "deepspeed": {"deepspeed", "megatron-deepspeed"},
                   "megatron": {"megatron", "megatron-lm", "megatron-deepspeed"},
                   "megatron-lm": {"megatron", "megatron-lm"}, "vllm": {"vllm", "vllm-ascend"},
                   "sglang": {"sglang"}, "ray": {"ray"}, "nccl": {"nccl"}, "hf_trainer": {"hf-trainer", "trl"},
                   "nemo_rl": {"nemo-rl"}, "nemo-rl": {"nemo-rl"}}

_SPLIT = re.compile(r"[/.:_\-]+")


def _norm(w: str) -> str:
    return SYNONYMS.get(w, w)


@lru_cache(maxsize=1)
def _metric_index() -> dict[str, tuple[str, frozenset[str]]]:
    """Normalised metric spelling -> (canonical id, frameworks that log it); empty without the alias table."""
    try:
        from grpo_debug.skills.aliases import load_aliases, normalise_key

        metrics = load_aliases().metrics
    except (ImportError, OSError, ValueError):  # the alias table is optional: words alone still rank
        return {}
    out: dict[str, tuple[str, set[str]]] = {}
    for cid, entry in metrics.items():
        for a in entry.aliases:
            k = normalise_key(a.key)
            out.setdefault(k, (cid, set()))[1].add(a.framework)
        out.setdefault(cid, (cid, set()))
    return {k: (c, frozenset(f)) for k, (c, f) in out.items()}


def metric_terms(text: str) -> tuple[set[str], set[str], set[str]]:
    """(canonical metric ids, raw metric spellings, frameworks those spellings belong to only) named in text."""
    idx = _metric_index()
    toks = [_norm(t) for t in re.findall(r"[A-Za-z0-9_/.:\-]+", text.lower())]
    toks = [t[:-1] if len(t) > 4 and t.endswith("s") and not t.endswith("ss") and "/" not in t else t for t in toks]
    cands = toks + [f"{a} {b}" for a, b in zip(toks, toks[1:])]
    ids, raw, fws = set(), set(), set()
    for c in cands:
        hit = idx.get(c.strip(".:"))
        if hit:
            ids.add(hit[0])
            raw.add(c)
            if len(hit[1]) == 1 and c != hit[0] and " " not in c and re.search(r"[/.]", c):
                fws |= set(hit[1])
    return ids, raw, fws


def query_terms(text: str, implied: tuple[str, ...] = ()) -> set[str]:
    """The query's words, metric names split into parts and mapped to canonical ids, synonyms normalised."""
    out: set[str] = set()
    for w in words(text) | set(implied):
        out.add(_norm(w))
        if w in _KEEP_SPELLING:  # ``oom`` is also itself: a rule that says OOM matches it better than 'memory'
            out.add(w)
        out |= {_norm(p) for p in _SPLIT.split(w) if len(p) >= 2 and p not in STOP}
    for cid in metric_terms(text)[0]:
        out.add(cid)
        out |= {_norm(p) for p in cid.split("_") if len(p) >= 2 and p not in STOP}
    return {w[:-1] if len(w) > 4 and w.endswith("s") and not w.endswith("ss") else w for w in out} - STOP


def framework_terms(text: str) -> set[str]:
    """applies_to framework names the query names, directly or through a framework-only metric spelling."""
    low = text.lower()
    named = {fw for w, fws in FRAMEWORK_WORDS.items() if re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", low)
             for fw in fws}
    if not named:  # else a spelling only one framework logs (``actor/entropy``: verl) names it
        for fw in metric_terms(text)[2]:
            named |= FRAMEWORK_WORDS.get(fw, {fw.replace("_", "-")})
    return named


_TERMS: dict[tuple[str, int], tuple[frozenset[str], frozenset[str], frozenset[str]]] = {}


def _rule_terms(r: Rule) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """(title/id/tags terms, what terms, symptom terms) of a rule, split and normalised like a query (cached)."""
    key = (r.id, id(r))
    if key not in _TERMS:
        if len(_TERMS) > 4096:
            _TERMS.clear()
        detectors = " ".join(s.detector for s in r.match.signals() if isinstance(s, DetectorSignal))
        _TERMS[key] = tuple(frozenset(query_terms(s)) for s in (
            r.title + " " + r.id.replace("-", " ") + " " + " ".join(r.tags), r.what,
            r.symptom.replace("_", " ") + " " + SYMPTOMS.get(r.symptom, "") + " " + detectors))
    return _TERMS[key]


def _sequence(text: str) -> list[str]:
    """The text's content words in order, normalised like query terms (for phrase matches)."""
    out = []
    for tok in re.findall(r"[a-z0-9_#.+-]{2,}", text.lower()):
        for w in [tok] if tok in SYNONYMS else _SPLIT.split(tok):  # max_grad_norm reads as max grad norm
            if len(w) >= 2 and w not in STOP:
                w = _norm(w)
                out.append(w[:-1] if len(w) > 4 and w.endswith("s") and not w.endswith("ss") else w)
    return out


def _pairs(text: str) -> set[tuple[str, str]]:
    seq = _sequence(text)
    return set(zip(seq, seq[1:]))


def _metric_score(r: Rule, ids: set[str], raw: set[str]) -> float:
    """4 when a detector of the rule watches a named metric, 1.5 when one watches every series (the
    caller scales it down when the query holds more than metric names)."""
    best = 0.0
    for s in r.match.signals():
        if not isinstance(s, DetectorSignal):
            continue
        keys = s.params.get("keys")
        if not keys:
            best = max(best, 1.5)
        elif any(re.search(str(keys), m) for m in ids | raw):
            return 4.0
    return best


def _framework_factor(r: Rule, named: set[str]) -> float:
    fws = {f.lower() for f in r.applies_to.frameworks}
    if not named or not fws:
        return 1.0
    return 1.5 if fws & named else 0.4


#: Words that introduce what happened first ("loss nan after a grad-norm spike"): the earlier event is
#: nearer the root cause, so rules whose symptom it names are raised.
_BEFORE = re.compile(r"\b(?:after|following|since|once|because of|caused by|due to)\b(.*)$")


def _idf(rules: list[Rule]) -> dict[str, float]:
    """Inverse document frequency of each term over the rules being ranked (rare words weigh more)."""
    df: dict[str, int] = {}
    for r in rules:
        for t in set().union(*_rule_terms(r)):
            df[t] = df.get(t, 0) + 1
    n = max(len(rules), 1)
    return {t: max(0.3, math.log(1 + n / d) / math.log(1 + n)) for t, d in df.items()}


def _compounds(text: str, q: set[str]) -> dict[str, set[str]]:
    """Hyphenated query words (``on-policy``) -> the parts that only come from splitting them (``policy``): a
    rule holding a part alone ('policy entropy') matches the compound weakly."""
    out: dict[str, set[str]] = {}
    alone = {_norm(w) for w in words(text) if "-" not in w}
    for w in words(text):
        if "-" in w.strip("-") and w not in SYNONYMS and not metric_terms(w)[0]:
            parts = {_norm(p) for p in w.split("-") if len(p) >= 2} - alone
            if parts:
                out[w] = parts & q
    return out


def _weak_parts(compounds: dict[str, set[str]], r: Rule) -> set[str]:
    """The compounds' parts this rule holds without the compound itself (any of -, _, space, or none between)."""
    if not compounds:
        return set()
    text = " ".join([r.id, r.title, r.what, " ".join(r.tags)]).lower()
    return {p for c, parts in compounds.items()
            if not re.search(r"[\s_-]?".join(re.escape(x) for x in c.split("-")), text) for p in parts}


def rank_rules_for_query(text: str, rules: list[Rule], implied: tuple[str, ...] = (),
                         idf_rules: list[Rule] | None = None) -> list[tuple[float, Rule]]:
    """Score rules against free text (see the module docstring). Highest first; zero scores dropped.
    ``idf_rules``: the rules word rarity is counted over (default ``rules``; the whole rule base, so that a
    family's own word, ``muon`` among the Muon rules, still weighs as a rare word)."""
    low = text.lower()
    q = query_terms(text, implied)
    m = _BEFORE.search(low)
    earlier = query_terms(m.group(1)) if m else set()
    idf = _idf(idf_rules if idf_rules is not None else rules)
    qpairs = _pairs(text)
    ids, raw, _ = metric_terms(text)
    named = framework_terms(text)
    bare = bool(raw) and all(t.strip(".:") in raw for t in low.split())  # the query is only metric names
    compounds = _compounds(text, q)
    out = []
    for r in rules:
        score = 0.0
        for s in r.match.signals():
            if isinstance(s, QuerySignal):
                score += 3 * sum(1 for t in s.terms if re.search(rf"(?<!\w){re.escape(t.lower())}(?!\w)", low))
        if r.id in low:
            score += 6
        nums = {n for src in r.sources for n in re.findall(r"(?:#|/(?:issues|pull)/)(\d{2,6})\b", src.ref + " " + src.note)}
        nums |= {n for ref in r.seed_refs for n in re.findall(r"#(\d{2,6})", ref)}
        score += 4 * sum(1 for n in nums if re.search(rf"(?<![\w.]){n}(?!\d)", low))
        head, what, sym = _rule_terms(r)
        weak = _weak_parts(compounds, r)
        w = lambda ts: sum(idf.get(t, 1.0) * (0.3 if t in weak else 1.0) for t in ts)  # noqa: E731
        score += 1.5 * w(q & head) + 1.0 * w(q & (what - head)) + 1.0 * w(q & sym)
        if earlier & sym and len(earlier & sym) > len(q & sym - earlier):
            score += 2.0
        score += 1.5 * len(qpairs & _pairs(r.title)) + (len(q & head) / len(head) if head else 0.0)
        if ids or raw:
            score += _metric_score(r, ids, raw) if bare else 0.4 * _metric_score(r, ids, raw) if score > 0 else 0.0
        if score > 0:
            out.append((round(score * _framework_factor(r, named), 3), r))
    out.sort(key=lambda x: (-x[0], x[1].id))
    return out


_PROSE = re.compile(r"\b(?:my|our|why|how|what|when|where|which|does|did|is|are|was|were|can|could|should|"
                    r"i|we|it|keeps?|help|after|before|goes?|went|becomes?|all)\b", re.I)
_LOG_SHAPE = re.compile(r"Traceback|^[ \t]*File \"|(?<!\w)\w+Error\b|^[ \t]*[\w.\-/]+\s*[=:]\s*\S+\s*$|\d{2}:\d{2}:\d{2}|"
                        r"^[ \t]*\{|^[ \t]*--\w|(?<![\w/])[\w/]+[:=]\s*-?\d[\d.e+-]*\s*[,|]?\s*[\w/]+[:=]\s*-?\d", re.M)


def reads_as_question(text: str) -> bool:
    """True when the text is a question or a plain description in words (``my rewards are all zero after step
    50``) rather than a pasted log or config: at most two lines, mostly words, prose words present and no log
    shape (tracebacks, error names, timestamps, ``key: value`` lines, several metric pairs on a line)."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    if not lines or len(lines) > 2 or _LOG_SHAPE.search(text):
        return False
    toks = text.split()
    wordy = sum(1 for t in toks if re.fullmatch(r"[A-Za-z][A-Za-z'’-]*[?.,!]?", t))
    return text.strip().endswith("?") or (wordy >= max(2, 0.6 * len(toks)) and bool(_PROSE.search(text)))


def best(ranked: list[tuple[float, Rule]], k: int = 5, rel: float = 0.35) -> list[tuple[float, Rule]]:
    """The first ``k`` of a ranking, without the tail that scores below ``rel`` of the best (loose matches)."""
    return [x for x in ranked[:k] if ranked and x[0] >= rel * ranked[0][0]]
