"""Version awareness (issue 12 part 1): versions read from the input, the host and the caller
(tools/run/versions.py, version_units.py), rules gated by them and fixes in the user's spelling
(tools/engine/version_gate.py), through triage, check, the CLI and MCP."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo_debug.skills.loader import default_rules
from grpo_debug.tools.check_config import check_config
from grpo_debug.tools.engine.normalize import normalize
from grpo_debug.tools.engine.version_gate import LOWER, relation, speak
from grpo_debug.tools.run import versions as V
from grpo_debug.tools.run.version_units import scan_lines
from grpo_debug.tools.triage import triage

DATA = Path(__file__).parent / "data" / "versions"
RULES = {r.id: r for r in default_rules()}


def _found(text: str) -> dict[str, V.VersionHit]:
    return V.best_of(scan_lines(normalize(text)))


# ------------------------------------------------------------------------------------------- units

@pytest.mark.parametrize("line, fw, version", [
    ("verl==0.4.1", "verl", "0.4.1"),                                                      # pip freeze
    ("pip install deepspeed==0.14.0 'trl[vllm]==0.19.1'", "deepspeed", "0.14.0"),          # pip install pins
    ("deepspeed                 0.14.0", "deepspeed", "0.14.0"),                           # pip list row
    ("megatron-core             0.12.0rc3", "megatron", "0.12.0rc3"),
    ("Successfully installed accelerate-1.4.0 vllm-0.8.5.post1", "vllm", "0.8.5.post1"),   # pip install summary
    ("- TRL version: 0.17.0.dev0+1884ff1", "trl", "0.17.0.dev0"),                          # trl env
    ("- `transformers` version: 4.57.1", "transformers", "4.57.1"),                        # transformers env
    ("- PyTorch version: 2.5.1", "torch", "2.5.1"),
    ("- PyTorch version (GPU?): 2.1.0+cu121 (True)", "torch", "2.1.0"),                # transformers env
    ("INFO 05-11 09:41:06 [api_server.py:1043] vLLM API server version 0.8.5.post1", "vllm", "0.8.5.post1"),
    ("p5:62571:62571 [1] NCCL INFO NCCL version 2.26.2+cuda12.2", "nccl", "2.26.2"),
    ("[2024-03-08 16:40:12,551] [INFO] [logging.py:96:log_dist] [Rank 0] DeepSpeed info: version=0.14.0, "
     "git-hash=unknown, git-branch=unknown", "deepspeed", "0.14.0"),
    ("INFO 07-30 10:00:01 [core.py:70] Initializing a V1 LLM engine (v0.10.1.1) with config: model='Qwen'",
     "vllm", "0.10.1.1"),
    ("INFO 10-01 llm_engine.py:237] Initializing an LLM engine (v0.6.3) with config: model='Qwen'", "vllm", "0.6.3"),
    ("vllm.__version__ = 0.8.5", "vllm", "0.8.5"),
    ("lmsysorg/sglang:v0.4.6.post1-cu124", "sglang", "0.4.6.post1"),
    ("image: vllm/vllm-openai:v0.8.5", "vllm", "0.8.5"),
    ("ray, version 2.9.3", "ray", "2.9.3"),
])
def test_each_unit_reads_its_line(line, fw, version):
    hit = _found(line)[fw]
    assert (hit.version, hit.line) == (version, 1), hit


def test_pip_show_and_repl_echo_read_the_next_line():
    found = _found("Name: verl\nVersion: 0.6.1\nSummary: x\n>>> import deepspeed; deepspeed.__version__\n'0.19.5'\n")
    assert (found["verl"].version, found["verl"].line, found["verl"].unit) == ("0.6.1", 2, "pip-show")
    assert (found["deepspeed"].version, found["deepspeed"].line) == ("0.19.5", 5)


def test_verl_image_tag_is_a_release_series_and_names_its_engines():
    found = _found("docker pull verlai/verl:app-verl0.5-transformers4.55.4-vllm0.10.0-mcore0.13.0-te2.2")
    assert (found["verl"].version, found["verl"].lo, found["verl"].hi) == ("", "0.5", "0.6")
    assert found["vllm"].version == "0.10.0" and found["megatron"].version == "0.13.0"
    assert found["transformers"].version == "4.55.4"


def test_words_that_are_not_versions_are_not_read():
    assert _found("step 3 loss 0.25 reward 1.0\nPython version: 3.12.9\nrelaxation 0.9.1\n- DeepSpeed version: "
                  "not installed\nmy-package==1.2.3\n") == {}


def test_comment_and_pip_facts_count(tmp_path):
    r = triage(text="# verl 0.6.1\npython3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.mode=async "
                    "actor_rollout_ref.rollout.free_cache_engine=False\n")
    assert any(v.startswith("verl 0.6.1") for v in r.coverage.versions)


def test_flag_spelling_bounds_the_release_only_for_a_framework_the_input_shows():
    rules = default_rules()
    from grpo_debug.tools.triage import build_context
    from grpo_debug.tools.engine.version_gate import attach_versions

    ctx, _ = build_context((DATA / "openrlhf_dotted.sh").read_text())
    attach_versions(ctx, rules)
    h = ctx.versions["openrlhf"]
    assert (h.version, h.lo, h.hi, h.unit) == ("", "0.10.2", "", "flag-spelling")
    ctx, _ = build_context((DATA / "openrlhf_flat.sh").read_text())
    attach_versions(ctx, rules)
    assert (ctx.versions["openrlhf"].lo, ctx.versions["openrlhf"].hi) == ("", "0.10.2")
    ctx, _ = build_context("python train.py --actor.max_norm 1.0\n")  # no OpenRLHF in sight
    attach_versions(ctx, rules)
    assert "openrlhf" not in ctx.versions


# ------------------------------------------------------------------------------------------- comparison, sources

@pytest.mark.parametrize("a, b, want", [
    ("0.9.0", "0.10.2", -1), ("0.10.2", "0.10.2", 0), ("0.19.3", "0.19.10", -1), ("0.9.0rc1", "0.9.0", -1),
    ("0.8.0.dev0", "0.8.0rc1", -1), ("0.3.0.post1", "0.3.0", 1), ("v0.4.6.post1", "0.4.6", 1),
    ("core_v0.18.0", "0.18.0", 0), ("2.21.5+cuda12.4", "2.21.5", 0), ("1.0", "1.0.0", 0),
])
def test_compare_with_packaging_and_with_the_fallback(monkeypatch, a, b, want):
    assert V.compare(a, b) == want
    monkeypatch.setattr(V, "_PV", None)  # packaging absent: skills.schema.release_key
    assert V.compare(a, b) == want


def test_parse_versions_arg():
    got, host = V.parse_versions_arg("verl=0.9.0, deepspeed==0.19.5;megatron-lm=core_v0.18.0")
    assert {k: h.version for k, h in got.items()} == {"verl": "0.9.0", "deepspeed": "0.19.5", "megatron": "0.18.0"}
    assert not host and all(h.source == "argument" for h in got.values())
    assert V.parse_versions_arg("host")[1] is True
    for bad in ("verl", "verl=", "=0.9", "verl=banana"):
        with pytest.raises(ValueError):
            V.parse_versions_arg(bad)


def test_the_argument_wins_over_the_input_and_the_input_over_the_host(monkeypatch):
    from importlib import metadata

    monkeypatch.setattr(metadata, "version", lambda d: {"verl": "0.9.1", "deepspeed": "0.19.5"}.get(d) or (
        _ for _ in ()).throw(metadata.PackageNotFoundError(d)))
    host = V.from_host()
    assert {k: h.version for k, h in host.items()} == {"verl": "0.9.1", "deepspeed": "0.19.5"}
    found = scan_lines(normalize("verl==0.6.1\n"))
    arg, _ = V.parse_versions_arg("verl=0.8.0")
    assert V.resolve(None, found, host)["verl"].version == "0.6.1"
    assert V.resolve(None, found, host)["deepspeed"].source == "host"
    assert V.resolve(arg, found, host)["verl"].version == "0.8.0"


def test_host_versions_only_when_asked(monkeypatch):
    monkeypatch.setattr(V, "from_host", lambda names=None: {"verl": V.exact("verl", "0.7.0", "metadata", None, "x",
                                                                               source="host")})
    text = (DATA / "verl_async_no_free_cache.sh").read_text()
    assert triage(text=text).findings
    assert not triage(text=text, versions="host").findings


def test_relation_of_ranges():
    lo = V.VersionHit("openrlhf", "", "0.10.2", "", unit="flag-spelling")
    assert relation(lo, "", "0.10.2") == "out" and relation(lo, "0.10.2", "") == "in"
    assert relation(lo, "0.9.8", "0.11.0") == "unknown" and relation(None, "", "0.7.0") == "unknown"
    assert LOWER == {"high": "medium", "medium": "low", "low": "low"}


# ------------------------------------------------------------------------------------------- gating

def _rules_of(r):
    return [(f.symptom, f.confidence, [c.rule_id for c in f.causes]) for f in r.findings]


def _rule_ids(r) -> set[str]:
    return {c.rule_id for f in r.findings for c in f.causes}


@pytest.mark.parametrize("name, rule, current, old", [
    ("ds_zero2_trl.json", "deepspeed-gradient-clipping-off", "deepspeed=0.19.5", "deepspeed=0.14.0"),
    ("verl_bypass.sh", "verl-bypass-mode-needs-rollout-logprobs", "verl=0.9.0", "verl=0.8.0"),
    ("verl_async_no_free_cache.sh", "verl-free-cache-engine-no-weight-sync", "verl=0.7.0", "verl=0.6.1"),
])
def test_current_release_defaults_stay_quiet_and_an_older_release_raises_the_rule(name, rule, current, old):
    path = DATA / name
    quiet = check_config(path=path, versions=current)
    assert rule not in _rule_ids(quiet), _rules_of(quiet)
    assert not [f for f in quiet.findings if f.confidence in ("medium", "high")], _rules_of(quiet)
    assert any(v.startswith(current.replace("=", " ")) for v in quiet.coverage.versions)
    loud = check_config(path=path, versions=old)
    cause = next(c for f in loud.findings for c in f.causes if c.rule_id == rule)
    assert cause.confidence == RULES[rule].confidence
    assert any(old.replace("=", " ") in m for m in cause.matched), cause.matched


def test_an_older_release_stated_in_the_input_raises_the_rule():
    ds = (DATA / "ds_zero2_trl.json").read_text()
    r = triage(text="DeepSpeed info: version=0.14.0, git-hash=unknown, git-branch=unknown\nds_config:\n" + ds)
    assert "deepspeed-gradient-clipping-off" in _rule_ids(r), _rules_of(r)
    verl = "verl==0.6.1\n" + (DATA / "verl_async_no_free_cache.sh").read_text()
    r = triage(text=verl)
    f = next(f for f in r.findings if f.causes[0].rule_id == "verl-free-cache-engine-no-weight-sync")
    # a launch script alone: the finding is a risk (low, issue 23), the rule's own confidence carries the version
    assert f.risk and f.confidence == "low" and f.causes[0].confidence == "high"
    assert "line 1" in " ".join(f.causes[0].matched)


def test_the_case_a_range_is_about_keeps_the_rule_outside_it():
    """An explicit gradient_clipping 0 disables clipping in every DeepSpeed release (the range is about the
    omitted key); an explicit calculate_log_probs=false breaks bypass mode in every verl release."""
    r = triage(text='{"gradient_clipping": 0.0, "zero_optimization": {"stage": 2}}\n', versions="deepspeed=0.19.5")
    assert "deepspeed-gradient-clipping-off" in _rule_ids(r)
    sh = (DATA / "verl_bypass.sh").read_text().replace("trainer.total_epochs=15",
                                                       "actor_rollout_ref.rollout.calculate_log_probs=false")
    assert "verl-bypass-mode-needs-rollout-logprobs" in _rule_ids(check_config(text=sh, versions="verl=0.9.0"))


def test_an_unknown_version_lowers_one_step_and_says_which_version_decides():
    r = check_config(path=DATA / "verl_async_no_free_cache.sh")
    f = next(f for f in r.findings if f.causes[0].rule_id == "verl-free-cache-engine-no-weight-sync")
    assert RULES["verl-free-cache-engine-no-weight-sync"].confidence == "high"
    assert f.risk and f.confidence == "low" and f.causes[0].confidence == "medium"  # a script alone: a risk
    assert "verl < 0.7.0 only; your version is unknown: paste `pip show verl`" in f.causes[0].matched
    assert any("pip show verl" in s for s in f.sharpen)
    r = check_config(path=DATA / "ds_zero2_trl.json")
    assert [(f.confidence, f.causes[0].rule_id) for f in r.findings] == [("low", "deepspeed-gradient-clipping-off")]


def test_a_trainer_range_does_not_apply_to_another_trainers_run():
    """grpo-singleton-groups-reinforce holds for TRL [0.14.0, 0.15.0) only; a verl run with trl 0.19.1 in its
    pip list is still a verl run."""
    sh = ("trl==0.19.1\npython3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
          "actor_rollout_ref.rollout.n=1 data.train_batch_size=256\n")
    assert "grpo-singleton-groups-reinforce" in _rule_ids(triage(text=sh.split("\n", 1)[1]))
    assert "grpo-singleton-groups-reinforce" in _rule_ids(triage(text=sh))


# ------------------------------------------------------------------------------------------- dialect

def test_openrlhf_fix_speaks_the_dotted_cli_from_0_10_2_and_the_flat_one_before():
    new = triage(path=DATA / "openrlhf_dotted.sh")
    f = next(f for f in new.findings if f.causes[0].rule_id == "gradient-clipping-disabled")
    assert f.fix.startswith("Your openrlhf >= 0.10.2 spells it --actor.max_norm.")
    old = triage(path=DATA / "openrlhf_flat.sh")
    f = next(f for f in old.findings if f.causes[0].rule_id == "gradient-clipping-disabled")
    assert f.fix.startswith("Your openrlhf < 0.10.2 spells it --max_norm.")
    assert [s.key for s in f.settings if "norm" in s.key] == ["max_norm"]
    stated = triage(path=DATA / "openrlhf_flat.sh", versions="openrlhf=0.9.8")
    assert stated.findings[0].fix.startswith("Your openrlhf 0.9.8 spells it --max_norm.")


def test_a_spelling_the_release_lacks_is_replaced_and_an_unknown_release_gets_both():
    rule = RULES["gradient-clipping-disabled"]
    only_new = "Set --actor.max_norm 1.0 for train_ppo_ray."
    old, _ = V.parse_versions_arg("openrlhf=0.9.8")
    assert speak(only_new, rule, old, {"openrlhf"}) == "Set --max_norm 1.0 for train_ppo_ray."
    new, _ = V.parse_versions_arg("openrlhf=0.11.2")
    assert speak("Set --max_norm 1.0.", rule, new, {"openrlhf"}) == "Set --actor.max_norm 1.0."
    assert speak(only_new, rule, {}, {"openrlhf"}) == only_new + " (openrlhf before 0.10.2: --max_norm)"


def test_trl_start_up_message_of_the_users_release():
    rule = RULES["trl-generations-not-divisible"]
    text = "TRL refuses the config ('must be divisible by num_generations')."
    old, _ = V.parse_versions_arg("trl=0.19.1")
    assert "must be evenly divisible by the number of generations per prompt" in speak(text, rule, old, {"trl"})
    new, _ = V.parse_versions_arg("trl=0.21.0")
    assert speak(text, rule, new, {"trl"}) == "Your trl 0.21.0 prints 'must be divisible by num_generations'. " + text
    why = speak(rule.why, rule, new, {"trl"}, replace=False)  # the history stays as written
    assert why == "Your trl 0.21.0 prints 'must be divisible by num_generations'. " + rule.why
    r = triage(text="trl==0.19.1\n# accelerate launch --num_processes 7 grpo.py\nnum_generations: 8\n"
                    "per_device_train_batch_size: 2\ngradient_accumulation_steps: 1\n")
    cause = next(c for f in r.findings for c in f.causes if c.rule_id == "trl-generations-not-divisible")
    assert cause.why.startswith("Your trl 0.19.1 prints 'must be evenly divisible by the number of generations "
                                "per prompt'.")


# ------------------------------------------------------------------------------------------- faces

def test_cli_versions_on_triage_and_check(capsys):
    from grpo_debug.server.cli import main

    path = str(DATA / "ds_zero2_trl.json")
    assert main(["check", path, "--format", "json", "--versions", "deepspeed=0.19.5"]) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []
    assert main(["triage", path, "--format", "json", "--versions", "deepspeed=0.14.0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["findings"][0]["causes"][0]["rule_id"] == "deepspeed-gradient-clipping-off"
    assert out["coverage"]["versions"] == ["deepspeed 0.14.0 (argument: deepspeed=0.14.0)"]
    with pytest.raises(SystemExit) as e:
        main(["check", path, "--versions", "deepspeed=soon"])
    assert e.value.code == 2 and "not a release number" in capsys.readouterr().err


@pytest.mark.anyio
async def test_mcp_tools_take_versions():
    from mcp import Client

    from grpo_debug.server.app import build_server

    text = (DATA / "ds_zero2_trl.json").read_text()
    async with Client(build_server()) as c:
        quiet = await c.call_tool("check_config", {"text": text, "versions": "deepspeed=0.19.5"})
        loud = await c.call_tool("triage", {"text": text, "versions": "deepspeed=0.14.0"})
        bad = await c.call_tool("triage", {"text": text, "versions": "deepspeed"})
    assert not quiet.is_error and quiet.structured_content["findings"] == []
    loud_f = loud.structured_content["findings"][0]  # a config alone: a risk (low), the rule's confidence medium
    assert loud_f["confidence"] == "low" and loud_f["causes"][0]["confidence"] == "medium"
    assert bad.is_error and "`versions`" in bad.content[0].text


def test_a_release_series_written_loosely_is_not_a_version():
    """'trl 0.2x' or 'trl 0.4.*' in a comment names no release: reading it as 0.2 / 0.4 silenced the TRL
    group-size rule (a newcomer's config comment '# TRL GRPOTrainer config (trl 0.2x)')."""
    cfg = "# TRL GRPOTrainer config (trl 0.2x)\nnum_generations: 1\nper_device_train_batch_size: 8\nuse_vllm: true\n"
    res = check_config(text=cfg)
    assert "trl-num-generations-below-two" in {c.rule_id for f in res.findings for c in f.causes}
    assert not res.coverage.versions or "trl" not in json.dumps(res.coverage.versions)
    cfg2 = cfg.replace("0.2x", "0.4.*")
    assert "trl-num-generations-below-two" in {c.rule_id for f in check_config(text=cfg2).findings for c in f.causes}
