"""Error classes harvested from the infrastructure trackers (vLLM, SGLang, Megatron-LM, DeepSpeed, Ray), placed after
the tables of :mod:`error_classes` and :mod:`error_classes_crash` (the first class whose tests hold wins, so every
class there is tried first). A traceback whose frames lie under site-packages/<library>/ is taken by the earlier
``api_version_mismatch`` class, so the rules match ``^\[(?:api_version_mismatch|<class>)\]`` plus the message.

Each class quotes the framework's own message and names the code that raises it and the thread it was harvested
from (docs/harvest_index_infra.md lists the threads read). The rules that explain them live in
``skills/rules/{deepspeed,megatron,vllm_sglang,ray}/``.
"""
from __future__ import annotations

from grpo_debug.tools.engine.error_class_base import ErrorClass


def infra_classes() -> tuple[ErrorClass, ...]:
    """The class table (a function that only returns a literal table is data)."""
    return (
        ErrorClass(
            "ds_zero_params_plain_dict", "process_crash",
            "DeepSpeed ZeRO-3 forward hook set an attribute on a module's plain-dict _parameters",
            types=r"^AttributeError$", text=r"'dict' object has no attribute '_in_forward'", confidence="high",
            cause="DeepSpeed's ZeRO-3 forward prologue/epilogue sets module._parameters._in_forward; from PyTorch 2.5 "
                  "nn.Module._parameters is a plain dict, which only DeepSpeed's ZeROOrderedDict wrapper (applied at "
                  "deepspeed.initialize) accepts, so a module attached after initialize (a PEFT/LoRA adapter, a "
                  "re-created submodule) crashes the next forward.",
            check="the DeepSpeed and torch versions (DeepSpeed < 0.19.1 with torch >= 2.5), and whether modules were "
                  "added to the model after deepspeed.initialize().",
            source="deepspeed/runtime/engine.py forward: module._parameters._in_forward = True/False (v0.19.0); "
                   "deepspeedai/DeepSpeed issue 6961, fixed by PR 8009 (ensure_zero_ordered_dict, first in v0.19.1)",
            examples=("AttributeError: 'dict' object has no attribute '_in_forward'",)),
        ErrorClass(
            "ds_zero3_coalesced_gather_same_dtype", "process_crash",
            "DeepSpeed ZeRO-3 coalesced all-gather refused parameters of different dtypes",
            types=r"^AssertionError$", text=r"all params must have the same dtype", confidence="high",
            cause="ZeRO-3's _all_gather_dtype asserts every parameter of a coalesced bucket has the dtype of the first; "
                  "with DeepSpeed torch_autocast on, bf16 base weights and fp32 trainable parameters (PEFT LoRA "
                  "adapters kept in fp32) share one bucket and the assertion fails although both would be "
                  "communicated in the autocast dtype.",
            check="the torch_autocast section of the DeepSpeed config, the dtypes of the trainable parameters (LoRA "
                  "adapters in fp32?) and the DeepSpeed version (0.17.2 to 0.19.2).",
            source="deepspeed/runtime/zero/partition_parameters.py _all_gather_dtype: assert all(p.dtype == dtype for p "
                   "in params), \"all params must have the same dtype\" (v0.17.2-v0.19.2); deepspeedai/DeepSpeed PR 8113",
            examples=("AssertionError: all params must have the same dtype",)),
        ErrorClass(
            "vllm_wake_up_nested_kv_cache", "process_crash",
            "vLLM wake-up zeroed an FP8 KV cache whose entries are lists of tensors (hybrid models)",
            types=r"^AttributeError$", text=r"'list' object has no attribute 'zero_'", confidence="medium",
            cause="On wake-up vLLM's GPUModelRunner.init_fp8_kv_scales zeroes every entry of self.kv_caches when the KV "
                  "cache dtype is fp8; hybrid models (Mamba, DeltaNet, hybrid sliding-window) keep a list of state "
                  "tensors per layer, and list has no zero_(), so the wake-up RPC fails and the engine is left "
                  "asleep or dead.",
            check="--kv-cache-dtype (fp8*), --enable-sleep-mode, whether the model is a hybrid (Mamba/DeltaNet/"
                  "linear-attention layers) and the vLLM version.",
            source="vllm/v1/worker/gpu_model_runner.py init_fp8_kv_scales: for cache_tensor in kv_caches: "
                   "cache_tensor.zero_(); vllm-project/vllm issues 41564 and 49237, PR 41602",
            examples=("AttributeError: 'list' object has no attribute 'zero_'",)),
        ErrorClass(
            "sglang_cache_flush_after_weight_update", "process_crash",
            "SGLang could not flush its cache after a weight update because requests were still queued or running",
            types=r"^AssertionError$", text=r"Cache flush failed after updating weights", confidence="high",
            cause="An update_weights_from_disk/_distributed/_tensor request with flush_cache=True (the default) "
                  "finished loading while the scheduler still held running or waiting requests; flush_cache() "
                  "refuses then ('Cache not flushed because there are pending requests') and the weight updater "
                  "asserts on the result, killing the scheduler process.",
            check="the 'Cache not flushed because there are pending requests. #queue-req: N, #running-req: M' line "
                  "before it, how generation was paused before the update (pause_generation mode) and the SGLang "
                  "version.",
            source="sglang/srt/managers/scheduler_update_weights_mixin.py (0.5.5-0.5.10) and "
                   "scheduler_components/weight_updater.py (0.5.20-0.5.21): assert flush_cache_success, \"Cache flush "
                   "failed after updating weights\"; sgl-project/sglang issues 12099 and 14062",
            examples=("AssertionError: Cache flush failed after updating weights",)),
    )
