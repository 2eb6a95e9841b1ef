"""Per-GPU memory estimate for an RL post-training step (actor training + reference model + colocated rollout
engine), by component, each with its formula and source. Pure arithmetic: no torch, no device.

Model states (ZeRO paper, Rajbhandari et al. 2019, arXiv:1910.02054, section 3.1 and Figure 1): mixed-precision
Adam keeps 2 (bf16/fp16 weights) + 2 (bf16/fp16 gradients) + K = 12 (fp32 master 4 + momentum 4 + variance 4)
= 16 bytes per parameter. ZeRO stage 1 shards the optimizer state over the data-parallel degree N_d, stage 2 also
the gradients, stage 3 also the weights; FSDP FULL_SHARD shards like stage 3. Paper check: 7.5B params, N_d = 1
-> 120 GB; stage 3 at N_d = 64 -> 1.9 GB (Figure 1). See also skills/derivations/zero3-single-rank-overhead.yaml.

Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
arXiv:2205.05198, section 4): per transformer layer s*b*h*(34 + 5*a*s/h) bytes without recomputation in 16-bit;
the 5*a*s/h attention-score term is not stored with flash attention, leaving ~34*s*b*h; tensor parallel with
sequence parallel divides it by t. With full activation checkpointing only each layer's input (2*s*b*h bytes)
is kept, plus one layer's activations recomputed during its backward.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from grpo_debug.probes.base import Confined, RefusedFile, probe
from grpo_debug.skills.knowledge import find_gpu

GiB = 1024 ** 3
ZERO = "ZeRO paper, arXiv:1910.02054 (sec. 3.1, Fig. 1)"
KORTH = "Korthikanti et al. 2022, arXiv:2205.05198 (sec. 4)"
LORA = "LoRA, Hu et al. 2021, arXiv:2106.09685 (r*(d_in+d_out) params per adapted matrix)"

DTYPE_BYTES = {"bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "half": 2, "fp32": 4, "float32": 4}
# Optimizer state bytes per trainable parameter for mixed-precision training (fp32 master copy included)
# and for pure fp32 training (no master copy: the weights already are fp32).
OPT_BYTES_MIXED = {"adam": 12, "adamw": 12, "adam_8bit": 6, "adamw_8bit": 6, "sgd": 8, "sgd_momentum": 8}
OPT_BYTES_FP32 = {"adam": 8, "adamw": 8, "adam_8bit": 2, "adamw_8bit": 2, "sgd": 4, "sgd_momentum": 4}
LORA_TARGETS = 7  # q, k, v, o, gate, up, down
CUDA_CONTEXT_GIB = 1.0


class MemoryComponent(BaseModel):
    name: str
    gib: float = Field(description="GiB per GPU (2**30 bytes).")
    formula: str
    source: str
    note: str = ""


class MemoryEstimate(BaseModel):
    params_b: float = Field(description="Total parameters, billions.")
    trainable_params_b: float
    hidden_size: int
    num_layers: int
    vocab_size: int
    components: list[MemoryComponent]
    model_states_bytes_per_param: float = Field(
        description="(weights + gradients + optimizer) bytes per GPU / total params; 16 for mixed Adam at dp=1.")
    model_states_gb: float = Field(description="Weights + gradients + optimizer per GPU in decimal GB (ZeRO paper units).")
    total_gib: float
    gpu: str
    gpu_memory_gib: float | None = None
    headroom_gib: float | None = None
    fits: bool | None = Field(None, description="total <= GPU memory; None when the GPU is unknown.")
    verdict: str
    assumptions: list[str]


#: A config.json is a few kB; anything past this is not one (and a link to /dev/zero stops here).
MAX_CONFIG_BYTES = 4 * 2**20


def _read_config_file(p: Path) -> bytes:
    """The bytes of config.json at ``p`` (a file or a model folder), read with probes/base.py's safe reader:
    opened once without following a last link (O_NOFOLLOW on the resolved path) and non-blocking, regular files
    only, at most MAX_CONFIG_BYTES. ValueError says why not (a FIFO, a device such as /dev/zero, too big)."""
    real = Path(os.path.realpath(p))
    if real.is_dir():
        real = Path(os.path.realpath(real / "config.json"))
    try:
        return Confined(real.parent).read(real, MAX_CONFIG_BYTES)
    except RefusedFile as e:
        raise ValueError(f"{p}: {real.name if real.name != p.name else 'the file'} is {e}") from None
    except OSError as e:
        raise ValueError(f"{p}: cannot read it: {e.strerror or e}") from None


def _load_config(config_json: str) -> dict[str, Any]:
    s = config_json.strip()
    if s.startswith("{"):
        data = json.loads(s)
    else:
        data = json.loads(_read_config_file(Path(s).expanduser()).decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError("config.json is not a JSON object")
    if "hidden_size" not in data and isinstance(data.get("text_config"), dict):
        data = {**data, **data["text_config"]}  # multimodal configs keep the LM under text_config
    return data


def params_from_config(cfg: dict[str, Any]) -> tuple[float, str]:
    """Parameter count from a HF config (dense or MoE, GQA, gated MLP, tied embeddings); returns (params, formula)."""
    h = int(cfg["hidden_size"])
    L = int(cfg["num_hidden_layers"])
    V = int(cfg.get("vocab_size") or 0)
    heads = int(cfg.get("num_attention_heads") or max(1, h // 128))
    kv = int(cfg.get("num_key_value_heads") or heads)
    hd = int(cfg.get("head_dim") or h // heads)
    ffn = int(cfg.get("intermediate_size") or 4 * h)
    act = str(cfg.get("hidden_act") or cfg.get("activation_function") or "silu").lower()
    gated = any(x in act for x in ("silu", "swiglu", "geglu", "swish")) or cfg.get("model_type") in {
        "llama", "qwen2", "qwen3", "mistral", "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gemma", "gemma2"}
    mlp_mats = 3 if gated else 2
    attn = h * heads * hd + 2 * h * kv * hd + heads * hd * h
    experts = int(cfg.get("num_experts") or cfg.get("num_local_experts") or cfg.get("n_routed_experts") or 0)
    if experts:
        moe_ffn = int(cfg.get("moe_intermediate_size") or ffn)
        shared = int(cfg.get("n_shared_experts") or 0) * moe_ffn + int(cfg.get("shared_expert_intermediate_size") or 0)
        mlp = mlp_mats * h * (experts * moe_ffn + shared) + h * experts  # + router
        mlp_f = f"{mlp_mats}*h*(E*moe_ffn + shared_ffn) + h*E with E={experts}, moe_ffn={moe_ffn}"
    else:
        mlp = mlp_mats * h * ffn
        mlp_f = f"{mlp_mats}*h*ffn with ffn={ffn}"
    tied = bool(cfg.get("tie_word_embeddings", False))
    emb = V * h * (1 if tied else 2)
    total = L * (attn + mlp + 2 * h) + emb + h
    formula = (f"L*(attn + mlp + 2h) + {'V*h (tied)' if tied else '2*V*h'} with L={L}, h={h}, V={V}, "
               f"attn = h*heads*hd + 2*h*kv*hd + heads*hd*h (heads={heads}, kv={kv}, hd={hd}), mlp = {mlp_f}")
    return float(total), formula


def _validate(dtype: str, optimizer: str, zero_stage: int, smallest: int, lora_rank: int,
              rollout_mem_fraction: float) -> tuple[str, str]:
    """The dtype and optimizer keys of the tables; ValueError naming what is out of range."""
    dkey = dtype.lower()
    if dkey not in DTYPE_BYTES:
        raise ValueError(f"dtype {dtype!r} not one of {sorted(DTYPE_BYTES)}")
    okey = optimizer.lower().replace("-", "_")
    if okey not in OPT_BYTES_MIXED:
        raise ValueError(f"optimizer {optimizer!r} not one of {sorted(OPT_BYTES_MIXED)}")
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError("zero_stage must be 0, 1, 2 or 3")
    if smallest < 1 or lora_rank < 0 or not 0 <= rollout_mem_fraction < 1:
        raise ValueError("dp, tp, pp, micro_batch, seq_len must be >= 1, lora_rank >= 0, 0 <= rollout_mem_fraction < 1")

    return dkey, okey


def _shape(params_b: float | None, config_json: str | None, hidden_size: int | None, num_layers: int | None,
           vocab_size: int | None, assumptions: list[str]) -> tuple[float, int, int, int]:
    """Parameters, hidden size, layers and vocabulary: as given, from config.json, or assumed (said in ``assumptions``)."""
    cfg: dict[str, Any] = {}
    if config_json:
        cfg = _load_config(config_json)
    h = hidden_size or (int(cfg["hidden_size"]) if cfg.get("hidden_size") else None)
    L = num_layers or (int(cfg["num_hidden_layers"]) if cfg.get("num_hidden_layers") else None)
    V = vocab_size or (int(cfg["vocab_size"]) if cfg.get("vocab_size") else None)
    if params_b is not None:
        P = params_b * 1e9
        assumptions.append(f"parameters: {params_b:g}B as given")
    elif cfg.get("hidden_size") and cfg.get("num_hidden_layers"):
        P, f = params_from_config(cfg)
        assumptions.append(f"parameters estimated from config.json: {P / 1e9:.2f}B = {f}")
    else:
        raise ValueError("pass params_b or a config_json with hidden_size and num_hidden_layers")
    if h is None or L is None:
        # Typical dense shape: P ~ 12*L*h^2 with h ~ 128*L (Llama-2-7B 4096/32, Qwen2.5-7B 3584/28).
        Lg = max(1, round((P / (12 * 128 ** 2)) ** (1 / 3)))
        L = L or Lg
        h = h or int(math.sqrt(P / (12 * L)))
        assumptions.append(f"hidden_size/num_layers not given: assumed h={h}, L={L} from P ~ 12*L*h^2 with h ~ 128*L")
    if V is None:
        V = 128_256
        assumptions.append("vocab_size not given: assumed 128,256 (Llama 3); Qwen2.5 is 151,936")

    return P, h, L, V


def _verdict(total: float, gpu_gib: float | None, gpu: str) -> tuple[float | None, bool | None, str]:
    """Headroom, whether it fits, and the verdict in words (tight under 10% headroom)."""
    if gpu_gib is not None:
        head = gpu_gib - total
        fits = head >= 0
        if not fits:
            verdict = f"does not fit: {total:.1f} GiB > {gpu_gib:g} GiB ({-head:.1f} GiB over)"
        elif head < 0.1 * gpu_gib:
            verdict = f"tight: {total:.1f} of {gpu_gib:g} GiB, {head:.1f} GiB headroom (< 10%; fragmentation may OOM)"
        else:
            verdict = f"fits: {total:.1f} of {gpu_gib:g} GiB, {head:.1f} GiB headroom"
    else:
        head, fits, verdict = None, None, f"{total:.1f} GiB per GPU (GPU {gpu!r} unknown)"

    return head, fits, verdict


def _activations(add, s: int, b: int, h: int, L: int, tp: int, V: int, gradient_checkpointing: bool,
                 assumptions: list[str]) -> None:
    """The activation and logits components (Korthikanti et al. 2022; fp32 logits for the log-prob pass)."""
    if gradient_checkpointing:
        act = 2 * s * b * h * L / tp + 34 * s * b * h / tp
        add("activations", act, f"2*s*b*h*L/tp + 34*s*b*h/tp (layer inputs kept + one layer recomputed; s={s}, b={b}, h={h}, L={L})",
            KORTH, "full recomputation; flash attention (no 5*a*s^2*b score term)")
    else:
        act = 34 * s * b * h * L / tp
        add("activations", act, f"34*s*b*h*L/tp (s={s}, b={b}, h={h}, L={L})", KORTH,
            "no recomputation; flash attention (no 5*a*s^2*b score term)")
    assumptions.append("activations: 16-bit, flash attention, sequence parallel with tp; with pp and 1F1B the first "
                       "stage holds pp micro-batches in flight, so pp does not reduce it (Korthikanti sec. 4.2.3); "
                       "34 assumes a 4h MLP, SwiGLU FFNs differ")

    logits = s * b * V * 4 / tp
    add("logits", logits, f"s*b*V*4/tp (fp32 logits for the log-prob pass; V={V})", "arithmetic (fp32 = 4 bytes)",
        "log_softmax / entropy can hold 2-3 such tensors transiently; chunked log-prob kernels avoid it")



def _reference(add, P: float, mp: int, shard_w: int, shard_w_txt: str, ref_model: bool, lora_rank: int,
               ref_offload: bool, assumptions: list[str]) -> None:
    """The reference policy's weights: none, the actor itself (LoRA), offloaded, or a bf16 copy sharded like the actor."""
    if not ref_model:
        add("ref_model", 0.0, "no reference model (KL off)", "configuration")
    elif lora_rank > 0:
        add("ref_model", 0.0, "0: LoRA reference = actor with the adapter disabled",
            "verl fsdp_workers (ref_in_actor when lora_rank > 0)")
        assumptions.append("LoRA: the reference policy is the actor with the adapter disabled (verl), no second copy")
    elif ref_offload:
        add("ref_model", 0.0, "0: reference weights offloaded to CPU between ref log-prob passes", "configuration")
    else:
        add("ref_model", P * 2 / mp / shard_w, f"P*2{shard_w_txt} (bf16, sharded like the actor)", ZERO)


