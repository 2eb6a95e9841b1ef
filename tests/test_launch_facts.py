"""Launch lines give every flag and env var as a config fact (value and line); printed configs are config facts;
neither ever becomes a metric series (issue 22: a TRL/accelerate launch line gave 0 settings, ``--learning_rate`` was
read as a metric, ``--gradient_accumulation_steps`` was lost after another flag on the same continuation line,
``NPROC_PER_NODE=6`` was ignored after ``CUDA_VISIBLE_DEVICES=...``).

The scripts are copied from public repositories' example scripts (named at each), cut to their launch parts; every
input goes through ``tools/triage.build_context`` (the reader the pipeline uses), and the expected flags are found by
an independent reading of the text (``_expected``), not by the reader under test. Printed configs:
tests/test_launch_facts_printed.py.
"""
from __future__ import annotations

import random
import re

import pytest

from grpo_debug.tools.engine.command_lines import is_command_line, setting_lines, strip_comment
from grpo_debug.tools.engine.normalize import normalize
from grpo_debug.tools.triage import build_context

# open-r1 style (QingyangZhang/EMPO empo-1.5B-NM-COT.sh; a Chinese comment after the continuation as in a public
# open-r1 fork's README), several flags per continuation line, --flag=value, a redirection at the end
OPEN_R1 = """\
CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6 NPROC_PER_NODE=6 ACCELERATE_LOG_LEVEL=info \\
    accelerate launch --config_file recipes/accelerate_configs/zero3.yaml --num_processes=7 src/open_r1/grpo.py \\
    --config recipes/Qwen2.5-1.5B-Instruct/grpo/config_EMPO_NM_COT_1.5B.yaml \\
    --learning_rate 1e-6 --gradient_accumulation_steps 8 --per_device_train_batch_size=2 --num_train_epochs=1 \\
    --main_process_port 29501 \\       #参数设置文件
    --max_completion_length 1024 --use_vllm \\
    > ./output/grpo_r1_0dot5B_sampling.log 2>&1
"""

# modelscope/ms-swift examples/train/grpo/external/grpo_32b_full.sh (env assignments on their own continuation lines)
SWIFT = """\
CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \\
NPROC_PER_NODE=8 \\
swift rlhf \\
    --rlhf_type grpo \\
    --model Qwen/Qwen2.5-32B-Instruct \\
    --reward_funcs accuracy \\
    --use_vllm true \\
    --vllm_mode server \\
    --dataset AI-MO/NuminaMath-TIR#1000 \\
    --max_completion_length 2048 \\
    --learning_rate 1e-6 \\
    --gradient_accumulation_steps 1 \\
    --num_generations 8 \\
    --report_to tensorboard wandb \\
    --beta 0.0
"""

# the same command on one line, three env assignments before it (the reported shape)
SWIFT_ONE_LINE = ("CUDA_VISIBLE_DEVICES=0,1 NPROC_PER_NODE=6 MASTER_PORT=29600 swift rlhf --rlhf_type grpo "
                  "--system 'You are a helpful assistant.' --learning_rate 1e-6 --num_generations 8\n")

# volcengine/verl examples/grpo_trainer/run_qwen2-7b_math.sh ($VAR expansion, quoted lists, `$@`)
VERL = """\
set -x

gsm8k_train_path=$HOME/data/gsm8k/train.parquet
math_train_path=$HOME/data/math/train.parquet
train_files="['$gsm8k_train_path', '$math_train_path']"
n_resp=5

python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_files="$train_files" \\
    data.train_batch_size=1024 \\
    data.truncation='error' \\
    actor_rollout_ref.actor.optim.lr=1e-6 \\
    actor_rollout_ref.actor.ppo_mini_batch_size=256 \\
    actor_rollout_ref.actor.kl_loss_coef=0.001 \\
    actor_rollout_ref.rollout.n=$n_resp \\
    trainer.logger=['console','wandb'] \\
    trainer.n_gpus_per_node=8 \\
    trainer.total_epochs=15 $@
"""

