"""Numerics probes through torch, each device measured in a SUBPROCESS with a timeout (JSON on stdout).

The parent never imports torch. ``run_numerics()`` always measures the CPU; it measures a GPU only when
``device='cuda'`` (or ``'cuda:N'``) is asked for AND :func:`gpu_gate` passes: the GPU (NVML index N) runs no other
compute process and the planned allocation is under 5 % of its free memory; ``force=True`` bypasses the check.
Otherwise the GPU result is ``Unknown('skipped: ...')``.

Measurements, per device:
  (a) the FP16 exp overflow threshold (smallest x, to 0.01, with exp(fp16(x)) == inf; ln 65504 = 11.0898), and a
      gating-sized softmax [4096 tokens x 64 experts] with logits scaled to max ~12: naive exp/sum in fp16 produces
      inf/NaN, fp32 and torch.softmax (max-subtracted) do not;
  (b) bf16 vs fp32 log_softmax drift over vocabulary-sized rows (151936 logits ~ N(0, 3)) at sampled tokens;
  (c) bitwise repeatability of matmul, scaled_dot_product_attention and index_add (same inputs, 3 runs);
  (d) torch.are_deterministic_algorithms_enabled() and related flags (of a fresh process: defaults plus the
      environment, not what a training script sets at run time).

Run one device by hand: ``python -m grpo_debug.probes.numerics --device cpu``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable

from pydantic import BaseModel, Field

from grpo_debug.probes.base import Unknown, probe
from grpo_debug.probes.gpu import GpuFacts, collect_gpus

FP16_MAX = 65504.0
GATING_SHAPE = (4096, 64)
VOCAB = 151936
VOCAB_ROWS = 8
SAMPLES_PER_ROW = 64
# Tensors of all measurements stay under ~0.15 GiB; the CUDA context adds ~0.3-0.6 GiB outside the caching allocator.
PLANNED_GIB = 0.75
FREE_FRACTION = 0.05


class GatingSoftmax(BaseModel):
    tokens: int
    experts: int
    max_logit: float
    fp16_naive_nonfinite: int = Field(description="inf/NaN elements of exp(x)/sum(exp(x)) in fp16.")
    fp16_naive_nonfinite_rows: int
    fp32_naive_nonfinite: int
    fp16_torch_softmax_nonfinite: int = Field(description="torch.softmax (max-subtracted) in fp16.")


class LogprobDrift(BaseModel):
    vocab: int
    rows: int
    tokens: int = Field(description="Sampled (selected) tokens compared.")
    max_abs: float = Field(description="max |log_softmax_bf16 - log_softmax_fp32| at the selected tokens.")
    mean_abs: float
    logits_only_max_abs: float = Field(description="Logits rounded to bf16, log_softmax in fp32.")
    logits_only_mean_abs: float


class DeviceNumerics(BaseModel):
    device: str
    device_name: str | None = None
    torch_version: str
    fp16_exp_overflow: float | Unknown
    gating_softmax: GatingSoftmax | Unknown
    bf16_logprob_drift: LogprobDrift | Unknown
    repeatable: dict[str, bool | Unknown] = Field(description="matmul / sdpa / index_add: bitwise equal over runs.")
    deterministic_algorithms: bool | Unknown
    flags: dict[str, bool | Unknown] = Field(default_factory=dict)
    timings_ms: dict[str, float] = Field(default_factory=dict)


class NumericsReport(BaseModel):
    results: dict[str, DeviceNumerics | Unknown] = Field(description="'cpu' always, 'cuda' when asked for.")
    wall_s: dict[str, float] = Field(default_factory=dict)


# ------------------------------------------------------------------------------------------- the GPU gate


def gpu_gate(gpus: GpuFacts, *, index: int = 0, planned_gib: float = PLANNED_GIB,
             force: bool = False) -> tuple[bool, str]:
    """May the numerics probe allocate on NVML GPU ``index``? (allowed, reason). Refuses a GPU with another compute
    process, or when ``planned_gib`` is not under 5 % of its free memory, or when either cannot be read."""
    if force:
        return True, "force=True: safety check bypassed"
    if not gpus.available:
        return False, f"no GPU facts: {gpus.reason}"
    gpu = next((g for g in gpus.gpus if g.index == index), None)
    if gpu is None:
        return False, f"GPU {index} not found (NVML sees {len(gpus.gpus)})"
    if isinstance(gpu.processes, Unknown):
        return False, f"GPU {index}: cannot tell whether it is busy ({gpu.processes.reason})"
    if gpu.processes:
        pids = ", ".join(str(p.pid) for p in gpu.processes)
        return False, f"GPU {index} is busy: {len(gpu.processes)} other compute process(es) (pid {pids})"
    if isinstance(gpu.memory_free_gib, Unknown):
        return False, f"GPU {index}: free memory unknown ({gpu.memory_free_gib.reason})"
    limit = FREE_FRACTION * gpu.memory_free_gib
    if planned_gib >= limit:
        return False, (f"GPU {index}: planned {planned_gib:g} GiB is not under 5% of free memory "
                       f"({gpu.memory_free_gib:g} GiB free, limit {limit:.3g} GiB)")
    return True, f"GPU {index} idle, planned {planned_gib:g} GiB < {limit:.3g} GiB (5% of free)"


# ------------------------------------------------------------------------------------------- the parent side


#: The numerics child's own limits (probes/rlimits.py): RLIMIT_DATA in MB (CPU: ~260 MB measured with torch 2.13;
#: CUDA: a backstop only, its context's host memory is larger) and RLIMIT_CPU as a multiple of the wall timeout
#: (torch runs several threads).
CHILD_MEM_MB = {"cpu": 2048, "cuda": 16384}
CHILD_CPU_PER_WALL_S = 4


def _run_device(device: str, timeout: float, env: dict[str, str] | None = None) -> DeviceNumerics | Unknown:
    from grpo_debug.probes.base import child_argv
    from grpo_debug.probes.rlimits import died_of

    mem_mb = CHILD_MEM_MB["cuda" if device.startswith("cuda") else "cpu"]
    cpu_s = int(timeout * CHILD_CPU_PER_WALL_S) + 10
    argv = child_argv("grpo_debug.probes.numerics", "--device", device, "--mem-mb", str(mem_mb), "--cpu-s", str(cpu_s))
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, shell=False)
    except subprocess.TimeoutExpired:
        return Unknown(reason=f"numerics on {device} timed out after {timeout:g} s")
    except OSError as e:
        return Unknown(reason=f"could not start {sys.executable}: {e}")
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    if p.returncode != 0 or not lines:
        tail = (p.stderr or p.stdout).strip()[-400:]
        return Unknown(reason=f"numerics subprocess on {device} failed ({died_of(p.returncode, mem_mb, cpu_s)}): {tail}")
    try:
        data = json.loads(lines[-1])
    except ValueError:
        return Unknown(reason=f"numerics subprocess on {device}: no JSON on stdout: {lines[-1][:200]}")
    if isinstance(data, dict) and data.get("unknown"):
        return Unknown.model_validate(data)
    return DeviceNumerics.model_validate(data)


def run_numerics(device: str = "cpu", *, force: bool = False, gpus: GpuFacts | None = None, nvml: Any = None,
                 timeout: float = 60.0) -> NumericsReport:
    """CPU always; the GPU (``'cuda'`` = NVML index 0, ``'cuda:N'``) only when :func:`gpu_gate` passes or ``force``.
    ``gpus`` avoids a second NVML read when the caller has them. Never raises."""
    results: dict[str, DeviceNumerics | Unknown] = {}
    wall: dict[str, float] = {}
    if importlib.util.find_spec("torch") is None:
        results["cpu"] = Unknown(reason="torch not installed")
        if device.startswith("cuda"):
            results["cuda"] = Unknown(reason="torch not installed")
        return NumericsReport(results=results)
    t = time.perf_counter()
    results["cpu"] = _run_device("cpu", timeout, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    wall["cpu"] = round(time.perf_counter() - t, 3)
    if device.startswith("cuda"):
        try:
            index = int(device.split(":", 1)[1]) if ":" in device else 0
        except ValueError:
            results["cuda"] = Unknown(reason=f"bad device {device!r}")
            return NumericsReport(results=results, wall_s=wall)
        if gpus is None:
            gpus = collect_gpus(nvml)
        ok, why = gpu_gate(gpus, index=index, force=force)
        if not ok:
            results["cuda"] = Unknown(reason=f"skipped: {why}")
        else:
            # NVML indices follow PCI bus order; pin the child to that physical GPU.
            env = {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": str(index)}
            t = time.perf_counter()
            results["cuda"] = _run_device("cuda", timeout, env=env)
            wall["cuda"] = round(time.perf_counter() - t, 3)
    return NumericsReport(results=results, wall_s=wall)


# ------------------------------------------------------------------------------------------- the child side
# Everything below runs in the subprocess only (torch imported inside the functions).


def _sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _timed(timings: dict[str, float], key: str, torch: Any, device: str, fn: Callable[[], Any]) -> Any:
    t = time.perf_counter()
    out = probe(fn)()
    probe(_sync)(torch, device)
    timings[key] = round((time.perf_counter() - t) * 1000, 3)
    return out


def _fp16_overflow(torch: Any, device: str) -> float | Unknown:
    xs = [round(i / 100, 2) for i in range(1000, 1300)]  # 10.00 .. 12.99
    y = torch.exp(torch.tensor(xs, dtype=torch.float16, device=device))
    inf = torch.isinf(y).cpu().tolist()
    for x, is_inf in zip(xs, inf):
        if is_inf:
            return x
    return Unknown(reason="exp(fp16) stayed finite up to 12.99")


def _gating_softmax(torch: Any, device: str) -> GatingSoftmax:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(*GATING_SHAPE, generator=g)
    logits = (logits / logits.abs().max() * 12.0).to(device)

    def naive(x: Any) -> Any:
        e = torch.exp(x)
        return e / e.sum(dim=-1, keepdim=True)

    p16 = naive(logits.half())
    bad16 = ~torch.isfinite(p16)
    return GatingSoftmax(
        tokens=GATING_SHAPE[0], experts=GATING_SHAPE[1], max_logit=round(float(logits.max()), 4),
        fp16_naive_nonfinite=int(bad16.sum()), fp16_naive_nonfinite_rows=int(bad16.any(dim=-1).sum()),
        fp32_naive_nonfinite=int((~torch.isfinite(naive(logits.float()))).sum()),
        fp16_torch_softmax_nonfinite=int((~torch.isfinite(torch.softmax(logits.half(), dim=-1))).sum()),
    )


def _logprob_drift(torch: Any, device: str) -> LogprobDrift:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(VOCAB_ROWS, VOCAB, generator=g) * 3.0
    tokens = torch.multinomial(torch.softmax(logits, dim=-1), SAMPLES_PER_ROW, replacement=True, generator=g)
    logits, tokens = logits.to(device), tokens.to(device)
    lp32 = torch.log_softmax(logits, dim=-1).gather(-1, tokens)
    lp16 = torch.log_softmax(logits.bfloat16(), dim=-1).float().gather(-1, tokens)
    lpq = torch.log_softmax(logits.bfloat16().float(), dim=-1).gather(-1, tokens)
    d, dq = (lp16 - lp32).abs(), (lpq - lp32).abs()
    return LogprobDrift(vocab=VOCAB, rows=VOCAB_ROWS, tokens=int(tokens.numel()),
                        max_abs=float(d.max()), mean_abs=float(d.mean()),
                        logits_only_max_abs=float(dq.max()), logits_only_mean_abs=float(dq.mean()))


def _repeatable(torch: Any, fn: Callable[[], Any], runs: int = 3) -> bool:
    first = fn()
    return all(torch.equal(first, fn()) for _ in range(runs - 1))


def _matmul_fn(torch: Any, device: str) -> Callable[[], Any]:
    g = torch.Generator().manual_seed(1)
    a = torch.randn(1024, 1024, generator=g).to(device)
    b = torch.randn(1024, 1024, generator=g).to(device)
    return lambda: a @ b


def _sdpa_fn(torch: Any, device: str) -> Callable[[], Any]:
    g = torch.Generator().manual_seed(2)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    q, k, v = (torch.randn(2, 8, 512, 64, generator=g).to(device=device, dtype=dtype) for _ in range(3))
    return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def _index_add_fn(torch: Any, device: str) -> Callable[[], Any]:
    g = torch.Generator().manual_seed(3)
    index = torch.randint(0, 1000, (100_000,), generator=g).to(device)
    source = torch.randn(100_000, 32, generator=g).to(device)
    target = torch.zeros(1000, 32, device=device)
    return lambda: target.index_add(0, index, source)


def _flags(torch: Any) -> dict[str, bool | Unknown]:
    return {
        "deterministic_algorithms_warn_only": probe(torch.is_deterministic_algorithms_warn_only_enabled)(),
        "cudnn_deterministic": probe(lambda: bool(torch.backends.cudnn.deterministic))(),
        "cudnn_benchmark": probe(lambda: bool(torch.backends.cudnn.benchmark))(),
        "matmul_allow_tf32": probe(lambda: bool(torch.backends.cuda.matmul.allow_tf32))(),
    }


def measure(device: str) -> DeviceNumerics | Unknown:
    """Run every measurement on ``device`` in this process (the subprocess side). Never raises."""
    if importlib.util.find_spec("torch") is None:
        return Unknown(reason="torch not installed")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import torch
        except Exception as e:  # noqa: BLE001
            return Unknown(reason=f"import torch failed: {type(e).__name__}: {e}")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            return Unknown(reason="torch.cuda.is_available() is False")
        device = "cuda:0"
    timings: dict[str, float] = {}
    name = probe(lambda: torch.cuda.get_device_name(0))() if device.startswith("cuda") else "cpu"
    return DeviceNumerics(
        device=device,
        device_name=None if isinstance(name, Unknown) else name,
        torch_version=str(torch.__version__),
        fp16_exp_overflow=_timed(timings, "fp16_exp_overflow", torch, device, lambda: _fp16_overflow(torch, device)),
        gating_softmax=_timed(timings, "gating_softmax", torch, device, lambda: _gating_softmax(torch, device)),
        bf16_logprob_drift=_timed(timings, "bf16_logprob_drift", torch, device, lambda: _logprob_drift(torch, device)),
        repeatable={
            "index_add": _timed(timings, "index_add", torch, device,
                                lambda: _repeatable(torch, _index_add_fn(torch, device))),
            "matmul": _timed(timings, "matmul", torch, device, lambda: _repeatable(torch, _matmul_fn(torch, device))),
            "sdpa": _timed(timings, "sdpa", torch, device, lambda: _repeatable(torch, _sdpa_fn(torch, device))),
        },
        deterministic_algorithms=probe(lambda: bool(torch.are_deterministic_algorithms_enabled()))(),
        flags=_flags(torch),
        timings_ms=timings,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m grpo_debug.probes.numerics")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--mem-mb", type=int, default=None, help="RLIMIT_DATA for this process (probes/rlimits.py)")
    ap.add_argument("--cpu-s", type=int, default=None, help="RLIMIT_CPU for this process")
    args = ap.parse_args(argv)
    from grpo_debug.probes.rlimits import limit_self

    limit_self(args.mem_mb, args.cpu_s)  # before torch is imported
    if os.environ.get("GRPO_DEBUG_NUMERICS_TEST_SLEEP"):  # tests only: a child that hangs (isolation test)
        time.sleep(float(os.environ["GRPO_DEBUG_NUMERICS_TEST_SLEEP"]))
    try:
        out = measure(args.device)
    except Exception as e:  # noqa: BLE001
        out = Unknown(reason=f"{type(e).__name__}: {e}")
    print(out.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
