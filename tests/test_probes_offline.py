"""Offline probes: checkpoint folders, stop strings -> stop_token_ids, per-GPU memory estimate.
Everything is built in tmp_path; no network, no GPU, no weights."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo_debug.probes.base import Unknown
from grpo_debug.probes.checkpoint import CheckpointReport, inspect_checkpoint
from grpo_debug.probes.memory import estimate_memory
from grpo_debug.probes.tokenizer import stop_token_ids


def _msgs(rep: CheckpointReport, severity: str = "error") -> str:
    return "\n".join(i.message for i in rep.issues if i.severity == severity)


def _mk(p: Path, text: str = "x") -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


# ------------------------------------------------------------------ checkpoint

def test_megatron_ok_torch_dist(tmp_path):
    _mk(tmp_path / "latest_checkpointed_iteration.txt", "100\n")
    it = tmp_path / "iter_0000100"
    _mk(it / ".metadata")
    _mk(it / "__0_0.distcp")
    _mk(it / "__0_1.distcp")
    rep = inspect_checkpoint(tmp_path)
    assert isinstance(rep, CheckpointReport)
    assert rep.layouts == ["megatron"] and rep.ok, rep.issues
    m = rep.megatron
    assert m.iteration == 100 and m.named_iter_dir == "iter_0000100" and m.named_iter_dir_exists
    assert m.torch_dist and m.distcp_files == 2 and m.format == "torch_dist"


def test_megatron_ok_legacy_release(tmp_path):
    _mk(tmp_path / "latest_checkpointed_iteration.txt", "release")
    _mk(tmp_path / "release" / "mp_rank_00" / "model_optim_rng.pt")
    rep = inspect_checkpoint(tmp_path)
    assert rep.ok and rep.megatron.release and rep.megatron.mp_rank_dirs == ["mp_rank_00"]
    assert rep.megatron.format == "legacy"


def test_megatron_missing_tracker(tmp_path):
    _mk(tmp_path / "iter_0000050" / "mp_rank_00" / "model_optim_rng.pt")
    rep = inspect_checkpoint(tmp_path)
    assert not rep.ok and not rep.megatron.tracker_present
    err = next(i for i in rep.issues if i.severity == "error")
    assert "latest_checkpointed_iteration.txt" in err.message and "slime FAQ" in err.message
    assert "--ckpt-step" in err.fix and "--load" in err.fix and "echo 50" in err.fix


def test_megatron_pointed_at_iteration_dir(tmp_path):
    _mk(tmp_path / "latest_checkpointed_iteration.txt", "7")
    _mk(tmp_path / "iter_0000007" / "mp_rank_00" / "model_optim_rng.pt")
    rep = inspect_checkpoint(tmp_path / "iter_0000007")
    assert not rep.ok and "no latest_checkpointed_iteration.txt" in _msgs(rep)
    assert str(tmp_path) in rep.issues[0].fix


def test_megatron_tracker_names_missing_iter(tmp_path):
    _mk(tmp_path / "latest_checkpointed_iteration.txt", "200")
    _mk(tmp_path / "iter_0000100" / "mp_rank_00" / "model_optim_rng.pt")
    rep = inspect_checkpoint(tmp_path)
    assert rep.megatron.named_iter_dir == "iter_0000200" and rep.megatron.named_iter_dir_exists is False
    assert "iter_0000200" in _msgs(rep) and "does not exist" in _msgs(rep)


def test_megatron_bad_tracker_and_missing_metadata(tmp_path):
    _mk(tmp_path / "latest_checkpointed_iteration.txt", "latest")
    _mk(tmp_path / "iter_0000003" / "__0_0.distcp")
    rep = inspect_checkpoint(tmp_path)
    assert "integer iteration or 'release'" in _msgs(rep)
    assert ".metadata" in _msgs(rep)


def test_deepspeed_layout(tmp_path):
    _mk(tmp_path / "latest", "global_step30")
    _mk(tmp_path / "global_step30" / "mp_rank_00_model_states.pt")
    _mk(tmp_path / "global_step30" / "zero_pp_rank_0_mp_rank_00_optim_states.pt")
    _mk(tmp_path / "zero_to_fp32.py", "# script")
    rep = inspect_checkpoint(tmp_path)
    assert "deepspeed" in rep.layouts and "megatron" not in rep.layouts
    assert rep.deepspeed.global_step_dirs == ["global_step30"] and rep.deepspeed.latest_exists
    w = _msgs(rep, "warning")
    assert "not loadable by plain Megatron-LM" in w
    assert any("zero_to_fp32.py" in i.fix for i in rep.issues)


def test_deepspeed_latest_names_missing_tag(tmp_path):
    _mk(tmp_path / "latest", "global_step99")
    _mk(tmp_path / "global_step10" / "mp_rank_00_model_states.pt")
    rep = inspect_checkpoint(tmp_path)
    assert not rep.ok and "global_step99" in _msgs(rep)


def _hf_config(**over):
    cfg = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "torch_dtype": "bfloat16",
           "vocab_size": 151936, "num_hidden_layers": 28, "hidden_size": 3584}
    cfg.update(over)
    return json.dumps(cfg)


def test_hf_index_missing_shard(tmp_path):
    _mk(tmp_path / "config.json", _hf_config())
    _mk(tmp_path / "tokenizer.json", "{}")
    _mk(tmp_path / "tokenizer_config.json", "{}")
    _mk(tmp_path / "generation_config.json", json.dumps({"eos_token_id": [151645, 151643]}))
    shards = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    wm = {f"layer.{i}.weight": s for i, s in enumerate(shards)}
    _mk(tmp_path / "model.safetensors.index.json", json.dumps({"metadata": {"total_size": 3}, "weight_map": wm}))
    _mk(tmp_path / shards[0], "aaaa")
    _mk(tmp_path / shards[2], "bbbb")
    rep = inspect_checkpoint(tmp_path)
    hf = rep.hf
    assert rep.layouts == ["hf"] and hf.model_type == "qwen2" and hf.architectures == ["Qwen2ForCausalLM"]
    assert hf.vocab_size == 151936 and hf.num_hidden_layers == 28 and hf.torch_dtype == "bfloat16"
    assert hf.generation_eos_token_id == [151645, 151643]
    assert {"tokenizer.json", "tokenizer_config.json"} <= set(hf.tokenizer_files)
    assert hf.missing_shards == [shards[1]]
    assert "1 of 3 shards" in _msgs(rep) and shards[1] in _msgs(rep)


def test_hf_float32_and_missing_tokenizer(tmp_path):
    _mk(tmp_path / "config.json", _hf_config(torch_dtype="float32"))
    _mk(tmp_path / "model.safetensors", "w" * 100)
    rep = inspect_checkpoint(tmp_path)
    assert rep.ok  # warnings only
    assert rep.hf.single_file == "model.safetensors" and rep.hf.weight_bytes == 100
    f32 = next(i for i in rep.issues if "float32" in i.message)
    assert f32.severity == "warning" and "fp16" in f32.message and "bfloat16" in f32.fix
    assert "no tokenizer files" in _msgs(rep, "warning")


def test_hf_lfs_pointer_and_unindexed_shards(tmp_path):
    _mk(tmp_path / "config.json", _hf_config())
    _mk(tmp_path / "tokenizer.json", "{}")
    _mk(tmp_path / "model-00001-of-00002.safetensors", "version https://git-lfs.github.com/spec/v1\noid sha256:ab\n")
    rep = inspect_checkpoint(tmp_path)
    assert rep.hf.lfs_pointer_files == ["model-00001-of-00002.safetensors"]
    assert rep.hf.missing_shards == ["model-00002-of-00002.safetensors"]
    assert "Git-LFS" in _msgs(rep)


def test_missing_path_and_empty_folder(tmp_path):
    rep = inspect_checkpoint(tmp_path / "nope")
    assert isinstance(rep, CheckpointReport) and not rep.exists and not rep.ok
    rep = inspect_checkpoint(tmp_path)
    assert rep.layouts == [] and "no Megatron" in _msgs(rep)


# ------------------------------------------------------------------ tokenizer

@pytest.fixture()
def tok_dir(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "</": 1, "answer": 2, ">": 3, "hello": 4, "world": 5, "<": 6, "think": 7}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(pattern=tokenizers.Regex(r"</|<|>|[a-z]+"), behavior="isolated")
    tok.add_special_tokens(["<|im_end|>", "<|endoftext|>"])  # ids 8, 9
    tok.add_tokens(["</tool_call>"])  # id 10
    tok.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": {"content": "<|im_end|>"}}))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [8, 9]}))
    return tmp_path


def test_stop_tokens_single_vs_multi(tok_dir):
    rep = stop_token_ids(tok_dir, ["<|im_end|>", "</tool_call>", "</answer>"])
    assert not isinstance(rep, Unknown), rep
    by = {r.text: r for r in rep.results}
    assert by["<|im_end|>"].single_token and by["<|im_end|>"].token_id == 8 and by["<|im_end|>"].added_token
    assert by["</tool_call>"].single_token and by["</tool_call>"].token_id == 10
    ans = by["</answer>"]
    assert not ans.single_token and ans.ids == [1, 2, 3] and ans.token_id is None
    assert "cannot be a stop_token_id" in ans.advice and "regex" in ans.advice
    assert rep.stop_token_ids == [8, 10] and rep.multi_token == ["</answer>"]
    assert rep.eos_token == "<|im_end|>" and rep.eos_token_ids == [8, 9]
    assert rep.turn_terminator == "<|im_end|>"
    assert rep.recommended_stop_token_ids == [8, 10, 9]
    assert rep.slime_flag == "--rollout-stop-token-ids 8 10 9"
    assert rep.extra_body == {"stop_token_ids": [8, 10, 9]}


def test_stop_tokens_from_file_path_and_missing(tok_dir, tmp_path):
    rep = stop_token_ids(tok_dir / "tokenizer.json", ["</tool_call>"])
    assert rep.stop_token_ids == [10] and rep.slime_flag.startswith("--rollout-stop-token-ids 10")
    missing = stop_token_ids(tmp_path / "none", ["x"])
    assert isinstance(missing, Unknown) and "tokenizer.json" in missing.reason


# ------------------------------------------------------------------ memory

def test_zero_paper_figure1_numbers():
    base = estimate_memory(params_b=7.5, dp=1, ref_model=False)
    assert base.model_states_bytes_per_param == pytest.approx(16)
    assert base.model_states_gb == pytest.approx(120, rel=1e-6)
    s1 = estimate_memory(params_b=7.5, zero_stage=1, dp=64, ref_model=False)
    s2 = estimate_memory(params_b=7.5, zero_stage=2, dp=64, ref_model=False)
    s3 = estimate_memory(params_b=7.5, zero_stage=3, dp=64, ref_model=False)
    assert s1.model_states_gb == pytest.approx(31.4, abs=0.05)
    assert s2.model_states_gb == pytest.approx(16.6, abs=0.05)
    assert s3.model_states_gb == pytest.approx(1.875) and round(s3.model_states_gb, 1) == 1.9
    fsdp = estimate_memory(params_b=7.5, fsdp=True, dp=64, ref_model=False)
    assert fsdp.model_states_gb == pytest.approx(s3.model_states_gb)
    # stage 3 at dp=1 saves nothing
    assert estimate_memory(params_b=7.5, zero_stage=3, dp=1).model_states_gb == pytest.approx(120)
    for c in base.components:
        assert c.formula and c.source


def test_lora_much_smaller_than_full():
    full = estimate_memory(params_b=7, hidden_size=4096, num_layers=32, vocab_size=32000)
    lora = estimate_memory(params_b=7, hidden_size=4096, num_layers=32, vocab_size=32000, lora_rank=32)
    assert lora.trainable_params_b == pytest.approx(2 * 32 * 4096 * 32 * 7 / 1e9)
    assert lora.model_states_gb < full.model_states_gb / 6
    assert next(c for c in lora.components if c.name == "ref_model").gib == 0
    assert lora.total_gib < full.total_gib / 3


def test_7b_full_finetune_does_not_fit_4090():
    est = estimate_memory(params_b=7, gpu="rtx4090")
    assert est.gpu == "rtx4090" and est.gpu_memory_gib == 24
    assert est.fits is False and est.headroom_gib < 0 and est.verdict.startswith("does not fit")
    assert any("7B" in a for a in est.assumptions)


def test_rollout_fraction_adds_fraction_of_memory():
    a = estimate_memory(params_b=1.5, gpu="h100")
    b = estimate_memory(params_b=1.5, gpu="h100", rollout_mem_fraction=0.5)
    assert b.total_gib - a.total_gib == pytest.approx(0.5 * 80)
    assert any(c.name == "rollout_engine" for c in b.components)


def test_memory_from_config_json_and_errors(tmp_path):
    cfg = {"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
           "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "hidden_act": "silu",
           "tie_word_embeddings": False}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    est = estimate_memory(config_json=str(tmp_path), gpu="h200")
    assert est.params_b == pytest.approx(7.6, abs=0.1)  # Qwen2.5-7B: 7.61B
    assert est.hidden_size == 3584 and est.num_layers == 28 and est.vocab_size == 152064
    logits = next(c for c in est.components if c.name == "logits")
    assert logits.gib == pytest.approx(4096 * 152064 * 4 / 2**30)
    assert isinstance(estimate_memory(), Unknown)
    assert isinstance(estimate_memory(params_b=7, optimizer="lion"), Unknown)
    unk_gpu = estimate_memory(params_b=1, gpu="tpu")
    assert unk_gpu.fits is None