def _runtime(add, gpu: str, rollout_mem_fraction: float, assumptions: list[str]):
    """The colocated rollout engine's reserved fraction and the CUDA context; the GPU spec and its GiB."""
    spec = find_gpu(gpu)
    gpu_gib = float(spec.memory_gb) if spec else None
    if spec:
        assumptions.append(f"GPU {spec.name}: {spec.memory_gb:g} GB treated as GiB (device GB are binary in practice: "
                           "an RTX 4090 reports 24564 MiB)")
    else:
        assumptions.append(f"GPU {gpu!r} not in the spec table (skills/gpus.yaml): fit not judged")
    if rollout_mem_fraction > 0:
        if gpu_gib is None:
            raise ValueError("rollout_mem_fraction needs a known gpu")
        add("rollout_engine", rollout_mem_fraction * gpu_gib * GiB,
            f"{rollout_mem_fraction:g} * {gpu_gib:g} GiB (vLLM gpu_memory_utilization / SGLang mem_fraction_static)",
            "vLLM / SGLang engine arguments")
        assumptions.append("colocated rollout engine keeps its reserved fraction during training (no sleep/offload); "
                           "with vLLM sleep mode / SGLang release_memory_occupation most of it is freed - set 0 then")
    add("cuda_context", CUDA_CONTEXT_GIB * GiB, f"{CUDA_CONTEXT_GIB:g} GiB fixed", "assumption",
        "CUDA context, cuBLAS workspace, NCCL buffers; allocator fragmentation not included")
    assumptions.append("all components summed as resident at once: an upper bound for the training phase")
    return spec, gpu_gib


