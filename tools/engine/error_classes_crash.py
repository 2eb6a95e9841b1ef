"""Error classes for crashes and start-up refusals that real reports show, placed after the table of
:mod:`error_classes` (the first class whose tests hold wins, so every class there is tried first).

A class whose symptom is ``process_crash`` says what died and where, not why: ``tools/error_findings.py`` turns it
into a finding only when nothing more specific explains the input, and names the first error that explains the
others (a vLLM ``EngineDeadError`` says the root cause is printed above it). Each ``source`` names the code that
prints the text; texts seen only in reports say which report.
"""
from __future__ import annotations

from grpo_debug.tools.engine.error_class_base import ErrorClass

# lower-case substrings one of which each line-level class below contains (errors_classify.LINE_HINT adds them)
CRASH_LINE_HINTS = ("port must be 0-65535", "enginecore encountered", "enginedeaderror", "inner error",
                    "pta call acl", "npu function error", "npu error, error code", "npu out of memory",
                    "triton error", "hccl", "fatal python error", "segmentation fault", "sigsegv", "sigabrt",
                    "sigbus", "core dumped", "signal 11", "signal 6", "signal 7", "exitcode", "exit code",
                    "entity too large", "exceeds the maximum size of")

# Ascend CANN error-message codes: E + one letter or digit + four digits (EZ9999, EE9999, EH9999, EI9999, E39999)
_CANN_CODE = r"\bE[0-9A-Z]\d{4}: Inner Error|\bE[0-9A-Z]\d{4}\[PID: \d+\]"

# the lines that say a compiled artifact was loaded from a cache (tools/error_findings.py cites the last one before a
# driver error inside a compiled kernel): vLLM vllm/compilation/backends.py, vllm/compilation/decorators.py
COMPILE_CACHE_LOAD = (r"Directly load the compiled graph\(s\) for .{0,80}from the cache|"
                      r"Directly load AOT compilation from path")


