"""Stream-safety checks over flattened config facts (DeepSpeed JSON, env variables): ``analyze_config``."""
from __future__ import annotations


from grpo_debug.tools.analyzers.cuda_streams.report import (SRC_DS_8061, SRC_TORCHTITAN_735, SRC_VERL_6976,
                                                            StreamFinding, StreamReport, by_severity, summarize)


# ---------------------------------------------------------------------------- config facts
_TRUE = {"true", "1", "yes", "on", "y", "t", "enabled", "enable"}
_FALSE = {"false", "0", "no", "off", "n", "f", "disabled", "disable", "none", "null", ""}


def _lookup(facts: dict[str, object], *keys: str) -> tuple[str, object] | None:
    """First fact whose key equals one of ``keys`` or ends with ``.<key>`` (case-insensitive).

    Keys are tried in order, so put the most specific first.
    """
    low = {str(k).lower(): (str(k), v) for k, v in facts.items()}
    for key in keys:
        key = key.lower()
        if key in low:
            return low[key]
        for lk, kv in low.items():
            if lk.endswith("." + key):
                return kv
    return None


def _truthy(v: object) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return v != 0
    if isinstance(v, dict):
        return _truthy(v.get("enabled")) if "enabled" in v else bool(v)
    s = str(v).strip().strip("'\"").lower()
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    return None


def _as_int(v: object) -> int | None:
    try:
        return int(str(v).strip().strip("'\""))
    except (TypeError, ValueError):
        return None


def _overlap_comm(facts: dict[str, object]) -> list[StreamFinding]:
    """``deepspeed_overlap_comm_compile`` / ``deepspeed_overlap_comm``: ZeRO-1/2 overlap_comm (with torch.compile)."""
    findings: list[StreamFinding] = []
    overlap = _lookup(facts, "zero_optimization.overlap_comm", "overlap_comm")
    stage = _lookup(facts, "zero_optimization.stage", "zero_stage", "zero_optimization_stage")
    compile_ = _lookup(
        facts, "compile.enabled", "torch_compile", "use_torch_compile", "compile", "torch_compile_backend",
    )
    overlap_on = overlap is not None and _truthy(overlap[1]) is True
    stage_v = _as_int(stage[1]) if stage else None
    if overlap_on and stage_v in (1, 2):
        comp_on: bool | None = None
        if compile_ is not None:
            k, v = compile_
            if k.lower().endswith("torch_compile_backend"):  # HF: a backend implies torch_compile=True
                comp_on = _truthy(v) is not False
            else:
                comp_on = _truthy(v)
        extras = []
        for key in ("contiguous_gradients", "reduce_scatter", "bf16.enabled"):
            hit = _lookup(facts, key)
            if hit is not None and _truthy(hit[1]) is True:
                extras.append(hit[0])
        extra_txt = f" Also on, from the issue's trigger set: {', '.join(extras)}." if extras else ""
        if comp_on:
            findings.append(StreamFinding(
                check="deepspeed_overlap_comm_compile", severity="high",
                message=(
                    f"ZeRO stage {stage_v} with `{overlap[0]}`=true and torch.compile on (`{compile_[0]}`). "  # type: ignore[index]
                    "In DeepSpeed #8061 the gradient reduction waits only on the current stream, while "
                    "the bucket copies are issued on several streams. The reduction can then read "
                    f"half-written buckets, and the loss goes NaN from step 1.{extra_txt}"
                ),
                fix=(
                    "Upgrade DeepSpeed to a release that contains PR #8080 "
                    "(https://github.com/deepspeedai/DeepSpeed/pull/8080), where the reduction stream waits "
                    "on every stream that wrote the bucket. Until then, set "
                    "`zero_optimization.overlap_comm: false` or turn torch.compile off. PR #7965 "
                    "(record_stream for overlap-comm buffer lifetimes) fixed a related ZeRO-2 NaN."
                ),
                source=SRC_DS_8061,
            ))
        elif comp_on is None:
            findings.append(StreamFinding(
                check="deepspeed_overlap_comm", severity="info",
                message=(
                    f"ZeRO stage {stage_v} with `{overlap[0]}`=true. DeepSpeed #8061 (NaN from step 1) "
                    "also needs torch.compile, and no torch.compile setting was found in these facts."
                    f"{extra_txt}"
                ),
                fix=(
                    "If torch.compile is on, upgrade DeepSpeed to a release with PR #8080, or set "
                    "overlap_comm false. Check that the release also has PR #7965 (record_stream for "
                    "overlap-comm buffers)."
                ),
                source=SRC_DS_8061,
            ))
    return findings