def _sharding(dtype: str, optimizer: str, dkey: str, okey: str, fsdp: bool, zero_stage: int, dp: int, tp: int,
              pp: int, lora_rank: int, assumptions: list[str]) -> tuple[int, int, int, int, int, int]:
    """(tp*pp, the dp shard factors of weights, gradients and optimizer state, weight bytes, optimizer bytes)."""
    mp = tp * pp
    stage = 3 if fsdp else zero_stage
    if fsdp:
        assumptions.append("fsdp=True: FSDP FULL_SHARD shards weights, gradients and optimizer state over dp like ZeRO stage 3")
    if stage > 0 and dp == 1 and lora_rank == 0:
        assumptions.append(f"ZeRO stage {stage} at dp=1 shards nothing: 16 bytes/param at any stage "
                           "(derivation zero3-single-rank-overhead)")
    shard_w = dp if stage >= 3 else 1
    shard_g = dp if stage >= 2 else 1
    shard_o = dp if stage >= 1 else 1
    assumptions.append(f"model states divided by tp*pp = {mp} (each rank holds 1/(tp*pp) of the layers' weights)")

    wb = DTYPE_BYTES[dkey]
    mixed = wb == 2
    ob = (OPT_BYTES_MIXED if mixed else OPT_BYTES_FP32)[okey]
    assumptions.append(
        f"{dtype} weights and gradients ({wb} bytes each); optimizer {optimizer}: {ob} bytes/trainable param"
        + (" (fp32 master 4 + momentum 4 + variance 4)" if mixed and okey in ("adam", "adamw") else "")
        + ". Megatron-LM keeps fp32 main gradients (+2 bytes/param, 18 total) - not modelled")
    return mp, shard_w, shard_g, shard_o, wb, ob


