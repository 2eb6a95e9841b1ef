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
]
KNOWN_CONFIG = [
    ("actor_rollout_ref.actor.optim.clip_grad", "verl", "grad_clip"),
    ("data.train_batch_size", "verl", "train_batch_size"),
    ("actor_rollout_ref.rollout.tensor_model_parallel_size", "verl", "tp"),
    ("actor_rollout_ref.rollout.gpu_memory_utilization", "verl", "gpu_memory_utilization"),
    ("  trainer.N_GPUS_per_node ", "verl", "n_gpus_per_node"),
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
