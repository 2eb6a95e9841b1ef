from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from grpo_debug.skills.aliases import (
    ALIASES_PATH, CANONICAL_CONFIG, CANONICAL_METRICS, AliasTable, canonical_config, canonical_metric,
    load_aliases, normalise_key,
)


def _raw():
    return yaml.safe_load(ALIASES_PATH.read_text(encoding="utf-8"))


def test_file_validates_and_covers_all_ids():
    t = load_aliases()
    assert set(t.metrics) == set(CANONICAL_METRICS)
    assert set(t.config) == set(CANONICAL_CONFIG)
    assert load_aliases() is t  # cached


def test_every_alias_has_a_source():
    t = load_aliases()
    for entries in (t.metrics, t.config):
        for cid, e in entries.items():
            for a in e.aliases:
                assert a.source.strip(), (cid, a.key)
                if a.status == "verified":
                    # a verified alias names the repository file it was seen in
                    assert "/" in a.source and not a.source.startswith("http"), (cid, a.key, a.source)
    for fw, markers in t.framework_markers.items():
        for m in markers:
            assert m.source.strip(), (fw, m.pattern)


def test_no_alias_maps_to_two_ids_per_framework():
    raw = _raw()
    for section in ("metrics", "config"):
        seen: dict[tuple[str, str], str] = {}
        for cid, e in raw[section].items():
            for a in e["aliases"]:
                k = (a["framework"], normalise_key(a["key"]))
                assert seen.setdefault(k, cid) == cid, (section, k, seen[k], cid)


def test_collision_is_rejected():
    raw = _raw()
    a = dict(raw["metrics"]["grad_norm"]["aliases"][0])
    raw["metrics"]["loss"]["aliases"] = [*raw["metrics"]["loss"]["aliases"], a]
    with pytest.raises(ValidationError):
        AliasTable.model_validate(raw)


def test_unknown_field_and_id_rejected():
    raw = _raw()
    raw["metrics"]["grad_norm"]["aliases"][0]["bogus"] = 1
    with pytest.raises(ValidationError):
        AliasTable.model_validate(raw)
    raw = _raw()
    raw["config"]["not_a_canonical_id"] = {"description": "xyz", "aliases": []}
    with pytest.raises(ValidationError):
        AliasTable.model_validate(raw)


KNOWN_METRICS = [
    ("actor/grad_norm", "verl", "grad_norm"),
    ("ACTOR/Grad_Norm", "verl", "grad_norm"),
    ("actor/pg_clipfrac", "verl", "pg_clipfrac"),
    ("actor/ppo_kl", "verl", "ppo_kl"),
    ("critic/score/mean", "verl", "score_mean"),
    ("response_length/clip_ratio", "verl", "response_length_clip_ratio"),
    ("perf/throughput", "verl", "throughput"),
    ("training/rollout_probs_diff_mean", "verl", "logprob_mismatch"),
    ("frac_reward_zero_std", "trl", "zero_std_frac"),
    ("completions/clipped_ratio", "trl", "response_length_clip_ratio"),
    ("grad_norm", "hf_trainer", "grad_norm"),
    ("learning_rate", "hf_trainer", "lr"),
    ("train/actor_grad_norm", "openrlhf", "grad_norm"),
    ("policy_loss", "openrlhf", "loss"),
    ("train/train_rollout_logprob_abs_diff", "slime", "logprob_mismatch"),
    ("rollout/response_len/mean", "slime", "response_length_mean"),
    ("grad norm", "megatron", "grad_norm"),
    ("Loss Scale", "megatron", "loss_scale"),
    ("lm loss", "megatron", "loss"),
    ("train/token_mult_prob_error", "nemo_rl", "logprob_mismatch"),
    ("policy/rollout_train_logprobs_abs_diff_mean", "skyrl", "logprob_mismatch"),
    ("ppo_actor/update/approx_kl/avg", "areal", "ppo_kl"),
    ("actor/ppo_ratio_clipfrac", "roll", "pg_clipfrac"),
    ("optim/grad_norm", "prime_rl", "grad_norm"),
]
KNOWN_CONFIG = [
    ("actor_rollout_ref.actor.optim.clip_grad", "verl", "grad_clip"),
    ("data.train_batch_size", "verl", "train_batch_size"),
    ("actor_rollout_ref.rollout.tensor_model_parallel_size", "verl", "tp"),
    ("actor_rollout_ref.rollout.gpu_memory_utilization", "verl", "gpu_memory_utilization"),
    ("  trainer.N_GPUS_per_node ", "verl", "n_gpus_per_node"),
    ("num_generations", "trl", "n_samples_per_prompt"),
    ("beta", "trl", "kl_coef"),
    ("--max_norm", "openrlhf", "grad_clip"),
    ("--actor.max_norm", "openrlhf", "grad_clip"),
    ("--rollout.n_samples_per_prompt", "openrlhf", "n_samples_per_prompt"),
    ("--n-samples-per-prompt", "slime", "n_samples_per_prompt"),
    ("--tensor-model-parallel-size", "megatron", "tp"),
    ("--clip-grad", "megatron", "grad_clip"),
    ("gradient_clipping", "deepspeed", "grad_clip"),
    ("train_micro_batch_size_per_gpu", "deepspeed", "micro_batch_size"),
    ("policy.max_grad_norm", "nemo_rl", "grad_clip"),
    ("actor.optimizer.gradient_clipping", "areal", "grad_clip"),
    ("num_return_sequences_in_group", "roll", "n_samples_per_prompt"),
]


@pytest.mark.parametrize("key,fw,cid", KNOWN_METRICS)
def test_known_metric_spellings(key, fw, cid):
    assert canonical_metric(key, fw) == cid


@pytest.mark.parametrize("key,fw,cid", KNOWN_CONFIG)
def test_known_config_spellings(key, fw, cid):
    assert canonical_config(key, fw) == cid


def test_lookup_edges():
    assert canonical_metric("actor/grad_norm", "no_such_framework") is None
    assert canonical_metric("definitely/not/a/metric") is None
    assert canonical_config("") is None
    assert canonical_metric("actor/grad-norm", "verl") is None  # '-' vs '_' is significant
    assert normalise_key("--Max_Norm") == "max_norm"
    assert normalise_key("grad   Norm") == "grad norm"


def test_cross_framework_lookup():
    # unique across frameworks -> resolved without a framework
    assert canonical_metric("actor/grad_norm") == "grad_norm"
    assert canonical_config("--tensor-model-parallel-size") == "tp"
    # the same spelling meaning different things in two frameworks -> None without a framework:
    # OpenRLHF's old --train_batch_size is samples per update, DeepSpeed's train_batch_size likewise
    # named but mapped to train_batch_size
    assert canonical_config("--train_batch_size", "openrlhf") == "ppo_mini_batch_size"
    assert canonical_config("train_batch_size", "deepspeed") == "train_batch_size"
    assert canonical_config("train_batch_size") is None


def test_openrlhf_flag_versions():
    t = load_aliases()
    by_key = {a.key: a for a in t.config["grad_clip"].aliases if a.framework == "openrlhf"}
    assert by_key["--max_norm"].until == "0.10.1.post2"
    assert by_key["--actor.max_norm"].since == "0.10.2"


def test_logprob_mismatch_aliases_say_what_they_measure():
    for a in load_aliases().metrics["logprob_mismatch"].aliases:
        assert a.measures, a.key
