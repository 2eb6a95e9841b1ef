"""Issue 24, the rules an independent check found wrong: each fact checked against the framework's source, and the
rule's behaviour on real text (the framework's own messages, configs and log lines) through triage."""
from __future__ import annotations

import pytest

from grpo_debug.skills.loader import default_rules
from grpo_debug.tools.triage import triage_text

RULES = {r.id: r for r in default_rules()}

# Megatron's own Muon functional test (tests/functional_tests/test_cases/moe/
# gpt3_moe_mcore_te_ep8_resume_torch_dist_muon/model_config.yaml @ core_v0.19.0), MODEL_ARGS excerpt
MEGATRON_MUON_TEST = """ENV_VARS:
  CUDA_DEVICE_MAX_CONNECTIONS: 1
MODEL_ARGS:
  --num-layers: 12
  --hidden-size: 512
  --micro-batch-size: 4
  --global-batch-size: 32
  --lr: 0.00015
  --clip-grad: 1.0
  --bf16: true
  --optimizer: muon
  --muon-momentum: 0.9
  --muon-scale-mode: spectral
TEST_TYPE: ckpt-resume
"""
LAUNCH = "torchrun --nproc-per-node 8 pretrain_gpt.py --optimizer dist_muon --clip-grad 1.0 --lr 2e-4 --bf16\n"


def _log(points: list[tuple[str, str]]) -> str:
    """Megatron training_log lines (megatron/training/training.py) with the given lm loss / grad norm."""
    return "".join(f" iteration {i * 10:8d}/    2000 | learning rate: 2.000000E-04 | global batch size:    32 | "
                   f"lm loss: {loss} | loss scale: 1.0 | grad norm: {g} | number of skipped iterations:   0 |\n"
                   for i, (loss, g) in enumerate(points, 1))


STALL = _log([("2.41E+00", "5.1E+07"), ("2.10E+00", "8.3E+07"), ("1.87E+00", "2.4E+08"), ("1.65E+00", "9.7E+08"),
              ("1.5810E+00", "3.1E+09"), ("1.5802E+00", "8.8E+09"), ("1.5809E+00", "2.2E+10"),
              ("1.5805E+00", "5.6E+10"), ("1.5807E+00", "1.1E+11"), ("1.5804E+00", "2.0E+11")])
HEALTHY = _log([(f"{9.4 - 0.4 * i:.4E}", f"{3.2 / (1 + 0.3 * i):.3E}") for i in range(10)])


def _causes(res) -> dict[str, object]:
    return {c.rule_id: c for f in res.findings for c in f.causes}


def _finding(res, rule_id: str):
    return next((f for f in res.findings if any(c.rule_id == rule_id for c in f.causes)), None)


# ---------------------------------------------------------------------------------------------- Muon clipping

@pytest.mark.parametrize("text,fmt", [(MEGATRON_MUON_TEST, "yaml"), (LAUNCH, None), (LAUNCH + HEALTHY, None)])
def test_muon_under_clipping_without_the_stall_is_no_finding_and_no_clip_off_edit(text, fmt):
    res = triage_text(text, hint=fmt)
    assert "megatron-muon-global-clip-stall" not in _causes(res)
    assert not any("clip_grad" in (f.patch or {}) for f in res.findings)


def test_the_stall_of_5394_raises_the_rule_with_its_clip_off_patch():
    res = triage_text(LAUNCH + STALL)
    f = _finding(res, "megatron-muon-global-clip-stall")
    assert f is not None and f.confidence == "medium", [(x.symptom, x.confidence) for x in res.findings]
    assert (f.patch or {}).get("clip_grad") == 0
    assert "megatron-muon-global-clip-stall" not in _causes(triage_text(LAUNCH.replace("1.0", "0") + STALL))


def test_deepspeed_muon_config_alone_is_a_low_risk_without_an_edit():
    cfg = ('{"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "Muon", "params": {"lr": 0.02}}, '
           '"zero_optimization": {"stage": 2}}\n')
    res = triage_text(cfg, hint="json")
    c = _causes(res).get("deepspeed-muon-gradient-clipping-conflict")
    assert c is not None and c.confidence == "low"
    f = _finding(res, "deepspeed-muon-gradient-clipping-conflict")
    assert "gradient_clipping" not in (f.patch or {}) and not f.edits
    off = cfg.replace('"optimizer"', '"gradient_clipping": 0.0, "optimizer"')
    assert "deepspeed-muon-gradient-clipping-conflict" not in _causes(triage_text(off, hint="json"))


