"""A finding's fix is written for the input it answers (issue 23 item 6, issue 22 "one framework detector").

- the rule's ``fix.summary_by_framework`` text of the input's framework is the fix shown (tools/engine/version_gate
  ``fix_summary``); an input of no known framework gets the generic ``fix.summary``;
- over every corpus case of verl, TRL, slime or OpenRLHF, the top finding's fix names no other framework's word
  or key (the forbidden words are built from the rules' ``patch_by_framework`` keys, the alias table's sourced
  framework markers and the framework names; the rollout engines vLLM/SGLang are allowed with every trainer,
  Megatron with slime, DeepSpeed with TRL and OpenRLHF, whose backends they are);
- a setting the fix asks for that the input already has is said ('Gradient clipping is already on at 1.0 ...');
- one detector: tools/run/frameworks.detect, its config-key markers from skills/aliases.yaml framework_markers.
"""
from __future__ import annotations

import glob
import re
from functools import lru_cache
from pathlib import Path

import pytest
from pydantic import ValidationError

from grpo_debug.skills.aliases import load_aliases
from grpo_debug.skills.loader import default_rules
from grpo_debug.skills.schema import Fix
from grpo_debug.tools.engine.version_gate import fix_frameworks, fix_summary
from grpo_debug.tools.inputs import read_input
from grpo_debug.tools.run.frameworks import detect, markers
from grpo_debug.tools.triage import build_context, triage, triage_text

ROOT = Path(__file__).resolve().parent
CASES = sorted(glob.glob(str(ROOT / "data/corpus*/cases/*/input.*")) + glob.glob(str(ROOT / "data/cases_heldout/*/input.*")))
VERL_NAN = ROOT / "data/corpus/cases/verl-agent-r1-multiturn-retokenize-nan/input.log"
TRAINERS = ("verl", "trl", "slime", "openrlhf")
# the frameworks a trainer's fix may name besides its own (its rollout engines and training backends)
ALLOWED = {"verl": {"verl", "vllm", "sglang"}, "slime": {"slime", "megatron", "sglang", "vllm"},
           "trl": {"trl", "deepspeed", "vllm"}, "openrlhf": {"openrlhf", "deepspeed", "vllm"}}
NAMES = {"verl": r"\bverl\b", "slime": r"\bslime\b", "trl": r"\bTRL\b", "openrlhf": r"OpenRLHF", "relax": r"\bRelax\b",
         "deepspeed": r"DeepSpeed", "megatron": r"Megatron"}
_RULE_NAME = {"megatron-lm": "megatron", "hf-trainer": "trl", "hf_trainer": "trl"}
_FLAG_STYLE = {"slime", "megatron", "relax", "openrlhf"}  # frameworks whose keys a fix writes as --flags


def _written(fw: str, key: str) -> str:
    """A framework's key as a fix writes it: a --flag with dashes for the argparse frameworks (OpenRLHF keeps
    underscores and dots), a bare or dotted key otherwise; a regex that does not match inside a longer key."""
    if fw in _FLAG_STYLE and not key.startswith("--"):
        key = "--" + (key if fw == "openrlhf" else key.replace("_", "-"))
    body = re.escape(key.rstrip("."))
    tail = r"\.\w" if key.endswith(".") else r"(?![\w-])"
    return r"(?<![\w.\-])" + body + tail


@lru_cache(maxsize=1)
def tokens() -> dict[str, list[str]]:
    """framework -> regexes of its own words and keys (rule patch_by_framework keys, alias-table key markers)."""
    out: dict[str, list[str]] = {fw: [rx] for fw, rx in NAMES.items()}
    for r in default_rules():
        for fw, patch in r.fix.patch_by_framework.items():
            fw = _RULE_NAME.get(fw, fw)
            for key in patch:
                if not re.fullmatch(r"[a-z]+(\.\w+)+", str(key)) or fw == "verl":  # module paths are values' business
                    out.setdefault(fw, []).append(_written(fw, key))
    for fw, key, prefix in markers().keys:
        out.setdefault(fw, []).append(_written(fw, key + ("." if prefix else "")))
    return out


