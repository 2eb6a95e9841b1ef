"""`grpo-debug check` on configs and launch scripts shaped like each framework's own examples.

tests/configs/ holds one healthy (``*_ok.*``) and one broken (``*_bad.*``) input per framework:

- verl: a ``main_ppo`` Hydra-override launch (examples/grpo_trainer/run_*.sh) and a flattened
  trainer YAML (verl/trainer/config/_generated_ppo_trainer.yaml, with its ``${oc.select:...}``
  interpolations);
- slime: a ``run-qwen3-4B``-style script (bash arrays, ``ray start`` + ``ray job submit ... train.py``);
- Megatron-LM: a ``train_gpt3_175b_distributed.sh``-style torchrun script with bash arrays;
- DeepSpeed: ZeRO-2 and ZeRO-3 JSON configs, and an HF-Trainer launch that writes its ZeRO config
  with a heredoc;
- accelerate: a ``deepspeed_config:`` YAML (trl examples/accelerate_configs/deepspeed_zero3.yaml);
- TRL: an open-r1 ``recipes/*/grpo/config_*.yaml`` GRPO recipe;
- OpenRLHF: a ``ray job submit ... openrlhf.cli.train_ppo_ray`` launch.

Each ``*_bad`` file differs from its ``*_ok`` twin only in the planted mistakes listed in BAD. Mistakes
that no rule detects yet, wrong edits and parser gaps are strict xfails that name the gap.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from grpo_debug.server.cli import main
from grpo_debug.tools.check_config import ConfigParseError, check_config
from grpo_debug.tools.engine.facts import FactSet
from grpo_debug.tools.models import Finding, TriageResult
from grpo_debug.tools.triage import build_context

CONFIGS = Path(__file__).parent / "configs"
ERROR_SYMPTOMS = {"config_error", "nan_inf", "grad_norm_spike"}


@functools.lru_cache(maxsize=None)
def _check(name: str) -> TriageResult:
    return check_config(path=CONFIGS / name)


@functools.lru_cache(maxsize=None)
def _facts(name: str) -> FactSet:
    p = CONFIGS / name
    hint = {".yaml": "yaml", ".yml": "yaml", ".json": "json"}.get(p.suffix)
    ctx, _ = build_context(p.read_text(encoding="utf-8"), hint)
    return ctx.facts


def _line_of(name: str, needle: str, after: str | None = None) -> int:
    """1-based number of the first line of ``name`` containing ``needle`` (after the line containing
    ``after``, when given)."""
    lines = (CONFIGS / name).read_text(encoding="utf-8").splitlines()
    start = 0
    if after is not None:
        start = next(i for i, ln in enumerate(lines) if after in ln) + 1
    for i in range(start, len(lines)):
        if needle in lines[i]:
            return i + 1
    raise AssertionError(f"{needle!r} not in {name}")


def _finding_of(res: TriageResult, rule_id: str) -> Finding | None:
    return next((f for f in res.findings if any(c.rule_id == rule_id for c in f.causes)), None)


def _rule_ids(res: TriageResult) -> set[str]:
    return {c.rule_id for f in res.findings for c in f.causes}


OK_FILES = sorted(p.name for p in CONFIGS.glob("*_ok.*"))
BAD_FILES = sorted(p.name for p in CONFIGS.glob("*_bad.*"))


def test_every_framework_has_an_ok_and_a_bad_file():
    assert len(OK_FILES) >= 8
    assert {n.replace("_ok.", ".") for n in OK_FILES} == {n.replace("_bad.", ".") for n in BAD_FILES}


# ------------------------------------------------------------------------------------------ parsing

# (file, key, expected value, needle of the line that sets it)
FACTS = [
    # verl launch: Hydra overrides; ${VAR:-default} and ${VAR} expansion from earlier assignments
    ("verl_grpo_run_ok.sh", "actor_rollout_ref.rollout.n", 5, "actor_rollout_ref.rollout.n=$N_SAMPLES"),
    ("verl_grpo_run_ok.sh", "trainer.n_gpus_per_node", 8, "trainer.n_gpus_per_node=${GPUS_PER_NODE}"),
    ("verl_grpo_run_ok.sh", "actor_rollout_ref.model.path", "Qwen/Qwen2-7B-Instruct", "model.path=$MODEL_PATH"),
    ("verl_grpo_run_ok.sh", "data.truncation", "error", "data.truncation="),
    ("verl_grpo_run_ok.sh", "data.filter_overlong_prompts", True, "data.filter_overlong_prompts=True"),
    ("verl_grpo_run_ok.sh", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 16, "ppo_micro_batch_size_per_gpu="),
    # verl YAML: OmegaConf interpolations (${oc.select:...} and plain ${a.b}), the quoted 'n' key, lists
    ("verl_ppo_trainer_ok.yaml", "actor_rollout_ref.actor.rollout_n", 5, "rollout_n: ${oc.select:"),
    ("verl_ppo_trainer_ok.yaml", "actor_rollout_ref.rollout.response_length", 2048, "response_length: ${data."),
    ("verl_ppo_trainer_ok.yaml", "actor_rollout_ref.rollout.prompt_length", 1024, "prompt_length: ${oc.select:"),
    ("verl_ppo_trainer_ok.yaml", "actor_rollout_ref.rollout.n_gpus_per_node", 8, "n_gpus_per_node: ${oc.select:"),
    ("verl_ppo_trainer_ok.yaml", "actor_rollout_ref.rollout.n", 5, "'n': 5"),
    ("verl_ppo_trainer_ok.yaml", "trainer.logger", ["console", "wandb"], "logger: [console, wandb]"),
    # slime: flags inside bash arrays, ${VAR} on the train.py line, ray start, the cluster comment
    ("slime_run_qwen3_4b_ok.sh", "n_samples_per_prompt", 8, "--n-samples-per-prompt 8"),
    ("slime_run_qwen3_4b_ok.sh", "max_tokens_per_gpu", 9216, "--max-tokens-per-gpu 9216"),
    ("slime_run_qwen3_4b_ok.sh", "use_dynamic_batch_size", True, "--use-dynamic-batch-size"),
    ("slime_run_qwen3_4b_ok.sh", "eps_clip_high", 0.28, "--eps-clip-high"),
    ("slime_run_qwen3_4b_ok.sh", "advantage_estimator", "grpo", "--advantage-estimator grpo"),
    ("slime_run_qwen3_4b_ok.sh", "actor_num_gpus_per_node", 4, "--actor-num-gpus-per-node ${NUM_GPUS}"),
    ("slime_run_qwen3_4b_ok.sh", "num_gpus_per_node", 4, "--num-gpus-per-node ${NUM_GPUS}"),
    ("slime_run_qwen3_4b_ok.sh", "colocate", True, "--colocate"),
    ("slime_run_qwen3_4b_ok.sh", "ray_start.num_gpus", 4, "ray start --head"),
    ("slime_run_qwen3_4b_ok.sh", "cluster.gpus_per_node", 4, "# cluster: 1 node x 4 GPUs"),
    # Megatron-LM: $VAR and ${VAR:-default} inside a bash array, flags of the training arrays
    ("megatron_pretrain_ok.sh", "nproc_per_node", 8, "--nproc_per_node $GPUS_PER_NODE"),
    ("megatron_pretrain_ok.sh", "nnodes", 2, "--nnodes $NUM_NODES"),
    ("megatron_pretrain_ok.sh", "optimizer", "adam", "--optimizer adam"),
    ("megatron_pretrain_ok.sh", "use_distributed_optimizer", True, "--use-distributed-optimizer"),
    ("megatron_pretrain_ok.sh", "clip_grad", 1.0, "--clip-grad 1.0"),
    ("megatron_pretrain_ok.sh", "tensor_model_parallel_size", 4, "--tensor-model-parallel-size 4"),
    # DeepSpeed JSON: nested keys flattened with their own line
    ("ds_zero2_ok.json", "zero_optimization.stage", 2, '"stage": 2'),
    ("ds_zero2_ok.json", "zero_optimization.overlap_comm", True, '"overlap_comm": true'),
    ("ds_zero2_ok.json", "bf16.enabled", True, '"enabled": true'),
    ("ds_zero2_ok.json", "gradient_clipping", 1.0, '"gradient_clipping"'),
    ("ds_zero3_ok.json", "zero_optimization.stage3_max_live_parameters", 1000000000, "stage3_max_live_parameters"),
    # accelerate YAML with a deepspeed_config: block
    ("accelerate_zero3_ok.yaml", "deepspeed_config.zero_stage", 3, "zero_stage: 3"),
    ("accelerate_zero3_ok.yaml", "deepspeed_config.gradient_clipping", 1.0, "gradient_clipping: 1.0"),
    ("accelerate_zero3_ok.yaml", "num_processes", 8, "num_processes: 8"),
    ("accelerate_zero3_ok.yaml", "mixed_precision", "bf16", "mixed_precision: bf16"),
    # TRL/open-r1 recipe
    ("trl_grpo_recipe_ok.yaml", "num_generations", 7, "num_generations: 7"),
    ("trl_grpo_recipe_ok.yaml", "per_device_train_batch_size", 16, "per_device_train_batch_size: 16"),
    ("trl_grpo_recipe_ok.yaml", "reward_funcs", ["accuracy", "format", "tag_count"], "reward_funcs:"),
    ("trl_grpo_recipe_ok.yaml", "learning_rate", 2e-5, "learning_rate: 2.0e-05"),
    ("trl_grpo_recipe_ok.yaml", "save_strategy", "epoch", "save_strategy:"),
    # OpenRLHF underscore flags after `ray job submit ... --`
    ("openrlhf_ppo_ray_ok.sh", "n_samples_per_prompt", 8, "--n_samples_per_prompt 8"),
    ("openrlhf_ppo_ray_ok.sh", "advantage_estimator", "group_norm", "--advantage_estimator group_norm"),
    ("openrlhf_ppo_ray_ok.sh", "zero_stage", 3, "--zero_stage 3"),
    ("openrlhf_ppo_ray_ok.sh", "colocate_all_models", True, "--colocate_all_models"),
    ("openrlhf_ppo_ray_ok.sh", "actor_learning_rate", 5e-7, "--actor_learning_rate 5e-7"),
    # HF Trainer + DeepSpeed: the heredoc JSON block and the trainer flags of the same script
    ("deepspeed_hf_launch_ok.sh", "zero_optimization.overlap_comm", False, '"overlap_comm": false'),
    ("deepspeed_hf_launch_ok.sh", "gradient_clipping", "auto", '"gradient_clipping": "auto"'),
    ("deepspeed_hf_launch_ok.sh", "torch_compile", True, "--torch_compile True"),
    ("deepspeed_hf_launch_ok.sh", "num_gpus", 8, "deepspeed --num_gpus ${NUM_GPUS}"),
    ("deepspeed_hf_launch_ok.sh", "output_dir", "./output/qwen2.5-7b-sft", "--output_dir ${OUTPUT_DIR}"),
]


@pytest.mark.parametrize("name,key,value,needle", FACTS, ids=[f"{n}:{k}" for n, k, _, _ in FACTS])
def test_facts_value_and_line(name, key, value, needle):
    fs = _facts(name)
    fact = fs.get(key)
    assert fact is not None, f"{key} not read from {name}"
    assert fs.value(key) == value
    assert type(fs.value(key)) is type(value)
    assert fact.line == _line_of(name, needle)


def test_quoted_list_override_is_a_list():
    assert _facts("verl_grpo_run_ok.sh").value("trainer.logger") == ["console", "wandb"]


@pytest.mark.parametrize("name,framework", [
    ("verl_grpo_run_ok.sh", "verl"), ("verl_ppo_trainer_ok.yaml", "verl"),
    ("slime_run_qwen3_4b_ok.sh", "slime"), ("megatron_pretrain_ok.sh", "megatron"),
    ("ds_zero2_ok.json", "deepspeed"), ("ds_zero3_ok.json", "deepspeed"), ("accelerate_zero3_ok.yaml", "deepspeed"),
    ("trl_grpo_recipe_ok.yaml", "trl"), ("openrlhf_ppo_ray_ok.sh", "openrlhf"),
    ("deepspeed_hf_launch_ok.sh", "deepspeed"),
])
def test_framework_detected(name, framework):
    assert f"framework:{framework}" in _check(name).coverage.formats


# ------------------------------------------------------------------------------------ healthy files

@pytest.mark.parametrize("name", OK_FILES)
def test_ok_file_has_no_error_level_finding(name):
    res = _check(name)
    assert res.coverage.config_facts >= 10, f"{name}: only {res.coverage.config_facts} settings read"
    errors = [(f.symptom, [c.rule_id for c in f.causes]) for f in res.findings if f.symptom in ERROR_SYMPTOMS]
    assert errors == []


# ------------------------------------------------------------------------------------- broken files

# file -> rule id -> (needle of the planted line the evidence must include, text the fixing edit's `new`
# must contain; None where no edit is expected). Needles are (text, after) pairs when a text repeats.
BAD: dict[str, dict[str, tuple[str | tuple[str, str], str | None]]] = {
    "verl_grpo_run_bad.sh": {
        # entropy bonus with GRPO
        "verl-grpo-entropy-coeff": ("actor.entropy_coeff=0.001", "actor_rollout_ref.actor.entropy_coeff=0 "),
        # ppo_mini_batch_size 16 x n 2 / 8 GPUs = 4 per rank < ppo_micro_batch_size_per_gpu 16
        "verl-micro-batch-exceeds-mini-batch": ("ppo_mini_batch_size=16", "ppo_micro_batch_size_per_gpu=4 "),
        # N_SAMPLES=${N_SAMPLES:-2}: evidence is the override that uses it
        "grpo-group-size-below-four": ("actor_rollout_ref.rollout.n=$N_SAMPLES", "actor_rollout_ref.rollout.n=4 "),
    },
    "verl_ppo_trainer_bad.yaml": {
        # free_cache_engine: false with rollout mode: async
        "verl-free-cache-engine-no-weight-sync": ("free_cache_engine: false", "free_cache_engine: true"),
        # 100 x n 5 = 500 not divisible by 8 GPUs
        "verl-train-batch-not-divisible": ("train_batch_size: 100", "train_batch_size: 104"),
        # lora_rank 64 with the vLLM rollout
        "lora-rank64-vllm-missing-eos": ("lora_rank: 64", "lora_rank: 32"),
    },
    "slime_run_qwen3_4b_bad.sh": {
        # --colocate with 4 GPUs per node and no --num-gpus-per-node (default 8)
        "slime-colocate-gpus-per-node": ("   --colocate \\", "gpus_per_node 4"),
        # --max-tokens-per-gpu without --use-dynamic-batch-size
        "slime-max-tokens-per-gpu-without-dynamic-batch": ("--max-tokens-per-gpu 9216", "dynamic"),
    },
    "megatron_pretrain_bad.sh": {
        # --optimizer muon with --use-distributed-optimizer / --overlap-grad-reduce (the rule has no patch)
        "megatron-muon-unsupported-options": ("--optimizer muon", None),
        # Muon under global clipping (Megatron-LM #5394) needs the stall in the log: a launch script alone is
        # Megatron's own tested setup and gets no --clip-grad 0 (tests/test_issue24_rules.py)
    },
    "ds_zero2_bad.json": {
        # no "gradient_clipping" at all (old default 0.0 = off): the edit adds the key
        "deepspeed-gradient-clipping-off": ('"stage": 2', '"gradient_clipping": 1.0'),
        # fp16.enabled and bf16.enabled both true
        "precision-fp16-and-bf16": (('"enabled": true', '"fp16"'), '"enabled": false'),
    },
    "ds_zero3_bad.json": {
        # train_batch_size 16 = micro 2 x accumulation 8 x dp 1
        "deepspeed-zero3-single-rank": ('"train_batch_size": 16', '"stage": 2'),
    },
    "accelerate_zero3_bad.yaml": {
        # deepspeed_config.gradient_clipping: 0.0
        "deepspeed-gradient-clipping-off": ("gradient_clipping: 0.0", "gradient_clipping: 1.0"),
    },
    "trl_grpo_recipe_bad.yaml": {
        # num_generations 3 (< 4; also 16 x 7 x 4 = 448 not divisible by 3)
        "grpo-group-size-below-four": ("num_generations: 3", "num_generations: 4"),
        # use_peft with lora_r 64 and use_vllm
        "lora-rank64-vllm-missing-eos": ("lora_r: 64", "lora_r: 32"),
        # bf16: true and fp16: true (the edit is wrong: see the xfail below)
        "precision-fp16-and-bf16": ("fp16: true", None),
    },
    "openrlhf_ppo_ray_bad.sh": {
        # --max_norm 0 disables clipping (the group-size and LoRA mistakes are gaps: xfails below)
        "gradient-clipping-disabled": ("--max_norm 0", "--max_norm 1.0"),
    },
    "deepspeed_hf_launch_bad.sh": {
        # ZeRO-2 overlap_comm: true in the heredoc config with --torch_compile True (DeepSpeed #8061)
        "deepspeed-overlap-comm-compile-nan": ('"overlap_comm": true', '"overlap_comm": false'),
    },
}
CASES = [(n, r, ln, new) for n, rules in BAD.items() for r, (ln, new) in rules.items()]


def test_bad_table_covers_every_bad_file():
    assert set(BAD) == set(BAD_FILES)


@pytest.mark.parametrize("name,rule_id,needle,new", CASES, ids=[f"{n}:{r}" for n, r, _, _ in CASES])
def test_bad_file_planted_mistake_found(name, rule_id, needle, new):
    res = _check(name)
    f = _finding_of(res, rule_id)
    assert f is not None, f"{rule_id} not among {sorted(_rule_ids(res))}"
    planted = _line_of(name, *needle) if isinstance(needle, tuple) else _line_of(name, needle)
    assert planted in [e.line for e in f.evidence], f"evidence {[e.line for e in f.evidence]} misses line {planted}"
    if new is not None:
        norm = new.replace("-", "_")  # flag spelling is checked separately (test_slime_added_flag_uses_dashes)
        assert any(norm in e.new.replace("-", "_") for e in f.edits), [e.new for e in f.edits]


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_file_has_an_edit_with_the_corrected_value(name):
    res = _check(name)
    wanted = [new for new_rule in BAD[name].values() if (new := new_rule[1])]
    edits = [e.new for f in res.findings for e in f.edits]
    if not wanted:  # megatron: the Muon rule's edit removes flags; a launch script alone never gets --clip-grad 0
        assert edits and not any("clip-grad 0" in e or "clip_grad 0" in e for e in edits), edits
        return
    assert any(w.replace("-", "_") in e.replace("-", "_") for w in wanted for e in edits), edits


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_edits_replace_the_line_they_name(name):
    """An edit that names a line quotes that line exactly as it is in the file."""
    lines = (CONFIGS / name).read_text(encoding="utf-8").splitlines()
    for f in _check(name).findings:
        for e in f.edits:
            if e.line is not None:
                assert e.old == lines[e.line - 1]
                assert e.new != e.old


# ------------------------------------------------------------------ planted mistakes not (well) handled

def test_openrlhf_group_norm_with_two_samples():
    assert "grpo-group-size-below-four" in _rule_ids(_check("openrlhf_ppo_ray_bad.sh"))


def test_openrlhf_lora_rank_64_with_vllm_engines():
    assert "lora-rank64-vllm-missing-eos" in _rule_ids(_check("openrlhf_ppo_ray_bad.sh"))


def test_accelerate_zero3_on_one_process():
    assert "deepspeed-zero3-single-rank" in _rule_ids(_check("accelerate_zero3_bad.yaml"))


TRL_NOT_DIVISIBLE = (CONFIGS / "trl_grpo_recipe_ok.yaml").read_text(encoding="utf-8").replace(
    "num_generations: 7", "num_generations: 6")


def _has_rule(rule_id: str) -> bool:
    from grpo_debug.skills.loader import default_rules

    return any(r.id == rule_id for r in default_rules())


def test_trl_generation_batch_not_divisible_by_num_generations():
    """per_device_train_batch_size 16 x num_processes 7 x gradient_accumulation_steps 4 = 448 is not a
    multiple of num_generations 6 (TRL GRPOConfig raises at startup)."""
    if not _has_rule("trl-generations-not-divisible"):
        pytest.xfail("rule gap: no config rule checks TRL's effective batch against num_generations")
    res = check_config(text=TRL_NOT_DIVISIBLE)
    f = _finding_of(res, "trl-generations-not-divisible")
    assert f is not None and f.symptom == "config_error", sorted(_rule_ids(res))
    line = TRL_NOT_DIVISIBLE.splitlines().index("num_generations: 6") + 1
    assert line in [e.line for e in f.evidence]
    new = [int(e.new.split(":")[1]) for e in f.edits if e.line == line]
    assert new and 448 % new[0] == 0, [(e.line, e.new) for e in f.edits]


def test_trl_divisibility_fix_keeps_groups_of_four():
    if not _has_rule("trl-generations-not-divisible"):
        pytest.skip("trl-generations-not-divisible is not in the rule base")
    f = _finding_of(_check("trl_grpo_recipe_bad.yaml"), "trl-generations-not-divisible")
    assert f is not None
    assert f.patch and f.patch.get("num_generations", 0) >= 4, f.patch


def test_megatron_muon_finding_has_an_edit():
    f = _finding_of(_check("megatron_pretrain_bad.sh"), "megatron-muon-unsupported-options")
    assert f is not None and f.edits


def test_trl_fp16_edit_rewrites_the_fp16_line():
    f = _finding_of(_check("trl_grpo_recipe_bad.yaml"), "precision-fp16-and-bf16")
    planted = _line_of("trl_grpo_recipe_bad.yaml", "fp16: true")
    assert any(e.line == planted and e.new == "fp16: false" for e in f.edits), [(e.line, e.new) for e in f.edits]


def test_trl_edits_use_only_trl_keys():
    keys = [e.key for f in _check("trl_grpo_recipe_bad.yaml").findings for e in f.edits]
    assert not [k for k in keys if k.startswith("actor_rollout_ref.")], keys


def test_slime_added_flag_uses_dashes():
    res = _check("slime_run_qwen3_4b_bad.sh")
    news = [ln.strip() for f in res.findings for e in f.edits for ln in e.new.split("\n")]
    assert "--num-gpus-per-node 4" in news and "--use-dynamic-batch-size" in news, news
    assert all(e.line is not None for f in res.findings for e in f.edits)  # placed inside the bash array


# Valid bash from slime's own scripts/run-qwen3-4B.sh: a multi-line double-quoted JSON assignment.
SLIME_RUNTIME_ENV = """\
#!/bin/bash
HAS_NVLINK=1
RUNTIME_ENV_JSON="{
  \\"env_vars\\": {
    \\"PYTHONPATH\\": \\"/root/Megatron-LM/\\",
    \\"NCCL_NVLS_ENABLE\\": \\"${HAS_NVLINK}\\"
  }
}"
ray job submit --address="http://127.0.0.1:8265" \\
   --runtime-env-json="${RUNTIME_ENV_JSON}" \\
   -- python3 train.py --colocate --actor-num-nodes 1 --actor-num-gpus-per-node 8