# volcengine/verl examples/sft/gsm8k/run_qwen_05_peft.sh (torchrun, `-m`, `+key=`, `\\` without a blank before it)
TORCHRUN = """\
nproc_per_node=4
torchrun --standalone --nnodes=1 --nproc_per_node=$nproc_per_node \\
     -m verl.trainer.fsdp_sft_trainer \\
    optim.lr=1e-4 \\
    +data.response_dict_keys=['answer'] \\
    trainer.default_hdfs_dir=null $@ \\
    model.lora_rank=32\\
    model.lora_alpha=16 \\
    model.target_modules=all-linear
"""

# deepspeed launcher with --module (OpenRLHF README form) and OpenRLHF examples/scripts/train_ppo_llama_ray_70b.sh
# (ray job submit ... -- python3 -m ...)
OPENRLHF = """\
deepspeed --num_gpus 8 --module openrlhf.cli.train_ppo_ray \\
   --actor_num_gpus_per_node 4 --vllm_num_engines 2 \\
   --save_steps -1 \\
   --zero_stage 3 \\
   --bf16 \\
   --actor_learning_rate 5e-7

ray job submit --address="http://127.0.0.1:8265" \\
    --runtime-env-json='{"working_dir": "/openrlhf"}' \\
    --no-wait \\
    -- python3 -m openrlhf.cli.train_ppo_ray \\
    --ref_num_nodes 1 \\
    --critic_learning_rate 9e-6 \\
    --init_kl_coef 0.01 \\
    --gradient_checkpointing
"""

# THUDM/slime scripts/run-qwen3-4B.sh and scripts/models/qwen3-1.7B.sh (bash arrays, comments inside them, blank
# lines, a one-line array, "${ARR[@]}" in the command)
SLIME = """\
export PYTHONBUFFERED=16

MODEL_ARGS=(
   --swiglu
   --num-layers 28
   --normalization "RMSNorm"
   --norm-epsilon 1e-6
   --rotary-base 1000000
)

CKPT_ARGS=(
   --hf-checkpoint /root/Qwen3-4B
   #--hf-checkpoint /root/Qwen3-4B-FP8
   --save-interval 20
)

ROLLOUT_ARGS=(
   --rollout-batch-size 32
   --n-samples-per-prompt 8

   --global-batch-size 256
   --balance-data
)
EVAL_ARGS=( --eval-interval 20 --n-samples-per-eval-prompt 16 )

export MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
ray start --head --node-ip-address ${MASTER_ADDR} --num-gpus 8 --disable-usage-stats --dashboard-port=8265

ray job submit --address="http://127.0.0.1:8265" \\
   -- python3 train.py \\
   --actor-num-nodes 1 \\
   --actor-num-gpus-per-node 8 \\
   --colocate \\
   ${MODEL_ARGS[@]} \\
   "${CKPT_ARGS[@]}" \\
   ${ROLLOUT_ARGS[@]} \\
   ${EVAL_ARGS[@]}
"""

SCRIPTS = {"open-r1": OPEN_R1, "swift": SWIFT, "swift-one-line": SWIFT_ONE_LINE, "verl": VERL,
           "torchrun": TORCHRUN, "openrlhf": OPENRLHF, "slime": SLIME}

_FLAG = re.compile(r"(?:^|[\s(])--([A-Za-z][\w.-]*)(?:=(\S+))?")
_ENV_PREFIX = re.compile(r"^(?:export\s+)?((?:[A-Z_][A-Z0-9_]*=[^\s(]\S*\s+)*[A-Z_][A-Z0-9_]*=[^\s(]\S*)")
_OVERRIDE = re.compile(r"(?:^|\s)\+{0,2}([a-z_]+(?:\.\w+)+)=")