def forbidden_in(fw: str, text: str) -> list[str]:
    """The other frameworks' words and keys ``text`` names, for a fix shown to a ``fw`` input."""
    return sorted({m.group(0) for other, rxs in tokens().items() if other not in ALLOWED[fw]
                   for rx in rxs for m in [re.search(rx, text)] if m})


def _framework_of(path: str) -> str | None:
    s, _, _, hint = read_input(None, path)
    ctx, _ = build_context(s, hint)
    fws = fix_frameworks(ctx)
    return fws[0] if fws else None


@pytest.mark.parametrize("path", CASES, ids=lambda p: Path(p).parent.name)
def test_top_fix_names_only_the_inputs_framework(path):
    fw = _framework_of(path)
    if fw not in TRAINERS:
        pytest.skip(f"framework {fw}: not one of {TRAINERS}")
    res = triage(path=path)
    if not res.findings:
        pytest.skip("no finding")
    f = res.findings[0]
    assert not forbidden_in(fw, f.fix), (fw, f.causes[0].rule_id if f.causes else None, forbidden_in(fw, f.fix), f.fix)


def test_the_corpus_has_cases_of_each_trainer():
    """The parity test above is not vacuous: it runs on cases of every trainer it names."""
    seen = {_framework_of(p) for p in CASES}
    assert set(TRAINERS) <= seen, seen


def test_verl_nan_case_gets_verl_keys_only():
    res = triage(path=str(VERL_NAN))
    f = res.findings[0]
    assert f.symptom == "nan_inf" and f.causes[0].rule_id == "metric-nonfinite"
    assert "actor_rollout_ref.actor.optim.clip_grad" in f.fix
    assert forbidden_in("verl", f.fix) == [], f.fix
    for word in ("DeepSpeed", "Megatron", "TRL", "slime", "--clip-grad", "learning_rate", "gradient_clipping"):
        assert word not in f.fix, (word, f.fix)
    length = next(x for x in res.findings if x.symptom == "length_blowup")
    assert "data.max_response_length" in length.fix and "--rollout" not in length.fix and "slime" not in length.fix


def test_causes_carry_the_same_framework_text():
    res = triage(path=str(VERL_NAN))
    rb = default_rules()
    for f in res.findings:
        for c in f.causes:
            rule = rb.get(c.rule_id)
            if rule is not None and "verl" in rule.fix.summary_by_framework:
                assert c.fix.startswith(rule.fix.summary_by_framework["verl"][:40]), (c.rule_id, c.fix)


def test_clipping_already_on_is_said():
    """The verl NaN log with its launch line setting clipping: the fix says clipping is on, with the line."""
    launch = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=32 "
              "actor_rollout_ref.actor.optim.clip_grad=1.0 actor_rollout_ref.rollout.n=8\n")
    res = triage_text(launch + VERL_NAN.read_text())
    f = next(x for x in res.findings if x.symptom == "nan_inf")
    assert "Gradient clipping is already on at 1.0 (actor_rollout_ref.actor.optim.clip_grad, line 1)" in f.fix, f.fix
    off = triage_text(launch.replace("clip_grad=1.0", "clip_grad=0.0") + VERL_NAN.read_text())
    assert "already on" not in next(x for x in off.findings if x.symptom == "nan_inf").fix


def test_trl_clipping_already_on_is_said():
    """A TRL GRPO run's config with max_grad_norm and a NaN in its log_history: TRL's text and the 'already' line."""
    text = ("num_generations: 8\nmax_completion_length: 256\nmax_grad_norm: 1.0\nlearning_rate: 1.0e-06\n"
            "use_vllm: true\n"
            "{'loss': 0.0123, 'grad_norm': 0.5, 'learning_rate': 1e-06, 'epoch': 0.01}\n"
            "{'loss': 0.0119, 'grad_norm': 0.6, 'learning_rate': 1e-06, 'epoch': 0.02}\n"
            "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-06, 'epoch': 0.03}\n")
    res = triage_text(text)
    f = next(x for x in res.findings if x.symptom == "nan_inf")
    assert "max_grad_norm" in f.fix and forbidden_in("trl", f.fix) == [], f.fix
    assert re.search(r"Gradient clipping is already on at 1\.0 \(max_grad_norm, line 3\)", f.fix), f.fix


