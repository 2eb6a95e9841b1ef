"""One host report: environment, GPUs and (optionally) numerics; a plain-text rendering; and the flat
``probe.*`` facts that rules read.

Importing this module imports neither torch nor pynvml.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from grpo_debug.probes.base import Runner, Unknown, run_cmd
from grpo_debug.probes.env import EnvFacts, collect_env
from grpo_debug.probes.gpu import GpuFacts, collect_gpus
from grpo_debug.probes.numerics import DeviceNumerics, NumericsReport, run_numerics

UNLIMITED = 2 ** 63 - 1  # probe.ulimit_nofile when the soft limit is RLIM_INFINITY


class HostReport(BaseModel):
    env: EnvFacts
    gpus: GpuFacts
    numerics: NumericsReport | None = None


def collect_host(*, numerics: bool = False, device: str = "cpu", force: bool = False, runner: Runner = run_cmd,
                 nvml: Any = None, timeout: float = 60) -> HostReport:
    """Collect everything; never raises. Numerics (a torch subprocess per device) only when ``numerics=True``;
    a GPU is measured only for ``device='cuda'`` and when the safety gate passes (or ``force``)."""
    env = collect_env(runner, nvml=nvml)
    gpus = collect_gpus(nvml)
    num = run_numerics(device, force=force, gpus=gpus, timeout=timeout) if numerics else None
    return HostReport(env=env, gpus=gpus, numerics=num)


# ------------------------------------------------------------------------------------------------ facts


def _known(v: Any) -> bool:
    return v is not None and not isinstance(v, Unknown)


def _gpu_bf16(report: HostReport) -> bool | None:
    """All GPUs support bf16: from the spec table; for a GPU not in the table, compute capability >= 8.0."""
    from grpo_debug.skills.knowledge import gpu_specs

    specs = gpu_specs()
    answers = []
    for g in report.gpus.gpus:
        spec = specs.get(g.spec_id) if g.spec_id else None
        if spec is not None:
            answers.append(bool(spec.bf16))
        elif _known(g.compute_capability):
            answers.append(float(g.compute_capability) >= 8.0)  # type: ignore[arg-type]
        else:
            return None
    return all(answers) if answers else None


def host_facts(report: HostReport) -> dict[str, object]:
    """Flat facts for rules. Keys whose value is Unknown are omitted (absent = could not be read)."""
    f: dict[str, object] = {}
    env, gpus = report.env, report.gpus

    if _known(env.nofile):
        soft = env.nofile.soft  # type: ignore[union-attr]
        f["probe.ulimit_nofile"] = UNLIMITED if soft is None else soft
    if _known(env.shm):
        f["probe.dev_shm_gib"] = env.shm.total_gib  # type: ignore[union-attr]
    if _known(env.python):
        f["probe.python"] = env.python
    if _known(env.driver_version):
        f["probe.driver_version"] = env.driver_version
    if _known(env.cpu) and env.cpu.affinity is not None:  # type: ignore[union-attr]
        f["probe.cpu_count"] = env.cpu.affinity  # type: ignore[union-attr]
    if _known(env.memory):
        f["probe.mem_available_gib"] = env.memory.available_gib  # type: ignore[union-attr]

    if gpus.available:
        gl = gpus.gpus
        f["probe.gpu_count"] = len(gl)
        names = [g.name for g in gl if _known(g.name)]
        if len(names) == len(gl):
            f["probe.gpu_names"] = names
        try:
            bf16 = _gpu_bf16(report)
        except Exception:  # noqa: BLE001
            bf16 = None
        if bf16 is not None:
            f["probe.gpu_bf16"] = bf16
        free = [g.memory_free_gib for g in gl if _known(g.memory_free_gib)]
        if free and len(free) == len(gl):
            f["probe.gpu_min_free_gib"] = min(free)  # type: ignore[type-var]
        procs = [g.processes for g in gl]
        if any(_known(p) and p for p in procs):
            f["probe.gpu_busy"] = True
        elif all(_known(p) for p in procs):
            f["probe.gpu_busy"] = False
        ecc = [g.ecc_volatile_uncorrected for g in gl if _known(g.ecc_volatile_uncorrected)]
        if ecc:
            f["probe.gpu_ecc_uncorrected"] = sum(ecc)  # type: ignore[arg-type]
        if _known(gpus.driver_version):
            f["probe.driver_version"] = gpus.driver_version

    if _known(env.packages):
        for pkg, ver in sorted(env.packages.items()):  # type: ignore[union-attr]
            if ver is not None:
                f[f"probe.versions.{pkg}"] = ver
    if _known(env.conflicts):
        f["probe.conflicts"] = [c.text() for c in env.conflicts]  # type: ignore[union-attr]
    if _known(env.env):
        for k, v in sorted(env.env.items()):  # type: ignore[union-attr]
            f[f"probe.env.{k}"] = v
    if _known(env.torch):
        f["probe.torch_version"] = env.torch.version  # type: ignore[union-attr]
        f["probe.torch_cuda"] = env.torch.cuda  # type: ignore[union-attr]

    if report.numerics is not None:
        cpu = report.numerics.results.get("cpu")
        if isinstance(cpu, DeviceNumerics):
            if _known(cpu.fp16_exp_overflow):
                f["probe.fp16_exp_overflow"] = cpu.fp16_exp_overflow
            if _known(cpu.bf16_logprob_drift):
                f["probe.bf16_logprob_drift_max"] = cpu.bf16_logprob_drift.max_abs  # type: ignore[union-attr]
        cuda = report.numerics.results.get("cuda")
        if isinstance(cuda, DeviceNumerics):
            nondet = sorted(k for k, v in cuda.repeatable.items() if v is False)
            f["probe.cuda_nonrepeatable_ops"] = nondet
            if _known(cuda.deterministic_algorithms):
                f["probe.deterministic_algorithms"] = cuda.deterministic_algorithms
    return f


# ------------------------------------------------------------------------------------------------ text


def _v(x: Any) -> str:
    if isinstance(x, Unknown):
        return f"unknown ({x.reason})"
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:g}"
    return str(x)


def _env_lines(env) -> list[str]:
    """The environment section: python, torch, CUDA, driver, limits, CPUs, memory."""
    out: list[str] = ["== Environment"]
    out.append(f"python:           {_v(env.python)}")
    if isinstance(env.torch, Unknown):
        out.append(f"torch:            {_v(env.torch)}")
    else:
        t = env.torch
        build = f"CUDA {t.cuda}" if t.cuda else (f"HIP {t.hip}" if t.hip else "CPU only")
        out.append(f"torch:            {t.version} ({build})")
        out.append(f"cuDNN:            {_v(t.cudnn)}")
        out.append(f"NCCL:             {_v(t.nccl)}")
    out.append(f"CUDA toolkit:     {_v(env.cuda_toolkit)}")
    out.append(f"driver:           {_v(env.driver_version)}")
    if isinstance(env.nofile, Unknown):
        out.append(f"ulimit -n:        {_v(env.nofile)}")
    else:
        out.append(f"ulimit -n:        soft {_v(env.nofile.soft) if env.nofile.soft is not None else 'unlimited'}, "
                   f"hard {_v(env.nofile.hard) if env.nofile.hard is not None else 'unlimited'}")
    if isinstance(env.shm, Unknown):
        out.append(f"/dev/shm:         {_v(env.shm)}")
    else:
        out.append(f"/dev/shm:         {env.shm.total_gib:g} GiB, {env.shm.free_gib:g} GiB free")
    if isinstance(env.cpu, Unknown):
        out.append(f"CPUs:             {_v(env.cpu)}")
    else:
        out.append(f"CPUs:             {_v(env.cpu.count)} (usable {_v(env.cpu.affinity)})")
    if isinstance(env.memory, Unknown):
        out.append(f"memory:           {_v(env.memory)}")
    else:
        out.append(f"memory:           {env.memory.total_gib:g} GiB, {env.memory.available_gib:g} GiB available")
    return out


def _package_lines(env) -> list[str]:
    """The packages section: installed versions, missing ones, conflicts."""
    out: list[str] = [""]
    out.append("== Packages")
    if isinstance(env.packages, Unknown):
        out.append(f"  {_v(env.packages)}")
    else:
        installed = {k: v for k, v in env.packages.items() if v is not None}
        for k, v in sorted(installed.items()):
            out.append(f"  {k:<20} {v}")
        missing = sorted(k for k, v in env.packages.items() if v is None)
        if missing:
            out.append(f"  not installed: {', '.join(missing)}")
    if isinstance(env.conflicts, Unknown):
        out.append(f"  conflicts: {_v(env.conflicts)}")
    elif env.conflicts:
        out.append("  conflicts:")
        out.extend(f"    {c.text()}" for c in env.conflicts)
    else:
        out.append("  conflicts: none found")
    return out


def _envvar_lines(env) -> list[str]:
    """The watched environment variables."""
    out: list[str] = [""]
    out.append("== Environment variables")
    if isinstance(env.env, Unknown):
        out.append(f"  {_v(env.env)}")
    elif env.env:
        out.extend(f"  {k}={v}" for k, v in env.env.items())
    else:
        out.append("  (none of the watched variables set)")
    return out


def _gpu_lines(gpus) -> list[str]:
    """The GPUs section: one block per GPU (memory, processes, ECC, clocks, links)."""
    out: list[str] = [""]
    out.append("== GPUs")
    if not gpus.available:
        out.append(f"  none: {gpus.reason}")
    else:
        out.append(f"  driver {_v(gpus.driver_version)}, CUDA (driver) {_v(gpus.cuda_driver_version)}")
        for g in gpus.gpus:
            out.append(f"  [{g.index}] {_v(g.name)} (spec {g.spec_id or 'not in table'}, uuid {_v(g.uuid)}, "
                       f"CC {_v(g.compute_capability)})")
            out.append(f"      memory: {_v(g.memory_total_gib)} GiB total, {_v(g.memory_used_gib)} used, "
                       f"{_v(g.memory_free_gib)} free")
            if isinstance(g.processes, Unknown):
                out.append(f"      processes: {_v(g.processes)}")
            else:
                procs = ", ".join(f"pid {p.pid} ({_v(p.used_gib)} GiB)" for p in g.processes) or "none"
                out.append(f"      processes: {procs}")
            out.append(f"      ECC: {_v(g.ecc_enabled)}, uncorrected volatile {_v(g.ecc_volatile_uncorrected)}, "
                       f"aggregate {_v(g.ecc_aggregate_uncorrected)}; retired pages {_v(g.retired_pages)}")
            thr = g.throttle_reasons
            out.append(f"      clocks: {_v(thr) if isinstance(thr, Unknown) else (', '.join(thr) or 'none')}; "
                       f"temperature {_v(g.temperature_c)} C")
            out.append(f"      NVLink active links: {_v(g.nvlink_active)}; MIG: {_v(g.mig_enabled)}")
    return out


def _numerics_lines(numerics) -> list[str]:
    """The numerics section (probe --numerics): per device, fp16 overflow, gating softmax, bf16 drift."""
    out: list[str] = []
    out.append("")
    out.append("== Numerics")
    for dev, r in numerics.results.items():
        if isinstance(r, Unknown):
            out.append(f"  {dev}: {_v(r)}")
            continue
        out.append(f"  {dev} ({r.device_name or r.device}, torch {r.torch_version}):")
        out.append(f"      fp16 exp overflow at x = {_v(r.fp16_exp_overflow)} (ln 65504 = 11.0898)")
        gs = r.gating_softmax
        if isinstance(gs, Unknown):
            out.append(f"      gating softmax: {_v(gs)}")
        else:
            out.append(f"      gating softmax [{gs.tokens}x{gs.experts}], max logit {gs.max_logit:g}: naive fp16 "
                       f"{gs.fp16_naive_nonfinite} inf/NaN in {gs.fp16_naive_nonfinite_rows} rows; naive fp32 "
                       f"{gs.fp32_naive_nonfinite}; torch.softmax fp16 {gs.fp16_torch_softmax_nonfinite}")
        d = r.bf16_logprob_drift
        if isinstance(d, Unknown):
            out.append(f"      bf16 log-prob drift: {_v(d)}")
        else:
            out.append(f"      bf16 vs fp32 log_softmax over {d.vocab} logits, {d.tokens} tokens: "
                       f"max |d| {d.max_abs:.4g}, mean {d.mean_abs:.4g} (bf16 logits only: max "
                       f"{d.logits_only_max_abs:.4g}, mean {d.logits_only_mean_abs:.4g})")
        rep = ", ".join(f"{k} {_v(v)}" for k, v in sorted(r.repeatable.items()))
        out.append(f"      bitwise repeatable: {rep}")
        out.append(f"      deterministic algorithms: {_v(r.deterministic_algorithms)}")
    return out


def render_host_text(report: HostReport) -> str:
    """Plain text, one fact per line (no rich needed)."""
    out = _env_lines(report.env) + _package_lines(report.env) + _envvar_lines(report.env) + _gpu_lines(report.gpus)
    if report.numerics is not None:
        out += _numerics_lines(report.numerics)
    return "\n".join(out) + "\n"
