"""GPU facts through NVML (nvidia-ml-py), never through nvidia-smi text.

``collect_gpus()`` imports ``pynvml`` inside the function (the ``nvml`` parameter injects a fake module in tests).
Every per-GPU field is read on its own: one call that the card or driver does not support (NVMLError_NotSupported on
consumer cards, retired pages on Ampere and later, NVLink on PCIe cards) becomes :class:`Unknown` for that field only.
No library, no driver or no device gives ``GpuFacts(available=False, reason=...)``, never an exception.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from pydantic import BaseModel, Field

from grpo_debug.probes.base import Unknown, probe

GIB = 1024 ** 3

# Clock event ("throttle") reason bits, from nvml.h (nvmlClocksEventReason* / nvmlClocksThrottleReason*).
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x0000000000000001, "gpu_idle"),
    (0x0000000000000002, "applications_clocks_setting"),
    (0x0000000000000004, "sw_power_cap"),
    (0x0000000000000008, "hw_slowdown"),
    (0x0000000000000010, "sync_boost"),
    (0x0000000000000020, "sw_thermal_slowdown"),
    (0x0000000000000040, "hw_thermal_slowdown"),
    (0x0000000000000080, "hw_power_brake_slowdown"),
    (0x0000000000000100, "display_clock_setting"),
)


class GpuProcess(BaseModel):
    pid: int
    used_gib: float | None = Field(None, description="None when NVML does not report per-process memory.")


class GpuInfo(BaseModel):
    index: int
    name: str | Unknown
    uuid: str | Unknown = Field(description="Redacted to the last 8 characters, e.g. '...1a2b3c4d'.")
    spec_id: str | None = Field(None, description="Id in skills/gpus.yaml (match_spec), None when not in the table.")
    memory_total_gib: float | Unknown
    memory_used_gib: float | Unknown
    memory_free_gib: float | Unknown
    processes: list[GpuProcess] | Unknown = Field(description="Compute processes (pid, used GiB), sorted by pid.")
    ecc_enabled: bool | Unknown
    ecc_volatile_uncorrected: int | Unknown
    ecc_aggregate_uncorrected: int | Unknown
    retired_pages: int | Unknown = Field(description="Retired pages (single-bit + double-bit causes); "
                                                     "Unknown on GPUs that use row remapping instead.")
    throttle_reasons: list[str] | Unknown = Field(description="Current clock event reasons, decoded, sorted.")
    temperature_c: int | Unknown
    compute_capability: str | Unknown
    nvlink_active: int | Unknown = Field(description="Number of NVLink links in the active state.")
    mig_enabled: bool | Unknown


class GpuFacts(BaseModel):
    available: bool
    reason: str | None = Field(None, description="Why no GPU facts could be read (available=False).")
    driver_version: str | Unknown | None = None
    cuda_driver_version: str | Unknown | None = Field(None, description="CUDA version the driver supports, '12.4'.")
    gpus: list[GpuInfo] = Field(default_factory=list)


def _s(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _read(fn: Callable[[], Any]) -> Any:
    """Call one NVML read; any exception (NVMLError_NotSupported, ...) becomes Unknown for that field only."""
    return probe(fn)()


def _redact_uuid(u: str) -> str:
    return "..." + u[-8:] if len(u) > 8 else u


def _cuda_version_str(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def decode_throttle_reasons(mask: int) -> list[str]:
    names = [name for bit, name in THROTTLE_REASONS if mask & bit]
    known = 0
    for bit, _ in THROTTLE_REASONS:
        known |= bit
    if mask & ~known:
        names.append(f"other(0x{mask & ~known:x})")
    return sorted(names)


def driver_version(nvml: Any) -> str:
    """Driver version string from an initialised NVML module (raises on error; callers wrap it)."""
    return _s(nvml.nvmlSystemGetDriverVersion())


def _memory(nvml: Any, h: Any) -> Any:
    return nvml.nvmlDeviceGetMemoryInfo(h)


def _processes(nvml: Any, h: Any) -> list[GpuProcess]:
    out = []
    for p in nvml.nvmlDeviceGetComputeRunningProcesses(h):
        used = getattr(p, "usedGpuMemory", None)
        out.append(GpuProcess(pid=int(p.pid), used_gib=None if used is None else round(used / GIB, 3)))
    return sorted(out, key=lambda p: p.pid)


def _retired_pages(nvml: Any, h: Any) -> int:
    total = 0
    for cause in (getattr(nvml, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0),
                  getattr(nvml, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)):
        total += len(nvml.nvmlDeviceGetRetiredPages(h, cause))
    return total


def _throttle(nvml: Any, h: Any) -> list[str]:
    fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) \
        or getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons")
    return decode_throttle_reasons(int(fn(h)))


def _nvlink_active(nvml: Any, h: Any) -> int | Unknown:
    enabled = getattr(nvml, "NVML_FEATURE_ENABLED", 1)
    max_links = int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))
    active = 0
    for link in range(max_links):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(h, link)
        except Exception as e:  # noqa: BLE001
            if link == 0:  # no NVLink at all (consumer / PCIe cards)
                return Unknown(reason=f"NVLink not supported: {type(e).__name__}: {e}")
            break  # past the last link of this GPU
        if state == enabled:
            active += 1
    return active


def _ecc_enabled(nvml: Any, h: Any) -> bool:
    cur, _pending = nvml.nvmlDeviceGetEccMode(h)
    return bool(cur == getattr(nvml, "NVML_FEATURE_ENABLED", 1))


def _ecc_errors(nvml: Any, h: Any, counter: str, default: int) -> int:
    return int(nvml.nvmlDeviceGetTotalEccErrors(h, getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
                                                getattr(nvml, counter, default)))


def _mig_enabled(nvml: Any, h: Any) -> bool:
    cur, _pending = nvml.nvmlDeviceGetMigMode(h)
    return bool(cur == getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1))


def _gpu(nvml: Any, i: int) -> GpuInfo:
    h = nvml.nvmlDeviceGetHandleByIndex(i)
    name = _read(lambda: _s(nvml.nvmlDeviceGetName(h)))
    mem = _read(lambda: _memory(nvml, h))
    cc = _read(lambda: "{}.{}".format(*nvml.nvmlDeviceGetCudaComputeCapability(h)))

    def mem_field(attr: str) -> float | Unknown:
        if isinstance(mem, Unknown):
            return mem
        return _read(lambda: round(getattr(mem, attr) / GIB, 3))

    return GpuInfo(
        index=i,
        name=name,
        uuid=_read(lambda: _redact_uuid(_s(nvml.nvmlDeviceGetUUID(h)))),
        spec_id=None if isinstance(name, Unknown) else match_spec(name),
        memory_total_gib=mem_field("total"),
        memory_used_gib=mem_field("used"),
        memory_free_gib=mem_field("free"),
        processes=_read(lambda: _processes(nvml, h)),
        ecc_enabled=_read(lambda: _ecc_enabled(nvml, h)),
        ecc_volatile_uncorrected=_read(lambda: _ecc_errors(nvml, h, "NVML_VOLATILE_ECC", 0)),
        ecc_aggregate_uncorrected=_read(lambda: _ecc_errors(nvml, h, "NVML_AGGREGATE_ECC", 1)),
        retired_pages=_read(lambda: _retired_pages(nvml, h)),
        throttle_reasons=_read(lambda: _throttle(nvml, h)),
        temperature_c=_read(lambda: int(nvml.nvmlDeviceGetTemperature(h, getattr(nvml, "NVML_TEMPERATURE_GPU", 0)))),
        compute_capability=cc,
        nvlink_active=_read(lambda: _nvlink_active(nvml, h)),
        mig_enabled=_read(lambda: _mig_enabled(nvml, h)),
    )


def _import_nvml() -> Any:
    import pynvml  # nvidia-ml-py; imported here only, so importing this module never needs it

    return pynvml


def collect_gpus(nvml: Any = None) -> GpuFacts:
    """Read the GPUs through NVML. Never raises: no library / driver / device -> available=False with the reason."""
    try:
        if nvml is None:
            try:
                nvml = _import_nvml()
            except ImportError:
                return GpuFacts(available=False, reason="nvidia-ml-py not installed (pip install nvidia-ml-py)")
        try:
            nvml.nvmlInit()
        except Exception as e:  # noqa: BLE001 - pynvml.NVMLError_LibraryNotFound, DriverNotLoaded, ...
            return GpuFacts(available=False, reason=f"NVML init failed: {type(e).__name__}: {e}")
        try:
            try:
                count = int(nvml.nvmlDeviceGetCount())
            except Exception as e:  # noqa: BLE001
                return GpuFacts(available=False, reason=f"nvmlDeviceGetCount failed: {type(e).__name__}: {e}")
            gpus: list[GpuInfo] = []
            for i in range(count):
                try:
                    gpus.append(_gpu(nvml, i))
                except Exception as e:  # noqa: BLE001 - e.g. the handle itself (GPU fallen off the bus)
                    unk = Unknown(reason=f"GPU {i}: {type(e).__name__}: {e}")
                    gpus.append(GpuInfo(index=i, name=unk, uuid=unk, memory_total_gib=unk, memory_used_gib=unk,
                                        memory_free_gib=unk, processes=unk, ecc_enabled=unk,
                                        ecc_volatile_uncorrected=unk, ecc_aggregate_uncorrected=unk,
                                        retired_pages=unk, throttle_reasons=unk, temperature_c=unk,
                                        compute_capability=unk, nvlink_active=unk, mig_enabled=unk))
            if count == 0:
                return GpuFacts(available=False, reason="NVML reports 0 GPUs",
                                driver_version=_read(lambda: driver_version(nvml)))
            return GpuFacts(
                available=True,
                driver_version=_read(lambda: driver_version(nvml)),
                cuda_driver_version=_read(lambda: _cuda_version_str(int(nvml.nvmlSystemGetCudaDriverVersion()))),
                gpus=gpus,
            )
        finally:
            try:
                nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass
    except Exception as e:  # noqa: BLE001 - the contract: never raise
        return GpuFacts(available=False, reason=f"{type(e).__name__}: {e}")


_MEM_TYPE = re.compile(r"\s*\b(HBM\d?e?|GDDR\d+X?)\b", re.I)
_FORM_FACTOR = re.compile(r"[-\s]*\b(SXM\d?|PCIE|OAM)\b", re.I)
_MEM_SIZE = re.compile(r"[-\s]*\b\d+\s?GB\b", re.I)


def match_spec(name: str) -> str | None:
    """Map an NVML name ('NVIDIA GeForce RTX 4090', 'NVIDIA A100-SXM4-80GB', 'NVIDIA H100 80GB HBM3') to a spec id
    in skills/gpus.yaml, or None. Tries the full name first, then strips 'NVIDIA ', 'GeForce ', the memory type,
    the form factor (SXM, PCIe; not NVL, a different product) and the memory size, in that order, so that a more
    specific entry wins."""
    try:
        from grpo_debug.skills.knowledge import find_gpu
    except Exception:  # noqa: BLE001
        return None
    base = name.strip()
    cands = [base]
    b = re.sub(r"^NVIDIA\s+", "", base, flags=re.I)
    cands.append(b)
    b = re.sub(r"^GeForce\s+", "", b, flags=re.I)
    cands.append(b)
    b = _MEM_TYPE.sub("", b).strip()
    cands.append(b)
    no_ff = _FORM_FACTOR.sub("", b).strip(" -")
    cands.append(no_ff)
    cands.append(_MEM_SIZE.sub("", b).strip(" -"))
    cands.append(_MEM_SIZE.sub("", no_ff).strip(" -"))
    seen = set()
    for c in cands:
        if not c or c in seen:
            continue
        seen.add(c)
        try:
            spec = find_gpu(c)
        except Exception:  # noqa: BLE001
            return None
        if spec is not None:
            return spec.id
    return None