def test_deepspeed_muon_omitted_clip_is_silent_before_0_19_3():
    cfg = ('{"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "Muon", "params": {"lr": 0.02}}, '
           '"zero_optimization": {"stage": 2}}\n')
    assert "deepspeed-muon-gradient-clipping-conflict" not in _causes(triage_text(cfg, hint="json", versions="deepspeed=0.19.2"))
    assert "deepspeed-muon-gradient-clipping-conflict" in _causes(triage_text(cfg, hint="json", versions="deepspeed=0.19.3"))


# ---------------------------------------------------------------------------------------------- vLLM compile cache

COMPILE = ("TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.name=vllm\n"
           "(EngineCore_DP0 pid=5120) INFO 10-20 08:11:02 [core.py:77] Initializing a V1 LLM engine (v{v}) with config: "
           "model='Qwen/Qwen2.5-7B-Instruct'\n"
           "(EngineCore_DP0 pid=5120) RuntimeError: vLLM failed to compile the model. The most likely reason for this "
           "is that a previous compilation failed, leading to a corrupted compilation artifact. We recommend trying to "
           "remove ~/.cache/vllm/torch_compile_cache and try again to see the real issue.\n")


@pytest.mark.parametrize("version,fires", [("0.10.2", True), ("0.11.0", True), ("0.11.1", False), ("0.33.0", False)])
def test_inductor_caches_disabled_is_gated_by_the_vllm_release_of_pr_27637(version, fires):
    assert ("vllm-inductor-caches-disabled" in _causes(triage_text(COMPILE.format(v=version)))) is fires


def test_inductor_rule_names_vllm_not_pytorch_as_the_fix():
    r = RULES["vllm-inductor-caches-disabled"]
    assert r.versions["vllm"].fixed_in == "0.11.1"
    assert "PyTorch 2.8 to fix" not in r.fix.summary and "0.11.1" in r.fix.summary


# ---------------------------------------------------------------------------------------------- spellings per release

def test_verl_fix_names_grad_clip_before_0_8_and_optim_clip_grad_from_0_8():
    text = "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo actor_rollout_ref.actor.grad_clip=0.0\n"
    old = _finding(triage_text(text, versions="verl=0.7.1"), "gradient-clipping-disabled")
    text8 = text.replace("actor.grad_clip", "actor.optim.clip_grad")  # 0.8.0 reads optim.clip_grad only
    new = _finding(triage_text(text8, versions="verl=0.8.0"), "gradient-clipping-disabled")
    assert old.causes[0].fix.startswith("Your verl 0.7.1 spells it actor_rollout_ref.actor.grad_clip"), old.causes[0].fix
    assert new.causes[0].fix.startswith("Your verl 0.8.0 spells it actor_rollout_ref.actor.optim.clip_grad"), new.causes[0].fix


def test_removed_and_renamed_spellings_carry_their_release_bounds():
    ids = {(i.name, i.framework): i for r in RULES.values() for i in r.identifiers}
    assert ids[("max_prompt_length", "trl")].until == "0.28.0"
    sg = ids[("--cuda-graph-max-bs", "sglang")]
    assert (sg.until, sg.replaced_by) == ("0.5.20", "--cuda-graph-max-bs-decode")
    assert ids[("actor_rollout_ref.actor.grad_clip", "verl")].until == "0.8.0"
    for rid in ("context-budget-exceeds-model", "context-length-exceeded"):
        assert "0.28.0" in RULES[rid].fix.summary  # TRL max_prompt_length named with its removal
    assert "--cuda-graph-max-bs-decode" in RULES["cuda-graph-capture-oom"].fix.summary


# ---------------------------------------------------------------------------------------------- vLLM V1 KV cache

V1_KV = ("(EngineCore_DP0 pid=2817) ERROR 11-20 10:02:11 [core.py:1012] ValueError: To serve at least one request with "
         "the model's max seq len (32768), (6.0 GiB KV cache is needed, which is larger than the available KV cache "
         "memory (2.35 GiB). Based on the available memory, the estimated maximum model length is 12832. Try "
         "increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing "
         "`max_model_len` when initializing the engine. See https://docs.vllm.ai/en/latest/configuration/"
         "conserving_memory/ for more details.\n")


def test_vllm_v1_kv_cache_message_fires_through_triage_as_the_kv_cache_rule():
    res = triage_text(V1_KV)
    assert res.findings and res.findings[0].causes[0].rule_id == "engine-kv-cache-too-small"
    assert not any(f.symptom == "config_error" for f in res.findings), [f.symptom for f in res.findings]
