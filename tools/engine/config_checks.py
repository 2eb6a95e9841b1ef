"""Named checks over config facts: arithmetic a single key predicate cannot express.

Each check takes a :class:`FactSet` and params and returns ``(lines, message)`` or None. Formulas and
defaults are the frameworks' own, with their source in the docstring.
"""
from __future__ import annotations

from typing import Any, Callable

from grpo_debug.tools.engine import defaults as D
from grpo_debug.tools.engine.facts import Fact, FactSet
from grpo_debug.tools.engine.invariants import INVARIANTS, world_size  # noqa: F401  (world_size re-exported)

Result = tuple[list[int], str] | tuple[list[int], str, dict[str, Any]] | None
"""(evidence lines, message[, patch computed for this input: key -> new value])"""


def _num(f: Fact | None, default: Any = None) -> Any:
    if f is None:
        return default
    v = f.value
    if isinstance(v, list) and v:
        v = v[0]
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else default


def _lines(*facts: Fact | None) -> list[int]:
    return sorted({f.line for f in facts if f is not None})


def verl_micro_exceeds_mini_per_rank(fs: FactSet) -> Result:
    """verl normalises the actor mini-batch per rank: ppo_mini_batch_size * rollout.n // (world_size // sp).

    verl/workers/fsdp_workers.py (``_normalize_config``) then asserts/derives
    gradient_accumulation = mini // ppo_micro_batch_size_per_gpu; a per-rank mini-batch smaller than the
    micro-batch gives 0 accumulation steps (division by zero in the loss scale -> NaN grad norm) or an
    assertion, depending on the version. Defaults (verl ppo_trainer.yaml): rollout.n 1,
    trainer.n_gpus_per_node 8, trainer.nnodes 1, ulysses_sequence_parallel_size 1.
    """
    for role in ("actor", "critic"):
        res = _verl_mini_micro(fs, role)
        if res:
            return res
    return None


