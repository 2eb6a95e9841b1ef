"""Mixed pastes (tools/engine/blocks.py, errors_classify.streams): a config in a code fence or before log lines
is read with its own line numbers; interleaved ranks and run tags are read as separate tracebacks."""
from __future__ import annotations

from grpo_debug.tools.engine.errors_classify import classify_all
from grpo_debug.tools.engine.normalize import normalize
from grpo_debug.tools.triage import build_context, triage_text

ISSUE = """I run GRPO with this config:
```yaml
num_generations: 1
per_device_train_batch_size: 8
```
and it fails at start:
```
ValueError: GRPO requires at least 2 generations per prompt to calculate the advantages. You provided 1, which is less than the minimum required.
```
"""


def test_fenced_yaml_inside_issue_prose_is_read_at_its_lines():
    ctx, _ = build_context(ISSUE)
    assert ("num_generations", 1, 3) in [(f.key, f.value, f.line) for f in ctx.facts.facts]
    f = triage_text(ISSUE).findings[0]
    assert f.symptom == "config_error" and {3, 8} & {e.line for e in f.evidence}


def test_config_followed_by_log_lines():
    text = "data:\n  train_batch_size: 8\n  max_prompt_length: 512\n{'loss': 0.1, 'grad_norm': 0.5, 'epoch': 0.1}\n"
    ctx, _ = build_context(text)
    assert ctx.facts.value("data.train_batch_size") == 8 and ctx.metrics.series


def test_log_shaped_lines_are_not_a_config():
    ctx, _ = build_context("INFO: starting\nValueError: x\nStep 1: loss 0.3\n")
    assert not ctx.facts.facts


def test_unparseable_block_is_skipped_not_raised():
    text = "```yaml\nkey: [unclosed\nother: 1\n```\nTraceback (most recent call last):\n  File \"a.py\", line 1, in f\nKeyError: 'x'\n"
    assert triage_text(text).findings  # the error still gets a finding
    for hint in ("yaml", "json", "sh", None):
        triage_text(text, hint=hint)


def test_interleaved_ranks_are_separate_tracebacks():
    text = """[rank3]: Traceback (most recent call last):
[rank0]: Traceback (most recent call last):
[rank3]:   File "/x/site-packages/verl/a.py", line 1, in f
[rank0]:   File "/x/site-packages/verl/b.py", line 2, in g
[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB
[rank0]: ValueError: train_batch_size must be divisible by 8
"""
    recs = classify_all(normalize(text))
    assert [(r.cls.name, r.lines) for r in recs] == [("cuda_oom", [1, 3, 5]), ("batch_not_divisible", [2, 4, 6])]


def test_run_tags_are_separate_streams():
    text = "[A] Traceback (most recent call last):\n[B] step 1 loss 0.2\n[A]   File \"/x/a.py\", line 1, in f\n[A] KeyError: 'x'\n"
    (r,) = classify_all(normalize(text))
    assert r.exc_type == "KeyError" and r.lines == [1, 3, 4]


def test_one_object_per_line_is_sniffed_as_a_log_not_a_json_document():
    from grpo_debug.tools.inputs import sniff_format

    assert sniff_format("{'loss': 0.1, 'grad_norm': 0.5}\n{'loss': 0.2, 'grad_norm': 0.4}\n", None) == "log"
    assert sniff_format('{"message": "a"}\n{"message": "b"}\n', None) == "log"
    assert sniff_format('{\n  "train_batch_size": 8\n}\n', None) == "json"
    assert sniff_format('{"train_batch_size": 8}', None) == "json"