def _expected(text: str) -> tuple[set[tuple[str, int]], dict[tuple[str, int], str]]:
    """An independent reading: every ``--flag`` word (as ``flag_name``), leading env assignment and dotted
    override of each line that is not a comment, with its line; and the value text of ``--flag=value``."""
    keys: set[tuple[str, int]] = set()
    eq_values: dict[tuple[str, int], str] = {}
    for no, line in enumerate(text.splitlines(), 1):
        s = strip_comment(line.strip())
        if not s or s.startswith("#"):
            continue
        for m in _FLAG.finditer(s):
            name = m.group(1).replace("-", "_")
            keys.add((name, no))
            if m.group(2) and not re.search(r"[$'\"{]", m.group(2)):  # a value the shell would not change
                eq_values[(name, no)] = m.group(2).strip("\"'")
        env = _ENV_PREFIX.match(s)
        if env:
            keys.update((w.split("=", 1)[0], no) for w in env.group(1).split())
        keys.update((m.group(1), no) for m in _OVERRIDE.finditer(s))
    return keys, eq_values


def _facts(text: str):
    ctx, _ = build_context(text)
    return ctx, {(f.key, f.line): f.value for f in ctx.facts.facts}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_flag_env_var_and_override_is_a_fact_at_its_line(name):
    text = SCRIPTS[name]
    ctx, got = _facts(text)
    keys, eq_values = _expected(text)
    assert keys, "the oracle found nothing: the fixture is wrong"
    missing = sorted(keys - set(got))
    assert not missing, f"{name}: settings not read: {missing}"
    for key, raw in eq_values.items():
        assert str(got[key]).lower() == raw.lower() or got[key] == pytest.approx(float(raw)), (key, got[key], raw)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_no_flag_of_a_launch_line_is_a_metric(name):
    ctx, _ = _facts(SCRIPTS[name])
    assert ctx.metrics.series == {}, f"{name}: launch flags read as metrics: {sorted(ctx.metrics.series)}"


def test_open_r1_accelerate_line_values():
    _, got = _facts(OPEN_R1)
    assert got[("CUDA_VISIBLE_DEVICES", 1)] == "0,1,2,3,4,5,6"
    assert got[("NPROC_PER_NODE", 1)] == 6
    assert got[("ACCELERATE_LOG_LEVEL", 1)] == "info"
    assert got[("num_processes", 2)] == 7
    assert got[("learning_rate", 4)] == 1e-6
    assert got[("gradient_accumulation_steps", 4)] == 8  # after another flag on the same continuation line
    assert got[("per_device_train_batch_size", 4)] == 2
    assert got[("main_process_port", 5)] == 29501  # a comment after the continuation
    assert got[("max_completion_length", 6)] == 1024
    assert got[("use_vllm", 6)] is True  # a flag without a value, then the redirection line: not a value
    assert not any(k == "output" or str(v).startswith((">", "./output")) for (k, _), v in got.items())


def test_swift_env_lines_lists_and_hash_in_value():
    _, got = _facts(SWIFT)
    assert got[("CUDA_VISIBLE_DEVICES", 1)] == "0,1,2,3,4,5,6,7"
    assert got[("NPROC_PER_NODE", 2)] == 8
    assert got[("report_to", 14)] == ["tensorboard", "wandb"]
    assert got[("dataset", 9)] == "AI-MO/NuminaMath-TIR#1000"  # '#' inside a word is not a comment
    assert got[("use_vllm", 7)] is True and got[("beta", 15)] == 0.0
    _, one = _facts(SWIFT_ONE_LINE)
    assert one[("NPROC_PER_NODE", 1)] == 6 and one[("MASTER_PORT", 1)] == 29600
    assert one[("system", 1)] == "You are a helpful assistant."  # a quoted value with blanks
    assert one[("learning_rate", 1)] == 1e-6 and one[("num_generations", 1)] == 8


def test_verl_overrides_expand_shell_variables():
    _, got = _facts(VERL)
    assert got[("launch.module", 8)] == "verl.trainer.main_ppo"
    assert got[("actor_rollout_ref.rollout.n", 16)] == 5  # $n_resp from the assignment above
    assert got[("actor_rollout_ref.actor.optim.lr", 13)] == 1e-6
    assert got[("trainer.logger", 17)] == ["console", "wandb"]
    assert got[("data.truncation", 12)] == "error"
    assert "$gsm8k_train_path" not in str(got[("data.train_files", 10)])  # expanded (its $HOME stays: unknown)
    assert got[("trainer.total_epochs", 19)] == 15  # `$@` after it is not part of the value


