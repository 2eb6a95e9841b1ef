"""The family operations' ``text`` as a filter, and ``suggest`` routing by what a text shows (issue 26).

The known failures first (playbook symptoms ignoring "reward all zero", knowledge_map cross "true on-policy"
answering with entropy rules, suggest sending "clipping is set to 1.0 but grad_norm > 1" to the NaN guide,
nan_guide diagnose ranking Megatron/Muon causes first for a verl NaN); then, for every operation whose text
is a filter, one filter that matches (every entry relevant to it, a bounded answer) and one that matches
nothing (the answer says so, never the unfiltered list).
"""
from __future__ import annotations

import pytest

from grpo_debug.skills.loader import default_rules
from grpo_debug.tools.families import FAMILY_SPECS, FILTER_OPERATIONS, OPERATIONS, run_family
from grpo_debug.tools.families.filtering import FILTERED_BYTES, own_framework
from grpo_debug.tools.search import query_terms
from grpo_debug.tools.suggest import suggest

NOTHING = "xyzzy quux"


def _rule_ids(rep) -> list[str]:
    """Every rule id an answer shows: its items' ids and the rule ids inside their fields."""
    out = []
    for it in rep.items:
        out.append(it.id)
        out += it.fields.get("rules") or []
        out += [c["rule_id"] for c in it.fields.get("causes") or []]
    return [i for i in out if i in default_rules().rules]


def _size(rep) -> int:
    return len(rep.model_dump_json())


# ---- the known failures ------------------------------------------------------------------------------

def test_playbook_symptoms_honours_reward_all_zero():
    whole = run_family("playbook", "symptoms")
    rep = run_family("playbook", "symptoms", text="reward all zero")
    assert rep.items[0].id == "reward_zero", [i.id for i in rep.items]
    assert "nan_inf" not in [i.id for i in rep.items]
    assert len(rep.items) < len(whole.items) and _size(rep) <= FILTERED_BYTES < _size(whole)
    rules = default_rules().rules
    assert all(rules[c["rule_id"]].symptom == "reward_zero" for c in rep.items[0].fields["causes"])


def test_knowledge_map_cross_true_on_policy_has_no_entropy_rule():
    rep = run_family("knowledge_map", "cross", text="true on-policy")
    assert rep.rules, rep.summary
    rules = default_rules().rules
    assert not any(rules[r].symptom == "entropy_anomaly" for r in rep.rules), rep.rules
    assert all("on-policy" in (rules[r].title + rules[r].what).lower() or "on_policy" in r or "on-policy" in r
               for r in rep.rules), rep.rules


def test_suggest_routes_grad_norm_above_clipping_to_the_grad_norm_guidance_not_nan():
    s = suggest("clipping is set to 1.0 but grad_norm > 1")
    assert s.tools[0].tool != "nan_guide" and "nan_guide" not in [t.tool for t in s.tools], s.tools
    assert "clipping value 1" in s.tools[0].why and "before clipping" in s.tools[0].why, s.tools[0].why
    assert default_rules().rules[s.rules[0].rule_id].symptom == "grad_norm_spike", s.rules
    # words only (no value): routed by keyword as before
    assert suggest("gradient explosion").tools[0].tool == "nan_guide"


def test_nan_guide_diagnose_ranks_the_input_frameworks_causes_first():
    rep = run_family("nan_guide", "diagnose", text="verl: actor/grad_norm: nan, loss nan at step 120")
    rules = default_rules().rules
    own = [own_framework(rules[i.id], {"verl"}) for i in rep.items]
    assert own and own[0] and own == sorted(own, reverse=True), [(i.id, o) for i, o in zip(rep.items, own)]
    assert not rep.items[0].id.startswith(("megatron", "deepspeed")) and "muon" not in rep.items[0].id
    # the same words naming DeepSpeed put its causes first instead
    ds = run_family("nan_guide", "diagnose", text="deepspeed: loss nan at step 120 with overlap_comm")
    assert "deepspeed" in [f.lower() for f in rules[ds.items[0].id].applies_to.frameworks], ds.rules


# ---- every filtered operation: a filter that matches, one that matches nothing -----------------------

MATCHES = {("playbook", "playbook"): "fp16 overflow", ("playbook", "symptoms"): "grad norm spike",
           ("playbook", "fixes"): "record_stream", ("nan_guide", "diagnose"): "fp16 overflow",
           ("nan_guide", "avoid"): "fp16 loss scale", ("muon_clipping", "diagnose"): "muon plateau",
           ("muon_clipping", "avoid"): "muon", ("stream_safety", "map"): "record_stream",
           ("stream_safety", "compare"): "overlap_comm", ("knowledge_map", "theory"): "entropy collapse",
           ("knowledge_map", "bug"): "overlap_comm", ("knowledge_map", "decision"): "gradient clipping",
           ("knowledge_map", "proof"): "fp16", ("knowledge_map", "cross"): "lora"}


def test_every_filter_operation_is_covered():
    assert set(MATCHES) == {(f, op) for f, ops in FILTER_OPERATIONS.items() for op in ops}
    assert all(set(ops) <= set(OPERATIONS[f]) for f, ops in FILTER_OPERATIONS.items())