def _verl_mini_micro(fs: FactSet, role: str) -> Result:
    if role == "actor":
        mini = fs.get("actor_rollout_ref.actor.ppo_mini_batch_size", "actor.ppo_mini_batch_size")
        micro = fs.get("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "actor.ppo_micro_batch_size_per_gpu")
    else:
        mini = fs.get("critic.ppo_mini_batch_size")
        micro = fs.get("critic.ppo_micro_batch_size_per_gpu")
    if _num(mini) is None or _num(micro) is None:
        return None
    if fs.value("use_dynamic_bsz") is True:
        return None
    n = fs.get("actor_rollout_ref.rollout.n")
    gpn = fs.get("trainer.n_gpus_per_node")
    nn = fs.get("trainer.nnodes")
    sp = fs.get("actor_rollout_ref.actor.ulysses_sequence_parallel_size")
    world = _num(gpn, 8) * _num(nn, 1)
    per_rank = _num(mini) * _num(n, 1) // max(1, world // _num(sp, 1))
    fit = max((d for d in range(1, _num(micro) + 1) if per_rank and per_rank % d == 0), default=1)
    patch = {micro.key: fit}
    if per_rank < _num(micro):
        return (_lines(mini, micro, n, gpn, nn),
                f"{role} per-rank mini-batch = ppo_mini_batch_size {_num(mini)} x rollout.n {_num(n, 1)} / "
                f"{world} GPUs = {per_rank} samples, below ppo_micro_batch_size_per_gpu {_num(micro)}", patch)
    if per_rank % _num(micro):
        return (_lines(mini, micro, n, gpn, nn),
                f"per-rank mini-batch {per_rank} is not divisible by ppo_micro_batch_size_per_gpu {_num(micro)}", patch)
    return None


def verl_train_batch_not_divisible(fs: FactSet) -> Result:
    """verl ray_trainer._validate_config: real_train_batch_size = data.train_batch_size x rollout.n must be
    divisible by the minimal batch (n_gpus for FSDP), and data.train_batch_size >= actor ppo_mini_batch_size."""
    tbs = fs.get("data.train_batch_size")
    if _num(tbs) is None:
        return None
    n = fs.get("actor_rollout_ref.rollout.n")
    gpn, nn = fs.get("trainer.n_gpus_per_node"), fs.get("trainer.nnodes")
    mini = fs.get("actor_rollout_ref.actor.ppo_mini_batch_size")
    gpus = _num(gpn, 8) * _num(nn, 1)
    real = _num(tbs) * _num(n, 1)
    if real % gpus:
        new = next(b for b in range(_num(tbs) + 1, _num(tbs) + gpus + 1) if (b * _num(n, 1)) % gpus == 0)
        return (_lines(tbs, n, gpn, nn), f"data.train_batch_size {_num(tbs)} x rollout.n {_num(n, 1)} = {real} is not "
                f"divisible by {gpus} GPUs", {tbs.key: new})
    if _num(mini) is not None and _num(mini) > _num(tbs):
        return (_lines(tbs, mini), f"ppo_mini_batch_size {_num(mini)} > data.train_batch_size {_num(tbs)}")
    return None


def verl_strict_on_policy(fs: FactSet) -> Result:
    """A verl config whose actor update is strictly on-policy: ppo_epochs 1 and ppo_mini_batch_size ==
    data.train_batch_size (one optimizer step per rollout batch), so log_prob must equal old_log_prob,
    ppo_kl must be 0 and pg_clipfrac 0 (verl issue #6280)."""
    tbs, mini = fs.get("data.train_batch_size"), fs.get("actor_rollout_ref.actor.ppo_mini_batch_size")
    if _num(tbs) is None or _num(mini) is None or _num(tbs) != _num(mini):
        return None
    ep = fs.get("actor_rollout_ref.actor.ppo_epochs")
    if _num(ep, 1) != 1:
        return None
    return (_lines(tbs, mini, ep), f"ppo_mini_batch_size == data.train_batch_size == {_num(tbs)} and ppo_epochs 1: "
            "the update is strictly on-policy")


def _real_gpus_per_node(fs: FactSet) -> Fact | None:
    return fs.get("cluster.gpus_per_node") or fs.get("ray_start.num_gpus")


def slime_colocate_gpus_per_node(fs: FactSet) -> Result:
    """slime/Relax colocate mode lays engines out by ``--num-gpus-per-node`` (default 8; slime
    arguments.py: "must be set if using fewer than 8 GPUs per node in colocate mode")."""
    colocate = fs.get("colocate")
    if colocate is None or colocate.value is not True or fs.get("num_gpus_per_node"):
        return None
    real = _real_gpus_per_node(fs)
    apn = fs.get("actor_num_gpus_per_node")
    gpn = _num(real) if real else _num(apn)
    if gpn is None or gpn >= 8:
        return None
    return (_lines(colocate, real, apn, fs.get("actor_num_nodes")),
            f"--colocate on nodes with {gpn} GPUs but --num-gpus-per-node is not set (default 8)",
            {"num_gpus_per_node": gpn})


def slime_gpus_exceed_cluster(fs: FactSet) -> Result:
    """slime FAQ: colocate needs actor_num_nodes x actor_num_gpus_per_node GPUs; decoupled needs that
    plus rollout_num_gpus. Compared with a stated cluster (comment or ``ray start --num-gpus``)."""
    apn, an = fs.get("actor_num_gpus_per_node"), fs.get("actor_num_nodes")
    if apn is None and an is None:
        return None
    nodes, gpn = fs.get("cluster.nodes"), _real_gpus_per_node(fs)
    if gpn is None:
        return None
    total = _num(nodes, 1) * _num(gpn)
    need = _num(an, 1) * _num(apn, 8)
    colo = fs.get("colocate")
    rg = fs.get("rollout_num_gpus")
    if not (colo and colo.value is True):
        need += _num(rg, 0)
    if need > total:
        return (_lines(apn, an, rg, nodes, gpn), f"the job needs {need} GPUs but the stated cluster has {total}")
    return None


def deepspeed_single_dp_rank(fs: FactSet) -> Result:
    """ZeRO-3 on one data-parallel rank: train_batch_size == micro_batch x grad_accum x dp gives dp=1
    (DeepSpeed batch identity, deepspeed/runtime/config.py); ZeRO partitions over dp ranks only."""
    stage = fs.get("zero_optimization.stage", "zero_stage", "zero_optimization_stage", "deepspeed_config.zero_stage")
    if _num(stage) != 3:
        return None
    tbs, mb, ga = fs.get("train_batch_size"), fs.get("train_micro_batch_size_per_gpu"), fs.get("gradient_accumulation_steps")
    if None in (_num(tbs), _num(mb), _num(ga)):
        ws = fs.get("world_size", "nproc_per_node", "num_gpus", "num_processes")
        if _num(ws) == 1:
            return (_lines(stage, ws), "ZeRO stage 3 with a single GPU")
        return None
    dp = _num(tbs) // max(1, _num(mb) * _num(ga))
    if dp == 1:
        return (_lines(stage, tbs, mb, ga), f"train_batch_size {_num(tbs)} = micro {_num(mb)} x accumulation "
                f"{_num(ga)} x dp 1: ZeRO stage 3 on one data-parallel rank", {stage.key: 2})
    return None


def deepspeed_clipping_disabled(fs: FactSet) -> Result:
    """DeepSpeed gradient clipping off: ``gradient_clipping`` explicitly 0, or absent from a DeepSpeed
    config (GRADIENT_CLIPPING_DEFAULT was 0.0 = disabled until DeepSpeed PR #8068 made it 1.0).
    The DeepSpeed config print (``gradient_clipping ...... 0.0``) shows the effective value."""
    gc = fs.get("gradient_clipping")
    if gc is not None:
        v = gc.value
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0:
            return ([gc.line], f"gradient_clipping = {v}: DeepSpeed does not clip gradients")
        return None
    ds = [f for f in fs.facts if f.key.lower().startswith("zero_optimization") and f.origin in ("json", "yaml")]
    if ds:
        return ([ds[0].line], "the DeepSpeed config has no gradient_clipping entry (old default 0.0 = no clipping)")
    return None


CLIP_KEYS = ("actor_rollout_ref.actor.optim.clip_grad", "actor_rollout_ref.actor.grad_clip", "critic.optim.clip_grad",
             "clip_grad", "max_grad_norm", "max_norm")


def clipping_disabled(fs: FactSet) -> Result:
    """Gradient clipping set to 0 outside DeepSpeed: verl actor.optim.clip_grad / grad_clip, Megatron/slime
    --clip-grad, HF/TRL max_grad_norm, OpenRLHF --max_norm (0 disables clipping in each)."""
    f = fs.get(*CLIP_KEYS)
    if f is None or _num(f) is None or _num(f) != 0:
        return None
    return ([f.line], f"{f.key} = {f.value}: gradient clipping is off", {f.key: 1.0})


def slime_global_batch_mismatch(fs: FactSet) -> Result:
    """slime: with --num-steps-per-rollout, global_batch_size = rollout_batch_size x n_samples_per_prompt //
    num_steps_per_rollout, and slime asserts equality when --global-batch-size is also given
    (slime/utils/arguments.py; reference/citations.md Q2). n_samples_per_prompt defaults to 1."""
    rbs, n, gbs, steps = (fs.get("rollout_batch_size"), fs.get("n_samples_per_prompt"), fs.get("global_batch_size"),
                          fs.get("num_steps_per_rollout"))
    if None in (_num(rbs), _num(gbs), _num(steps)):
        return None
    want = _num(rbs) * _num(n, 1) // max(1, _num(steps))
    if want == _num(gbs):
        return None
    return (_lines(rbs, n, gbs, steps), f"--global-batch-size {_num(gbs)} but rollout_batch_size {_num(rbs)} x "
            f"n_samples_per_prompt {_num(n, 1)} // num_steps_per_rollout {_num(steps)} = {want}", {gbs.key: want})


_HALF = ("float16", "fp16", "half", "torch.float16")


def rollout_train_dtype_mismatch(fs: FactSet) -> Result:
    """The rollout engine samples in fp16 while training runs in bf16 (or the reverse): log-probs of the same
    tokens differ by the precision gap, so ratios and KL are off from step 1 (verl rollout.yaml:
    'dtype: bfloat16 # should align with FSDP')."""
    rd = fs.get("actor_rollout_ref.rollout.dtype", "rollout.dtype", "vllm_dtype")
    if rd is None:
        return None
    r = str(rd.value).lower()
    train_bf16 = fs.get("bf16", "bf16.enabled", "mixed_precision", "param_dtype", "actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype")
    t = str(train_bf16.value).lower() if train_bf16 else "bf16"  # verl and most trainers train in bf16 by default
    t_is_bf16 = t in ("true", "bf16", "bfloat16")
    if (r in _HALF and t_is_bf16) or (r in ("bfloat16", "bf16") and t in _HALF):
        return (_lines(rd, train_bf16), f"rollout dtype {rd.value} vs training {'bf16' if t_is_bf16 else t}",
                {rd.key: "bfloat16" if t_is_bf16 else rd.value})
    return None


def verl_rollout_tp_exceeds_gpus(fs: FactSet) -> Result:
    """verl rollout tensor parallel size (default 2 in rollout.yaml) must fit the GPUs per node and divide the
    GPU count; a 1-GPU run with the default TP 2 cannot build the rollout mesh."""
    tp = fs.get("actor_rollout_ref.rollout.tensor_model_parallel_size")
    gpn = fs.get("trainer.n_gpus_per_node")
    if gpn is None or (tp is None and not fs.find("actor_rollout_ref.rollout.name")):
        return None
    tpv, g = _num(tp, 2), _num(gpn, 8)
    world = g * _num(fs.get("trainer.nnodes"), 1)
    if tpv > g or world % tpv:
        why = "default 2 (not set)" if tp is None else str(tpv)
        return (_lines(tp, gpn), f"rollout tensor_model_parallel_size {why} does not fit {g} GPU(s) per node / {world} GPUs",
                {"actor_rollout_ref.rollout.tensor_model_parallel_size": max(d for d in range(1, g + 1) if world % d == 0 and d <= tpv)})
    return None


def verl_train_batch_below_gpus(fs: FactSet) -> Result:
    """data.train_batch_size (prompts) smaller than the number of GPUs: some verl versions split the prompt
    batch over all workers before the n samples are made (verl issue #606), so a batch below the GPU count
    cannot be dispatched."""
    tbs = fs.get("data.train_batch_size")
    world, src = world_size(fs)
    if _num(tbs) is None or world is None or _num(tbs) >= world:
        return None
    return (_lines(tbs, *src), f"data.train_batch_size {_num(tbs)} prompts < {world} GPUs", {tbs.key: world})


def deepspeed_batch_not_divisible(fs: FactSet) -> Result:
    """DeepSpeed's identity train_batch_size = micro_batch_per_gpu x gradient_accumulation x world_size
    (deepspeed/runtime/config.py); OpenRLHF derives the accumulation as train_batch_size // (micro x world), so a
    train batch that is not a multiple of micro x world fails the check at start-up."""
    tbs = fs.get("train_batch_size")
    micro = fs.get("micro_train_batch_size", "train_micro_batch_size_per_gpu")
    world, src = world_size(fs)
    if world is None:
        apn = fs.get("actor_num_gpus_per_node")
        if apn is not None:
            world, src = _num(apn, 1) * _num(fs.get("actor_num_nodes"), 1), [apn]
    if None in (_num(tbs), _num(micro), world):
        return None
    unit = _num(micro) * world
    if _num(tbs) % unit == 0:
        return None
    return (_lines(tbs, micro, *src), f"train_batch_size {_num(tbs)} is not a multiple of micro batch {_num(micro)} x "
            f"{world} GPUs = {unit}", {tbs.key: max(unit, _num(tbs) // unit * unit)})


def openrlhf_colocate_vllm_gpus(fs: FactSet) -> Result:
    """OpenRLHF with --colocate_all_models asserts actor_num_nodes x actor_num_gpus_per_node ==
    vllm_num_engines x vllm_tensor_parallel_size (openrlhf/cli/train_ppo_ray.py)."""
    if not fs.value("colocate_all_models"):
        return None
    an, apn, ne, tp = (fs.get("actor_num_nodes"), fs.get("actor_num_gpus_per_node"), fs.get("vllm_num_engines"),
                       fs.get("vllm_tensor_parallel_size"))
    if _num(ne) is None:
        return None
    actor, vllm = _num(an, 1) * _num(apn, 8), _num(ne) * _num(tp, 1)
    if actor == vllm:
        return None
    return (_lines(an, apn, ne, tp), f"actor GPUs {actor} != vllm_num_engines x vllm_tensor_parallel_size = {vllm}",
            {ne.key: max(1, actor // _num(tp, 1))})


def megatron_distopt_non_adam(fs: FactSet) -> Result:
    """Megatron's DistributedOptimizer asserts isinstance(optimizer, Adam) ('Only Adam currently supported, due
    to checkpointing requirements'); Muon variants reject it in validate_args."""
    d, o = fs.get("use_distributed_optimizer"), fs.get("optimizer")
    if d is None or d.value is not True or o is None or o.origin != "flag":
        return None
    name = str(o.value).lower()
    if name in ("adam", "adamw") or "muon" in name:
        return None
    return (_lines(d, o), f"--optimizer {o.value} with --use-distributed-optimizer", {"use_distributed_optimizer": False})


def trl_generations_not_divisible(fs: FactSet) -> Result:
    """TRL GRPOConfig/GRPOTrainer: the effective train batch (num_processes x per_device_train_batch_size
    [x gradient_accumulation_steps in newer TRL]) must be divisible by num_generations."""
    g, pd = fs.get("num_generations"), fs.get("per_device_train_batch_size")
    if g is None and pd is not None and _trl_grpo(fs):  # GRPOConfig's default (8 in every release 0.14.0-1.9.0)
        g = D.resolve(fs, "num_generations", "trl", D.version_of(fs, "trl"))
    procs = fs.get("num_processes", "nproc_per_node")
    if None in (_num(g), _num(pd)) or _num(g) < 2:
        return None
    nproc = _num(procs, 1)
    ga = _num(fs.get("gradient_accumulation_steps"), 1)
    old, new = nproc * _num(pd), nproc * _num(pd) * ga
    if new % _num(g) == 0 and (old % _num(g) == 0 or ga == 1):
        return None
    if new % _num(g):
        valid = [d for d in range(2, new + 1) if new % d == 0]
        msg = (f"{nproc} processes x per_device_train_batch_size {_num(pd)} x accumulation {ga} = {new} is not "
               f"divisible by num_generations {_num(g)}; valid values: {valid[:8]}")
    else:
        valid = [d for d in range(2, old + 1) if old % d == 0] or [old]
        msg = (f"{nproc} processes x per_device_train_batch_size {_num(pd)} = {old} is not divisible by num_generations "
               f"{_num(g)}: older TRL (the 'global train batch size' check, e.g. 0.15) rejects it; newer TRL counts "
               f"gradient accumulation ({new}) and accepts it")
    best = min(valid, key=lambda d: (d < 4, abs(d - _num(g))))  # keep groups of >= 4 when possible
    if D.is_default(g):
        msg = msg.replace(f"num_generations {_num(g)}", f"num_generations {_num(g)} ({g.origin}; the input does not set it)")
    return (D.input_lines(g, pd, procs), msg, {g.key: best})


_TRL_GRPO_KEYS = ("max_completion_length", "num_iterations", "vllm_mode", "use_vllm", "vllm_gpu_memory_utilization")


def _trl_grpo(fs: FactSet) -> bool:
    """The input configures a TRL GRPO run: a key only GRPOConfig has (trl/trainer/grpo_config.py)."""
    return any(fs.get(k) is not None for k in _TRL_GRPO_KEYS)


def context_budget_exceeds_model(fs: FactSet) -> Result:
    """Prompt + response budget above the model/engine context (max_position_embeddings, max_model_len, Megatron
    --seq-length/--max-position-embeddings): requests overflow or the engine refuses to start."""
    pairs = (("data.max_prompt_length", "data.max_response_length"), ("max_prompt_length", "max_completion_length"),
             ("rollout_max_prompt_len", "rollout_max_response_len"), ("prompt_max_len", "generate_max_len"))
    ctx_f = fs.get("max_position_embeddings", "max_model_len", "context_length")
    if _num(ctx_f) is None:
        return None
    for p, r in pairs:
        fp, fr = fs.get(p), fs.get(r)
        if _num(fp) is not None and _num(fr) is not None and _num(fp) + _num(fr) > _num(ctx_f):
            return (_lines(fp, fr, ctx_f), f"{fp.key} {_num(fp)} + {fr.key} {_num(fr)} = {_num(fp) + _num(fr)} > "
                    f"{ctx_f.key} {_num(ctx_f)}", {fr.key: max(1, _num(ctx_f) - _num(fp))})
    return None


def slime_global_batch_exceeds_rollout(fs: FactSet) -> Result:
    """slime: one rollout yields rollout_batch_size x n_samples_per_prompt samples; a --global-batch-size above
    that gives 0 optimizer steps per rollout (slime PR #2366 added a check)."""
    rbs, n, gbs = fs.get("rollout_batch_size"), fs.get("n_samples_per_prompt"), fs.get("global_batch_size")
    if None in (_num(rbs), _num(gbs)) or fs.get("num_steps_per_rollout") or rbs.origin != "flag":
        return None
    samples = _num(rbs) * _num(n, 1)
    if _num(gbs) <= samples:
        return None
    return (_lines(rbs, n, gbs), f"--global-batch-size {_num(gbs)} > rollout_batch_size {_num(rbs)} x "
            f"n_samples_per_prompt {_num(n, 1)} = {samples}: 0 training steps per rollout", {gbs.key: samples})


GROUP_KEYS = ("actor_rollout_ref.rollout.n", "n_samples_per_prompt", "num_generations", "rollout_n", "n_samples_per_prompt")


GROUP_FIX = 4  # the group size a fix raises to whatever the detection threshold (the skill's MUST DO 7: gs>=4)


def group_size_below(fs: FactSet, min: int = 4) -> Result:
    """GRPO group size (samples per prompt) below ``min``: with 1 the group-normalised advantage is
    0 (verl: mean 0/std 1 branch) or the raw reward (REINFORCE without a baseline; rllm #605)."""
    f = fs.get(*GROUP_KEYS)
    est = fs.get("adv_estimator", "advantage_estimator", "rl_algorithm")
    truncated = any(f2.value == "..." or "..." in str(f2.value) for f2 in fs.facts)
    if f is None and not truncated:
        # the framework default when the key is left out: verl rollout.n 1, slime --n-samples-per-prompt 1
        if est is not None and str(est.value).lower() == "grpo" and est.key.startswith("algorithm."):
            return ([est.line], "actor_rollout_ref.rollout.n is not set: verl's default is 1 sample per prompt",
                    {"actor_rollout_ref.rollout.n": max(min, GROUP_FIX)})
        rbs = fs.get("rollout_batch_size")
        if rbs is not None and rbs.origin == "flag" and (est is None or str(est.value).lower() == "grpo"):
            return ([rbs.line], "--n-samples-per-prompt is not set: slime's default is 1 sample per prompt",
                    {"n_samples_per_prompt": max(min, GROUP_FIX)})
        return None
    if _num(f) is None or _num(f) >= min:
        return None
    if f.key.lower().endswith("num_generations") and _num(f) < 2:
        return None  # TRL refuses it at start-up (invariants.trl_single_generation), nothing degrades silently
    if est is not None and str(est.value).lower() not in ("grpo", "gspo", "dapo", "rloo", "drgrpo", "grpo_passk",
                                                          "group_norm", "dr_grpo", "reinforce_plus_plus_baseline"):
        return None
    if est is None and f.key.lower().endswith("rollout.n"):
        return None
    return (_lines(f, est), f"{f.key} = {_num(f)} samples per prompt (< {min})", {f.key: max(min, GROUP_FIX)})


def lora_rank_with_vllm(fs: FactSet, min: int = 64) -> Result:
    """LoRA rank >= ``min`` with a vLLM rollout (verl issue #6782: no EOS at rank 64, fine at 32)."""
    r = fs.get("lora_rank", "lora_r", "r")
    if _num(r) is None or _num(r) < min:
        return None
    eng = fs.get("actor_rollout_ref.rollout.name", "rollout.name", "use_vllm", "vllm_num_engines")
    if eng is None or (str(eng.value).lower() not in ("vllm", "true") and not (eng.key.endswith("vllm_num_engines")
                                                                            and (_num(eng) or 0) > 0)):
        return None
    return (_lines(r, eng), f"LoRA rank {_num(r)} with a vLLM rollout", {r.key: 32})


CHECKS: dict[str, Callable[..., Result]] = {
    "verl_micro_exceeds_mini_per_rank": verl_micro_exceeds_mini_per_rank,
    "verl_train_batch_not_divisible": verl_train_batch_not_divisible,
    "verl_strict_on_policy": verl_strict_on_policy,
    "slime_colocate_gpus_per_node": slime_colocate_gpus_per_node,
    "slime_gpus_exceed_cluster": slime_gpus_exceed_cluster,
    "deepspeed_single_dp_rank": deepspeed_single_dp_rank,
    "deepspeed_clipping_disabled": deepspeed_clipping_disabled,
    "verl_rollout_tp_exceeds_gpus": verl_rollout_tp_exceeds_gpus,
    "verl_train_batch_below_gpus": verl_train_batch_below_gpus,
    "deepspeed_batch_not_divisible": deepspeed_batch_not_divisible,
    "openrlhf_colocate_vllm_gpus": openrlhf_colocate_vllm_gpus,
    "megatron_distopt_non_adam": megatron_distopt_non_adam,
    "trl_generations_not_divisible": trl_generations_not_divisible,
    "context_budget_exceeds_model": context_budget_exceeds_model,
    "slime_global_batch_exceeds_rollout": slime_global_batch_exceeds_rollout,
    "clipping_disabled": clipping_disabled,
    "slime_global_batch_mismatch": slime_global_batch_mismatch,
    "rollout_train_dtype_mismatch": rollout_train_dtype_mismatch,
    "group_size_below": group_size_below,
    "lora_rank_with_vllm": lora_rank_with_vllm,
    **INVARIANTS,
}
