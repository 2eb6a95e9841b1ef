"""Host environment facts: python / torch / CUDA build, driver, package versions, relevant environment variables,
limits, /dev/shm, CPUs, memory and version conflicts between the RL frameworks and their pinned dependencies.

One small ``@probe`` function per fact (the torch ``collect_env`` model): each returns a value or :class:`Unknown`
and never raises. Packages are read through ``importlib.metadata`` without importing them; torch is imported only
inside :func:`get_torch_build`, and only when it is installed.
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys
from importlib import metadata as importlib_metadata
from typing import Any, Mapping

from pydantic import BaseModel, Field

from grpo_debug.probes.base import Runner, Unknown, probe, run_cmd

GIB = 1024 ** 3

# display name -> distribution names to try (importlib.metadata normalises - / _ / case, the list covers renames)
PACKAGES: dict[str, tuple[str, ...]] = {
    "accelerate": ("accelerate",),
    "deepspeed": ("deepspeed",),
    "flash-attn": ("flash-attn", "flash_attn"),
    "megatron-core": ("megatron-core", "megatron_core"),
    "nvidia-ml-py": ("nvidia-ml-py",),
    "openrlhf": ("openrlhf",),
    "peft": ("peft",),
    "ray": ("ray",),
    "sglang": ("sglang",),
    "slime": ("slime",),
    "torch": ("torch",),
    "transformer-engine": ("transformer-engine", "transformer_engine", "transformer-engine-cu12",
                           "transformer_engine_torch"),
    "transformers": ("transformers",),
    "trl": ("trl",),
    "verl": ("verl",),
    "vllm": ("vllm",),
}

# frameworks whose Requires-Dist we check, and the dependencies whose pins matter
CONFLICT_PACKAGES = ("deepspeed", "openrlhf", "sglang", "trl", "verl", "vllm")
CONFLICT_TARGETS = ("flash-attn", "ray", "torch", "transformers", "vllm", "xformers")

ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "CUDA_DEVICE_MAX_CONNECTIONS", "PYTORCH_CUDA_ALLOC_CONF",
                "PYTORCH_ALLOC_CONF", "TORCHINDUCTOR_", "VLLM_", "SGLANG_", "RAY_", "CUDA_VISIBLE_DEVICES")
SECRET_MARKERS = ("TOKEN", "KEY", "SECRET", "PASSWORD")
REDACTED = "<redacted>"


class TorchBuild(BaseModel):
    version: str
    cuda: str | None = Field(description="torch.version.cuda; None on CPU or ROCm builds.")
    hip: str | None = Field(description="torch.version.hip; None on CUDA or CPU builds.")
    cudnn: int | None | Unknown = Field(description="torch.backends.cudnn.version(); None when not built with cuDNN.")
    nccl: str | None | Unknown = Field(description="torch.cuda.nccl.version() as 'x.y.z'; Unknown on CPU builds.")


class NoFileLimit(BaseModel):
    soft: int | None = Field(description="None = unlimited.")
    hard: int | None = Field(description="None = unlimited.")


class ShmFacts(BaseModel):
    path: str = "/dev/shm"
    total_gib: float
    free_gib: float


class CpuFacts(BaseModel):
    count: int | None = Field(description="os.cpu_count(): CPUs in the machine.")
    affinity: int | None = Field(description="len(os.sched_getaffinity(0)): CPUs this process may use.")


class MemoryFacts(BaseModel):
    total_gib: float
    available_gib: float


class Conflict(BaseModel):
    package: str = Field(description="The framework whose Requires-Dist is not met, e.g. 'vllm'.")
    requires: str = Field(description="The requirement as written, e.g. 'torch==2.5.1'.")
    installed: str = Field(description="The installed version of the required package.")

    def text(self) -> str:
        return f"{self.package} requires {self.requires}, installed {self.installed}"


class EnvFacts(BaseModel):
    python: str | Unknown
    torch: TorchBuild | Unknown
    cuda_toolkit: str | Unknown = Field(description="nvcc --version release, e.g. '12.4' (the toolkit, not torch's).")
    driver_version: str | Unknown = Field(description="NVIDIA driver version read through NVML.")
    packages: dict[str, str | None] | Unknown = Field(description="Installed version per package; None = not installed.")
    env: dict[str, str] | Unknown = Field(description="Relevant environment variables (secrets redacted), sorted.")
    nofile: NoFileLimit | Unknown
    shm: ShmFacts | Unknown
    cpu: CpuFacts | Unknown
    memory: MemoryFacts | Unknown
    conflicts: list[Conflict] | Unknown


# ---------------------------------------------------------------------------------------------------- probes


@probe
def get_python_version() -> str:
    return sys.version.split()[0]


@probe
def get_torch_build() -> TorchBuild | Unknown:
    """torch's version, CUDA and HIP versions without importing torch (seconds and GBs saved).

    The version comes from the package metadata, CUDA/HIP from the ``cuda = '12.4'`` / ``hip = None`` lines
    of ``torch/version.py`` (written by torch's build, ``tools/generate_torch_version.py``). cuDNN and NCCL
    versions need the library loaded: they are reported unknown here and read by ``probe --numerics``.
    """
    spec = importlib.util.find_spec("torch")
    if spec is None:
        return Unknown(reason="torch not installed")
    version = importlib_metadata.version("torch")
    fields: dict[str, str | None] = {"cuda": None, "hip": None}
    for folder in spec.submodule_search_locations or []:
        try:
            with open(os.path.join(folder, "version.py"), encoding="utf-8") as fh:
                text = fh.read(65536)
        except OSError:
            continue
        for key in fields:
            m = re.search(rf"^{key}\s*(?::\s*[\w\[\], |]+)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
            fields[key] = m.group(1) if m else None
        break
    not_loaded = Unknown(reason="not read without importing torch; `grpo-debug probe --numerics` loads it")
    return TorchBuild(version=version, cuda=fields["cuda"], hip=fields["hip"], cudnn=not_loaded, nccl=not_loaded)


@probe
def get_cuda_toolkit(runner: Runner = run_cmd) -> str | Unknown:
    rc, out, err = runner(["nvcc", "--version"], 5.0)
    if rc != 0:
        return Unknown(reason=f"nvcc --version failed (rc {rc}): {(err or out).strip()[:200]}")
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else Unknown(reason="no 'release X.Y' in nvcc --version output")


@probe
def get_driver_version(nvml: Any = None) -> str | Unknown:
    from grpo_debug.probes.gpu import driver_version

    if nvml is None:
        try:
            import pynvml as nvml  # noqa: PLC0415
        except ImportError:
            return Unknown(reason="nvidia-ml-py not installed")
    try:
        nvml.nvmlInit()
    except Exception as e:  # noqa: BLE001 - pynvml.NVMLError_*
        return Unknown(reason=f"NVML init failed: {type(e).__name__}: {e}")
    try:
        return driver_version(nvml)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _dist_version(names: tuple[str, ...]) -> str | None:
    for n in names:
        try:
            return importlib_metadata.version(n)
        except importlib_metadata.PackageNotFoundError:
            continue
    return None


@probe
def get_package_versions() -> dict[str, str | None]:
    return {name: _dist_version(dists) for name, dists in sorted(PACKAGES.items())}


def _redact(name: str, value: str) -> str:
    return REDACTED if any(m in name.upper() for m in SECRET_MARKERS) else value


@probe
def get_env_vars(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    return {k: _redact(k, v) for k, v in sorted(environ.items()) if k.startswith(ENV_PREFIXES)}


@probe
def get_nofile_limit() -> NoFileLimit:
    import resource  # POSIX only; ImportError on Windows becomes Unknown

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    inf = resource.RLIM_INFINITY
    return NoFileLimit(soft=None if soft == inf else int(soft), hard=None if hard == inf else int(hard))


@probe
def get_shm(path: str = "/dev/shm") -> ShmFacts | Unknown:
    if not os.path.isdir(path):
        return Unknown(reason=f"{path} does not exist")
    st = os.statvfs(path)
    return ShmFacts(path=path, total_gib=round(st.f_blocks * st.f_frsize / GIB, 3),
                    free_gib=round(st.f_bavail * st.f_frsize / GIB, 3))


@probe
def get_cpu() -> CpuFacts:
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return CpuFacts(count=os.cpu_count(), affinity=affinity)


@probe
def get_memory(meminfo: str = "/proc/meminfo") -> MemoryFacts | Unknown:
    if not os.path.exists(meminfo):
        return Unknown(reason=f"{meminfo} not found (not Linux)")
    vals: dict[str, int] = {}
    with open(meminfo, encoding="ascii", errors="replace") as f:
        for line in f:
            m = re.match(r"(\w+):\s+(\d+)\s*kB", line)
            if m:
                vals[m.group(1)] = int(m.group(2)) * 1024
    if "MemTotal" not in vals or "MemAvailable" not in vals:
        return Unknown(reason=f"MemTotal/MemAvailable missing from {meminfo}")
    return MemoryFacts(total_gib=round(vals["MemTotal"] / GIB, 3), available_gib=round(vals["MemAvailable"] / GIB, 3))


@probe
def get_conflicts() -> list[Conflict] | Unknown:
    try:
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.utils import canonicalize_name
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return Unknown(reason="packaging not installed")
    targets = {canonicalize_name(t) for t in CONFLICT_TARGETS}
    out: list[Conflict] = []
    for pkg in CONFLICT_PACKAGES:
        try:
            reqs = importlib_metadata.requires(pkg)
        except importlib_metadata.PackageNotFoundError:
            continue
        for line in reqs or []:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            name = canonicalize_name(req.name)
            if name not in targets or not str(req.specifier):
                continue
            if req.marker is not None:
                try:
                    if not req.marker.evaluate({"extra": ""}):
                        continue  # an optional extra or another platform
                except Exception:  # noqa: BLE001
                    continue
            installed = _dist_version((name,))
            if installed is None:
                continue  # missing, not a version conflict
            try:
                ok = req.specifier.contains(Version(installed), prereleases=True)
            except InvalidVersion:
                continue
            if not ok:
                out.append(Conflict(package=pkg, requires=f"{req.name}{req.specifier}", installed=installed))
    return sorted(out, key=lambda c: (c.package, c.requires, c.installed))


# ---------------------------------------------------------------------------------------------------- collect


def collect_env(runner: Runner = run_cmd, *, nvml: Any = None, environ: Mapping[str, str] | None = None) -> EnvFacts:
    """All environment facts; every field is a value or Unknown, nothing raises."""
    return EnvFacts(
        python=get_python_version(),
        torch=get_torch_build(),
        cuda_toolkit=get_cuda_toolkit(runner),
        driver_version=get_driver_version(nvml),
        packages=get_package_versions(),
        env=get_env_vars(environ),
        nofile=get_nofile_limit(),
        shm=get_shm(),
        cpu=get_cpu(),
        memory=get_memory(),
        conflicts=get_conflicts(),
    )