@pytest.mark.parametrize("family,op", sorted(MATCHES))
def test_a_matching_filter_keeps_only_relevant_entries_bounded(family, op):
    text = MATCHES[(family, op)]
    rep = run_family(family, op, text=text)
    assert rep.items, rep.summary
    assert _size(rep) <= FILTERED_BYTES + 500, _size(rep)  # notes of a cut may pass the item budget a little
    terms = query_terms(text)
    rules = default_rules().rules
    ids = _rule_ids(rep) or [r for r in rep.rules if r in rules]
    assert ids, rep
    for rid in ids[:3]:  # the first entries share a word with the filter
        r = rules[rid]
        assert terms & query_terms(" ".join([r.id.replace("-", " "), r.title, r.what, " ".join(r.tags),
                                             r.symptom.replace("_", " "), r.why, r.pattern_class or ""])), (rid, text)


@pytest.mark.parametrize("family,op", sorted(MATCHES))
def test_a_filter_matching_nothing_says_so(family, op):
    rep = run_family(family, op, text=NOTHING)
    assert not rep.items, [i.id for i in rep.items]
    assert "matches" in rep.summary and NOTHING in rep.summary, rep.summary
    assert _size(rep) < 1000


def test_an_implied_symptom_word_never_matches_alone():
    """nan_guide implies 'nan': a filter of nonsense still matches nothing there (it used to list NaN rules)."""
    rep = run_family("nan_guide", "diagnose", text=NOTHING)
    assert not rep.items and "closest" in rep.summary


def test_a_gpu_profile_only_where_the_text_names_the_gpu():
    rules = default_rules().rules
    gpu_rules = [r for r in rules.values() if r.applies_to.hardware and "4090" in r.applies_to.hardware]
    assert gpu_rules
    plain = run_family("nan_guide", "diagnose", text="loss nan with fp16")
    assert not {r.id for r in gpu_rules} & set(plain.rules)
    named = run_family("nan_guide", "avoid", text="rtx 4090")
    assert {r.id for r in gpu_rules} & set(named.rules), named.summary


def test_text_descriptions_say_what_text_is_per_operation():
    for spec in FAMILY_SPECS.values():
        for op in spec.operations:
            assert f"{op}:" in spec.text_help or f"{op}," in spec.text_help, (spec.name, op, spec.text_help)


# ---- suggest: routing by the evidence in the text ----------------------------------------------------

def test_suggest_routes_a_traceback_to_triage_naming_its_line():
    tb = ("Traceback (most recent call last):\n  File \"/w/verl/trainer/main_ppo.py\", line 10, in <module>\n"
          "    main()\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    s = suggest(tb)
    assert s.tools[0].tool == "triage" and "line 4" in s.tools[0].why, s.tools[0]
    assert default_rules().rules[s.rules[0].rule_id].symptom == "cuda_oom", s.rules


def test_suggest_routes_a_nan_value_to_the_nan_guide_and_finite_ones_away_from_it():
    s = suggest("my run: grad_norm went to nan at step 40")
    assert s.tools[0].tool == "nan_guide" and "line 1" in s.tools[0].why
    s = suggest("max_grad_norm=1.0 and the grad norm is 35.2 at step 100")
    assert s.tools[0].tool == "playbook" and "35.2" in s.tools[0].why and "nan_guide" not in [t.tool for t in s.tools]
    s = suggest("grad_norm is 0.4 with clip_grad 1.0")  # below the threshold: no grad-norm evidence
    assert "clipping value" not in s.summary


def test_the_input_framework_comes_from_a_pasted_logs_lines_when_no_word_names_it():
    from grpo_debug.tools.families.filtering import input_frameworks

    verl = "step:1 - actor/pg_loss:0.1 - actor/grad_norm:0.5\nstep:2 - actor/pg_loss:nan - actor/grad_norm:nan"
    megatron = (" iteration        1/    100 | lm loss: 1.0E+00 | grad norm: 1.0 |\n"
                " iteration        2/    100 | lm loss: nan | grad norm: nan |")
    assert input_frameworks(verl) == {"verl"}
    assert "megatron" in input_frameworks(megatron) and "verl" not in input_frameworks(megatron)
    assert input_frameworks("loss nan") == set()


def test_a_cut_filtered_answer_says_how_many_matched():
    rep = run_family("playbook", "fixes", text="oom")  # several seed fixes match; each fix item is ~2 kB
    assert _size(rep) <= FILTERED_BYTES + 500
    assert any("more entries match 'oom'" in n for n in rep.notes), rep.notes
    assert f"the first {len(rep.items)} of" in rep.summary, rep.summary


def test_trigger_words_match_whole_words_not_inside_others():
    """'inf' (a NaN-guide trigger word) is not in 'information', so a 503 log with "For more information" is not
    routed to the NaN guide; a stem ('explod') still matches its longer forms."""
    from grpo_debug.tools.suggest import _written, suggest

    log = ("(RolloutManager pid=5) Error: Server error '503 Service Unavailable' for url 'http://h:4674/generate'\n"
           "(RolloutManager pid=5) For more information check: https://developer.mozilla.org/, retrying...\n")
    assert all(t.tool != "nan_guide" for t in suggest(log).tools)
    assert _written("loss is inf at step 3", "inf") and not _written("for more information", "inf")
    assert _written("the grad norm is exploding", "explod")
    assert any(t.tool == "nan_guide" for t in suggest("grad_norm went inf at step 40").tools)