def _avoid_record_streams(facts: dict[str, object]) -> list[StreamFinding]:
    """``torch_nccl_avoid_record_streams``: what setting TORCH_NCCL_AVOID_RECORD_STREAMS changes."""
    findings: list[StreamFinding] = []
    avoid = _lookup(facts, "TORCH_NCCL_AVOID_RECORD_STREAMS", "env.TORCH_NCCL_AVOID_RECORD_STREAMS")
    if avoid is not None:
        on = _truthy(avoid[1])
        state = "on" if on else ("off" if on is False else f"set to {avoid[1]!r}")
        findings.append(StreamFinding(
            check="torch_nccl_avoid_record_streams", severity="info",
            message=(
                f"`{avoid[0]}` is {state}. By default, ProcessGroupNCCL called record_stream on "
                "collective tensors, which can hold memory longer than needed (FSDP2/TP peak memory "
                "in torchtitan #735). With the variable on, c10d instead keeps a reference to the "
                "tensors until `work.wait()`, so code must wait on async_op=True work handles. "
                "Newer PyTorch releases stash references this way by default and may ignore the "
                "variable, so check your torch version before relying on it either way."
            ),
            fix=(
                "No change is needed for safety if every async_op=True collective is waited on. Set it to 1 on "
                "older PyTorch when TP/FSDP2 memory grows from record_stream."
            ),
            source=SRC_TORCHTITAN_735,
        ))
    return findings


def _max_connections(facts: dict[str, object]) -> list[StreamFinding]:
    """``cuda_device_max_connections_1``: one hardware queue for every stream."""
    findings: list[StreamFinding] = []
    conn = _lookup(facts, "CUDA_DEVICE_MAX_CONNECTIONS")
    if conn is not None and _as_int(conn[1]) == 1:
        strat = _lookup(facts, "actor.strategy", "strategy")
        fsdp = strat is not None and "fsdp" in str(strat[1]).lower()
        findings.append(StreamFinding(
            check="cuda_device_max_connections_1", severity="low" if fsdp else "info",
            message=(
                f"`{conn[0]}`=1 puts the work of all streams on one hardware queue. Megatron relies on this "
                "to order communication before compute. With FSDP2-style backends it serialises "
                "multi-stream prefetch and overlap, which verl PR #6976 limits to Megatron."
                + (f" The strategy here is `{strat[1]}`." if fsdp else "")  # type: ignore[index]
            ),
            fix="Set CUDA_DEVICE_MAX_CONNECTIONS=1 only for Megatron-based training. Unset it for FSDP/FSDP2 workers.",
            source=SRC_VERL_6976,
        ))
    return findings


def analyze_config(facts: dict[str, object]) -> StreamReport:
    """Check flattened config facts (key -> value) for stream-safety signals (heuristic).

    Keys match case-insensitively, either exactly or by suffix (``overlap_comm`` matches
    ``zero_optimization.overlap_comm``). Checks:

    - ``deepspeed_overlap_comm_compile`` (high): ZeRO stage 1/2 with ``overlap_comm`` true and
      torch.compile on (``compile.enabled``, ``compile``, ``torch_compile``, ``use_torch_compile``,
      ``torch_compile_backend``). In DeepSpeed #8061 the reduction waits only on the current stream,
      while the IPG bucket copies come from several streams. The loss is NaN from step 1. Fixed by
      PR #8080, in which the reduction stream waits on every stream that wrote the bucket.
    - ``deepspeed_overlap_comm`` (info): the same ZeRO-1/2 + ``overlap_comm`` when torch.compile is
      not stated. It names the fact that would decide the case.
    - ``torch_nccl_avoid_record_streams`` (info): ``TORCH_NCCL_AVOID_RECORD_STREAMS`` is set. It says
      what that changes (pytorch/torchtitan #735).
    - ``cuda_device_max_connections_1`` (info, or low with an FSDP strategy):
      ``CUDA_DEVICE_MAX_CONNECTIONS=1`` puts the work of all streams on one hardware queue. Megatron
      needs that, but with FSDP2 it serialises prefetch and overlap (verl PR #6976).
    """
    facts = dict(facts or {})
    findings = by_severity([*_overlap_comm(facts), *_avoid_record_streams(facts), *_max_connections(facts)])
    return StreamReport(findings=findings, summary=summarize(findings, f"{len(facts)} config fact{'s' if len(facts) != 1 else ''}"))
