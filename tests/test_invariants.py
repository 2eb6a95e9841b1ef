"""Generic config invariants (tools/engine/invariants.py) on real inputs: parallel sizes against the world size,
Megatron layers against PP, DeepSpeed's batch identity, TRL's group size, chunked-prefill token budget,
colocated memory fractions."""
from __future__ import annotations

from pathlib import Path

from grpo_debug.tools.engine.facts import extract_facts
from grpo_debug.tools.engine.invariants import INVARIANTS
from grpo_debug.tools.engine.normalize import normalize
from grpo_debug.tools.inputs import looks_like_document
from grpo_debug.tools.triage import triage, triage_text

SHARED = Path("/work/shared/cases")
CORPUS = Path(__file__).parent / "data" / "corpus" / "cases"


def _facts(text: str, hint: str | None = None):
    return extract_facts(normalize(text), text if looks_like_document(text, hint) else None, hint)


def test_trl_single_generation_is_a_config_error_with_trls_own_text():
    text = "num_generations: 1\nper_device_train_batch_size: 8\n"
    res = INVARIANTS["trl_single_generation"](_facts(text, "yaml"))
    assert res[0] == [1] and "GRPO requires at least 2 generations per prompt" in res[1]
    r = triage_text(text, hint="yaml")
    assert r.findings[0].symptom == "config_error" and "num_generations" in r.findings[0].fix
    assert "reward_zero" not in [f.symptom for f in r.findings]  # TRL refuses; nothing degrades silently


def test_shared_trl_case_names_num_generations():
    p = SHARED / "trl-num-generations-one-refuses" / "input.yaml"
    if p.exists():
        f = triage(path=str(p)).findings[0]
        assert f.symptom == "config_error" and 28 in {e.line for e in f.evidence}


def test_deepspeed_identity_without_world_size():
    text = '{"train_batch_size": 100, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 4}'
    lines, msg, patch = INVARIANTS["deepspeed_batch_identity"](_facts(text, "json"))
    assert "not a multiple" in msg and patch == {"train_batch_size": 96}
    assert INVARIANTS["deepspeed_batch_identity"](_facts(text.replace("100", "128"), "json")) is None


def test_parallel_sizes_and_layers_from_launch_flags():
    sh = ("torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --tensor-model-parallel-size 4 "
          "--pipeline-model-parallel-size 4 --num-layers 46\n")
    fs = _facts(sh)
    assert "not divisible by TP 4 x PP 4" in INVARIANTS["parallel_sizes_vs_world"](fs)[1]
    assert "46 is not divisible by pipeline_model_parallel_size 4" in INVARIANTS["num_layers_vs_pipeline"](fs)[1]
    ok = _facts(sh.replace("--pipeline-model-parallel-size 4", "--pipeline-model-parallel-size 2"))
    assert INVARIANTS["parallel_sizes_vs_world"](ok) is None and INVARIANTS["num_layers_vs_pipeline"](ok) is None


def test_megatron_validate_args_traceback_names_the_uneven_split():
    f = triage(path=str(CORPUS / "megatron-glm45air-46-layers-pp4-not-divisible" / "input.log")).findings[0]
    assert f.symptom == "config_error" and {39, 40} & {e.line for e in f.evidence}
    assert "decoder_first_pipeline_num_layers" in f.fix or "decoder_first_pipeline_num_layers" in f.causes[0].fix


def test_batched_tokens_below_context_only_with_chunked_prefill_off():
    on = "actor_rollout_ref:\n  rollout:\n    enable_chunked_prefill: true\n    max_num_batched_tokens: 8192\n" \
         "    max_model_len: 32768\n"
    assert INVARIANTS["batched_tokens_below_context"](_facts(on, "yaml")) is None
    off = on.replace("true", "false")
    assert INVARIANTS["batched_tokens_below_context"](_facts(off, "yaml"))[2] == {
        "actor_rollout_ref.rollout.max_num_batched_tokens": 32768}


def test_colocated_fraction_quiet_when_the_engine_sleeps():
    text = "vllm_mode: colocate\nvllm_gpu_memory_utilization: 0.95\n"
    assert INVARIANTS["colocated_memory_fraction"](_facts(text, "yaml"))
    assert INVARIANTS["colocated_memory_fraction"](_facts(text + "vllm_enable_sleep_mode: true\n", "yaml")) is None


def test_context_budget_checks_every_limit_and_max_model_len_against_positions():
    text = ("data:\n  max_prompt_length: 1024\n  max_response_length: 8192\nmax_model_len: 16384\n"
            "max_position_embeddings: 8192\n")
    lines, msg, patch = INVARIANTS["context_budget"](_facts(text, "yaml"))
    assert "max_position_embeddings 8192" in msg and patch == {"data.max_response_length": 7168}
    ok = "max_model_len: 16384\nmax_position_embeddings: 8192\nother: 1\n"
    assert "max_model_len 16384 > the model's max_position_embeddings 8192" in INVARIANTS["context_budget"](_facts(ok, "yaml"))[1]