@probe
def estimate_memory(
    params_b: float | None = None,
    config_json: str | None = None,
    dtype: str = "bf16",
    optimizer: str = "adam",
    zero_stage: int = 0,
    fsdp: bool = False,
    dp: int = 1,
    tp: int = 1,
    pp: int = 1,
    lora_rank: int = 0,
    ref_model: bool = True,
    ref_offload: bool = False,
    param_offload: bool = False,
    optimizer_offload: bool = False,
    rollout_mem_fraction: float = 0.0,
    seq_len: int = 4096,
    micro_batch: int = 1,
    hidden_size: int | None = None,
    num_layers: int | None = None,
    vocab_size: int | None = None,
    gradient_checkpointing: bool = True,
    gpu: str = "h100_sxm",
) -> MemoryEstimate:
    """GiB per GPU by component for one actor training step of an RL run; see the module docstring for sources.

    ``config_json`` is a path to config.json, a model folder, or the JSON text itself. Explicit ``params_b``,
    ``hidden_size``, ``num_layers`` and ``vocab_size`` override what the config says.
    """
    assumptions: list[str] = []
    dkey, okey = _validate(dtype, optimizer, zero_stage, min(dp, tp, pp, micro_batch, seq_len), lora_rank,
                           rollout_mem_fraction)

    P, h, L, V = _shape(params_b, config_json, hidden_size, num_layers, vocab_size, assumptions)

    mp, shard_w, shard_g, shard_o, wb, ob = _sharding(dtype, optimizer, dkey, okey, fsdp, zero_stage, dp, tp, pp,
                                                       lora_rank, assumptions)
    comps: list[MemoryComponent] = []

    def add(name: str, nbytes: float, formula: str, source: str, note: str = "") -> None:
        comps.append(MemoryComponent(name=name, gib=nbytes / GiB, formula=formula, source=source, note=note))

    shard_w_txt = f"/(tp*pp={mp})" + (f"/(dp={dp})" if shard_w > 1 else "")
    if lora_rank > 0:
        T = 2 * lora_rank * h * L * LORA_TARGETS
        assumptions.append(f"LoRA r={lora_rank} on q,k,v,o,gate,up,down: trainable ~ 2*r*h*L*7 = {T / 1e6:.1f}M "
                           "(undercounts gate/up/down, whose d_out is the FFN width); base weights frozen, no grads/optimizer")
        w_bytes = 0.0 if param_offload else P * wb / mp / shard_w
        add("weights", w_bytes, f"P*{wb}{shard_w_txt} (frozen base)" + (" -> 0 (param_offload)" if param_offload else ""), ZERO)
        add("lora_weights", T * wb / mp / shard_w, f"2*r*h*L*7*{wb}{shard_w_txt}", LORA)
        add("gradients", T * wb / mp / shard_g, f"T*{wb}/(tp*pp)" + (f"/(dp={dp})" if shard_g > 1 else "") + " (adapters only)", ZERO)
        o = 0.0 if optimizer_offload else T * ob / mp / shard_o
        add("optimizer", o, f"T*{ob}/(tp*pp)" + (f"/(dp={dp})" if shard_o > 1 else "") + (" -> 0 (optimizer_offload)" if optimizer_offload else ""), ZERO)
        trainable = T
        states = w_bytes + T * wb / mp / shard_w + T * wb / mp / shard_g + o
    else:
        w_bytes = 0.0 if param_offload else P * wb / mp / shard_w
        add("weights", w_bytes, f"P*{wb}{shard_w_txt}" + (" -> 0 (param_offload)" if param_offload else ""), ZERO,
            "param_offload keeps weights in CPU memory between uses; a layer is still gathered on the GPU" if param_offload else "")
        g = P * wb / mp / shard_g
        add("gradients", g, f"P*{wb}/(tp*pp)" + (f"/(dp={dp})" if shard_g > 1 else ""), ZERO)
        o = 0.0 if optimizer_offload else P * ob / mp / shard_o
        add("optimizer", o, f"P*{ob}/(tp*pp)" + (f"/(dp={dp})" if shard_o > 1 else "")
            + (" -> 0 (optimizer_offload)" if optimizer_offload else ""), ZERO)
        trainable = P
        states = w_bytes + g + o

    _reference(add, P, mp, shard_w, shard_w_txt, ref_model, lora_rank, ref_offload, assumptions)
    _activations(add, seq_len, micro_batch, h, L, tp, V, gradient_checkpointing, assumptions)
    spec, gpu_gib = _runtime(add, gpu, rollout_mem_fraction, assumptions)
    total = sum(c.gib for c in comps)
    head, fits, verdict = _verdict(total, gpu_gib, gpu)

    return MemoryEstimate(
        params_b=P / 1e9, trainable_params_b=trainable / 1e9, hidden_size=h, num_layers=L, vocab_size=V,
        components=comps, model_states_bytes_per_param=states / P, model_states_gb=states / 1e9,
        total_gib=total, gpu=spec.id if spec else gpu, gpu_memory_gib=gpu_gib, headroom_gib=head, fits=fits,
        verdict=verdict, assumptions=assumptions,
    )