def test_patch_already_set_is_said_before_the_fix():
    text = ("actor_rollout_ref:\n  actor:\n    entropy_coeff: 0\n    optim:\n      lr: 1e-6\n"
            "trainer:\n  total_epochs: 1\n")
    rule = default_rules().get("entropy-climb")
    from grpo_debug.tools.engine.edits import already_set
    from grpo_debug.tools.engine.facts import extract_facts
    from grpo_debug.tools.engine.normalize import normalize

    lines = normalize(text)
    assert already_set(rule.fix, extract_facts(lines, text, "yaml"), lines) == [
        "actor_rollout_ref.actor.entropy_coeff = 0 (line 3)"]


def test_unknown_framework_gets_the_generic_text():
    text = "\n".join(f"step {i}: loss={0.5 - i * 0.01:.3f} grad_norm={1.0 + i * 0.1:.2f}" for i in range(1, 9))
    text += "\nstep 9: loss=nan grad_norm=nan\n"
    ctx, _ = build_context(text)
    assert fix_frameworks(ctx) == []
    res = triage_text(text)
    f = next(x for x in res.findings if x.symptom == "nan_inf")
    rule = default_rules().get(f.causes[0].rule_id)
    assert rule.fix.summary_by_framework, "the test needs a rule with per-framework text"
    assert f.fix.startswith(rule.fix.summary), f.fix


def test_fix_summary_picks_the_first_framework_with_text():
    fix = Fix(summary="generic text for everyone", summary_by_framework={"slime": "slime --clip-grad 1.0 text",
                                                                         "verl": "verl clip_grad text here"})
    assert fix_summary(fix, ["verl", "vllm"]) == "verl clip_grad text here"
    assert fix_summary(fix, ["relax"]) == "slime --clip-grad 1.0 text"  # Relax reads slime's flags
    assert fix_summary(fix, ["openrlhf", "vllm"]) == "generic text for everyone"
    assert fix_summary(fix, []) == "generic text for everyone"


def test_unknown_framework_name_is_rejected():
    with pytest.raises(ValidationError, match="unknown framework"):
        Fix(summary="generic text for everyone", summary_by_framework={"verl-lm": "a text of some length"})
    with pytest.raises(ValidationError, match="unknown framework"):
        Fix(summary="generic text for everyone", patch_by_framework={"Megatron-LM": {"clip_grad": 1.0}})


def test_every_written_key_has_a_source_or_is_in_the_rule():
    """A per-framework text names no key/flag the rule's own generic text, steps, patch or identifiers do not, except
    the ones checked in the framework source and recorded in the alias table or a signal's keys."""
    keylike = re.compile(r"--[A-Za-z][\w.-]+|\b[a-z_]+(?:\.[a-z_0-9]+)+\b|\b[a-z]+_[a-z0-9_]+\b")
    for r in default_rules():
        if not r.fix.summary_by_framework:
            continue
        own = " ".join([r.fix.summary, *r.fix.steps, r.why, r.what, str(r.fix.patch_by_framework),
                        " ".join(s.model_dump_json() for s in r.match.signals())])
        for fw, text in r.fix.summary_by_framework.items():
            assert len(text) <= len(r.fix.summary) + 400, (r.id, fw)
            for k in keylike.findall(text):
                base = k.lstrip("-").rsplit(".", 1)[-1].replace("-", "_")
                assert base in own.replace("-", "_") or base in CHECKED, (r.id, fw, k)