"""


def test_multiline_quoted_shell_string_parses():
    check_config(text=SLIME_RUNTIME_ENV)


# ------------------------------------------------------------------------------------ malformed input

MALFORMED = [
    ("bad.yaml", "data:\n  train_batch_size: 512\n   max_prompt_length: 1024\ntrainer:\n  nnodes: 1\n", 3),
    ("bad.json", '{\n  "train_batch_size": 256,\n  "gradient_clipping": 1.0,\n}\n', 4),
    ("bad.sh", "#!/bin/bash\nset -x\npython3 -m verl.trainer.main_ppo \\\n    algorithm.adv_estimator=grpo \\\n"
               "    trainer.project_name='verl_grpo \\\n    trainer.nnodes=1\n", 3),
]


@pytest.mark.parametrize("fname,text,line", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_input_names_the_line(tmp_path, fname, text, line):
    p = tmp_path / fname
    p.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigParseError, match=rf"\bline {line}\b") as ei:
        check_config(path=p)
    assert str(p) in str(ei.value)


def test_malformed_text_without_path_is_sniffed():
    with pytest.raises(ConfigParseError, match=r"invalid JSON at line 4"):
        check_config(text=MALFORMED[1][1])


# ------------------------------------------------------------------------------------------------ CLI

def test_cli_check_json_bad_file(capsys):
    assert main(["check", str(CONFIGS / "verl_ppo_trainer_bad.yaml"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["findings"]
    ids = {c["rule_id"] for f in data["findings"] for c in f["causes"]}
    assert {"verl-train-batch-not-divisible", "verl-free-cache-engine-no-weight-sync"} <= ids
    assert any(e["new"] == "  train_batch_size: 104" for f in data["findings"] for e in f["edits"])
    TriageResult.model_validate(data)


def test_cli_check_json_ok_file(capsys):
    assert main(["check", str(CONFIGS / "slime_run_qwen3_4b_ok.sh"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert not [f for f in data["findings"] if f["symptom"] in ERROR_SYMPTOMS]
    assert data["coverage"]["config_facts"] > 40


def test_cli_check_malformed_yaml_exits_2(tmp_path, capsys):
    p = tmp_path / "bad.yaml"
    p.write_text(MALFORMED[0][1], encoding="utf-8")
    assert main(["check", str(p)]) == 2
    err = capsys.readouterr().err
    assert "line 3" in err and "invalid YAML" in err


def test_cli_check_text_output(capsys):
    assert main(["check", str(CONFIGS / "ds_zero2_bad.json")]) == 0
    out = capsys.readouterr().out
    assert "gradient_clipping" in out


def test_bad_and_ok_twins_differ_only_in_planted_lines():
    """Each bad file is its ok twin plus the planted mistakes: a handful of changed lines at most."""
    import difflib

    for bad in BAD_FILES:
        ok = bad.replace("_bad.", "_ok.")
        a = (CONFIGS / ok).read_text(encoding="utf-8").splitlines()
        b = (CONFIGS / bad).read_text(encoding="utf-8").splitlines()
        changed = [ln for ln in difflib.unified_diff(a, b, lineterm="", n=0)
                   if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
        assert 0 < len(changed) <= 10, (bad, changed)


def test_a_review_change_of_another_cause_is_not_slipped_into_the_edits(tmp_path):
    """fp16 and bf16 both on, with ZeRO-3 and param offload on one rank: the precision fix is applied by --diff, the
    ZeRO stage change (its rule says: review, stage 3 with offload can fit a model stage 2 cannot) is not."""
    import json as _json

    from grpo_debug.tools.triage import triage

    cfg = tmp_path / "ds.json"
    cfg.write_text(_json.dumps({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1,
                                "gradient_accumulation_steps": 8, "fp16": {"enabled": True}, "bf16": {"enabled": True},
                                "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}, indent=2))
    res = triage(path=str(cfg))
    keys = {e.key for f in res.findings for e in f.edits}
    assert any("fp16" in k for k in keys), keys
    assert not any(k.endswith("zero_optimization.stage") for k in keys), keys
