"""The rule base: schema lint and every rule's own positive and negative examples (semgrep-style)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from grpo_debug.skills.loader import SUBSYSTEMS, RuleBaseError, default_rules, load_rule_file, load_rules
from grpo_debug.skills.schema import CheckSignal, DetectorSignal, EventSignal, QuerySignal, RegexSignal
from grpo_debug.skills.symptoms import SYMPTOMS
from grpo_debug.tools.engine.config_checks import CHECKS
from grpo_debug.tools.engine.detectors import DETECTORS
from grpo_debug.tools.engine.events import EVENT_KINDS
from grpo_debug.tools.engine.match import evaluate
from grpo_debug.tools.triage import build_context

RULES = default_rules()
RULES_DIR = Path(__file__).resolve().parents[1] / "skills" / "rules"
SHARED_SYMPTOMS = Path(__file__).resolve().parents[2] / "shared" / "symptoms.md"


def test_rule_base_is_not_empty_and_ids_unique():
    files = sorted(RULES_DIR.rglob("*.yaml"))
    ids = [r.id for f in files for r in load_rule_file(f)]
    assert len(ids) >= 40
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]
    assert len(RULES) == len(ids)


def test_file_name_is_rule_id():
    for f in RULES_DIR.rglob("*.yaml"):
        (rule,) = load_rule_file(f)
        assert f.stem == rule.id, f


def test_rule_folders_are_subsystems():
    folders = {p.relative_to(RULES_DIR).parts[0] for p in RULES_DIR.rglob("*.yaml")}
    assert folders <= set(SUBSYSTEMS), folders - set(SUBSYSTEMS)
    assert all(len(p.relative_to(RULES_DIR).parts) == 2 for p in RULES_DIR.rglob("*.yaml"))


@pytest.mark.parametrize("rule", list(RULES), ids=lambda r: r.id)
def test_rule_lint(rule):
    assert rule.symptom in SYMPTOMS
    assert rule.why.strip() and rule.fix.summary.strip() and rule.what.strip()
    assert rule.sources, "provenance required"
    for sig in rule.match.signals():
        if isinstance(sig, EventSignal):
            assert sig.event in EVENT_KINDS, f"unknown event kind {sig.event}"
        if isinstance(sig, DetectorSignal):
            assert sig.detector in DETECTORS, f"unknown detector {sig.detector}"
        if isinstance(sig, CheckSignal):
            assert sig.check in CHECKS, f"unknown check {sig.check}"
        if isinstance(sig, RegexSignal):
            re.compile(sig.pattern)
    if rule.kind == "diagnostic":
        assert any(not isinstance(s, QuerySignal) for s in rule.match.signals()), "diagnostic rule needs a machine signal"


def yaml_cuts(text: str) -> list[tuple[int, str]]:
    """Values YAML cut at an unquoted ` #` (the rest of the line became a comment): [(line number, lost text)].

    Scans the tokens: a plain (unquoted) scalar followed on its last line by whitespace and `#` lost that text.
    Rule files have no reason for a trailing comment after a plain value, so every such comment is a cut."""
    import yaml

    lines = text.split("\n")
    out = []
    for tok in yaml.scan(text, Loader=yaml.SafeLoader):
        if isinstance(tok, yaml.ScalarToken) and tok.plain:
            end = tok.end_mark
            rest = lines[end.line][end.column:] if end.line < len(lines) else ""
            if rest[:1].isspace() and rest.lstrip().startswith("#"):
                out.append((end.line + 1, rest.strip()))
    return out


def test_yaml_cut_detector_catches_the_kind():
    cut = ("title: Fixed by PR #4248 in verl\nsteps:\n  - Upgrade past #8068 now\n"
           "ok: 'quoted #1'\nblock: >-\n  text #2\n")
    assert [n for n, _ in yaml_cuts(cut)] == [1, 3]
    assert yaml_cuts("a: 'PR #1'\nb: \"PR #2\"\nc: x#y\n# a comment line\n") == []


def test_rule_text_is_whole():
    """` #` starts a YAML comment: an unquoted issue number silently truncates the text. No value in any
    YAML file of the knowledge base (rules, GPU table, derivations, triggers) may be cut that way."""
    bad = []
    for f in sorted(RULES_DIR.parent.rglob("*.y*ml")):
        for no, lost in yaml_cuts(f.read_text()):
            bad.append(f"{f.relative_to(RULES_DIR.parent)}:{no}: value cut at {lost[:60]!r}")
    assert not bad, "\n".join(bad)


def _examples():
    for r in RULES:
        for ex in r.examples:
            yield pytest.param(r, ex, id=f"{r.id}::{ex.name}")


@pytest.mark.parametrize("rule,example", list(_examples()))
def test_rule_example(rule, example):
    if example.mode == "query":
        ctx, _ = build_context("")
        ctx.query = example.input
        hit = evaluate(rule, ctx, mode="query")
    else:
        hint = example.format if example.format in ("yaml", "json") else None
        ctx, _ = build_context(example.input, hint)
        ctx.probe = dict(example.probe)
        hit = evaluate(rule, ctx)
    assert (hit is not None) == (example.expect == "match"), (
        f"{rule.id}: example {example.name!r} expected {example.expect}; "
        f"events={[e.kind for e in ctx.events]} series={list(ctx.metrics.series)[:8]} "
        f"facts={[(f.key, f.value) for f in ctx.facts.facts][:12]}")


def test_symptom_codes_match_shared_list():
    if not SHARED_SYMPTOMS.exists():
        pytest.skip("../shared/symptoms.md not present")
    codes = set(re.findall(r"^\| `([a-z_]+)` \|", SHARED_SYMPTOMS.read_text(), re.M))
    assert codes == set(SYMPTOMS)


def test_user_rule_pack_overrides_and_bad_pack_errors(tmp_path):
    rule = (RULES_DIR / "general" / "cuda-oom.yaml").read_text().replace("title: CUDA out of memory", "title: Custom OOM")
    (tmp_path / "cuda-oom.yaml").write_text(rule)
    rb = load_rules([tmp_path], include_env=False)
    assert rb.get("cuda-oom").title == "Custom OOM"
    (tmp_path / "broken.yaml").write_text("id: x\ntitle: [unclosed\n")
    with pytest.raises(RuleBaseError, match="broken.yaml"):
        load_rules([tmp_path], include_env=False)
    with pytest.raises(RuleBaseError, match="does not exist"):
        load_rules([tmp_path / "nope"], include_env=False)


# ---- version data (issue 12): ranges per framework and per identifier spelling ----

def test_release_key_orders_releases():
    from grpo_debug.skills.schema import release_key
    order = ["0.8.0.dev", "0.9.0rc1", "0.9.0", "0.9.0.post1", "0.9.1", "0.10.2", "1.0"]
    assert sorted(order, key=release_key) == order
    assert release_key("") is None
    with pytest.raises(ValueError):
        release_key("core_v0.18.0")


def test_version_range_and_identifier_validate():
    from pydantic import ValidationError

    from grpo_debug.skills.schema import Identifier, VersionRange
    assert VersionRange(introduced_in="0.16.0", fixed_in="0.18.0").fixed_in == "0.18.0"
    assert VersionRange(note="open").introduced_in == ""
    for bad in ({"introduced_in": "0.18.0", "fixed_in": "0.18.0"}, {"introduced_in": "1.0", "fixed_in": "0.9"},
                {"fixed_in": "v0.7"}, {"fixed_in": "0.7.0", "extra": 1}):
        with pytest.raises(ValidationError):
            VersionRange(**bad)
    i = Identifier(name="--max_norm", framework="openrlhf", until="0.10.2", replaced_by="--actor.max_norm")
    assert i.kind == "flag" and i.since == ""
    with pytest.raises(ValidationError):
        Identifier(name="--x", framework="openrlhf", since="0.10.2", until="0.10.1")
    with pytest.raises(ValidationError):
        Identifier(name="--x", framework="openrlhf", kind="option")


def test_rule_version_range_must_name_an_applied_framework(tmp_path):
    text = (RULES_DIR / "general" / "cuda-oom.yaml").read_text()
    assert "\nversions:" in text
    bad = text.replace("\nversions:\n", "\nversions:\n  not-a-framework: {fixed_in: \"1.0\"}\n", 1)
    (tmp_path / "cuda-oom.yaml").write_text(bad)
    with pytest.raises(RuleBaseError, match="not-a-framework"):
        load_rule_file(tmp_path / "cuda-oom.yaml")


def test_every_named_framework_has_a_version_range():
    """Every framework a rule names has a range (open-ended ranges say what was checked, or why nothing was)."""
    missing = [f"{r.id}: {fw}" for r in RULES for fw in r.applies_to.frameworks if fw not in r.versions]
    assert not missing, missing
    for r in RULES:
        for fw, rng in r.versions.items():
            assert rng.fixed_in or rng.introduced_in or rng.checked or rng.note, f"{r.id}: {fw} range says nothing"


def test_a_replaced_spelling_hands_over_without_a_gap():
    """When a spelling ends (until) and names its replacement, the replacement exists by then (since <= until):
    some release always has one of the two."""
    from grpo_debug.skills.schema import release_key
    for r in RULES:
        by_name = {(i.framework, i.name): i for i in r.identifiers}
        for i in r.identifiers:
            new = by_name.get((i.framework, i.replaced_by))
            if new and new.since and i.until:
                assert release_key(new.since) <= release_key(i.until), (r.id, i.name, new.name)


@pytest.mark.parametrize("rule_id,framework,introduced,fixed", [
    ("verl-free-cache-engine-no-weight-sync", "verl", "", "0.7.0"),  # PR #4248, first in v0.7.0
    ("verl-bypass-mode-needs-rollout-logprobs", "verl", "", "0.9.0"),  # calculate_log_probs default True (#6616)
    ("deepspeed-gradient-clipping-off", "deepspeed", "", "0.19.3"),  # GRADIENT_CLIPPING_DEFAULT 1.0 (#8068)
    ("deepspeed-overlap-comm-compile-nan", "deepspeed", "", "0.19.3"),  # PR #8080
    ("megatron-muon-unsupported-options", "megatron-lm", "0.16.0", "0.18.0"),  # muon + distopt supported
])
def test_audited_version_facts(rule_id, framework, introduced, fixed):
    rng = RULES.get(rule_id).versions[framework]
    assert (rng.introduced_in, rng.fixed_in) == (introduced, fixed)
    assert rng.checked and rng.note


def test_renamed_spellings_are_recorded():
    orl = {i.name: i for i in RULES.get("openrlhf-colocate-vllm-gpus").identifiers}
    assert orl["--colocate_all_models"].until == "0.10.2" and orl["--train.colocate_all"].since == "0.10.2"
    assert orl["--vllm_num_engines"].replaced_by == "--vllm.num_engines"
    trl = {i.name: i for i in RULES.get("trl-generations-not-divisible").identifiers}
    assert trl["must be evenly divisible by the number of generations per prompt"].until == "0.20.0"
    assert trl["must be divisible by num_generations"].since == "0.20.0"
