"""Error classes: what one exception or error line means, as data.

Each :class:`ErrorClass` is one unit: the exception types and message text that identify it (taken from the
framework source that raises it, cited in ``source``), optionally the frames it must be raised from or the
lines just before it, the symptom code it maps to (``skills/symptoms.py``), a generic cause, what to check,
and real example lines (``tests/test_errors_classify.py`` runs every example through the classifier).

The order matters: the first class whose tests hold wins, so specific classes (a named message) come
before the generic ones (an exception type raised from a validation frame). :mod:`errors_classify`
reads the record; this module only describes the classes.
"""
from __future__ import annotations

from grpo_debug.tools.engine.error_class_base import ErrorClass
from grpo_debug.tools.engine.error_classes_crash import crash_classes
from grpo_debug.tools.engine.error_classes_infra import infra_classes

_VALIDATION_FRAMES = (r"validate_args|_validate_config|validate_config|check_config|__post_init__|_check_\w+|"
                      r"_validate\w*|parse_args|check_args|_verify_args")


def _classes() -> tuple[ErrorClass, ...]:
    """The class table (a function that only returns a literal table is data)."""
    return (
        ErrorClass(
            "trl_num_generations_below_two", "config_error", "TRL refuses fewer than 2 generations per prompt",
            text=r"GRPO requires at least 2 generations per prompt", line_level=True,
            cause="GRPO's advantage is each reward minus its group's mean; TRL refuses num_generations < 2 at start-up.",
            check="num_generations (>= 2; 4-16 in practice) and that generation_batch_size stays divisible by it.",
            source="huggingface/trl trl/trainer/grpo_config.py GRPOConfig.__post_init__ (older releases: "
                   "GRPOTrainer.__init__): 'GRPO requires at least 2 generations per prompt to calculate the advantages'",
            examples=("ValueError: GRPO requires at least 2 generations per prompt to calculate the advantages. "
                      "You provided 1, which is less than the minimum required.",)),
        ErrorClass(
            "vllm_batched_tokens_below_model_len", "config_error",
            "vLLM rejects max_num_batched_tokens below max_model_len (chunked prefill off)",
            text=r"max_num_batched_tokens \(\d+\) is smaller than max_model_len", line_level=True,
            cause="With chunked prefill off one batch must hold a whole sequence, so vLLM's SchedulerConfig refuses "
                  "max_num_batched_tokens < max_model_len.",
            check="max_num_batched_tokens, max_model_len and enable_chunked_prefill of the rollout engine.",
            source="vllm-project/vllm vllm/config/scheduler.py SchedulerConfig (pydantic ValidationError): "
                   "'max_num_batched_tokens (...) is smaller than max_model_len (...)'",
            examples=("  Value error, max_num_batched_tokens (8192) is smaller than max_model_len (128000).",)),
        ErrorClass(
            "ray_gpus_below_desired", "ray_resources_pending", "Ray sees fewer GPUs than the resource pools ask for",
            text=r"Total available GPUs [\d.]+ is less than total desired GPUs", line_level=True,
            cause="The driver's Ray cluster has fewer GPUs than nnodes x n_gpus_per_node: a node did not join the "
                  "cluster (ray.init started a local one), or another job holds GPUs.",
            check="ray status on the head node; that the driver joins the cluster (ray.init(address='auto')); "
                  "trainer.nnodes x trainer.n_gpus_per_node.",
            source="verl-project/verl verl/trainer/ppo/ray_trainer.py ResourcePoolManager._check_resource_available: "
                   "'Total available GPUs {x} is less than total desired GPUs {y}'",
            examples=("ValueError: Total available GPUs 16.0 is less than total desired GPUs 32",)),
        ErrorClass(
            "max_model_len_exceeds_model", "config_error", "max_model_len is above the model's context",
            text=r"User-specified max_model_len \(\d+\) is greater than the derived max_model_len", line_level=True,
            cause="The engine was asked for a longer context than the model's config allows (max_position_embeddings "
                  "/ model_max_length), e.g. prompt + response set above the model's positions.",
            check="max_model_len (or prompt + response length) against the model's max_position_embeddings, and "
                  "RoPE scaling if a longer context is intended.",
            source="vllm-project/vllm vllm/config/model.py _get_and_verify_max_len: 'User-specified max_model_len "
                   "(...) is greater than the derived max_model_len (...)'",
            examples=("ValueError: User-specified max_model_len (40960) is greater than the derived max_model_len "
                      "(max_position_embeddings=32768 or model_max_length=None in model's config.json).",)),
        ErrorClass(
            "sglang_req_slots_exhausted", "cuda_oom", "SGLang ran out of request slots (req_to_token_pool)",
            text=r"alloc_req_slots runs out of memory", line_level=True,
            cause="More requests are running than the request-to-token pool has slots; the pool is sized from "
                  "--max-running-requests and the KV-cache memory fraction.",
            check="--max-running-requests, --mem-fraction-static and the req_to_token_pool size in the server log.",
            source="sgl-project/sglang python/sglang/srt/managers/schedule_batch.py alloc_req_slots: "
                   "'alloc_req_slots runs out of memory. Please set a smaller number for `--max-running-requests`'",
            examples=("RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for "
                      "`--max-running-requests`. self.req_to_token_pool.available_size()=1, num_reqs=2,",)),
        ErrorClass(
            "host_enomem", "host_oom", "Host memory allocation failed (ENOMEM)",
            text=r"\[Errno 12\] Cannot allocate memory|Cannot allocate memory \(errno 12\)|std::bad_alloc", line_level=True,
            cause="The host (CPU) could not give a process memory: RAM, the cgroup limit or the overcommit policy is "
                  "exhausted, often by many workers or pinned buffers at start-up.",
            check="free -g and the container/cgroup memory limit at the failure, ulimit -v, vm.overcommit_memory, "
                  "how many processes start at once (TP x engines x workers).",
            source="CPython OSError errno 12 (ENOMEM) from fork/mmap/faulthandler.enable; "
                   "sgl-project/sglang python/sglang/srt/managers/scheduler.py run_scheduler_process",
            examples=("OSError: [Errno 12] Cannot allocate memory",)),
        ErrorClass(
            "process_killed_oom", "host_oom", "A process was killed by the kernel or Ray OOM killer",
            text=r"Out of memory: Killed process|Killed process \d+|oom-kill|oom_kill|OOMKilled|"
                 r"Task was killed due to the node running low on memory|killed due to memory pressure|"
                 r"worker\(s\) were killed due to the node running low on memory", line_level=True,
            cause="The kernel, cgroup or Ray memory monitor killed the process because host memory ran out.",
            check="dmesg / journalctl -k for 'Out of memory: Killed process', the host memory of the node, Ray's "
                  "memory monitor lines, what held host memory (datasets, checkpoint buffers, offloaded states).",
            source="Linux mm/oom_kill.c 'Out of memory: Killed process'; ray memory monitor 'Task was killed due to the node running low on memory' "
                   "(raylet, Ray <= 2.54.1), '%d worker(s) were killed due to the node running low on memory' "
                   "(raylet of the 2.55.0-2.60.0 wheels)",
            examples=("[Mon Jan 1 00:00:00 2025] Out of memory: Killed process 12345 (python) total-vm:1000kB",
                      "ray.exceptions.OutOfMemoryError: 2 worker(s) were killed due to the node running low on "
                      "memory. Memory on the node (IP: 10.0.0.1, ID: 92edc4e9) was 110.69GB used / 124.35GB limit "
                      "(0.890161)")),
        ErrorClass(  # a SIGKILL alone: who sent it is unknown, so a lead at low confidence, not a diagnosis
            "process_sigkilled", "host_oom", "A process was killed with SIGKILL (sender not shown)",
            text=r"exitcode\s*:\s*-9\b|exit(?:ed with)? (?:code|status) 137\b|signal 9 \(SIGKILL\)|"
                 r"Signals\.SIGKILL|died with <Signals\.SIGKILL|^Killed$", line_level=True, confidence="low",
            cause="The process received SIGKILL (exit -9 / 137). The kernel, cgroup or Ray OOM killer is the usual "
                  "sender, but not the only one: SGLang's launcher kills its own process tree when a child fails "
                  "('Received sigquit from a child process'), and a scheduler's time limit or a kill -9 do the same; "
                  "with no OOM-killer line it is a lead, not a diagnosis.",
            check="dmesg / journalctl -k for 'Out of memory: Killed process' at that time, the host memory of the "
                  "node, and whether an error just above (a child's traceback) came first.",
            source="torch.distributed.elastic 'exitcode  : -9'; the shell's 'Killed' for a SIGKILLed job; "
                   "sgl-project/sglang python/sglang/srt/entrypoints/engine.py sigquit_handler: logs 'Received "
                   "sigquit from a child process. It usually means the child failed.' then "
                   "kill_process_tree(os.getpid())",
            examples=("exitcode  : -9 (pid: 12345)", "Killed")),
        ErrorClass(
            "cuda_oom", "cuda_oom", "GPU out of memory",
            # RuntimeError / AcceleratorError: torch's CUDA check (C10_CUDA_CHECK) raises "CUDA error: out of memory"
            # as c10::Error (RuntimeError) and, in newer releases, c10::AcceleratorError (torch.AcceleratorError)
            types=r"^(?:OutOfMemoryError|CudaOutOfMemory|RuntimeError|AcceleratorError)$",
            text=r"CUDA out of memory|(?i:CUDA error: out of memory)|HIP out of memory|OutOfMemoryError|"
                 r"CUresult error: 2 \(out of memory\)|cudaErrorMemoryAllocation|Triton Error \[CUDA\]: out of memory|"
                 # torch_memory_saver's CURESULT_CHECK (csrc/torch_memory_saver.cpp, before utils.h): "[torch_memory_saver.cpp]
                 # CUresult error  result=2 file=... func=cu_mem_create line=..."; CUresult 2 = CUDA_ERROR_OUT_OF_MEMORY
                 r"\[torch_memory_saver\.cpp\] CUresult error\s+result=2\b",
            line_level=True,
            cause="A GPU allocation failed: the model, activations, optimizer state or the rollout engine's KV cache "
                  "do not fit beside each other.",
            check="the allocator numbers in the message (tried / free / reserved), which worker and step failed, the "
                  "batch size of that step (training micro-batch, log-prob / reference forward batch, rollout "
                  "batch) and sequence lengths, and the engine's memory fraction when it shares the GPU.",
            source="pytorch c10/cuda/CUDACachingAllocator.cpp: 'CUDA out of memory. Tried to allocate ...' "
                   "(torch.OutOfMemoryError); Ray wraps it as RayTaskError(OutOfMemoryError); pytorch "
                   "c10/cuda/CUDAException.cpp c10_cuda_check_implementation: 'CUDA error: ' + "
                   "cudaGetErrorString(cudaErrorMemoryAllocation) = 'CUDA error: out of memory' (TORCH_CHECK -> "
                   "RuntimeError; throw c10::AcceleratorError in newer releases, torch.AcceleratorError); triton-lang/triton "
                   "third_party/nvidia/backend/driver.c 'Triton Error [CUDA]: %s' with cuGetErrorString's 'out of memory'",
            examples=("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
                      "[torch_memory_saver.cpp] CUresult error  result=2 file=csrc/torch_memory_saver.cpp "
                      "func=cu_mem_create line=104",
                      "RuntimeError: Triton Error [CUDA]: out of memory",
                      "RuntimeError: CUDA error: out of memory",
                      "torch.AcceleratorError: CUDA error: out of memory",
                      "ray.exceptions.RayTaskError(OutOfMemoryError): ray::DTensorPolicyWorkerV2.get_logprobs() "
                      "(pid=2671339, ip=10.65.16.209)")),
        ErrorClass(
            "engine_kv_cache_too_small", "cuda_oom", "The rollout engine's KV cache does not fit its context or batch",
            text=r"larger than the maximum number of tokens that can be stored in KV cache|"
                 r"No available memory for the cache blocks|Not enough memory\. Please try to increase "
                 r"--mem-fraction-static|(?i:insufficient memory for (?:the )?kv cache)|"
                 r"KV cache is needed, which is larger than the available KV cache memory", line_level=True,
            cause="The memory left to the engine after weights (gpu_memory_utilization / mem_fraction_static) holds "
                  "fewer KV-cache tokens than max_model_len or the configured batch needs.",
            check="gpu_memory_utilization / mem_fraction_static, max_model_len / context length, max_num_seqs, "
                  "and what else occupies the GPU (a colocated trainer).",
            source="vllm-project/vllm vllm/v1/core/kv_cache_utils.py: \"The model's max seq len (...) is larger than "
                   "the maximum number of tokens that can be stored in KV cache\"; sgl-project/sglang "
                   "model_runner.py 'Not enough memory. Please try to increase --mem-fraction-static.'; V1: "
                   "'To serve at least one request with the model's max seq len (N), (X GiB KV cache is needed, which "
                   "is larger than the available KV cache memory (Y GiB)' (v1/core/kv_cache_utils.py in the 0.11.1 "
                   "wheel, v1/core/kv_cache_planning.py _check_enough_kv_cache_memory in the 0.33.0 wheel)",
            examples=("ValueError: The model's max seq len (29000) is larger than the maximum number of tokens that "
                      "can be stored in KV cache (23648).",
                      "ValueError: To serve at least one request with the model's max seq len (32768), (6.0 GiB KV "
                      "cache is needed, which is larger than the available KV cache memory (2.35 GiB).")),
        ErrorClass(
            "slurm_time_limit", "collective_hang", "Slurm cancelled the job at its time limit",
            text=r"CANCELLED AT \S+ DUE TO TIME LIMIT|DUE TO TIME LIMIT \*\*\*", line_level=True,
            cause="The job ran to its wall-clock limit. When the log is silent for long before this line, the run "
                  "was hung (a collective, a weight sync or a server wait), not slow.",
            check="the time of the last progress line before the cancellation, py-spy dump of a hung rank, the "
                  "NCCL/gloo timeouts (a shorter timeout turns a silent hang into a traceback).",
            source="SchedMD/slurm src/slurmd/slurmstepd/req.c: '*** JOB %u ON %s CANCELLED AT %s DUE TO TIME LIMIT ***'",
            examples=("slurmstepd: error: *** JOB 10711368 ON c0617 CANCELLED AT 2026-09-30T16:00:24 DUE TO TIME LIMIT ***",)),
        ErrorClass(
            "nccl_watchdog_timeout", "collective_hang", "NCCL watchdog timed out a collective",
            text=r"Watchdog caught collective operation timeout|ran for \d+ milliseconds before timing out", line_level=True,
            cause="A collective waited longer than the process-group timeout: one rank never joined it (it crashed, "
                  "is stuck elsewhere, or ranks issue collectives in different orders).",
            check="the first rank that stopped and its last line, OpType and SeqNum on every rank, and which collective "
                  "it was: in RL runs most often the weight sync (trainer-to-rollout broadcast or its gather), "
                  "where only some ranks enter the collective.",
            source="pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp: 'Watchdog caught collective operation "
                   "timeout: WorkNCCL(...) ran for N milliseconds before timing out'",
            examples=("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=BROADCAST, "
                      "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600035 milliseconds before timing out.",)),
        ErrorClass(
            "collective_timeout_reported", "collective_hang", "An NCCL timeout or deadlock is reported",
            text=r"\bNCCL\b[^\n]{0,80}?\b(?:deadlock|dead-lock|timed out|time-?out (?:occur|error|was|is reached|exceeded)"
                 r"|hangs?\b|hung\b|stuck\b)", line_level=True, confidence="low",
            cause="The report describes a collective that never completed (a deadlock or timeout). In RL runs this "
                  "is most often the weight sync, where one side (trainer or inference worker) never enters the "
                  "matching send/receive.",
            check="the ranks' last lines before the timeout, which side of the weight sync (trainer send vs rollout "
                  "receive) was waiting, the weight-sync mode and group setup, and a py-spy dump of a waiting rank.",
            source="pytorch ProcessGroupNCCL watchdog (the timeout the report describes); no log line quoted",
            examples=("When four GPUs are used, an NCCL deadlock timeout occurs during the weight synchronization phase.",)),
        ErrorClass(
            "gloo_timeout", "collective_hang", "A gloo collective or recv timed out",
            text=r"Timed out waiting \d+ms for (?:send|recv)|\[[^\]]*gloo[^\]]*\] Timed out waiting", line_level=True,
            cause="A gloo (CPU) collective or point-to-point op waited past its timeout: the peer rank never reached "
                  "it (crashed, hung, or is in a different step).",
            check="the peer rank's log at the same time, the process-group timeout, which collective (barrier, "
                  "broadcast of objects, weight sync over gloo).",
            source="facebookincubator/gloo gloo/transport/tcp/unbound_buffer.cc: 'Timed out waiting {N}ms for recv "
                   "operation to complete'",
            examples=("RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
                      "1800000ms for recv operation to complete",)),
        ErrorClass(
            "tcpstore_timeout", "collective_hang", "A torch.distributed store wait timed out",
            types=r"^DistStoreError$",
            text=r"DistStoreError|wait timeout after \d+ms, keys:|Socket Timeout|likely a timeout|"
                 r"TCPStore.*(?:timed out|timeout)", line_level=True,
            cause="A rank waited on the rendezvous/TCP store for a key another rank never wrote: the other side "
                  "(trainer or inference server in a weight-sync group) stopped or never joined.",
            check="the other side's log at the same time, the store/group timeout (a fixed 300 s in some clients), "
                  "the key named in the message (e.g. /broadcast_from/...).",
            source="pytorch torch/csrc/distributed/c10d/TCPStore.cpp: 'wait timeout after {}ms, keys: {}' "
                   "(torch.distributed.DistStoreError); c10d/socket.cpp 'waitForInput: poll ... likely a timeout'",
            examples=("torch.distributed.DistStoreError: wait timeout after 300000ms, keys: /broadcast_from/0/553755",)),
        ErrorClass(
            "http_context_length", "context_overflow", "The inference server refused a request longer than its context",
            text=r"(?i)maximum context length|longer than the maximum model length|context length exceeded|"
                 r"prompt is too long|exceeds the model'?s (?:max|context)",
            types=r"(?i)BadRequest|HTTPStatusError|HTTPError|APIStatusError|ValueError|^$", line_level=True,
            cause="A request's prompt plus max_tokens exceeds the server's max_model_len (HTTP 400); multi-turn "
                  "rollouts grow the prompt each turn.",
            check="the requested and allowed token counts in the message, max_model_len, the prompt + response "
                  "budget per turn, and truncation of the conversation history.",
            source="vllm-project/vllm vllm/entrypoints/openai/serving_engine.py: \"This model's maximum context length "
                   "is {} tokens. However, you requested {} tokens\" (HTTP 400)",
            examples=("openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': \"This model's maximum "
                      "context length is 32768 tokens. However, you requested 33000 tokens.\"}",)),
        ErrorClass(
            "weight_update_http_failure", "collective_hang", "The HTTP call that updates the server's weights failed",
            frames=r"httpx|httpcore|requests/|aiohttp|urllib3",
            context=r"(?i)updat\w* (?:the )?weights?|update_weights?|weight[ _-]?(?:sync|update|broadcast)|"
                    r"broadcast\w* weights",
            cause="The trainer asked the inference server to load new weights over HTTP and the request timed out or "
                  "failed: the client timeout is shorter than the weight load, or the server died during it.",
            check="the client timeout on the update_weights call (admin client), the server's log during the update, "
                  "and how long a weight load takes for this model size.",
            source="encode/httpx httpx/_transports/default.py map_httpcore_exceptions (httpcore timeouts -> "
                   "httpx.ReadTimeout / ConnectError)",
            examples=(("INFO Updating weights to weight checkpoint 1\n"
                      "Traceback (most recent call last):\n"
                      '  File "/v/site-packages/httpx/_transports/default.py", line 101, in map_httpcore_exceptions\n'
                      "    yield\n"
                      "httpx.ReadTimeout: timed out"),)),
        ErrorClass(
            "weight_update_timeout", "collective_hang", "The weight update request to the server timed out",
            types=r"^(?:ReadTimeout|WriteTimeout|TimeoutException|Timeout|ServerTimeoutError|APITimeoutError|"
                  r"TimeoutError)$",
            context=r"(?i)updat\w* (?:the )?weights?|update_weights?|weight[ _-]?(?:sync|update|broadcast)|"
                    r"broadcast\w* weights",
            cause="A timeout raised while the trainer pushed new weights to the inference server (HTTP or a weight "
                  "broadcast): the client timeout is shorter than the weight load, or the server stopped.",
            check="the client timeout on the update_weights call (admin client), the server's log during the update, "
                  "and how long a weight load takes for this model size.",
            source="encode/httpx httpx/_exceptions.py ReadTimeout; asyncio TimeoutError around the update call",
            examples=("httpx.ReadTimeout: timed out while POST /update_weights",)),
        ErrorClass(
            "http_timeout", "port_conflict", "An HTTP request to a server timed out",
            types=r"^(?:ReadTimeout|ConnectTimeout|WriteTimeout|PoolTimeout|TimeoutException|Timeout|"
                  r"ServerTimeoutError|APITimeoutError)$",
            cause="A server (rollout engine, reward or admin endpoint) did not answer within the client timeout: it "
                  "is overloaded, hung, or still loading.",
            check="the server's own log at that time, the client timeout, and the server's health endpoint.",
            source="encode/httpx httpx/_exceptions.py ReadTimeout; psf/requests requests/exceptions.py ReadTimeout",
            examples=("httpx.ReadTimeout: timed out",)),
        ErrorClass(
            "http_5xx", "port_conflict", "The server answered with a 5xx error",
            text=r"Server error '5\d\d|\b5\d\d Server Error|status(?:_code)?[ =:]+5\d\d\b|Error code: 5\d\d|"
                 r"\b50[0234] (?:Internal Server Error|Bad Gateway|Service Unavailable|Gateway Timeout)", line_level=True,
            cause="The inference/reward server was reached but failed the request; the reason is in the server's "
                  "own log, not the client's.",
            check="the server's log at the time of the request, whether the server process is still alive.",
            source="encode/httpx httpx/_models.py Response.raise_for_status: \"Server error '{status}' for url\"; "
                   "psf/requests requests/models.py: '{status} Server Error'",
            examples=("httpx.HTTPStatusError: Server error '500 Internal Server Error' for url "
                      "'http://localhost:8000/update_weights'",)),
        ErrorClass(
            "port_in_use", "port_conflict", "A server could not bind its port",
            text=r"EADDRINUSE|(?i:address already in use)|(?i:port \d+ is (?:already )?in use)", line_level=True,
            cause="Another process (a leftover server, a second engine picking the same port) holds the port.",
            check="which processes listen on the port (ss -ltnp), leftover servers of an earlier run, port choice "
                  "when several engines start at once.",
            source="POSIX errno EADDRINUSE ('Address already in use') from bind()",
            examples=("OSError: [Errno 98] Address already in use",)),
        ErrorClass(
            "server_unreachable", "port_conflict", "A server never became reachable",
            text=r"server launch failed|(?i:failed to (?:launch|start) (?:the )?(?:\w+ )?server)|Connection refused|"
                 r"Max retries exceeded with url|ConnectError|ConnectionRefusedError|NewConnectionError|"
                 r"APIConnectionError: Connection error",
            types=r"^(?:RuntimeError|ConnectionError|ConnectError|ConnectionRefusedError|TimeoutError|"
                  r"ClientConnectorError|MaxRetryError|NewConnectionError|APIConnectionError|)$",
            cause="The client waited for an inference server that never answered: the server crashed while "
                  "starting, bound another address/port, or is unreachable from this host.",
            check="the server log (the real error is there, not in the client's traceback), its host:port, and "
                  "that the server starts when launched alone.",
            source="areal-project/AReaL areal/engine/sglang_remote.py _wait_for_server: "
                   "RuntimeError('server launch failed'); urllib3 'Max retries exceeded with url'",
            examples=("RuntimeError: server launch failed",)),
        ErrorClass(
            "ray_actor_died", "ray_actor_died", "A Ray actor or worker died",
            types=r"^(?:ActorDiedError|RayActorError|ActorUnavailableError|WorkerCrashedError|NodeDiedError)$",
            text=r"The actor died unexpectedly|A worker died or was killed|ActorDiedError|Owner's node has crashed",
            line_level=True,
            cause="A Ray actor's process exited: its own error (earlier in its log), a host OOM kill, or its node "
                  "going away.",
            check="the actor's own log (worker-*.err) and the raylet log for the exit reason, host memory at the time.",
            source="ray-project/ray python/ray/exceptions.py ActorDiedError: 'The actor died unexpectedly before "
                   "finishing this task'",
            examples=("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",)),
        ErrorClass(
            "illegal_memory_access", "illegal_memory_access", "CUDA illegal memory access",
            text=r"(?i)illegal memory access|cudaErrorIllegalAddress", line_level=True,
            cause="A kernel read or wrote outside its buffer (a kernel bug, a wrong shape reaching a fused kernel, "
                  "or an OOM surfacing late).",
            check="rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel, the engine/kernel versions and backends.",
            source="CUDA runtime cudaErrorIllegalAddress: 'an illegal memory access was encountered'",
            examples=("RuntimeError: CUDA error: an illegal memory access was encountered",)),
        ErrorClass(
            "weights_key_error", "checkpoint_load_error", "A weight name was not found while loading weights",
            types=r"^KeyError$",
            frames=r"(?i)load_weights?|weight_loader|load_state_dict|load_checkpoint|load_model|_load_\w*weights|"
                   r"convert\w*(?:ckpt|checkpoint|weights)|from_pretrained",
            cause="The checkpoint's parameter names do not match what the model code expects (a different model "
                  "class/version, a converted or LoRA/MoE-renamed checkpoint).",
            check="the missing key in the message, the checkpoint's key list, the model class and the "
                  "framework/engine versions that wrote and read it.",
            source="vllm-project/vllm vllm/model_executor/models/*.py load_weights (params_dict[name] -> KeyError)",
            examples=(("Traceback (most recent call last):\n"
                      '  File "/v/site-packages/vllm/model_executor/models/qwen2_moe.py", line 480, in load_weights\n'
                      "    param = params_dict[name]\n"
                      "KeyError: 'model.layers.0.mlp.experts.w2_weight'"),)),
        ErrorClass(
            "mesh_reshape", "config_error", "The parallel sizes do not fit the number of ranks",
            text=r"cannot reshape array of size \d+ into shape|is invalid for input of size \d+",
            frames=r"(?i)mesh|parallel_state|initialize_model_parallel|init_device_mesh|rank_generator|"
                   r"_get_ranks|parallel",
            cause="The product of the parallel sizes (TP x PP x CP x DP, or EP) does not equal the number of ranks, "
                  "so the rank grid cannot be built.",
            check="every parallel size against the world size (nodes x GPUs per node).",
            source="numpy 'cannot reshape array of size N into shape (...)' from the rank-grid reshape; pytorch "
                   "torch/distributed/device_mesh.py init_device_mesh",
            examples=(("Traceback (most recent call last):\n"
                      '  File "/v/site-packages/megatron/core/parallel_state.py", line 300, in initialize_model_parallel\n'
                      "    ranks = np.arange(world_size).reshape(shape)\n"
                      "ValueError: cannot reshape array of size 8 into shape (3,2,1)"),)),
        ErrorClass(
            "megatron_validate_args", "config_error", "Megatron refused the arguments (validate_args)",
            frames=r"validate_args|arguments\.py",
            types=r"^(?:AssertionError|ValueError|)$",
            cause="Megatron-LM's validate_args checks layer counts, parallel sizes and batch arithmetic before "
                  "training; the failing assert names the condition (e.g. num_layers divisible by the pipeline "
                  "size unless an uneven first/last stage layout is given).",
            check="the assert's condition in the traceback, num_layers against the pipeline size "
                  "(decoder_first_pipeline_num_layers / decoder_last_pipeline_num_layers for an uneven split), "
                  "global batch against micro batch x DP.",
            source="NVIDIA/Megatron-LM megatron/training/arguments.py validate_args: 'Number of layers should be "
                   "divisible by the pipeline-model-parallel size'",
            examples=(('  File "/w/Megatron-LM/megatron/training/arguments.py", line 561, in validate_args\n'
                      "    assert num_layers % args.transformer_pipeline_model_parallel_size == 0, \\\n"
                      "AssertionError: Number of layers should be divisible by the pipeline-model-parallel size"),)),
        ErrorClass(
            "engine_args_validation", "config_error", "The engine refused its arguments (pydantic ValidationError)",
            types=r"^ValidationError$",
            text=r"validation errors? for \w+",
            cause="The rollout engine's config (vLLM/SGLang engine args) rejected a value or a combination at start-up; "
                  "the lines after the header name the field.",
            check="the field and value named under the ValidationError, and the engine version (defaults change).",
            source="pydantic/pydantic-core ValidationError ('N validation error for <Model>'); vLLM config classes "
                   "in vllm/config/ are pydantic dataclasses",
            examples=("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",)),
        ErrorClass(
            "engine_import_mismatch", "config_error", "An import from the engine or a library failed (version mismatch)",
            types=r"^(?:ImportError|ModuleNotFoundError)$",
            text=r"cannot import name '\w+' from '(?:vllm|sglang|transformers|torch|megatron|deepspeed|ray|flash_attn|"
                 r"trl|peft|accelerate)\b",
            cause="The framework imports a name its installed engine or library no longer (or not yet) has: the "
                  "two come from incompatible releases.",
            check="the framework's pinned versions against pip list for the package the import names.",
            source="CPython ImportError 'cannot import name X from Y'",
            examples=("ImportError: cannot import name 'ParallelConfig' from 'vllm.config'",)),
        ErrorClass(
            "nccl_communicator_error", "collective_hang", "NCCL reported an error or aborted a communicator",
            types=r"^(?:DistBackendError|RuntimeError|)$",
            text=r"NCCL error|ncclUnhandledCudaError|ncclSystemError|ncclInternalError|ncclInvalidUsage|"
                 r"ncclRemoteError|NCCL communicator was aborted|DistBackendError", line_level=False,
            cause="A collective failed inside NCCL: a peer rank died or hung, the network/IB path failed, or "
                  "processes disagree on the communicator (weight-sync groups built differently on two sides).",
            check="NCCL_DEBUG=INFO output of the first failing rank, which rank exited first and why, and the "
                  "network interface NCCL picked (NCCL_SOCKET_IFNAME, IB).",
            source="pytorch torch/csrc/distributed/c10d/NCCLUtils.hpp 'NCCL error in: ...' (DistBackendError); "
                   "ProcessGroupNCCL.cpp 'NCCL communicator was aborted'",
            examples=("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                      "NCCLUtils.hpp:275, unhandled cuda error",)),
        ErrorClass(
            "config_key_error", "config_error", "The config names a key the framework does not have",
            types=r"^(?:ConfigAttributeError|ConfigKeyError|ConfigTypeError|OverrideParseException|"
                  r"ConfigCompositionException|MissingMandatoryValue)$",
            cause="A Hydra/OmegaConf override or config key is not in the framework's schema (a misspelling, or a key "
                  "renamed between releases), or a mandatory value is missing.",
            check="the key in the message against the framework's config of the installed version (keys move "
                  "between releases).",
            source="omry/omegaconf omegaconf/errors.py ConfigAttributeError ('Key ... is not in struct'); "
                   "facebookresearch/hydra 'Could not override'",
            examples=("omegaconf.errors.ConfigAttributeError: Key 'rollout_n' is not in struct",)),
        ErrorClass(
            "api_version_mismatch", "config_error", "The framework calls an API its installed engine does not have",
            types=r"^(?:AttributeError|ImportError|ModuleNotFoundError|TypeError)$",
            text=r"has no attribute|cannot import name|No module named|unexpected keyword argument|"
                 r"got an unexpected keyword",
            frames=r"(?i)site-packages/(?:vllm|sglang|transformers|torch|megatron|deepspeed|ray|flash_attn|trl|peft)/",
            cause="The training framework and the engine/library it calls come from incompatible releases (an "
                  "attribute, import or keyword that the installed version removed or renamed, e.g. vLLM V1's "
                  "LLMEngine has no model_executor).",
            check="the framework's pinned versions against pip list (vllm, sglang, transformers, torch), and env "
                  "switches that change the engine API (VLLM_USE_V1).",
            source="vllm-project/vllm vllm/v1/engine/llm_engine.py (the V1 LLMEngine has no model_executor; V0 had)",
            examples=(("Traceback (most recent call last):\n"
                      '  File "/v/site-packages/vllm/entrypoints/llm.py", line 495, in collective_rpc\n'
                      "    executor = self.llm_engine.model_executor\n"
                      "AttributeError: 'LLMEngine' object has no attribute 'model_executor'"),)),
        ErrorClass(
            "compile_failure", "compile_cache_error", "torch.compile / inductor failed",
            text=r"BackendCompilerFailed|InductorError|failed to get the hash of the compiled graph|"
                 r"corrupt local cache entry", line_level=True,
            cause="torch.compile failed to build or load a compiled graph; a compile cache shared by several "
                  "processes or devices, or a stale cache from another version, is the common cause.",
            check="the compile cache directory (VLLM_CACHE_ROOT / TORCHINDUCTOR_CACHE_DIR) and whether processes "
                  "share it; rerun once with the cache cleared.",
            source="pytorch torch/_dynamo/exc.py BackendCompilerFailed, torch/_inductor/exc.py InductorError",
            examples=("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",)),
        ErrorClass(
            "compiled_graph_runtime", "compile_cache_error", "An error inside a compiled (inductor) graph",
            types=r"^$", frames=r"torch/_inductor/|torch/_dynamo/|compiled_fn|torch_compile", confidence="low",
            cause="The failing frames are inside torch.compile/inductor generated code: a compiled artifact that "
                  "does not fit this process (compiled for another device or shape, a raced cache) or a compile bug.",
            check="the exception line (paste it), the compile cache directory and whether engines share it.",
            source="pytorch torch/_inductor/output_code.py (compiled graph call)",
            examples=(("Traceback (most recent call last):\n"
                      '  File "/v/site-packages/torch/_inductor/output_code.py", line 656, in __call__\n'
                      "    return self.current_callable(inputs)"),)),
        ErrorClass(
            "nonfinite_reported", "nan_inf", "The framework reported a NaN/Inf",
            text=r"(?i)\b(?:loss|grad(?:ient)?[ _]?norm|logits?|log_?probs?|reward)s? (?:is|are|became|contains?) "
                 r"(?:nan|inf)|found (?:nan|inf)|detected (?:nan|inf)|non-?finite", line_level=False,
            cause="A loss, gradient or log-prob became NaN/Inf and the framework stopped.",
            check="the first step where a metric turned non-finite, the loss scale (fp16), the learning rate and "
                  "grad clipping.",
            source="torch.autograd anomaly mode / framework NaN checks",
            examples=("RuntimeError: Rank 0: loss is nan at iteration 12",)),
        ErrorClass(
            "deepspeed_batch_assertion", "config_error", "DeepSpeed's batch identity does not hold",
            text=r"train_batch_size is not equal to micro_batch_per_gpu \* gradient_acc_step \* world_size", line_level=True,
            cause="DeepSpeed requires train_batch_size = micro batch per GPU x gradient accumulation x world size; "
                  "the numbers in the message are the three sides.",
            check="train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps and the number of "
                  "GPUs actually launched (a framework may derive one of them).",
            source="deepspeedai/DeepSpeed deepspeed/runtime/config.py _batch_assertion: 'Check batch related "
                   "parameters. train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size'",
            examples=("AssertionError: Check batch related parameters. train_batch_size is not equal to "
                      "micro_batch_per_gpu * gradient_acc_step * world_size 16 != 2 * 1 * 4",)),
        ErrorClass(
            "checkpoint_files_missing", "checkpoint_load_error", "A checkpoint or model file is missing",
            text=r"does not appear to have a file named|No such file or directory: \S*(?:ckpt|checkpoint|global_step|"
                 r"iter_\d+|safetensors|\.bin\b|\.pt\b|model_optim_rng|latest_checkpointed_iteration|config\.json)|"
                 # a fresh run that finds nothing to resume says so and goes on: not a failure
                 r"(?i:no checkpoint found|checkpoint (?:not found|does not exist))"
                 r"(?![^\n]*(?i:from scratch|start(?:ing)? (?:fresh|from random|from step 0)|from the beginning))",
            line_level=True,
            cause="The path given to load (model, checkpoint to resume, converted weights) lacks the file the loader "
                  "expects: a wrong path, an unfinished save, or a layout from another framework version.",
            check="the path in the message, what the checkpoint folder really holds, and the resume/load settings.",
            source="huggingface/transformers configuration_utils/modeling_utils: 'does not appear to have a file "
                   "named'; Megatron-LM checkpointing.py latest_checkpointed_iteration.txt",
            examples=("OSError: /models/qwen does not appear to have a file named config.json.",
                      "FileNotFoundError: [Errno 2] No such file or directory: "
                      "'/ckpt/global_step_100/actor/model_world_size_8_rank_0.pt'")),
        ErrorClass(
            "state_dict_mismatch", "checkpoint_load_error", "The checkpoint does not match the model (state_dict)",
            text=r"Error\(s\) in loading state_dict|Missing key\(s\) in state_dict|Unexpected key\(s\) in "
                 r"state_dict|size mismatch for \S+: copying a param", line_level=True,
            cause="The checkpoint's parameter names or shapes differ from the model being built: another model "
                  "config (layers, experts, TP/EP layout), a converted checkpoint, or a format change between releases.",
            check="the missing/unexpected keys and shapes listed, the model config used to write the checkpoint and "
                  "the parallel layout (TP/PP/EP) it was saved with.",
            source="pytorch torch/nn/modules/module.py load_state_dict: 'Error(s) in loading state_dict for {}'",
            examples=("RuntimeError: Error(s) in loading state_dict for GPTModel:",)),
        ErrorClass(
            "batch_not_divisible", "config_error", "The batch arithmetic does not divide",
            text=r"must be (?:evenly )?divisible|is not divisible|should be divisible by|must be a multiple of|"
                 r"not a multiple of|should be larger than 0 after normalization",
            types=r"^(?:AssertionError|ValueError|RuntimeError|Exception|)$",
            cause="A batch size is not divisible by what it is split over (GPUs x micro-batch, samples per prompt, "
                  "gradient accumulation); frameworks check this at start-up.",
            check="global batch = micro batch x gradient accumulation x data-parallel size, and the samples-per-prompt "
                  "divisibility the message names.",
            source="huggingface/trl GRPOConfig: 'must be evenly divisible by the number of generations per prompt' "
                   "(before 0.20.0), 'generation_batch_size (...) must be divisible by num_generations (...)'; verl "
                   "verl/utils/config.py validate_config: 'must be divisible by minimal possible batch size'",
            examples=("ValueError: The global train batch size (1 x 1) must be evenly divisible by the number of "
                      "generations per prompt (6).",)),
        ErrorClass(
            "option_conflict", "config_error", "Two options that the framework does not allow together",
            text=r"does not support|(?:is|are) not supported (?:with|when|for|in)|mutually exclusive|"
                 r"cannot be (?:used|enabled|set) (?:together|simultaneously|with)|only supports?|"
                 r"(?:is|are) incompatible with",
            types=r"^(?:AssertionError|ValueError|NotImplementedError|RuntimeError|)$",
            cause="The configuration combines options the framework refuses together (an optimizer with the "
                  "distributed optimizer, a backend with a parallel mode).",
            check="the two options the message names; drop or change one of them.",
            source="NVIDIA/Megatron-LM megatron/core/optimizer/ assertions; verl/utils/config.py validate_config",
            examples=("AssertionError: Muon optimizer does not support distributed optimizer for now.",)),
        ErrorClass(
            "config_validation", "config_error", "The framework rejected its configuration at start-up",
            types=r"^(?:AssertionError|ValueError|TypeError|NotImplementedError|ConfigAttributeError|"
                  r"ConfigKeyError|MissingMandatoryValue|InstantiationException|SystemExit)$",
            frames=_VALIDATION_FRAMES,
            cause="A check on the configuration failed before training started; the message names the options.",
            check="the options the message names, against the framework's documented constraints.",
            source="verl verl/utils/config.py validate_config; Megatron-LM arguments.py validate_args; "
                   "TRL GRPOConfig.__post_init__",
            examples=(("Traceback (most recent call last):\n"
                      '  File "/v/site-packages/verl/utils/config.py", line 90, in validate_config\n'
                      "    assert n_gpus % tp == 0\n"
                      "AssertionError"),)),
        ErrorClass(
            "flag_instruction", "config_error", "The framework refused to start and named the flag to change",
            types=r"^(?:ValueError|AssertionError|RuntimeError|SystemExit)$",
            text=r"\b(?:[Ss]et|[Ii]ncrease|[Dd]ecrease|[Rr]educe|[Ll]ower|[Rr]aise|[Pp]ass|[Ss]pecify|[Aa]dd|[Rr]emove|"
                 r"[Dd]isable|[Ee]nable|[Uu]se) (?:the |a |an )?[`'\"]?--[A-Za-z][\w.-]*[`'\"]?(?: argument| flag| option)?"
                 r"(?: to| or| =|,|\.| when| if| with|$)",
            cause="A check before training refused the setup and its message says which command-line flag to change "
                  "(the device or process count, a length, a parallel size).",
            check="the flag the message names and the value the message asks for; the launch command's value of it.",
            source="huggingface/trl trl/trainer/grpo_trainer.py v0.14.0-v0.15.x: 'The requested device for vllm (...) is "
                   "not available. You are likely using vLLM without restricting the number of GPUs for training. Set "
                   "the `--num_processes` argument to a value lower than the number of GPUs available on your "
                   "machine'; the same imperative form in other launchers' start-up checks",
            examples=("ValueError: The requested device for vllm (cuda:8) is not available. You are likely using vLLM "
                      "without restricting the number of GPUs for training. Set the `--num_processes` argument to a "
                      "value lower than the number of GPUs available on your machine",
                      "AssertionError: rollout batch does not fit: increase --rollout-batch-size or lower "
                      "--n-samples-per-prompt.")),
    )


CLASSES: tuple[ErrorClass, ...] = _classes() + crash_classes() + infra_classes()
BY_NAME: dict[str, ErrorClass] = {c.name: c for c in CLASSES}

UNKNOWN = ErrorClass(
    "unclassified", "process_crash", "Unclassified error",
    cause="An error the engine has no class for yet.",
    check="the lines just before the first error, the full traceback with its last line (the exception), "
          "framework and engine versions, and the launch command.",
    source="-", examples=(), confidence="low")
