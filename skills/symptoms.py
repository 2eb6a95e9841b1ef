"""Symptom codes: the stable vocabulary every finding names.

Codes are never renamed; a new code is added here, with its meaning, before any rule names it.
"""
from __future__ import annotations

SYMPTOMS: dict[str, str] = {
    "nan_inf": "a non-finite loss, grad norm, log-prob, KL or reward",
    "grad_norm_spike": "gradient norm far above its trailing level, or growing step after step",
    "loss_plateau": "loss and reward stop moving while steps go on",
    "logprob_mismatch": "trainer and rollout log-probs disagree; KL or ratio not 0 at step 1",
    "reward_zero": "rewards all zero, or zero spread inside every group: no learning signal",
    "entropy_anomaly": "entropy collapses toward 0 or climbs until output is random",
    "length_blowup": "responses run to the length cap; generation does not stop",
    "garbled_rollout": "rollout text is gibberish or degenerate (!!!!, repeats, mixed scripts)",
    "illegal_memory_access": "CUDA error: an illegal memory access was encountered",
    "cuda_oom": "GPU out of memory, in training or in the rollout engine",
    "host_oom": "host (CPU) memory exhausted; workers killed",
    "context_overflow": "a request asks for more tokens than the model's context",
    "ray_resources_pending": "the job waits for GPUs/CPUs/placement groups that never come",
    "ray_actor_died": "a Ray actor or node is lost or unreachable",
    "collective_hang": "a collective or weight sync blocks: NCCL watchdog timeout or silent hang",
    "port_conflict": "a server cannot bind or cannot be reached at its port",
    "compile_cache_error": "torch.compile / inductor / engine compile cache is corrupt or raced",
    "checkpoint_load_error": "weights missing or loaded wrongly at start",
    "config_error": "options that conflict or are invalid; fails at start-up or silently misbehaves",
    "process_crash": "a process died with an error no other code explains (an unclassified exception, a native signal)",
}
