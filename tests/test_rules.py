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


def test_unquoted_hash_in_yaml_values():
    """` #` starts a YAML comment: an unquoted issue number silently truncates the text.

    Every fragment written after ` #` on a non-comment line must survive loading."""
    import json

    import yaml
    bad = []
    for f in RULES_DIR.rglob("*.yaml"):
        text = f.read_text()
        loaded = json.dumps(yaml.safe_load(text), ensure_ascii=False)
        for no, line in enumerate(text.splitlines(), 1):
            if " #" not in line or line.lstrip().startswith("#"):
                continue
            m = re.match(r"[\w.-]+", line.split(" #", 1)[1])
            if m and "#" + m.group(0) not in loaded:
                bad.append(f"{f.relative_to(RULES_DIR)}:{no}: {line.strip()[:90]}")
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
