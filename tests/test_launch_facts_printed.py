"""A config printed into a log is read as config facts, never as metric series (issue 22: a printed config dict
became a metric series, which broke ``compare``): verl's pprint of its whole config, one-line nested dicts, argparse
``Namespace`` reprs, transformers' ``TrainingArguments.__str__`` (TRL's GRPOConfig), dataclass reprs, the same after a
logger's text, and Megatron-LM's arguments print. Every input goes through ``tools/triage.build_context``; expected
values come from the objects that printed them."""
from __future__ import annotations

import argparse
import dataclasses
import pprint

from grpo_debug.tools.triage import build_context

VERL_CONFIG = {
    "actor_rollout_ref": {"actor": {"optim": {"lr": 1e-06, "lr_warmup_steps": -1, "lr_warmup_steps_ratio": 0.0,
                                              "total_training_steps": 435, "weight_decay": 0.01},
                                    "ppo_mini_batch_size": 256, "ppo_micro_batch_size_per_gpu": 16, "clip_ratio": 0.2,
                                    "entropy_coeff": 0, "use_kl_loss": True, "kl_loss_coef": 0.001, "grad_clip": 1.0},
                          "rollout": {"n": 5, "name": "vllm", "temperature": 1.0, "gpu_memory_utilization": 0.6,
                                      "tensor_model_parallel_size": 2, "response_length": 1024}},
    "algorithm": {"adv_estimator": "grpo", "gamma": 1.0, "kl_ctrl": {"kl_coef": 0.001, "type": "fixed"}},
    "data": {"train_batch_size": 1024, "max_prompt_length": 1024, "max_response_length": 1024},
    "trainer": {"total_epochs": 15, "total_training_steps": None, "n_gpus_per_node": 8, "save_freq": 20,
                "logger": ["console", "wandb"], "val_before_train": True},
}
STEP_LINES = ["step:1 - actor/pg_loss:-0.012 - actor/grad_norm:0.41 - critic/score/mean:0.12",
              "step:2 - actor/pg_loss:0.003 - actor/grad_norm:0.38 - critic/score/mean:0.15"]


