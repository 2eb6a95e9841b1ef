"""A fake ``pynvml`` module for the probe tests (no GPU, no driver needed).

``make_fake_nvml(gpus, init_error=None)`` returns a module object with the NVML calls probes/gpu.py uses.
Each GPU is a dict; a value that is an exception instance is raised by the matching call (e.g.
``NVMLError_NotSupported()``), which is how a test marks one field as unsupported.
"""
from __future__ import annotations

import types
from typing import Any

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_LIBRARY_NOT_FOUND = 12


class NVMLError(Exception):
    value = 999

    def __str__(self) -> str:
        return {3: "Not Supported", 2: "Invalid Argument", 12: "NVML Shared Library Not Found"}.get(
            self.value, "Unknown Error")


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's spelling
    value = NVML_ERROR_NOT_SUPPORTED


class NVMLError_InvalidArgument(NVMLError):  # noqa: N801
    value = NVML_ERROR_INVALID_ARGUMENT


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801
    value = NVML_ERROR_LIBRARY_NOT_FOUND


class _Mem:
    def __init__(self, total: int, used: int, free: int) -> None:
        self.total, self.used, self.free = total, used, free


class _Proc:
    def __init__(self, pid: int, used: int | None) -> None:
        self.pid, self.usedGpuMemory = pid, used


GIB = 1024 ** 3


def make_fake_nvml(gpus: list[dict[str, Any]], *, init_error: Exception | None = None,
                   driver: str = "550.54.15", cuda_driver: int = 12040) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.NVMLError = NVMLError
    m.NVMLError_NotSupported = NVMLError_NotSupported
    m.NVMLError_InvalidArgument = NVMLError_InvalidArgument
    m.NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    m.NVML_FEATURE_ENABLED = 1
    m.NVML_FEATURE_DISABLED = 0
    m.NVML_DEVICE_MIG_ENABLE = 1
    m.NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    m.NVML_VOLATILE_ECC = 0
    m.NVML_AGGREGATE_ECC = 1
    m.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
    m.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
    m.NVML_NVLINK_MAX_LINKS = 18
    m.NVML_TEMPERATURE_GPU = 0
    m.calls = []  # type: ignore[attr-defined]
    m.shutdown_called = False  # type: ignore[attr-defined]

    def val(h: int, key: str) -> Any:
        v = gpus[h][key]
        if isinstance(v, Exception):
            raise v
        return v

    def nvmlInit() -> None:
        m.calls.append("init")
        if init_error is not None:
            raise init_error

    def nvmlShutdown() -> None:
        m.shutdown_called = True

    def nvmlDeviceGetHandleByIndex(i: int) -> int:
        if not 0 <= i < len(gpus):
            raise NVMLError_InvalidArgument()
        return i

    def nvmlDeviceGetMemoryInfo(h: int) -> _Mem:
        total, used = val(h, "mem_gib")
        return _Mem(int(total * GIB), int(used * GIB), int((total - used) * GIB))

    def nvmlDeviceGetComputeRunningProcesses(h: int) -> list[_Proc]:
        return [_Proc(pid, None if used is None else int(used * GIB)) for pid, used in val(h, "procs")]

    def nvmlDeviceGetTotalEccErrors(h: int, err_type: int, counter: int) -> int:
        return val(h, "ecc_errors")[(err_type, counter)]

    def nvmlDeviceGetRetiredPages(h: int, cause: int) -> list[int]:
        return val(h, "retired")[cause]

    def nvmlDeviceGetNvLinkState(h: int, link: int) -> int:
        states = val(h, "nvlink")
        if link >= len(states):
            raise NVMLError_InvalidArgument()
        return states[link]

    m.nvmlInit = nvmlInit
    m.nvmlShutdown = nvmlShutdown
    m.nvmlSystemGetDriverVersion = lambda: driver
    m.nvmlSystemGetCudaDriverVersion = lambda: cuda_driver
    m.nvmlDeviceGetCount = lambda: len(gpus)
    m.nvmlDeviceGetHandleByIndex = nvmlDeviceGetHandleByIndex
    m.nvmlDeviceGetName = lambda h: val(h, "name")
    m.nvmlDeviceGetUUID = lambda h: val(h, "uuid")
    m.nvmlDeviceGetMemoryInfo = nvmlDeviceGetMemoryInfo
    m.nvmlDeviceGetComputeRunningProcesses = nvmlDeviceGetComputeRunningProcesses
    m.nvmlDeviceGetEccMode = lambda h: val(h, "ecc_mode")
    m.nvmlDeviceGetTotalEccErrors = nvmlDeviceGetTotalEccErrors
    m.nvmlDeviceGetRetiredPages = nvmlDeviceGetRetiredPages
    m.nvmlDeviceGetCurrentClocksEventReasons = lambda h: val(h, "throttle")
    m.nvmlDeviceGetTemperature = lambda h, sensor: val(h, "temp")
    m.nvmlDeviceGetCudaComputeCapability = lambda h: val(h, "cc")
    m.nvmlDeviceGetNvLinkState = nvmlDeviceGetNvLinkState
    m.nvmlDeviceGetMigMode = lambda h: val(h, "mig")
    return m


def two_gpus() -> list[dict[str, Any]]:
    """GPU 0: H100, busy (one compute process), 2 of 18 NVLink links active, retired pages NotSupported.
    GPU 1: RTX 4090 (bytes name, as old pynvml returned), idle, ECC errors, no NVLink, no MIG, thermal throttling."""
    return [
        {
            "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-11111111-2222-3333-4444-55556666aaaa",
            "mem_gib": (80.0, 30.0), "procs": [(4242, 29.5)], "ecc_mode": (1, 1),
            "ecc_errors": {(1, 0): 0, (1, 1): 0}, "retired": NVMLError_NotSupported(),
            "throttle": 0x1 | 0x4, "temp": 61, "cc": (9, 0), "nvlink": [1, 1, 0], "mig": (0, 0),
        },
        {
            "name": b"NVIDIA GeForce RTX 4090", "uuid": b"GPU-99999999-8888-7777-6666-5555deadbeef",
            "mem_gib": (24.0, 0.5), "procs": [], "ecc_mode": (1, 1),
            "ecc_errors": {(1, 0): 3, (1, 1): 7}, "retired": {0: [0x1000], 1: [0x2000, 0x3000]},
            "throttle": 0x40 | 0x20 | 0x400, "temp": 88, "cc": (8, 9), "nvlink": NVMLError_NotSupported(),
            "mig": NVMLError_NotSupported(),
        },
    ]