def crash_classes() -> tuple[ErrorClass, ...]:
    """The class table (a function that only returns a literal table is data)."""
    return (
        ErrorClass(
            "port_out_of_range", "port_conflict", "A port number outside 0-65535 was computed or configured",
            types=r"^(?:OverflowError|)$", text=r"\w+\(\): port must be 0-65535", line_level=True,
            confidence="high",
            cause="A server or rendezvous socket was given a port above 65535 (or below 0): most often port "
                  "arithmetic (a base port plus an offset per engine, rank or DP replica) that runs past the range "
                  "when many engines start, or a configured base port set too high.",
            check="the base port (--port, master_port, the launcher's port range) and how many offsets are added to "
                  "it (engines x DP x TP); pick a lower base port or a narrower offset.",
            source="CPython Modules/socketmodule.c getsockaddrarg: '%s(): port must be 0-65535.' (OverflowError, "
                   "checked with socket.bind); seen in sgl-project/sglang PR #2826 (PortArgs.init_new adds an "
                   "offset to --port) and areal-project/AReaL #652 (find_free_ports with many vLLM servers)",
            examples=("OverflowError: bind(): port must be 0-65535.",
                      ("Traceback (most recent call last):\n"
                       '  File "/w/areal/utils/network.py", line 88, in is_port_free\n'
                       '    sock.bind(("", port))\n'
                       "OverflowError: bind(): port must be 0-65535."))),
        ErrorClass(
            "npu_oom", "cuda_oom", "Ascend NPU out of memory",
            text=r"NPU out of memory\. Tried to allocate", line_level=True, confidence="high",
            cause="An allocation on the Ascend NPU failed: the model, activations, optimizer state or the rollout "
                  "engine's KV cache do not fit beside each other.",
            check="the allocator numbers in the message (tried / total / free), the batch and sequence length of "
                  "that step, and the engine's memory fraction when it shares the NPU.",
            source="Ascend/pytorch torch_npu NPU caching allocator: 'NPU out of memory. Tried to allocate ...' "
                   "(RuntimeError / torch.OutOfMemoryError), as quoted in reports",
            examples=("RuntimeError: NPU out of memory. Tried to allocate 260.00 MiB (NPU 0; 28.50 GiB total "
                      "capacity; 10.24 GiB already allocated; 149.57 MiB free)",)),
        ErrorClass(
            "ascend_hccl_timeout", "collective_hang", "An Ascend HCCL collective timed out",
            text=r"hccl fftsplus timeout|HCCL watchdog thread terminated|(?i:hccl[^\n]{0,60}\btime(?:d)? ?out)",
            line_level=True, confidence="medium",
            cause="A collective on the Ascend HCCL backend waited past its timeout: a peer rank crashed, hung or "
                  "entered another collective (the NPU analogue of an NCCL watchdog timeout).",
            check="which rank stopped first and its last lines, HCCL_EXEC_TIMEOUT / HCCL_CONNECT_TIMEOUT, and the "
                  "device plog of the first failing rank.",
            source="Ascend CANN runtime stream.cc 'fftsplus task execute failed ... [hccl fftsplus timeout]' "
                   "(seen in hiyouga/LlamaFactory #5347); torch_npu ProcessGroupHCCL watchdog",
            examples=("EE9999  fftsplus task execute failed, dev_id=7, stream_id=7, task_id=5990, context_id=6, "
                      "thread_id=0, err_type=13[hccl fftsplus timeout][FUNC:GetError][FILE:stream.cc][LINE:1512]",)),
        ErrorClass(
            "ascend_npu_error", "process_crash", "The Ascend NPU runtime reported an error",
            text=r"NPU function error: |NPU error, error code is \d+|ERR\d{5} PTA call acl api failed|" + _CANN_CODE,
            line_level=True, confidence="medium",
            cause="An Ascend CANN/ACL call failed on the device (torch_npu raises it with the ACL error code; CANN "
                  "adds an EZ/EE/EH/EI/E3 'Inner Error' block): an operator the installed CANN does not support "
                  "with these shapes or dtypes (5610xx, 1610xx), an AI core/vector core fault or timeout (5070xx), "
                  "or a device/driver problem. The code and the '[Error]:' line under it say which.",
            check="the ACL error code and the '[Error]:' / Inner Error lines, rerun with ASCEND_LAUNCH_BLOCKING=1 to "
                  "find the operator, the CANN / torch_npu / vllm-ascend versions (they must match), and the device "
                  "plog (~/ascend/log).",
            source="Ascend/pytorch torch_npu/csrc/core/npu/NPUException.h NPU_CHECK_ERROR ('NPU error, error code "
                   "is', newer releases 'NPU function error: <call>, error code is <n>') and formatErrorCode "
                   "(ERR00100 = PTA + ACL: 'PTA call acl api failed'); CANN 'EZ9999: Inner Error!' blocks as in "
                   "vllm-project/vllm-ascend #116 and Ascend/pytorch #66, #77",
            examples=("RuntimeError: operator():build/CMakeFiles/torch_npu.dir/compiler_depend.ts:25 NPU function "
                      "error: c10_npu::acl::AclrtSynchronizeStreamWithTimeout(copy_stream), error code is 507035",
                      "[ERROR] 2025-04-29-18:46:11 (PID:1066924, Device:1, RankID:-1) ERR00100 PTA call acl api failed",
                      "EZ9999: Inner Error!")),
        ErrorClass(
            "compiled_kernel_driver_error", "process_crash", "A CUDA driver error inside a compiled (Triton/inductor) "
            "kernel",
            text=r"Triton Error \[CUDA\]: |(?i:CUDA error: )|CUDA driver error|CUresult error",
            frames=r"(?i)/triton/|torch/_inductor/|/inductor_cache/|/torchinductor_|output_code|compiled_fn|"
                   r"vllm/compilation/|triton_\w+\.py|/\.triton/",
            confidence="low",
            cause="A kernel built by torch.compile / Triton failed at launch: a kernel image that does not fit this "
                  "GPU or driver (compiled or cached for another arch or CUDA version), a shape the kernel was not "
                  "built for, or a kernel bug. When the artifact was loaded from a compile cache, a cache shared "
                  "between machines or versions is the first suspect.",
            check="whether the compiled graph was loaded from a cache (the 'Directly load the compiled graph(s) ... "
                  "from the cache' line) and where that cache lives (VLLM_CACHE_ROOT / TORCHINDUCTOR_CACHE_DIR / "
                  "TRITON_CACHE_DIR); rerun once with the cache cleared, and with CUDA_LAUNCH_BLOCKING=1.",
            source="triton-lang/triton third_party/nvidia/backend/driver.c: 'Triton Error [CUDA]: %s' "
                   "(RuntimeError from cuGetErrorString); pytorch c10/cuda/CUDAException.cpp 'CUDA error: '; "
                   "vLLM vllm/compilation/backends.py 'Directly load the compiled graph(s) for ... from the cache'",
            examples=(("Traceback (most recent call last):\n"
                       '  File "/v/site-packages/torch/_inductor/output_code.py", line 584, in __call__\n'
                       "    return self.current_callable(inputs)\n"
                       '  File "/root/.cache/vllm/torch_compile_cache/ab12/rank_0_0/inductor_cache/x7/cx7.py", '
                       "line 900, in call\n"
                       "    triton_poi_fused_0.run(buf0, stream=stream0)\n"
                       "RuntimeError: Triton Error [CUDA]: device kernel image is invalid"),)),
        ErrorClass(
            "triton_driver_error", "process_crash", "A CUDA driver error raised by a Triton kernel launch",
            text=r"Triton Error \[CUDA\]: ", line_level=True, confidence="low",
            cause="A Triton kernel failed at launch or load with a CUDA driver error: a kernel image built for another "
                  "GPU arch or driver (an old cache), an invalid launch configuration (grid over the limit), or a "
                  "kernel bug.",
            check="the driver error text, the Triton and CUDA driver versions, TRITON_CACHE_DIR (clear it once), and "
                  "the kernel named in the traceback.",
            source="triton-lang/triton third_party/nvidia/backend/driver.c: 'Triton Error [CUDA]: %s'",
            examples=("RuntimeError: Triton Error [CUDA]: invalid argument",)),
        ErrorClass(
            "vllm_engine_dead", "process_crash", "vLLM's engine core process died (EngineDeadError)",
            types=r"^(?:EngineDeadError|)$",
            text=r"EngineDeadError|EngineCore encountered an issue\. See stack trace \(above\) for the root cause",
            line_level=True, confidence="medium",
            cause="The EngineCore process of vLLM V1 died; the client (AsyncLLM / LLM) raises EngineDeadError for every "
                  "request after that. The cause is the EngineCore's own error, printed above it (an OOM, an illegal "
                  "memory access, a failed RPC such as a weight update or sleep/wake_up).",
            check="the first error printed by the EngineCore process (lines prefixed EngineCore / EngineCore_DP0) "
                  "before this one, and the request or utility call running when it died.",
            source="vllm-project/vllm vllm/v1/engine/exceptions.py EngineDeadError: 'EngineCore encountered an issue. "
                   "See stack trace (above) for the root cause.'",
            examples=("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace "
                      "(above) for the root cause.",)),
        ErrorClass(
            "empty_batch_reduction", "config_error", "A reduction over an empty array: a batch or group came out empty",
            types=r"^ValueError$", text=r"zero-size array to reduction operation \w+ which has no identity",
            confidence="low",
            cause="numpy was asked for the min/max of an empty array: in a trainer this means a batch, a group or a "
                  "filtered list came out empty, most often because the batch arithmetic (prompts per step over "
                  "data-parallel ranks and samples per prompt) truncated it to zero, or every sample was filtered.",
            check="the batch sizes after each division (train batch / DP / samples per prompt), dynamic filtering "
                  "and dataset size; print the length of the list the failing frame reduces.",
            source="numpy numpy/_core/src/umath/reduction.c: 'zero-size array to reduction operation %s which has no "
                   "identity' (checked with numpy: np.array([]).min())",
            examples=("ValueError: zero-size array to reduction operation minimum which has no identity",)),
        ErrorClass(
            "config_keyword_rejected", "config_error", "A config key is passed to a class that does not accept it",
            types=r"^TypeError$", text=r"__init__\(\) got an unexpected keyword argument '\w+'", confidence="low",
            cause="A config section is instantiated as keyword arguments of a class, and one key is not an argument of "
                  "the installed release (renamed or removed, or a config written for another version).",
            check="the key the message names against the class of the installed version; remove or rename it, or "
                  "install the version the config was written for.",
            source="CPython TypeError: \"__init__() got an unexpected keyword argument 'x'\" (config dict -> cls(**cfg))",
            examples=("TypeError: Llama31ModelProvider.__init__() got an unexpected keyword argument "
                      "'pipeline_model_parallel_split_rank'",)),
        ErrorClass(
            "config_value_refused", "config_error", "The framework refused a setting's value",
            types=r"^(?:AssertionError|ValueError)$",
            text=r"\b[a-z]+(?:_[a-z]+)+\b[^\n]{0,80}?(?:must be|should be|is not equal to|cannot meet|"
                 r"has to be|needs to be|must not|is larger than|is smaller than|exceeds)",
            confidence="low",
            cause="A start-up check compared a setting the message names with another value and refused it.",
            check="the settings and values the message names, against the framework's documented constraints.",
            source="framework start-up assertions, e.g. verl 'train_batch_size (...) must be >= "
                   "actor.ppo_mini_batch_size (...)', Megatron-LM checkpointing.py 'value from checkpoint (...) is "
                   "not equal to the input argument value (...)'",
            examples=("ValueError: train_batch_size (32) must be >= actor.ppo_mini_batch_size (64)",
                      "AssertionError: tensor_model_parallel_size value from checkpoint (1) is not equal to the "
                      "input argument value (2).")),
        ErrorClass(
            "native_crash", "process_crash", "A process died of a native signal (segfault, abort, bus error)",
            text=r"Fatal Python error: (?:Segmentation fault|Aborted|Bus error|Floating point exception|"
                 r"Illegal instruction)|Segmentation fault(?: \(core dumped\))?|Aborted \(core dumped\)|"
                 r"Bus error \(core dumped\)|\bSIG(?:SEGV|ABRT|BUS|ILL)\b|Signals\.SIG(?:SEGV|ABRT|BUS)|"
                 r"exitcode\s*:\s*-(?:11|6|7|8|4)\b|exit(?:ed with)? (?:code|status) (?:-11|-6|-8|139|134|135|136)\b|"
                 r"\b[Ss]ignal (?:11|6|7) \(SIG",
            line_level=True, confidence="medium",
            cause="A process was killed by a signal from native code (C++/CUDA extension, NCCL, a driver, the "
                  "Python interpreter itself): no Python exception explains it. The thread dump under 'Fatal Python "
                  "error' (or the core dump) names the library that crashed.",
            check="the stack under 'Fatal Python error' / 'Current thread' (which extension's frame is on top), "
                  "the versions of torch, NCCL, the CUDA driver and the extension, and whether it is reproducible "
                  "on one GPU; rerun with PYTHONFAULTHANDLER=1 if there is no stack.",
            source="CPython Python/pylifecycle.c fatal_error / faulthandler: 'Fatal Python error: Segmentation "
                   "fault'; torch.distributed.elastic 'exitcode  : -11'; Signal 11 (SIGSEGV) received by PID",
            examples=("Fatal Python error: Segmentation fault", "exitcode  : -11 (pid: 4242)",
                      "Segmentation fault (core dumped)")),
        # --- harvest of resolved public threads (issue 24); each class cites the code that raises its text ---
        ErrorClass(
            "signal_not_main_thread", "reward_zero", "A signal-based timeout was set up outside the main thread",
            types=r"^ValueError$", text=r"signal only works in main thread", confidence="high",
            cause="signal.signal()/signal.alarm() may only be called from the main thread; a reward function that "
                  "uses a signal-based timeout (math_verify's parse/verify) fails when the trainer calls it from a "
                  "worker thread (async reward loop, thread pool, Ray threaded actor).",
            check="the frame that calls signal.signal (math_verify/utils.py timeout wrapper); whether the reward runs "
                  "in a thread; math-verify >= 0.8.0 takes parsing_timeout=None / timeout_seconds=None.",
            source="CPython Modules/signalmodule.c: 'signal only works in main thread of the main interpreter' "
                   "(ValueError); huggingface/Math-Verify #50, #55 (utils.py timeout wrapper)",
            examples=("ValueError: signal only works in main thread of the main interpreter",)),
        ErrorClass(
            "vllm_cumem_expandable_segments", "config_error",
            "vLLM's sleep-mode memory pool refused PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            types=r"^AssertionError$", text=r"Expandable segments are not compatible with memory pool",
            confidence="high",
            cause="vLLM's CuMemAllocator (the memory pool behind sleep mode / enable_sleep_mode) asserts at start-up "
                  "that PyTorch's expandable segments are off: the two cannot share one process "
                  "(pytorch/pytorch issue 147851).",
            check="PYTORCH_CUDA_ALLOC_CONF of the rollout processes (Ray runtime_env env_vars, the launch script, "
                  "the container image) and whether sleep mode is on.",
            source="vllm-project/vllm vllm/device_allocator/cumem.py CuMemAllocator.__init__: 'Expandable segments "
                   "are not compatible with memory pool. Please track ... pytorch/issues/147851' (added by PR 14189; "
                   "in the 0.11.0 and 0.11.1 wheels; replaced by a toggle in PR 40812, absent from the 0.33.0 wheel)",
            examples=("AssertionError: Expandable segments are not compatible with memory pool. Please track "
                      "https://github.com/pytorch/pytorch/issues/147851 for the latest updates.",)),
        ErrorClass(
            "vllm_insecure_serialization_off", "config_error",
            "vLLM V1 refused to pickle an object over its engine IPC (VLLM_ALLOW_INSECURE_SERIALIZATION unset)",
            types=r"^TypeError$",
            text=r"is\s+not\s*serializable\.?\s*Set VLLM_ALLOW_INSECURE_SERIALIZATION=1|"
                 r"VLLM_ALLOW_INSECURE_SERIALIZATION must be set to use custom utility result types",
            confidence="high",
            cause="vLLM V1's msgpack encoder between the front end and the engine core falls back to pickle only when "
                  "VLLM_ALLOW_INSECURE_SERIALIZATION=1; RL weight-sync calls (collective_rpc with a function, a "
                  "torch.dtype or custom result objects) need that fallback.",
            check="VLLM_ALLOW_INSECURE_SERIALIZATION in the environment of the process that creates the engine "
                  "(a Ray actor does not see a variable exported only in the driver shell after ray start).",
            source="vllm-project/vllm vllm/v1/serial_utils.py MsgpackEncoder.enc_hook: 'Object of type {type} is not "
                   "serializableSet VLLM_ALLOW_INSECURE_SERIALIZATION=1 to allow fallback to pickle-based "
                   "serialization.' and _decode_utility_result: 'VLLM_ALLOW_INSECURE_SERIALIZATION must be set to use "
                   "custom utility result types' (0.11.1 and 0.33.0 wheels; env var from PR 17490)",
            examples=("TypeError: Object of type <class 'torch.dtype'> is not serializableSet "
                      "VLLM_ALLOW_INSECURE_SERIALIZATION=1 to allow fallback to pickle-based serialization.",
                      "TypeError: VLLM_ALLOW_INSECURE_SERIALIZATION must be set to use custom utility result types")),
        ErrorClass(
            "vllm_mm_cache_desync", "process_crash",
            "vLLM's engine found no cached multimodal item for a hash its front end sent (mm cache desync)",
            types=r"^AssertionError$", text=r"Expected a cached item for mm_hash", confidence="high",
            cause="vLLM mirrors a multimodal processor cache between the front-end sender (P0) and the engine "
                  "receiver (P1); clearing only the engine side (pause_generation(clear_cache=True), sleep, a weight "
                  "update) leaves P0 sending cache references for items P1 no longer holds.",
            check="whether the failure follows a pause / sleep / weight update of a multimodal rollout, the vLLM "
                  "version, and mm_processor_cache_gb of the engine.",
            source="vllm-project/vllm vllm/multimodal/cache.py (0.11.x) and vllm/multimodal/cache/base.py, shm.py "
                   "(0.33.0): assert mm_item is not None, f'Expected a cached item for {mm_hash=}'",
            examples=("AssertionError: Expected a cached item for mm_hash='8c7d4f0e1b2a'",)),
        ErrorClass(
            "zero3_partitioned_weight_matmul", "process_crash",
            "A kernel read a ZeRO-3 partitioned weight directly and got an empty (0-element) shard",
            types=r"^RuntimeError$",
            text=r"size mismatch, got input \([^)]*\),(?: mat \([^)]*\),)? vec \(0\)|"
                 r"The size of tensor a \(0\) must match the size of tensor b \(\d+\)",
            confidence="medium",
            cause="Under DeepSpeed ZeRO-3 every parameter is a 0-element placeholder outside its module's forward; a "
                  "fused kernel that reads module.weight by attribute (a fused linear + loss over lm_head.weight) "
                  "never triggers the gather hook, so the matmul sees an empty shard.",
            check="which code reads the weight outside forward (fused/Liger loss, custom head), the ZeRO stage, and "
                  "whether the framework wraps that read in deepspeed.zero.GatheredParameters.",
            source="pytorch aten addmv shape check: 'size mismatch, got input (...), mat (...), vec (...)'; torch "
                   "broadcasting: 'The size of tensor a (0) must match the size of tensor b (N) at non-singleton "
                   "dimension 1'; as pasted in huggingface/trl PR 6372 and linkedin/Liger-Kernel issue 1048",
            examples=("RuntimeError: size mismatch, got input (s2x2048), vec (0)",
                      "RuntimeError: The size of tensor a (0) must match the size of tensor b (4096) at non-singleton "
                      "dimension 1")),
        ErrorClass(
            "megatron_modeltype_encoder_and_decoder_removed", "config_error",
            "Code written for Megatron-Core < 0.17 reads ModelType.encoder_and_decoder, removed in core_v0.17.0",
            types=r"^AttributeError$", text=r"type object 'ModelType' has no attribute 'encoder_and_decoder'",
            confidence="high",
            cause="megatron.core.transformer.enums.ModelType.encoder_and_decoder was a deprecated property in "
                  "core_v0.16.x and is gone from core_v0.17.0; a trainer that still names it fails when it builds "
                  "the model.",
            check="pip show megatron-core and the trainer's release (verl before 0.9.0 names it in "
                  "verl/utils/megatron_utils.py get_model).",
            source="NVIDIA/Megatron-LM megatron/core/transformer/enums.py: ModelType has the deprecated "
                   "encoder_and_decoder property at core_v0.16.0, only encoder_or_decoder at core_v0.17.0",
            examples=("AttributeError: type object 'ModelType' has no attribute 'encoder_and_decoder'",)),
        ErrorClass(
            "megatron_get_optimizer_removed_kwargs", "config_error",
            "get_megatron_optimizer() called with arguments Megatron-Core 0.16 removed",
            types=r"^TypeError$",
            text=r"get_megatron_optimizer\(\) got an unexpected keyword argument "
                 r"'(?:no_weight_decay_cond|scale_lr_cond|lr_mult)'",
            confidence="high",
            cause="Megatron-Core core_v0.16.0 dropped no_weight_decay_cond, scale_lr_cond and lr_mult from "
                  "megatron.core.optimizer.get_megatron_optimizer (config_overrides replace them); a trainer built for "
                  "0.15 still passes them.",
            check="pip show megatron-core and the trainer's release (verl before 0.7.0 passes them in "
                  "verl/utils/megatron/optimizer.py).",
            source="NVIDIA/Megatron-LM megatron/core/optimizer/__init__.py get_megatron_optimizer: the three "
                   "arguments at core_v0.15.0, gone at core_v0.16.0",
            examples=("TypeError: get_megatron_optimizer() got an unexpected keyword argument 'no_weight_decay_cond'",)),
        ErrorClass(
            "fastapi_included_router_no_path", "config_error",
            "prometheus-fastapi-instrumentator reads route.path of FastAPI 0.137's path-less _IncludedRouter",
            types=r"^AttributeError$", text=r"'_IncludedRouter' object has no attribute 'path'", confidence="high",
            cause="FastAPI 0.137 stores lazy _IncludedRouter objects (no .path) in app.routes; the metrics "
                  "middleware of prometheus-fastapi-instrumentator <= 8.0.0 reads route.path on every request, so "
                  "the server (vLLM's API server) answers 500 to every request, /health included.",
            check="pip show fastapi prometheus-fastapi-instrumentator vllm in the inference server's environment.",
            source="prometheus_fastapi_instrumentator/routing.py _get_route_name: route.path (trallnag/"
                   "prometheus-fastapi-instrumentator issue 370); vllm-project/vllm PR 45629 skips path-less routes "
                   "(vllm/entrypoints/serve/instrumentator/metrics.py in the 0.33.0 wheel)",
            examples=("AttributeError: '_IncludedRouter' object has no attribute 'path'",)),
        ErrorClass(
            "cuda_tensor_to_cpu_process", "process_crash",
            "A CUDA tensor was sent (pickled) to a process that has no GPU",
            text=r"Attempting to deserialize object on a CUDA device but torch\.cuda\.is_available\(\) is False",
            confidence="medium",
            cause="torch pickles a tensor with its device; unpickling a CUDA tensor in a process without a visible GPU "
                  "(a Ray driver or TaskRunner scheduled with num_gpus=0) fails. A worker returned a CUDA tensor (a "
                  "metric such as grad_norm left as a tensor) instead of a Python number or a CPU tensor.",
            check="which value the failing ray.get returns (metrics dict of update_actor and similar), and convert "
                  "tensors with .item() or .cpu() before they leave the GPU worker.",
            source="pytorch torch/serialization.py validate_cuda_device: 'Attempting to deserialize object on a CUDA "
                   "device but torch.cuda.is_available() is False. If you are running on a CPU-only machine, please "
                   "use torch.load with map_location=torch.device('cpu') ...' (Ray wraps it as RaySystemError)",
            examples=("ray.exceptions.RaySystemError: System error: Attempting to deserialize object on a CUDA device "
                      "but torch.cuda.is_available() is False. If you are running on a CPU-only machine, please use "
                      "torch.load with map_location=torch.device('cpu') to map your storages to the CPU.",)),
        ErrorClass(
            "none_operand_arithmetic", "process_crash", "Arithmetic on a value that is None (a setting left null)",
            types=r"^TypeError$", text=r"unsupported operand type\(s\) for [-+*/%]+: '\w+' and 'NoneType'|"
                                      r"unsupported operand type\(s\) for [-+*/%]+: 'NoneType' and '\w+'",
            confidence="low",
            cause="A number the code combines with another is None: most often a config key set to null (Hydra "
                  "'key=null', YAML '~') where the code reads it with .get(key, default), which returns None, not "
                  "the default, when the key is present.",
            check="the config keys the failing line reads (seed, sizes, offsets) and whether one is null.",
            source="CPython TypeError: \"unsupported operand type(s) for +: 'int' and 'NoneType'\" (binary operator "
                   "on None); as in verl-project/verl PR 6503 (rollout.seed=null)",
            examples=("TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'",)),
        ErrorClass(
            "none_tensor_buffer", "process_crash", "A tensor or buffer the code expects was never allocated (None)",
            types=r"^AttributeError$",
            text=r"'NoneType' object has no attribute '(?:storage|untyped_storage|data_ptr|numel|nbytes)'",
            confidence="low",
            cause="Code calls a tensor method on a buffer that this configuration does not allocate (e.g. "
                  "Megatron's ParamAndGradBuffer.param_data is None without the distributed optimizer).",
            check="the frame that reads the buffer and the option that decides whether it is allocated.",
            source="CPython AttributeError on None; as in verl-project/verl PR 5782 (buffer.param_data.storage() with "
                   "use_distributed_optimizer=False)",
            examples=("AttributeError: 'NoneType' object has no attribute 'storage'",)),
        ErrorClass(
            "tensor_view_not_contiguous", "process_crash", "Tensor.view() on a non-contiguous (strided) tensor",
            types=r"^RuntimeError$", text=r"view size is not compatible with input tensor's size and stride",
            confidence="low",
            cause="Tensor.view() needs a layout-compatible tensor; a transposed, sliced or otherwise strided tensor "
                  "(e.g. a weight an exporter returns as a view) has to be made contiguous (or reshaped) first.",
            check="the frame that calls .view() and where the tensor comes from (an exporter, a transpose, a slice).",
            source="pytorch aten view: 'view size is not compatible with input tensor's size and stride (at least one "
                   "dimension spans across two contiguous subspaces). Use .reshape(...) instead.'",
            examples=("RuntimeError: view size is not compatible with input tensor's size and stride",)),
        ErrorClass(
            "megatron_routing_padding_mask_kwarg", "config_error",
            "A patched TopKRouter.routing() does not accept the padding_mask Megatron-Core 0.16 passes",
            types=r"^TypeError$", text=r"routing\(\) got an unexpected keyword argument 'padding_mask'",
            confidence="high",
            cause="Megatron-Core core_v0.16.0 calls TopKRouter.routing(logits, padding_mask=...); a trainer that "
                  "monkey-patches routing with the older signature (logits only) fails on the first MoE forward.",
            check="pip show megatron-core and the trainer release that patches the router (verl 0.7.0 router replay).",
            source="NVIDIA/Megatron-LM megatron/core/transformer/moe/router.py at core_v0.16.0: def routing(self, "
                   "logits, padding_mask=None) and self.routing(logits, padding_mask=padding_mask)",
            examples=("TypeError: patched_routing() got an unexpected keyword argument 'padding_mask'",)),
        ErrorClass(
            "vllm_generate_prompt_token_ids_removed", "config_error",
            "LLM.generate() no longer takes prompt_token_ids= (vLLM 0.10.2+)",
            types=r"^TypeError$",
            text=r"LLM\.(?:generate|beam_search|encode|embed)\(\) got an unexpected keyword argument 'prompt_token_ids'",
            confidence="high",
            cause="vLLM removed the legacy prompt_token_ids= keyword of LLM.generate (vLLM PR 18800): token ids go "
                  "in prompts as TokensPrompt(prompt_token_ids=ids) / {'prompt_token_ids': ids}; code written for "
                  "older vLLM fails on the first generate call.",
            check="the caller's vLLM version and the generate call (rollout worker, LLM-as-judge reward worker).",
            source="vllm-project/vllm vllm/entrypoints/llm.py LLM.generate(self, prompts, sampling_params=None, ...) "
                   "in the 0.11.0 and 0.33.0 wheels (no prompt_token_ids parameter)",
            examples=("TypeError: LLM.generate() got an unexpected keyword argument 'prompt_token_ids'",)),
        ErrorClass(
            "ray_working_dir_too_large", "config_error",
            "The Ray job's runtime_env working_dir package is over the upload limit",
            text=r"Package size \([^)]*\) exceeds the maximum size of|HTTPRequestEntityTooLarge|"
                 r"Request Entity Too Large",
            line_level=True, confidence="high",
            cause="ray job submit / ray.init(runtime_env={'working_dir': ...}) zips the working directory and stores it "
                  "in the GCS; model weights, checkpoints, datasets or a .git directory inside it push the package past "
                  "the limit, and the dashboard refuses the upload (413 Request Entity Too Large) or packaging raises.",
            check="the size of the working_dir (du -sh), large files in it (*.safetensors, checkpoints, outputs, .git), "
                  "and the runtime_env 'excludes' list.",
            source="ray-project/ray python/ray/_private/runtime_env/packaging.py _store_package_in_gcs: 'Package size "
                   "({size_str}) exceeds the maximum size of ... You can exclude large files using the excludes option "
                   "to the runtime_env ...'; aiohttp HTTPRequestEntityTooLarge from the dashboard's upload_package",
            examples=("aiohttp.web_exceptions.HTTPRequestEntityTooLarge: Request Entity Too Large",
                      "Failed to upload working_dir /home/pc/sd/ComfyUI/custom_nodes to the Ray cluster: Package size "
                      "(1765.45MiB) exceeds the maximum size of 512.00MiB. You can exclude large files using the "
                      "'excludes' option to the runtime_env")),
        ErrorClass(
            "callable_without_name", "config_error", "Code reads __name__ of a callable that has none (partial, instance)",
            types=r"^AttributeError$", text=r"object has no attribute '__name__'", confidence="medium",
            cause="functools.partial objects and callable class instances have no __name__; a trainer that names "
                  "each reward function by func.__name__ fails when one is passed that way.",
            check="the reward functions passed to the trainer (partial(...), an object with __call__) and the "
                  "trainer release.",
            source="CPython: functools.partial has no __name__ (\"'functools.partial' object has no attribute "
                   "'__name__'\"); huggingface/trl grpo_trainer.py reward_funcs[i].__name__ before PR 6313",
            examples=("AttributeError: 'functools.partial' object has no attribute '__name__'. Did you mean: '__ne__'?",)),
        ErrorClass(
            "fsdp_wrap_layer_class_missing", "config_error",
            "verl's FSDP wrap policy cannot resolve a transformer layer class the model names",
            text=r"Could not find (?:the|any of the) transformer layer class(?:es)? to wrap in the model",
            confidence="high",
            cause="The FSDP auto-wrap policy wraps the classes named in the model's _no_split_modules (or "
                  "wrap_policy.transformer_layer_cls_to_wrap); a name that is not a module class of the loaded model "
                  "(a new architecture, a forward-compat name in transformers) makes the lookup fail.",
            check="the model's _no_split_modules, the transformers version, and "
                  "fsdp_config.wrap_policy.transformer_layer_cls_to_wrap.",
            source="verl-project/verl verl/utils/fsdp_utils.py get_fsdp_wrap_policy: 'Could not find the transformer "
                   "layer class to wrap in the model.' (before 0.8.0), 'Could not find any of the transformer layer "
                   "classes to wrap in the model: [...]' (0.8.0+)",
            examples=("Exception: Could not find the transformer layer class to wrap in the model.",)),
        ErrorClass(
            "fsdp2_fully_shard_function_attr", "config_error",
            "FSDP2 code reads FSDPModule from the fully_shard function (PyTorch 2.4/2.5 layout)",
            types=r"^AttributeError$", text=r"'function' object has no attribute 'FSDPModule'", confidence="high",
            cause="On PyTorch 2.4/2.5 torch.distributed._composable.fsdp.fully_shard is a function, not the module "
                  "that holds FSDPModule; code that takes the attribute from it fails when it wraps a model with FSDP2.",
            check="the torch version (below 2.6 takes the _composable.fsdp path) and the trainer release.",
            source="verl-project/verl verl/utils/fsdp_utils.py (v0.6.0-v0.7.0): fully_shard_module = "
                   "torch.distributed._composable.fsdp.fully_shard for torch 2.4-2.5, then fully_shard_module.FSDPModule "
                   "in maybe_patch_fsdp_module",
            examples=("AttributeError: 'function' object has no attribute 'FSDPModule'",)),
        ErrorClass(
            "tensor_device_mismatch", "process_crash", "An operation mixed tensors on two devices (cuda and cpu)",
            types=r"^RuntimeError$",
            text=r"Expected all tensors to be on the same device, but found at least two devices",
            confidence="low",
            cause="One operand was created or left on another device than the rest (a helper that picks 'cuda if "
                  "available' for its outputs while the inputs are CPU tensors, or an offloaded parameter).",
            check="the frame that combines the tensors and where each operand was created.",
            source="pytorch aten device check: 'Expected all tensors to be on the same device, but found at least two "
                   "devices, cuda:0 and cpu!'",
            examples=("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, "
                      "cuda:0 and cpu!",)),
        ErrorClass(
            "allgather_dtype_mismatch", "process_crash",
            "A collective all-gather got an output buffer of another dtype than its input (mixed-dtype parameters)",
            types=r"^(?:TypeError|RuntimeError)$", text=r"output tensor must have the same type as input tensor",
            confidence="medium",
            cause="An all-gather's output buffer was allocated with one dtype while the gathered tensor has another: "
                  "under DeepSpeed ZeRO-3, parameters of mixed dtypes (bf16 base weights with fp32 LoRA adapters) "
                  "gathered in one coalesced call.",
            check="the dtypes of the trainable parameters (LoRA adapters upcast to fp32?), the ZeRO stage and the "
                  "DeepSpeed version.",
            source="pytorch c10d ProcessGroupNCCL allgather checks: 'output tensor must have the same type as input "
                   "tensor'; deepspeedai/DeepSpeed issue 8072 (_allgather_params_coalesced)",
            examples=("TypeError: output tensor must have the same type as input tensor",)),
        ErrorClass(
            "te_swa_mask_shape_mismatch", "process_crash",
            "Transformer Engine could not combine a 2-D padding mask with its sliding-window mask",
            types=r"^RuntimeError$", text=r"The size of tensor a \(\d+\) must match the size of tensor b \(\d+\)",
            context=r"get_full_mask|logical_or\(swa_mask", confidence="high",
            cause="Transformer Engine's get_full_mask ORs the sliding-window mask ([..., seq, seq]) with the "
                  "attention mask it is given; a [batch, seq] keep-mask is not broadcastable against it once the "
                  "micro-batch has more than one sample, so batch and sequence dimensions collide.",
            check="the attention mask shape the trainer passes to the Megatron model (2-D [batch, seq] vs "
                  "[batch, 1, 1, seq]), the micro-batch size and whether the model uses sliding-window attention.",
            source="transformer_engine/pytorch/attention/dot_product_attention/utils.py get_full_mask: "
                   "attention_mask = torch.logical_or(swa_mask, attention_mask); as pasted in NovaSky-AI/SkyRL PR 1848",
            examples=("  attention_mask = torch.logical_or(swa_mask, attention_mask)\n"
                      "RuntimeError: The size of tensor a (24) must match the size of tensor b (2) at non-singleton "
                      "dimension 2",)),
        ErrorClass(
            "dcp_missing_key", "checkpoint_load_error",
            "torch.distributed.checkpoint found no entry for a key the model/optimizer expects",
            types=r"^RuntimeError$", text=r"Missing key in checkpoint state_dict: \S+", confidence="medium",
            cause="A distributed (DCP) checkpoint is loaded into a state dict with a key the checkpoint does not "
                  "have: the model or optimizer layout at load time differs from save time (parameters that got "
                  "optimizer state only at load, a renamed module, another parallel layout).",
            check="the missing key (model weight vs optimizer state), what changed between save and load, and "
                  "whether those parameters ever received gradients.",
            source="pytorch torch/distributed/checkpoint default planner: 'Missing key in checkpoint state_dict: "
                   "{fqn}.' (RuntimeError); as in PrimeIntellect-ai/prime-rl PR 2800",
            examples=("RuntimeError: Missing key in checkpoint state_dict: "
                      "app.optimizers.state.model.layers.0.self_attn.indexer.wq_b.weight.step",)),
        ErrorClass(
            "vllm_free_memory_below_utilization", "cuda_oom",
            "vLLM found less free GPU memory at start-up than gpu_memory_utilization asks for",
            types=r"^ValueError$",
            text=r"Free memory on device (?:\S+ )?\([\d.]+/[\d.]+ GiB\) on startup is less than desired GPU memory "
                 r"utilization",
            confidence="high",
            cause="vLLM reserves gpu_memory_utilization x total memory at start-up and refuses to start when less "
                  "than that is free: another process (the colocated trainer's weights and optimizer, a previous "
                  "engine that was not released, another job) already holds part of the GPU.",
            check="nvidia-smi on that GPU at start-up, what else runs there (trainer state not yet offloaded, a stale "
                  "engine), and gpu_memory_utilization against the free fraction the message prints.",
            source="vllm-project/vllm vllm/v1/worker/gpu_worker.py init_device (0.11.x) and vllm/v1/worker/utils.py "
                   "(0.33.0): 'Free memory on device (...) on startup is less than desired GPU memory utilization "
                   "(..., ... GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.'",
            examples=("ValueError: Free memory on device (59.32/79.15 GiB) on startup is less than desired GPU memory "
                      "utilization (0.9, 71.24 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
                      "processes.",
                      "ValueError: Free memory on device cuda:1 (19.77/22.05 GiB) on startup is less than desired GPU "
                      "memory utilization (0.9, 19.84 GiB).")),
    )