def _leaves(d: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        out.update(_leaves(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _assert_config_not_metrics(ctx, metric_keys: set[str]):
    assert set(ctx.metrics.series) == metric_keys
    assert not set(ctx.metrics.lines) & set(ctx.facts.block_lines)


def test_verl_pprint_of_the_whole_config_is_config():
    """verl's TaskRunner prints ``pprint(OmegaConf.to_container(config, resolve=True))`` under its Ray prefix."""
    printed = [f"(TaskRunner pid=40213) {x}" for x in pprint.pformat(VERL_CONFIG).splitlines()]
    assert len(printed) > 10
    text = "\n".join(printed + [f"(TaskRunner pid=40213) {x}" for x in STEP_LINES]) + "\n"
    ctx, _ = build_context(text)
    facts = {f.key: (f.value, f.line) for f in ctx.facts.facts if f.origin == "printed"}
    for key, val in _leaves(VERL_CONFIG).items():
        assert facts[key][0] == val, key
        assert key.rsplit(".", 1)[-1] in printed[facts[key][1] - 1], key  # the line that prints the key
    _assert_config_not_metrics(ctx, {"actor/pg_loss", "actor/grad_norm", "critic/score/mean"})


def test_one_line_print_of_a_nested_config_is_config():
    text = str({"seed": 1, **VERL_CONFIG}) + "\n" + "\n".join(STEP_LINES) + "\n"
    ctx, _ = build_context(text)
    assert ctx.facts.value("actor_rollout_ref.actor.optim.lr") == 1e-06 and ctx.facts.value("seed") == 1
    assert set(ctx.metrics.series) == {"actor/pg_loss", "actor/grad_norm", "critic/score/mean"}


def test_argparse_namespace_repr_is_config():
    ns = argparse.Namespace(lr=1e-06, min_lr=1e-07, num_layers=28, global_batch_size=256, clip_grad=1.0,
                            train_iters=500, lr_warmup_iters=10, eps_clip=0.2, kl_loss_coef=0.0, seed=1234)
    text = f"{ns}\nstep 1: {{'train/loss': 0.5, 'train/grad_norm': 0.3}}\n"
    ctx, _ = build_context(text)
    got = {f.key: f.value for f in ctx.facts.facts if f.line == 1}
    assert got == vars(ns)
    assert set(ctx.metrics.series) == {"train/loss", "train/grad_norm"}


@dataclasses.dataclass
class GRPOConfig:
    """Fields of TRL's GRPOConfig; ``__str__`` as transformers' TrainingArguments.__str__ prints it."""

    output_dir: str = "data/Qwen2.5-1.5B-GRPO"
    learning_rate: float = 1e-06
    max_grad_norm: float = 1.0
    gradient_accumulation_steps: int = 8
    num_generations: int = 8
    beta: float = 0.04
    logging_steps: int = 1
    max_steps: int = -1
    lr_scheduler_type: str = "cosine"
    warmup_ratio: float = 0.1
    report_to: list = dataclasses.field(default_factory=lambda: ["wandb"])
    accelerator_config: dict = dataclasses.field(default_factory=lambda: {"split_batches": False,
                                                                           "gradient_accumulation_kwargs": None})

    def __str__(self) -> str:
        attrs = [f"{k}={v},\n" for k, v in sorted(dataclasses.asdict(self).items())]
        return f"{self.__class__.__name__}(\n{''.join(attrs)})"


def test_training_arguments_str_is_config():
    cfg = GRPOConfig()
    text = f"{cfg}\n{{'loss': 0.0123, 'grad_norm': 0.51, 'learning_rate': 1e-06, 'epoch': 0.01}}\n"
    ctx, _ = build_context(text)
    lines = text.splitlines()
    facts = {f.key: (f.value, f.line) for f in ctx.facts.facts if f.origin == "printed"}
    for key, val in dataclasses.asdict(cfg).items():
        if isinstance(val, dict):
            for k, v in val.items():
                assert facts[f"{key}.{k}"][0] == v
            continue
        assert facts[key][0] == val, key
        assert lines[facts[key][1] - 1].startswith(f"{key}="), key
    _assert_config_not_metrics(ctx, {"loss", "grad_norm", "learning_rate", "epoch"})
    assert [p.line for p in ctx.metrics.series["learning_rate"]] == [len(lines)]


def test_dataclass_repr_on_one_line_is_config():
    text = repr(GRPOConfig()) + "\n"
    ctx, _ = build_context(text)
    assert ctx.metrics.series == {}
    assert ctx.facts.value("learning_rate") == 1e-06 and ctx.facts.value("gradient_accumulation_steps") == 8


def test_arguments_printed_after_a_logger_prefix_are_config():
    """open-r1's grpo.py logs ``f"Script parameters {script_args}"`` and ``f"Training parameters {training_args}"``
    under transformers' explicit format ``[%(levelname)s|%(filename)s:%(lineno)s] %(asctime)s >> %(message)s``."""
    head = "[INFO|grpo.py:178] 2025-02-11 10:12:01,532 >> "
    script = ("GRPOScriptArguments(dataset_name='open-r1/OpenR1-Math-220k', dataset_config=None, "
              "reward_funcs=['accuracy', 'format'], cosine_min_value_wrong=0.0, max_completion_len=16384)")
    text = (f"{head}Script parameters {script}\n{head}Training parameters {GRPOConfig()}\n"
            "{'loss': 0.0123, 'grad_norm': 0.51, 'learning_rate': 1e-06, 'epoch': 0.01}\n")
    ctx, _ = build_context(text)
    assert set(ctx.metrics.series) == {"loss", "grad_norm", "learning_rate", "epoch"}
    assert ctx.facts.value("max_completion_len") == 16384 and ctx.facts.value("cosine_min_value_wrong") == 0.0
    printed = {f.key: f.value for f in ctx.facts.facts if f.origin == "printed"}
    assert printed["learning_rate"] == 1e-06 and printed["gradient_accumulation_steps"] == 8
    assert printed["report_to"] == ["wandb"]


def test_megatron_arguments_print_is_config():
    """Megatron-LM's _print_args (megatron/training/arguments.py): a header, '  {arg} {dots} {value}' per argument
    with 48 - len(arg) dots, sorted, and an end line; the iteration lines after it stay metrics."""
    args = {"lr": 1e-06, "clip_grad": 1.0, "global_batch_size": 256, "micro_batch_size": 1,
            "tensor_model_parallel_size": 2, "use_distributed_optimizer": True, "optimizer": "adam", "loss_scale": None,
            "eval_prompt_data": ["aime", "/root/aime-2024/aime-2024.jsonl"],
            "a_very_long_argument_name_that_leaves_no_room_for_dots_x": 3}
    out = ["------------------------ arguments ------------------------"]
    out += sorted(("  {} {} {}".format(a, "." * (48 - len(a)), v) for a, v in args.items()), key=lambda x: x.lower())
    out += ["-------------------- end of arguments ---------------------",
            " iteration        1/     500 | consumed samples:          256 | learning rate: 1.000000E-06 | "
            "lm loss: 2.345678E+00 | grad norm: 1.234 | number of skipped iterations:   0 |"]
    ctx, _ = build_context("\n".join(out) + "\n")
    printed = {f.key: (f.value, f.line) for f in ctx.facts.facts if f.origin == "printed"}
    for key, val in args.items():
        assert printed[key][0] == val, key
        assert out[printed[key][1] - 1].lstrip().startswith(key + " ")
    assert "lm loss" in ctx.metrics.series and not set(ctx.metrics.lines) & {v[1] for v in printed.values()}
    assert "launch-command" not in ctx.facts.formats  # a '-----' rule line is not a flag line


def test_a_yaml_exponent_without_a_dot_is_a_number_unless_quoted():
    """YAML 1.1 (PyYAML) reads `lr: 1e-6` as a string; OmegaConf's loader (Hydra configs) and YAML 1.2 read a float,
    and so does every trainer that casts it to its dataclass field: a config fact keeps the number, sign included."""
    from grpo_debug.tools.engine.facts import extract_facts
    from grpo_debug.tools.engine.normalize import normalize

    t = "actor:\n  optim:\n    lr: 1e-6\n    wd: -1E-2\n    big: 5e+3\n    q: '1e-6'\n    d: \"2e5\"\n    v: 1.0e-6\n"
    got = {f.key.rsplit(".", 1)[-1]: f.value for f in extract_facts(normalize(t), t, "yaml").facts}
    assert got == {"lr": 1e-6, "wd": -0.01, "big": 5000.0, "q": "1e-6", "d": "2e5", "v": 1e-6}
