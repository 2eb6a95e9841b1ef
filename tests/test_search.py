"""Free-text ranking (tools/search.py): metric names, framework names and plain questions; the family
operations and suggest that rank with it; the commands triage's next_checks suggest answer usefully."""
from __future__ import annotations

import re
import shlex

import pytest

from grpo_debug.skills.loader import default_rules
from grpo_debug.tools.families import FAMILY_SPECS, run_family
from grpo_debug.tools.search import framework_terms, metric_terms, query_terms, rank_rules_for_query, reads_as_question
from grpo_debug.tools.suggest import suggest


def test_metric_names_read_as_canonical_terms_and_name_their_framework():
    assert {"entropy"} <= query_terms("actor/entropy") and "actor" not in query_terms("actor/entropy")
    assert "grad_norm" in query_terms("grad norm") and "reward" in query_terms("rewards")
    assert "entropy" in metric_terms("actor/entropy")[0]
    assert framework_terms("actor/entropy") == {"verl"}  # a verl-only spelling
    assert framework_terms("loss nan after grad norm spike verl") == {"verl"}  # words, not Megatron's 'grad norm'
    assert {"megatron", "megatron-lm"} <= framework_terms("megatron run diverges")


@pytest.mark.parametrize("family,text,rule_id", [
    ("nan_guide", "actor/entropy", "metric-nonfinite"),  # a metric went NaN: the nonfinite mechanism, not 'no rule'
    ("nan_guide", "loss nan after grad norm spike verl", "gradient-clipping-disabled"),  # the spike came first
    ("muon_clipping", "loss plateau with Muon and ChainedOptimizer", "megatron-muon-global-clip-stall"),
])
def test_diagnose_ranks_the_mechanism_first(family, text, rule_id):
    rep = run_family(family, "diagnose", text=text)
    assert rep.rules and rep.rules[0] == rule_id, rep.rules


def test_framework_words_raise_that_frameworks_rules():
    rules = list(default_rules())
    for fw in ("verl", "deepspeed"):
        top = rank_rules_for_query(f"grad norm explodes with clipping off {fw}", rules)[:3]
        assert any(fw in [f.lower() for f in r.applies_to.frameworks] for _, r in top), (fw, [r.id for _, r in top])
    top = rank_rules_for_query("loss nan after grad norm spike verl", rules)[:5]
    assert all("verl" in r.applies_to.frameworks or not r.applies_to.frameworks for _, r in top)


def test_plain_questions_are_not_logs():
    for q in ("my rewards are all zero after step 50", "why does my loss plateau?", "loss nan after grad norm spike verl"):
        assert reads_as_question(q), q
    for log in ("step:1 - actor/grad_norm:0.4 actor/loss:0.3", "Traceback (most recent call last):",
                "epoch 1 step 50: loss=nan grad_norm=inf", "2024-01-01 12:00:00 step 50 loss nan"):
        assert not reads_as_question(log), log


def test_suggest_answers_a_question_as_a_question():
    s = suggest("my rewards are all zero after step 50")
    assert s.rules[0].rule_id == "reward-zero"
    assert not any("looks like a log" in t.why for t in s.tools)
    assert any(t.tool == "playbook" and t.operation == "symptoms" for t in s.tools)  # the 'reward all zero' trigger


def test_knowledge_map_decision_and_stream_compare_use_their_input():
    rep = run_family("knowledge_map", "decision", text="should I turn off overlap_comm")
    assert rep.rules[0] == "deepspeed-overlap-comm-compile-nan", rep.rules
    rep = run_family("knowledge_map", "decision", text="clip_grad 1.0")
    assert rep.rules[0] == "gradient-clipping-disabled", rep.rules
    rep = run_family("stream_safety", "compare", text="deepspeed")
    assert [i.id for i in rep.items] == ["deepspeed"]
    assert len(run_family("stream_safety", "compare").items) > 1


def _family_commands(check: str) -> list[list[str]]:
    """Family command lines a next_check names: [family, operation, args...] (placeholders kept)."""
    names = "|".join(list(FAMILY_SPECS) + [f.replace("_", "-") for f in FAMILY_SPECS])
    out = []
    for m in re.finditer(rf"(?:grpo-debug )?\b({names}) (\w+)([^`;\"]*)", check):
        args = re.sub(r"\(e\.g\..*$|:.*$", "", m.group(3)).strip()
        out.append([m.group(1).replace("-", "_"), m.group(2), *shlex.split(args)])
    return out


def test_next_checks_name_only_commands_that_answer():
    examples = {"<first non-finite metric>": "actor/grad_norm"}
    seen = 0
    for rule in default_rules():
        for check in rule.next_checks:
            for family, op, *args in _family_commands(check):
                if op not in FAMILY_SPECS[family].choices:
                    continue  # prose ("the nan_guide family"), not a command
                text = " ".join(args)
                for ph, ex in examples.items():
                    text = text.replace(ph, ex)
                text = None if not text or text.startswith("<") else text  # a file placeholder: the whole view
                rep = run_family(family, op, text=text)
                seen += 1
                assert rep.items or rep.findings, (rule.id, check, rep.summary)
                assert not rep.summary.startswith(("No rule", "Nothing")), (rule.id, check, rep.summary)
    assert seen >= 3
