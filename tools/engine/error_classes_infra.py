r"""Error classes harvested from the infrastructure trackers (vLLM, SGLang, Megatron-LM, DeepSpeed, Ray), placed after
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
        ErrorClass(
            "ds_zero3_stale_param_trace", "process_crash",
            "DeepSpeed ZeRO-3's parameter coordinator replayed a stale module trace (pop from an empty deque)",
            types=r"^IndexError$", text=r"pop from an empty deque",
            frames=r"record_parameters|reset_step|construct_parameter_trace_from_module_trace|_start_of_forward_hook",
            confidence="high",
            cause="ZeRO-3 records which submodules fetch parameters during the first forward and replays that trace "
                  "to prefetch; when the module hooks are removed and re-registered between steps (generation with "
                  "gathered weights: unwrap_model_for_generation / ds3_gather_for_generation) or the forward order "
                  "changes, the recorded per-module step ids run out and record_parameters pops an empty deque.",
            check="whether the trainer generates with gathered ZeRO-3 weights between training forwards (TRL "
                  "ds3_gather_for_generation, unwrap_model_for_generation), gradient checkpointing, and the DeepSpeed "
                  "version (PR 8043 in 0.19.2).",
            source="deepspeed/runtime/zero/partitioned_param_coordinator.py record_parameters: step_id = "
                   "self.__step_id_module_fetched_for[sub_module.ds_id].popleft() (v0.19.1); deepspeedai/DeepSpeed "
                   "PR 8043",
            examples=(('  File "/v/site-packages/deepspeed/runtime/zero/partitioned_param_coordinator.py", line 225, in '
                       "record_parameters\n    step_id = self.__step_id_module_fetched_for[sub_module.ds_id].popleft()\n"
                       "IndexError: pop from an empty deque"),)),
        ErrorClass(
            "ds_zero3_param_not_inflight", "process_crash",
            "DeepSpeed ZeRO-3 waited on an all-gather for a parameter that was not in flight",
            types=r"^AssertionError$", text=r"expected param \{.{0,400}\} to be inflight", confidence="medium",
            cause="ZeRO-3's partitioned-parameter handle asserts the parameter is INFLIGHT when its all-gather is "
                  "waited on; a parameter already AVAILABLE means it was gathered twice or by another handle (two "
                  "coalesced all-gathers sharing one parameter list, or a parameter fetched outside the "
                  "coordinator's order).",
            check="DeepSpeed's torch_autocast setting and version (0.17.2-0.17.4 with autocast), mixed parameter "
                  "dtypes, and any code that gathers or fetches ZeRO-3 parameters itself.",
            source="deepspeed/runtime/zero/partition_parameters.py wait: assert param.ds_status == "
                   "ZeroParamStatus.INFLIGHT, f\"expected param {param.ds_summary()} to be inflight\"; "
                   "deepspeedai/DeepSpeed PR 7462",
            examples=("AssertionError: expected param {'id': 685, 'status': 'AVAILABLE', 'numel': 131334144, "
                      "'ds_numel': 131334144, 'shape': (32064, 4096)} to be inflight",)),
        ErrorClass(
            "ds_zero2_ipg_bucket_dtype_key", "process_crash",
            "DeepSpeed ZeRO-1/2 looked up its gradient bucket by the parameter dtype instead of the reduce dtype",
            types=r"^KeyError$", text=r"KeyError: torch\.(?:bfloat16|float16|float32)", frames=r"report_ipg_memory_usage",
            confidence="high",
            cause="ZeRO-1/2 keeps one gradient (IPG) bucket per communication dtype; report_ipg_memory_usage was "
                  "given the parameter dtype, so a bf16 parameter whose gradients are reduced in fp32 (the default "
                  "communication dtype, e.g. with Ulysses sequence parallelism) has no bucket under that key.",
            check="the DeepSpeed version (0.17.2-0.18.0), the parameter dtype, and communication_data_type / "
                  "seq_parallel_communication_data_type.",
            source="deepspeed/runtime/base_optimizer.py report_ipg_memory_usage: bucket = self.ipg_buckets[dt], called "
                   "with param.dtype from stage_1_and_2.py (v0.17.2-v0.18.0); deepspeedai/DeepSpeed issue 7607, PR 7636",
            examples=(('  File "/v/site-packages/deepspeed/runtime/base_optimizer.py", line 70, in '
                       "report_ipg_memory_usage\n    bucket = self.ipg_buckets[dt]\nKeyError: torch.bfloat16"),)),
        ErrorClass(
            "megatron_flattened_range_unsupported", "checkpoint_load_error",
            "Megatron dist_checkpointing refused a ShardedTensor with flattened_range (legacy optimizer-state layout)",
            types=r"^CheckpointingException$", text=r"ShardedTensor\.flattened_range is not supported", confidence="high",
            cause="From megatron-core core_v0.16.0 ShardedTensor.validate_metadata_integrity rejects flattened_range, "
                  "but DistributedOptimizer.sharded_state_dict still builds flattened_range tensors for its default "
                  "sharding type 'fully_sharded_model_space', used whenever the caller passes no "
                  "metadata['distrib_optim_sharding_type'].",
            check="how the optimizer state dict is built (a framework calling DistributedOptimizer.sharded_state_dict "
                  "without metadata) and the megatron-core version (core_v0.16.0 and later).",
            source="megatron/core/dist_checkpointing/mapping.py ShardedTensor.validate_metadata_integrity: raise "
                   "CheckpointingException(\"ShardedTensor.flattened_range is not supported.\") (core_v0.16.0-"
                   "core_v0.19.0); NVIDIA/Megatron-LM PR 2126; areal-project/AReaL PR 1468",
            examples=("megatron.core.dist_checkpointing.core.CheckpointingException: ShardedTensor.flattened_range is "
                      "not supported.",)),
        ErrorClass(
            "ds_zero_flatten_empty_group", "config_error",
            "DeepSpeed ZeRO-1/2 tried to flatten an optimizer parameter group with no trainable parameters",
            types=r"^ValueError$", text=r"torch\.cat\(\): expected a non-empty list of Tensors",
            frames=r"flatten_dense_tensors_aligned|stage_1_and_2\.py", confidence="high",
            cause="ZeRO-1/2 flattens each optimizer parameter group into one buffer at deepspeed.initialize; a group "
                  "that holds only frozen parameters (requires_grad=False) is emptied and torch.cat gets no tensors, "
                  "e.g. DeepSpeed's Muon/AdamW split when every trainable parameter falls on one side.",
            check="the optimizer (Muon?), which parameters are frozen, and the DeepSpeed version (0.17.6-0.18.6 for "
                  "the Muon split).",
            source="torch _flatten_dense_tensors via deepspeed/runtime/zero/stage_1_and_2.py "
                   "flatten_dense_tensors_aligned; deepspeedai/DeepSpeed PR 7869",
            examples=(('  File "/w/DeepSpeed/deepspeed/runtime/zero/stage_1_and_2.py", line 1044, in '
                       "flatten_dense_tensors_aligned\n    return self.flatten(align_dense_tensors(tensor_list, "
                       "alignment))\nValueError: torch.cat(): expected a non-empty list of Tensors"),)),
    )
