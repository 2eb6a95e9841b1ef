"""Generic invariants over config facts: arithmetic every run must satisfy whatever the framework, each with the
framework's own error text where it has one (issue 11 item 5).

Each function takes a :class:`FactSet` and returns ``(lines, message[, patch])`` or None, like the checks of
:mod:`config_checks` (which registers these in ``CHECKS``). Keys are the ones the engine extracts today
(flags with ``-`` read as ``_``, dotted YAML paths matched by suffix); only keys that mean one thing across
frameworks are read bare, so a verl rollout TP is never taken for a Megatron TP.
"""
from __future__ import annotations

from typing import Any

from grpo_debug.tools.engine.facts import Fact, FactSet

Result = tuple[list[int], str] | tuple[list[int], str, dict[str, Any]] | None


def _num(f: Fact | None, default: Any = None) -> Any:
    if f is None:
        return default
    v = f.value[0] if isinstance(f.value, list) and f.value else f.value
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else default


def _lines(*facts: Fact | None) -> list[int]:
    return sorted({f.line for f in facts if f is not None})


def _bare(fs: FactSet, *names: str) -> Fact | None:
    """The last fact whose whole key is one of ``names`` (a launch flag or a top-level config key)."""
    want = {n.lower() for n in names}
    found = [f for f in fs.facts if f.key.lower() in want and _num(f) is not None]
    return max(found, key=lambda f: f.line) if found else None


def world_size(fs: FactSet) -> tuple[int | None, list[Fact]]:
    """GPUs the job trains on, from what the input states: verl trainer.n_gpus_per_node x trainer.nnodes,
    torchrun --nproc_per_node x --nnodes, deepspeed --num_gpus / --include, accelerate --num_processes,
    or a stated cluster comment."""
    gpn, nn = fs.get("trainer.n_gpus_per_node"), fs.get("trainer.nnodes")
    if gpn is not None:
        return _num(gpn, 8) * _num(nn, 1), [f for f in (gpn, nn) if f]
    npn = fs.get("nproc_per_node", "num_processes", "num_gpus")
    if npn is not None and npn.key != "ray_start.num_gpus":
        nodes = fs.get("nnodes", "num_nodes")
        return _num(npn, 1) * _num(nodes, 1), [f for f in (npn, nodes) if f]
    cn, cg = fs.get("cluster.nodes"), fs.get("cluster.gpus_per_node")
    if cg is not None:
        return _num(cn, 1) * _num(cg), [f for f in (cn, cg) if f]
    return None, []


def _world(fs: FactSet) -> tuple[int | None, list[Fact]]:
    w, src = world_size(fs)
    if w is None:
        ws = _bare(fs, "world_size", "WORLD_SIZE")
        if ws is not None:
            return _num(ws), [ws]
    return w, src


_TP = ("tensor_model_parallel_size", "tp", "tp_size", "tensor_parallel_size")
_PP = ("pipeline_model_parallel_size", "pp", "pp_size", "pipeline_parallel_size")
_CP = ("context_parallel_size", "cp", "cp_size")
_EP = ("expert_model_parallel_size", "ep", "ep_size", "expert_parallel_size")
_ETP = ("expert_tensor_parallel_size",)