def test_torchrun_module_and_hydra_additions():
    _, got = _facts(TORCHRUN)
    assert got[("nproc_per_node", 2)] == 4 and got[("nnodes", 2)] == 1 and got[("standalone", 2)] is True
    assert got[("launch.module", 3)] == "verl.trainer.fsdp_sft_trainer"
    assert got[("data.response_dict_keys", 5)] == ["answer"]
    assert got[("trainer.default_hdfs_dir", 6)] is None
    assert got[("model.lora_rank", 7)] == 32 and got[("model.lora_alpha", 8)] == 16


def test_deepspeed_module_and_ray_job_separator():
    _, got = _facts(OPENRLHF)
    assert got[("num_gpus", 1)] == 8 and got[("module", 1)] == "openrlhf.cli.train_ppo_ray"
    assert got[("save_steps", 3)] == -1  # a negative value is a value, not a short option
    assert got[("bf16", 5)] is True and got[("actor_learning_rate", 6)] == 5e-7
    assert got[("runtime_env_json", 9)] == '{"working_dir": "/openrlhf"}'
    assert got[("no_wait", 10)] is True  # the `--` separator after it is not its value
    assert got[("launch.module", 11)] == "openrlhf.cli.train_ppo_ray"
    assert got[("critic_learning_rate", 13)] == 9e-6 and got[("gradient_checkpointing", 15)] is True


def test_slime_bash_arrays():
    _, got = _facts(SLIME)
    assert got[("num_layers", 5)] == 28 and got[("swiglu", 4)] is True
    assert got[("normalization", 6)] == "RMSNorm" and got[("norm_epsilon", 7)] == 1e-6
    assert ("hf_checkpoint", 12) in got and ("hf_checkpoint", 13) not in got  # a commented element
    assert got[("global_batch_size", 21)] == 256 and got[("balance_data", 22)] is True  # after a blank line
    assert got[("eval_interval", 24)] == 20 and got[("n_samples_per_eval_prompt", 24)] == 16
    assert got[("ray_start.num_gpus", 27)] == 8 and got[("ray_start.node_ip_address", 27)] == "127.0.0.1"
    assert got[("actor_num_gpus_per_node", 32)] == 8 and got[("colocate", 33)] is True


def test_launch_line_echoed_in_a_log_keeps_the_log_metrics():
    """A `set -x` trace of the command, then verl step lines: the overrides are facts, the step lines metrics, and
    no metric point sits on a command line."""
    log = ("+ python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo actor_rollout_ref.actor.optim.lr=1e-6 "
           "--learning_rate 3e-6 data.train_batch_size=64\n"
           "step:1 - actor/pg_loss:-0.012 - actor/grad_norm:0.41\n"
           "step:2 - actor/pg_loss:0.003 - actor/grad_norm:0.38\n")
    ctx, got = _facts(log)
    assert got[("actor_rollout_ref.actor.optim.lr", 1)] == 1e-6 and got[("learning_rate", 1)] == 3e-6
    assert set(ctx.metrics.series) == {"actor/pg_loss", "actor/grad_norm"}
    assert [p.value for p in ctx.metrics.series["actor/pg_loss"]] == [-0.012, 0.003]
    assert not set(ctx.metrics.lines) & set(ctx.facts.command_lines)


@pytest.mark.parametrize("line", [
    "step:1 - actor/pg_loss:-0.012 - actor/grad_norm:0.41",
    "{'loss': 0.0123, 'grad_norm': 0.51, 'learning_rate': 1e-06, 'epoch': 0.01}",
    " iteration       10/    500 | consumed samples: 2560 | lm loss: 2.3E+00 | grad norm: 1.2 |",
    "Global step 3: {'policy_loss': -0.1, 'kl': 0.002}",
    "step 5: {'train/loss': 0.5, 'train/grad_norm': 0.3}",
    "  5%|▌         | 10/200 [00:10<03:10, 1.0s/it, act_loss=0.1, reward=0.5, grad_norm=1.2]",
])
def test_metric_lines_are_not_command_lines(line):
    assert not is_command_line(line)
    assert not setting_lines(normalize(line + "\n"))