# keys written in per-framework texts that the rule's own text does not name, each checked in the source
CHECKED = {
    "ppo_mini_batch_size", "tensor_model_parallel_size", "param_offload", "optimizer_offload", "nccl_timeout",
    "enable_gradient_checkpointing", "resume_mode", "resume_from_path", "ppo_epochs", "free_cache_engine",  # verl
    "lr", "max_context_len", "rollout_max_context_len", "offload", "partial_rollout", "num_steps_per_rollout",
    "rollout_stop_token_ids", "rollout_max_response_len", "n_samples_per_prompt", "max_response_length",  # slime/verl
    "micro_batch_size", "micro_train_batch_size", "adam_offload", "tensor_parallel_size", "vllm_tensor_parallel_size",
    "max_new_tokens", "generate_max_len", "max_len", "batch_size", "train_batch_size", "gradient_checkpointing_enable",
    "gradient_checkpointing", "max_norm", "actor_learning_rate", "n_samples_per_prompt", "gpu_memory_utilization",
    "vllm_gpu_memory_utilization", "sglang_chunked_prefill_size", "chunked_prefill_size",  # OpenRLHF, slime
    "per_device_train_batch_size", "gradient_accumulation_steps", "num_generations", "max_grad_norm", "learning_rate",
    "ddp_timeout", "vllm_max_model_length", "max_completion_length", "eos_token_id", "stop_token_ids",  # TRL / HF
    "train_micro_batch_size_per_gpu", "gradient_clipping", "max_model_len", "max_num_seqs", "max_num_batched_tokens",
    "sglang_mem_fraction_static", "rollout_num_gpus_per_engine", "max_tokens_per_gpu", "use_dynamic_batch_size",
    "ppo_max_token_len_per_gpu", "ppo_micro_batch_size_per_gpu", "use_dynamic_bsz", "clip_grad", "grad_clip",
    "data.max_response_length", "entropy_coef", "entropy_coeff", "max_prompt_length", "filter_overlong_prompts",
    "global_batch_size",  # slime reset_arg --global-batch-size (slime/utils/arguments.py), Megatron's flag
    "train_ppo_ray",  # OpenRLHF's entry point (openrlhf/cli/train_ppo_ray.py)
}


def test_one_detector_with_sourced_markers():
    """Every config-key marker of the detector is an alias-table pattern (with a source); the old unsourced
    FRAMEWORK_MARKERS / detect_frameworks are no longer used by the detector, the edits or triage."""
    patterns = {m.pattern.lstrip("-").rstrip(".").replace("-", "_") for ms in load_aliases().framework_markers.values()
                for m in ms if m.status == "verified" and m.source}
    for fw, key, _ in markers().keys:
        assert key.replace("-", "_") in patterns, (fw, key)
    pkg = ROOT.parent
    for mod in ("tools/run/frameworks.py", "tools/engine/edits.py", "tools/triage.py", "tools/engine/version_gate.py"):
        src = (pkg / mod).read_text()
        facts_imports = " ".join(re.findall(r"from grpo_debug\.tools\.engine\.facts import ([^\n]+)", src))
        assert "FRAMEWORK_MARKERS" not in facts_imports and "detect_frameworks" not in facts_imports, mod


def test_detector_reads_config_keys_and_text_markers():
    from grpo_debug.tools.engine.facts import extract_facts
    from grpo_debug.tools.engine.normalize import normalize

    text = "python train.py --vllm.num_engines 4 --train.colocate_all --ds.zero_stage 3\n"
    lines = normalize(text)
    hits = detect(lines, extract_facts(lines, None, None))
    assert hits[0].name == "openrlhf" and any("config key vllm.num_engines" in e for e in hits[0].evidence), hits
    lines = normalize("from trl import GRPOConfig, GRPOTrainer\ntrainer = GRPOTrainer(model=m)\n")
    hits = detect(lines, None)
    assert hits and hits[0].name == "trl", hits


def test_fix_frameworks_is_computed_once_per_input():
    ctx, _ = build_context(VERL_NAN.read_text())
    first = fix_frameworks(ctx)
    assert first[0] == "verl" and fix_frameworks(ctx) is first