def parallel_sizes_vs_world(fs: FactSet) -> Result:
    """TP x PP x CP must divide the world size (the rest is data parallel), and expert parallelism must divide
    the ranks of one pipeline stage: Megatron-LM's RankGenerator / initialize_model_parallel
    (megatron/core/parallel_state.py: 'world_size (...) is not divisible by tensor_model_parallel_size (...) x
    pipeline_model_parallel_size (...) x context_parallel_size (...)'; the expert grid uses
    world_size // pp = ep x etp x expert-dp)."""
    world, src = _world(fs)
    tp, pp, cp, ep, etp = (_bare(fs, *k) for k in (_TP, _PP, _CP, _EP, _ETP))
    if world is None or not (tp or pp or cp or ep):
        return None
    model = _num(tp, 1) * _num(pp, 1) * _num(cp, 1)
    if world % model:
        return (_lines(tp, pp, cp, *src), f"world size {world} is not divisible by TP {_num(tp, 1)} x PP {_num(pp, 1)} "
                f"x CP {_num(cp, 1)} = {model}")
    if ep is not None and (world // _num(pp, 1)) % (_num(ep) * _num(etp, 1)):
        return (_lines(ep, etp, pp, *src), f"expert parallel {_num(ep)} x expert TP {_num(etp, 1)} does not divide the "
                f"{world // _num(pp, 1)} ranks of one pipeline stage (world {world} / PP {_num(pp, 1)})")
    return None


def num_layers_vs_pipeline(fs: FactSet) -> Result:
    """Megatron-LM validate_args: num_layers must be divisible by the pipeline-model-parallel size unless an uneven
    first/last stage is given (megatron/training/arguments.py: 'Number of layers should be divisible by the
    pipeline-model-parallel size'; --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers)."""
    pp = _bare(fs, *_PP)
    layers = _bare(fs, "num_layers", "num_hidden_layers") or fs.get("num_hidden_layers")
    if _num(pp, 1) <= 1 or _num(layers) is None:
        return None
    if fs.get("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers", "pipeline_model_parallel_layout",
              "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage"):
        return None
    if _num(layers) % _num(pp) == 0:
        return None
    return (_lines(layers, pp), f"{layers.key} {_num(layers)} is not divisible by pipeline_model_parallel_size "
            f"{_num(pp)}: set decoder_first_pipeline_num_layers / decoder_last_pipeline_num_layers for an uneven split")


def deepspeed_batch_identity(fs: FactSet) -> Result:
    """DeepSpeed: train_batch_size = train_micro_batch_size_per_gpu x gradient_accumulation_steps x world_size
    (deepspeed/runtime/config.py _batch_assertion: 'Check batch related parameters. train_batch_size is not equal
    to micro_batch_per_gpu * gradient_acc_step * world_size'). With all three batch keys set, train_batch_size
    must at least be a multiple of micro x accumulation; with the world size known it must equal the product."""
    tbs = _bare(fs, "train_batch_size")
    mb = _bare(fs, "train_micro_batch_size_per_gpu")
    ga = _bare(fs, "gradient_accumulation_steps")
    if None in (tbs, mb, ga):
        return None
    unit = _num(mb) * _num(ga)
    world, src = _world(fs)
    if world is not None and _num(tbs) != unit * world:
        return (_lines(tbs, mb, ga, *src), f"train_batch_size {_num(tbs)} != train_micro_batch_size_per_gpu {_num(mb)} x "
                f"gradient_accumulation_steps {_num(ga)} x world size {world} = {unit * world}", {tbs.key: unit * world})
    if _num(tbs) % unit:
        return (_lines(tbs, mb, ga), f"train_batch_size {_num(tbs)} is not a multiple of train_micro_batch_size_per_gpu "
                f"{_num(mb)} x gradient_accumulation_steps {_num(ga)} = {unit}: no GPU count satisfies DeepSpeed's "
                "identity", {tbs.key: max(unit, _num(tbs) // unit * unit)})
    return None


def trl_single_generation(fs: FactSet) -> Result:
    """TRL refuses num_generations < 2 at start-up: ValueError 'GRPO requires at least 2 generations per prompt to
    calculate the advantages' (trl/trainer/grpo_config.py GRPOConfig.__post_init__; older releases raise it in
    GRPOTrainer.__init__). ``num_generations`` is TRL's (and TRL-based trainers') key."""
    g = fs.get("num_generations")
    if _num(g) is None or _num(g) >= 2:
        return None
    return ([g.line], f"{g.key} = {_num(g)}: TRL raises 'GRPO requires at least 2 generations per prompt to calculate "
            "the advantages' at start-up", {g.key: 4})


def trl_generation_batch_not_divisible(fs: FactSet) -> Result:
    """TRL >= 0.20: 'generation_batch_size (...) must be divisible by num_generations (...)'
    (trl/trainer/grpo_config.py GRPOConfig.__post_init__)."""
    g, gbs = fs.get("num_generations"), fs.get("generation_batch_size")
    if _num(g) is None or _num(gbs) is None or _num(g) < 2 or _num(gbs) % _num(g) == 0:
        return None
    return (_lines(g, gbs), f"generation_batch_size ({_num(gbs)}) must be divisible by num_generations ({_num(g)})",
            {gbs.key: max(_num(g), _num(gbs) // _num(g) * _num(g))})


def _is_verl(fs: FactSet, *facts: Fact | None) -> bool:
    return any(f is not None and f.key.startswith("actor_rollout_ref.") for f in facts) or fs.get(
        "actor_rollout_ref.rollout.name", "actor_rollout_ref.model.path") is not None


def batched_tokens_below_context(fs: FactSet) -> Result:
    """Chunked prefill off: one engine step must hold a whole prompt, so max_num_batched_tokens must be >=
    max_model_len (vLLM vllm/config/scheduler.py: 'max_num_batched_tokens (...) is smaller than max_model_len (...)').

    In verl, a key the input does not write takes its release default (:mod:`defaults`: rollout
    ``max_num_batched_tokens`` is 8192 in every release 0.3.0-0.9.0), and an unset ``max_model_len`` is derived:
    prompt_length + response_length up to 0.6 (``vllm_async_server.py`` / ``vllm_rollout_spmd.py``), the model's
    ``max_position_embeddings`` from 0.7.0 (``vllm_async_server.py``: ``if self.config.max_model_len is None:
    self.config.max_model_len = max_position_embeddings``), which is never below prompt + response; so
    prompt + response is the need in every release unless the model's positions are known (verl #7624, PR #7632).

    The implicit default is used only for a stated verl release below 0.7.0: from 0.7.0 to 0.9.0 verl starts vLLM
    through ``build_cli_args_from_config`` (``vllm_rollout/utils.py``), which skips a bool False, so
    ``enable_chunked_prefill=False`` never reaches vLLM and nothing fails (verl #7508 made False reach it on main,
    #7632 then raised the token budget itself); with no stated release the default cannot decide."""
    from grpo_debug.tools.engine import defaults as D

    chunked = fs.get("enable_chunked_prefill")
    if chunked is None or chunked.value not in (False, "false", "False", 0):
        return None
    mbt = fs.get("max_num_batched_tokens")
    verl = _is_verl(fs, chunked, mbt)
    version = D.version_of(fs, "verl") if verl else None
    if mbt is None and verl and version and _release(version) < (0, 7):
        mbt = D.resolve(fs, "actor_rollout_ref.rollout.max_num_batched_tokens", "verl", version)
    if _num(mbt) is None:
        return None
    need, what, used = _batched_need(fs, verl, version)
    if need is None or _num(mbt) >= need:
        return None
    said = f"{mbt.key} {_num(mbt)}" + (f" ({mbt.origin}; the input does not set it)" if D.is_default(mbt) else "")
    lines = D.input_lines(mbt, chunked, *used)
    patch = {mbt.key: need}
    if verl and fs.get("max_model_len") is None:  # pin the length the budget was sized for (0.7+ derive more)
        patch[mbt.key.rsplit(".", 1)[0] + ".max_model_len"] = need
    return (lines, f"{said} < {what} with enable_chunked_prefill off", patch)


def _batched_need(fs: FactSet, verl: bool, version: str | None) -> tuple[Any, str, list]:
    """The tokens one engine step must hold: max_model_len when set, else (verl) the derived length."""
    ctx = fs.get("max_model_len")
    if _num(ctx) is not None:
        return _num(ctx), f"{ctx.key} {_num(ctx)}", [ctx]
    pos = fs.get("max_position_embeddings")
    if verl and version and _release(version) >= (0, 7) and _num(pos) is not None:
        return _num(pos), f"max_model_len derived from the model's max_position_embeddings {_num(pos)} (verl {version})", [pos]
    p, r = fs.get("data.max_prompt_length", "prompt_length"), fs.get("data.max_response_length", "response_length")
    if _num(p) is None or _num(r) is None:
        return None, "", []
    return _num(p) + _num(r), f"prompt {_num(p)} + response {_num(r)} = {_num(p) + _num(r)}", [p, r]


def _release(v: str) -> tuple[int, ...]:
    out = []
    for x in v.split(".")[:2]:
        d = "".join(c for c in x if c.isdigit())
        out.append(int(d) if d else 0)
    return tuple(out)


_BUDGETS = (("data.max_prompt_length", "data.max_response_length"), ("max_prompt_length", "max_completion_length"),
            ("rollout_max_prompt_len", "rollout_max_response_len"), ("prompt_max_len", "generate_max_len"),
            ("prompt_length", "response_length"))


def context_budget(fs: FactSet) -> Result:
    """Every context limit the input states, checked against each other: prompt + response must fit both the
    engine's max_model_len and the model's max_position_embeddings, and max_model_len may not exceed the model's
    positions (vLLM vllm/config/model.py _get_and_verify_max_len: 'User-specified max_model_len (...) is greater
    than the derived max_model_len (...)'). Checks each limit, not only the last one set."""
    limits = [f for f in (fs.get("max_model_len"), fs.get("max_position_embeddings")) if _num(f) is not None]
    for p_key, r_key in _BUDGETS:
        fp, fr = fs.get(p_key), fs.get(r_key)
        if _num(fp) is None or _num(fr) is None:
            continue
        for lim in limits:
            if _num(fp) + _num(fr) > _num(lim):
                return (_lines(fp, fr, lim), f"{fp.key} {_num(fp)} + {fr.key} {_num(fr)} = {_num(fp) + _num(fr)} > "
                        f"{lim.key} {_num(lim)}", {fr.key: max(1, _num(lim) - _num(fp))})
        break
    if len(limits) == 2 and _num(limits[0]) > _num(limits[1]):
        return (_lines(*limits), f"{limits[0].key} {_num(limits[0])} > the model's {limits[1].key} {_num(limits[1])}",
                {limits[0].key: _num(limits[1])})
    return None


_FRACTIONS = ("gpu_memory_utilization", "vllm_gpu_memory_utilization", "mem_fraction_static",
              "sglang_mem_fraction_static")
_COLOCATE = ("colocate", "colocate_all_models", "vllm_mode", "hybrid_engine", "colocate_actor_ref")


def colocated_memory_fraction(fs: FactSet, max: float = 0.9) -> Result:
    """A rollout engine that shares its GPUs with training (TRL vllm_mode colocate, OpenRLHF
    --colocate_all_models, slime --colocate) and reserves more than ``max`` of GPU memory for itself leaves
    too little for the trainer's weights, gradients and optimizer state unless the engine sleeps/offloads
    during training (vLLM gpu_memory_utilization and SGLang mem_fraction_static are fractions of the whole GPU)."""
    frac = fs.get(*_FRACTIONS)
    col = fs.get(*_COLOCATE)
    if _num(frac) is None or col is None or _num(frac) <= max:
        return None
    if col.value in (False, "false", None, "server") or str(col.value).lower() in ("server", "false"):
        return None
    if fs.get("vllm_enable_sleep_mode", "enable_sleep_mode", "offload_rollout", "free_cache_engine") is not None:
        sleep = fs.get("vllm_enable_sleep_mode", "enable_sleep_mode", "offload_rollout", "free_cache_engine")
        if sleep.value not in (False, "false", 0):
            return None
    return (_lines(frac, col), f"{frac.key} {_num(frac)} on GPUs shared with training ({col.key} = {col.value})",
            {frac.key: 0.5})


INVARIANTS = {
    "parallel_sizes_vs_world": parallel_sizes_vs_world,
    "num_layers_vs_pipeline": num_layers_vs_pipeline,
    "deepspeed_batch_identity": deepspeed_batch_identity,
    "trl_single_generation": trl_single_generation,
    "trl_generation_batch_not_divisible": trl_generation_batch_not_divisible,
    "batched_tokens_below_context": batched_tokens_below_context,
    "colocated_memory_fraction": colocated_memory_fraction,
    "context_budget": context_budget,
}