def test_words_stop_at_operators_but_not_inside_quotes():
    """A quoted '</answer>' is a value (slime --rollout-stop); `| tee` and `2>&1` end the command's words; the
    command after `&&` is read on its own."""
    text = ("python3 train.py --rollout-stop '</answer>' '</tool_call>' --rollout-stop-token-ids 151645 "
            "--sep '|' --rollout-batch-size 32 2>&1 | tee train.log --not-a-flag 1\n"
            "cd /root && torchrun --nproc_per_node 8 train.py --lr 2e-5 > out.log\n")
    _, got = _facts(text)
    assert got[("rollout_stop", 1)] == ["</answer>", "</tool_call>"]
    assert got[("rollout_stop_token_ids", 1)] == 151645 and got[("sep", 1)] == "|"
    assert got[("rollout_batch_size", 1)] == 32 and ("not_a_flag", 1) not in got
    assert got[("nproc_per_node", 2)] == 8 and got[("lr", 2)] == 2e-5  # the command after `cd /root &&`


def test_an_unclosed_bash_array_ends_at_its_cap():
    from grpo_debug.tools.engine import launch_facts

    text = "ARGS=(\n" + "".join(f"   --flag-{i} {i}\n" for i in range(launch_facts._MAX_ARRAY_LINES + 5))
    text += "step:1 - actor/pg_loss:0.5 - actor/grad_norm:0.1\n"
    ctx, got = _facts(text)
    assert got[("flag_0", 2)] == 0 and ("flag_2004", 2006) in got
    assert set(ctx.metrics.series) == {"actor/pg_loss", "actor/grad_norm"}


def test_launch_commands_quoted_in_log_records_and_python_options():
    text = ("[2025-03-01 10:00:00,123] INFO launcher.py:45 - Running command: torchrun --nproc_per_node 8 "
            "src/train_grpo.py --learning_rate 1e-5 --max_grad_norm 1.0 --num_generations 8\n"
            "+ python3 -u -m openrlhf.cli.train_ppo_ray --actor_learning_rate 5e-7 --init_kl_coef 0.01\n"
            "accelerate launch --multi_gpu --num_processes 8 train.py --learning_rate 2e-5\n")
    ctx, got = _facts(text)
    assert ctx.metrics.series == {}
    assert got[("nproc_per_node", 1)] == 8 and got[("learning_rate", 1)] == 1e-5 and got[("num_generations", 1)] == 8
    assert got[("launch.module", 2)] == "openrlhf.cli.train_ppo_ray" and got[("init_kl_coef", 2)] == 0.01
    assert got[("multi_gpu", 3)] is True  # a store_true flag: the script after it is not its value
    assert got[("num_processes", 3)] == 8 and got[("learning_rate", 3)] == 2e-5


def test_launch_facts_and_metrics_are_the_same_streamed_from_gz(tmp_path):
    """The launch script and the metric lines after it read alike in memory and through the streamed .gz path."""
    import gzip

    from grpo_debug.skills.loader import default_rules
    from grpo_debug.tools.streaming import read_streamed

    metrics = "".join(f"{{'loss': {0.5 - i / 100:.4f}, 'grad_norm': {-0.25 + i / 50:.3f}, 'learning_rate': 1e-06, "
                      f"'epoch': {i / 100:.2f}}}\n" for i in range(1, 30))
    text = OPEN_R1 + SWIFT + metrics
    path = tmp_path / "run.log.gz"
    path.write_bytes(gzip.compress(text.encode()))
    mem, _ = build_context(text)
    streamed = read_streamed(path, default_rules()).ctx
    for ctx in (mem, streamed):
        assert sorted(ctx.metrics.series) == ["epoch", "grad_norm", "learning_rate", "loss"]
        assert [p.value for p in ctx.metrics.series["grad_norm"]][:2] == [-0.23, -0.21]
    assert sorted((f.key, f.line, repr(f.value)) for f in mem.facts.facts) == \
        sorted((f.key, f.line, repr(f.value)) for f in streamed.facts.facts)
    assert {(f.key, f.line) for f in mem.facts.facts} >= _expected(OPEN_R1)[0]