# verl prints its resolved config at start: pprint(OmegaConf.to_container(config, resolve=True)) in TaskRunner.run
# (volcengine/verl verl/trainer/main_ppo.py), one physical line per pprint line under the driver's Ray prefix.
VERL_CONFIG = {
    "actor_rollout_ref": {
        "actor": {"_target_": "verl.workers.config.FSDPActorConfig",
                  "checkpoint": {"load_contents": ["model", "optimizer", "extra"]},
                  "clip_ratio": 0.2, "fsdp_config": {"param_offload": False, "wrap_policy": {"min_num_params": 0}},
                  "optim": {"lr": 1e-06, "warmup_style": "constant", "weight_decay": 0.01},
                  "ppo_epochs": 1, "ppo_micro_batch_size": None, "ppo_micro_batch_size_per_gpu": 64,
                  "ppo_mini_batch_size": 16, "strategy": "fsdp", "use_dynamic_bsz": False, "use_kl_loss": True},
        "model": {"path": "Qwen/Qwen2.5-3B-Instruct", "use_remove_padding": True},
        "rollout": {"gpu_memory_utilization": 0.6, "log_prob_micro_batch_size_per_gpu": 16, "max_num_seqs": 1024,
                    "n": 5, "name": "vllm", "response_length": 1024, "tensor_model_parallel_size": 2,
                    "val_kwargs": {"do_sample": False, "n": 1, "temperature": 0}}},
    "algorithm": {"adv_estimator": "grpo", "kl_ctrl": {"kl_coef": 0.001, "type": "fixed"}},
    "data": {"max_prompt_length": 512, "max_response_length": 1024, "train_batch_size": 1024},
    "trainer": {"logger": ["console", "wandb"], "n_gpus_per_node": 8, "nnodes": 1, "total_epochs": 15,
                "total_training_steps": None}}


def _printed_config_log() -> str:
    from pprint import pformat

    p = "(TaskRunner pid=40213) "
    dump = [p + x for x in pformat(VERL_CONFIG).splitlines()]
    dump.insert(5, "(WorkerDict pid=40577) Model config after override: Qwen2Config {")  # another process, interleaved
    return "\n".join(["2025-08-02 00:35:19,831\tINFO worker.py:1879 -- Started a local Ray instance.",
                      p + "TaskRunner hostname: node-0, PID: 40213", *dump,
                      p + "Using dataset class: RLHFDataset"]) + "\n"


def test_verl_config_printed_as_a_dict_is_read_at_the_lines_of_its_keys():
    text = _printed_config_log()
    lines = text.splitlines()
    ctx, _ = build_context(text)
    f = ctx.facts.get("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    assert f is not None and f.value == 64 and "'ppo_micro_batch_size_per_gpu': 64" in lines[f.line - 1]
    assert ctx.facts.value("actor_rollout_ref.rollout.n") == 5 and ctx.facts.value("trainer.n_gpus_per_node") == 8
    assert ctx.facts.value("actor_rollout_ref.actor.checkpoint.load_contents") == ["model", "optimizer", "extra"]
    assert ctx.facts.value("actor_rollout_ref.actor.ppo_micro_batch_size") is None
    # config rules see it: 16 x 5 / 8 GPUs = 10 samples per GPU, below the micro-batch of 64
    r = triage_text(text)
    assert r.findings and r.findings[0].causes[0].rule_id == "verl-micro-batch-exceeds-mini-batch"
    assert f.line in {e.line for e in r.findings[0].evidence}
    # the Ray banner, the hostname line, the interleaved WorkerDict line and the dataset line; none of the dict's
    assert [e.line for e in r.coverage.not_understood_sample] == [1, 2, 8, len(lines)]


def test_a_flat_one_line_dict_is_not_a_config():
    ctx, _ = build_context("{'train_runtime': 1234.5, 'train_samples_per_second': 3.1, 'epoch': 1.0}\n")
    assert not [f for f in ctx.facts.facts if f.origin == "printed"]


def test_traceback_source_lines_are_not_config():
    """The code a traceback quotes under 'File "...", line N, in f' (with CPython 3.11 carets) is not a setting."""
    text = """(WorkerDict pid=40577) Traceback (most recent call last):
(WorkerDict pid=40577)   File "/usr/local/lib/python3.10/dist-packages/verl/workers/actor/dp_actor.py", line 173, in _forward_micro_batch
(WorkerDict pid=40577)     entropy = verl_F.entropy_from_logits(logits_rmpad, dim=-1, chunk_size=2048)
(WorkerDict pid=40577)   File "/usr/local/lib/python3.10/dist-packages/verl/utils/torch_functional.py", line 112, in entropy_from_logits
(WorkerDict pid=40577)     pd = torch.nn.functional.softmax(logits, dim=-1, dtype=torch.float32)
(WorkerDict pid=40577)          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
(WorkerDict pid=40577) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.64 GiB.
"""
    ctx, _ = build_context(text)
    assert ctx.facts.facts == [] and "launch-command" not in ctx.facts.formats
    r = triage_text(text)
    assert r.coverage.config_facts == 0 and r.coverage.unknown_config_keys == []