def test_export_of_several_variables_sets_each_for_later_commands():
    text = "export NNODES=2 GPUS=8\ntorchrun --nnodes $NNODES --nproc_per_node=$GPUS train.py --lr 1e-5\n"
    _, got = _facts(text)
    assert got[("NNODES", 1)] == 2 and got[("GPUS", 1)] == 8
    assert got[("nnodes", 2)] == 2 and got[("nproc_per_node", 2)] == 8 and got[("lr", 2)] == 1e-5


def _random_command(rnd) -> tuple[str, dict[tuple[str, int], object]]:
    """A launch command of a random shape and the facts it must give: env prefixes (on the launcher's line or
    their own continuation lines), a launcher, then flags split over continuation lines, several per line, in
    every value form, with comments after some continuations."""
    want: dict[tuple[str, int], object] = {}
    lines: list[list[str]] = [[]]

    def new_line():
        if lines[-1]:
            lines.append([])

    for k in range(rnd.randint(0, 3)):
        name, val = f"ENV_{k}_X", rnd.choice(["0,1,2,3", "6", "info", "/opt/x"])
        lines[-1].append(f"{name}={val}")
        want[(name, len(lines))] = int(val) if val.isdigit() else val
        if rnd.random() < 0.4:
            new_line()
    launcher = rnd.choice(["torchrun --nproc_per_node 8 train.py", "accelerate launch --num_processes 7 grpo.py",
                           "python3 -m verl.trainer.main_ppo", "deepspeed --num_gpus 8 --module pkg.train",
                           "swift rlhf", "python -u train.py"])
    lines[-1].append(launcher)
    for word, val in re.findall(r"--(\w+) (\d+)", launcher):
        want[(word, len(lines))] = int(val)
    if "--module" in launcher:
        want[("module", len(lines))] = "pkg.train"
    if "-m verl" in launcher:
        want[("launch.module", len(lines))] = "verl.trainer.main_ppo"
    for k in range(rnd.randint(1, 12)):
        if rnd.random() < 0.5:
            new_line()
        name = f"flag_{k}_" + rnd.choice(["lr", "steps", "name", "on", "list"])
        form = rnd.choice(["int", "neg", "exp", "str", "quoted", "bool", "eq", "list"])
        if form == "exp":
            val: object = float(f"{rnd.randint(1, 9)}e-{rnd.randint(1, 9)}")
            text = f"--{name} " + (rnd.choice(["%g", "%.0e"]) % val)
        elif form == "str":
            val = rnd.choice(["cosine", "Qwen/Qwen2.5-7B", "AI-MO/NuminaMath-TIR#1000"])
            text = f"--{name} {val}"
        elif form == "quoted":
            val, text = "a b  c", f"--{name} 'a b  c'"
        elif form == "bool":
            val, text = True, f"--{name}"
        elif form == "eq":
            val = rnd.randint(0, 99)
            text = f"--{name}={val}"
        elif form == "list":
            val, text = ["tensorboard", "wandb"], f"--{name} tensorboard wandb"
        else:
            val = rnd.randint(0, 10**6) if form == "int" else -rnd.randint(1, 99)
            text = f"--{name} {val}"
        lines[-1].append(text)
        want[(name, len(lines))] = val
    out = []
    for i, ws in enumerate(lines):
        tail = "" if i == len(lines) - 1 else rnd.choice([" \\", "\\", " \\   # a comment"])
        out.append(rnd.choice(["", "    "]) * (i > 0) + " ".join(ws) + tail)
    return "\n".join(out) + "\n", want


def test_random_launch_commands_give_every_fact_exactly():
    rnd = random.Random(22)
    for _ in range(300):
        text, want = _random_command(rnd)
        ctx, got = _facts(text)
        for key, val in want.items():
            assert key in got, (key, text)
            assert got[key] == val or (isinstance(val, float) and got[key] == pytest.approx(val)), (key, got[key], text)
        assert ctx.metrics.series == {}, text
