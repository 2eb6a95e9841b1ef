"""On-host probes without a GPU: env facts, NVML through a fake pynvml, CPU numerics with real torch, the GPU
safety gate, host_facts, and that importing the collector does not import torch."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import types
from importlib import metadata as real_metadata
from pathlib import Path

import pytest

from grpo_debug.probes import collect as collect_mod
from grpo_debug.probes import env as env_mod
from grpo_debug.probes import gpu as gpu_mod
from grpo_debug.probes import numerics as num_mod
from grpo_debug.probes.base import Unknown

_spec = importlib.util.spec_from_file_location("fake_pynvml", Path(__file__).parent / "data" / "fakes" / "fake_pynvml.py")
fake = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake)  # type: ignore[union-attr]

HAS_TORCH = importlib.util.find_spec("torch") is not None


def runner_127(argv: list[str], timeout: float) -> tuple[int, str, str]:
    return 127, "", f"{argv[0]}: not found"


def no_lib_nvml() -> types.ModuleType:
    return fake.make_fake_nvml([], init_error=fake.NVMLError_LibraryNotFound())


# ------------------------------------------------------------------------------------------------ env


def test_collect_env_never_raises_with_failing_runner_and_no_nvml():
    facts = env_mod.collect_env(runner_127, nvml=no_lib_nvml())
    assert isinstance(facts.cuda_toolkit, Unknown) and "rc 127" in facts.cuda_toolkit.reason
    assert isinstance(facts.driver_version, Unknown) and "LibraryNotFound" in facts.driver_version.reason
    assert isinstance(facts.python, str) and facts.python.count(".") == 2
    for name in ("torch", "packages", "env", "nofile", "shm", "cpu", "memory", "conflicts"):
        v = getattr(facts, name)
        assert v is not None
    json.loads(facts.model_dump_json())  # serialisable


def test_every_probe_returns_value_or_unknown(tmp_path):
    assert isinstance(env_mod.get_shm(str(tmp_path / "nope")), Unknown)
    assert isinstance(env_mod.get_memory(str(tmp_path / "nope")), Unknown)
    bad = tmp_path / "meminfo"
    bad.write_text("garbage\n")
    assert isinstance(env_mod.get_memory(str(bad)), Unknown)
    good = tmp_path / "meminfo2"
    good.write_text("MemTotal:       16777216 kB\nMemFree: 1 kB\nMemAvailable:    8388608 kB\n")
    m = env_mod.get_memory(str(good))
    assert m.total_gib == 16.0 and m.available_gib == 8.0
    shm = env_mod.get_shm(str(tmp_path))
    assert shm.total_gib > 0 and shm.free_gib >= 0
    lim = env_mod.get_nofile_limit()
    assert isinstance(lim, Unknown) or lim.soft is None or lim.soft > 0
    cpu = env_mod.get_cpu()
    assert isinstance(cpu, Unknown) or (cpu.count or 0) >= 1


def test_cuda_toolkit_parses_nvcc():
    out = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.4, V12.4.131\n"
    assert env_mod.get_cuda_toolkit(lambda argv, t: (0, out, "")) == "12.4"
    assert isinstance(env_mod.get_cuda_toolkit(lambda argv, t: (0, "weird", "")), Unknown)

    def boom(argv, t):
        raise RuntimeError("runner exploded")

    r = env_mod.get_cuda_toolkit(boom)
    assert isinstance(r, Unknown) and "runner exploded" in r.reason


def test_driver_version_via_nvml():
    nv = fake.make_fake_nvml(fake.two_gpus(), driver="550.54.15")
    assert env_mod.get_driver_version(nv) == "550.54.15"
    assert nv.shutdown_called


def test_env_vars_filtered_sorted_and_redacted():
    environ = {
        "NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "CUDA_DEVICE_MAX_CONNECTIONS": "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "VLLM_API_KEY": "sk-secret", "RAY_REDIS_PASSWORD": "hunter2", "SGLANG_TOKEN": "t",
        "HF_TOKEN": "hf_xxx", "HOME": "/root", "CUDA_VISIBLE_DEVICES": "0,1", "TORCHINDUCTOR_CACHE_DIR": "/tmp/x",
    }
    got = env_mod.get_env_vars(environ)
    assert list(got) == sorted(got)
    assert "HOME" not in got and "HF_TOKEN" not in got
    assert got["NCCL_DEBUG"] == "INFO" and got["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert got["VLLM_API_KEY"] == got["RAY_REDIS_PASSWORD"] == got["SGLANG_TOKEN"] == "<redacted>"
    assert "sk-secret" not in json.dumps(got) and "hunter2" not in json.dumps(got)


def _fake_metadata(versions: dict[str, str], requires: dict[str, list[str]]) -> types.SimpleNamespace:
    def norm(n: str) -> str:
        return n.lower().replace("_", "-")

    vs = {norm(k): v for k, v in versions.items()}

    def version(name: str) -> str:
        if norm(name) not in vs:
            raise real_metadata.PackageNotFoundError(name)
        return vs[norm(name)]

    def reqs(name: str) -> list[str] | None:
        if norm(name) not in vs:
            raise real_metadata.PackageNotFoundError(name)
        return requires.get(norm(name))

    return types.SimpleNamespace(version=version, requires=reqs, PackageNotFoundError=real_metadata.PackageNotFoundError)


def test_package_versions_and_conflicts(monkeypatch):
    md = _fake_metadata(
        {"torch": "2.13.0+cpu", "vllm": "0.6.3", "transformers": "4.40.0", "ray": "2.60.0",
         "transformer_engine": "1.9.0", "flash_attn": "2.6.3", "verl": "0.4.0"},
        {
            "vllm": ["torch==2.4.0", "transformers>=4.45.0", "ray>=2.9", "xformers==0.0.27.post2",
                     "flash-attn>=2.0; extra == 'flash'", "numpy<2.0"],
            "verl": ["torch>=2.4", "ray[default]>=2.41", "vllm<=0.6.3,>=0.6.0", "flash-attn ; platform_system == 'Darwin'"],
        },
    )
    monkeypatch.setattr(env_mod, "importlib_metadata", md)
    pv = env_mod.get_package_versions()
    assert list(pv) == sorted(pv)
    assert set(pv) == set(env_mod.PACKAGES)
    assert pv["torch"] == "2.13.0+cpu" and pv["transformer-engine"] == "1.9.0" and pv["flash-attn"] == "2.6.3"
    assert pv["sglang"] is None and pv["megatron-core"] is None

    conflicts = env_mod.get_conflicts()
    texts = [c.text() for c in conflicts]
    assert texts == sorted(texts)
    assert "vllm requires torch==2.4.0, installed 2.13.0+cpu" in texts
    assert "vllm requires transformers>=4.45.0, installed 4.40.0" in texts
    assert not any("ray" in t for t in texts)           # ray>=2.9 and >=2.41 are met by 2.60.0
    assert not any("xformers" in t for t in texts)      # not installed: not a version conflict
    assert not any("flash-attn" in t for t in texts)    # behind an extra / a platform marker
    assert not any(t.startswith("verl") for t in texts)  # verl's pins are all met
    assert len(conflicts) == 2


def test_conflicts_unknown_without_packaging(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *a, **k):
        if name.startswith("packaging"):
            raise ImportError("no packaging")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    r = env_mod.get_conflicts()
    assert isinstance(r, Unknown) and "packaging" in r.reason


def test_torch_missing_is_unknown(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(env_mod.importlib.util, "find_spec", lambda n, *a: None if n == "torch" else real(n, *a))
    r = env_mod.get_torch_build()
    assert isinstance(r, Unknown) and r.reason == "torch not installed"
    rep = num_mod.run_numerics("cuda")
    assert rep.results["cpu"].reason == "torch not installed" and rep.results["cuda"].reason == "torch not installed"


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
def test_torch_build_fields():
    t = env_mod.get_torch_build()
    assert not isinstance(t, Unknown)
    assert t.version
    assert t.cuda is None or isinstance(t.cuda, str)
    assert t.nccl is None or isinstance(t.nccl, (str, Unknown))


# ------------------------------------------------------------------------------------------------ gpu


def test_collect_gpus_fake_two_gpus_every_field():
    nv = fake.make_fake_nvml(fake.two_gpus())
    g = gpu_mod.collect_gpus(nv)
    assert g.available and g.reason is None
    assert g.driver_version == "550.54.15" and g.cuda_driver_version == "12.4"
    assert nv.shutdown_called
    h100, rtx = g.gpus
    assert (h100.index, rtx.index) == (0, 1)
    assert h100.name == "NVIDIA H100 80GB HBM3" and rtx.name == "NVIDIA GeForce RTX 4090"
    assert h100.spec_id == "h100_sxm" and rtx.spec_id == "rtx4090"
    assert h100.uuid == "...6666aaaa" and rtx.uuid == "...deadbeef"
    assert "11111111" not in g.model_dump_json()
    assert (h100.memory_total_gib, h100.memory_used_gib, h100.memory_free_gib) == (80.0, 30.0, 50.0)
    assert rtx.memory_free_gib == 23.5
    assert [(p.pid, p.used_gib) for p in h100.processes] == [(4242, 29.5)]
    assert rtx.processes == []
    assert h100.ecc_enabled is True and rtx.ecc_enabled is True
    assert (h100.ecc_volatile_uncorrected, h100.ecc_aggregate_uncorrected) == (0, 0)
    assert (rtx.ecc_volatile_uncorrected, rtx.ecc_aggregate_uncorrected) == (3, 7)
    assert isinstance(h100.retired_pages, Unknown) and "NotSupported" in h100.retired_pages.reason
    assert rtx.retired_pages == 3
    assert h100.throttle_reasons == ["gpu_idle", "sw_power_cap"]
    assert rtx.throttle_reasons == ["hw_thermal_slowdown", "other(0x400)", "sw_thermal_slowdown"]
    assert (h100.temperature_c, rtx.temperature_c) == (61, 88)
    assert (h100.compute_capability, rtx.compute_capability) == ("9.0", "8.9")
    assert h100.nvlink_active == 2
    assert isinstance(rtx.nvlink_active, Unknown) and "NVLink not supported" in rtx.nvlink_active.reason
    assert h100.mig_enabled is False
    assert isinstance(rtx.mig_enabled, Unknown)


def test_collect_gpus_library_not_found():
    g = gpu_mod.collect_gpus(no_lib_nvml())
    assert g.available is False and "LibraryNotFound" in g.reason and g.gpus == []


def test_collect_gpus_real_pynvml_here_never_raises():
    g = gpu_mod.collect_gpus()  # this box: no libnvidia-ml (or nvidia-ml-py missing)
    assert isinstance(g, gpu_mod.GpuFacts)
    if not g.available:
        assert g.reason


def test_collect_gpus_broken_handle_and_zero_gpus():
    gpus = fake.two_gpus()
    nv = fake.make_fake_nvml(gpus)
    nv.nvmlDeviceGetHandleByIndex = lambda i: (_ for _ in ()).throw(fake.NVMLError_NotSupported()) if i == 1 else i
    g = gpu_mod.collect_gpus(nv)
    assert g.available and g.gpus[0].name == "NVIDIA H100 80GB HBM3"
    assert isinstance(g.gpus[1].name, Unknown) and isinstance(g.gpus[1].processes, Unknown)
    z = gpu_mod.collect_gpus(fake.make_fake_nvml([]))
    assert z.available is False and "0 GPUs" in z.reason


@pytest.mark.parametrize("name,spec", [
    ("NVIDIA GeForce RTX 4090", "rtx4090"), ("NVIDIA GeForce RTX 3090", "rtx3090"),
    ("NVIDIA A100-SXM4-80GB", "a100_80gb"), ("NVIDIA A100-SXM4-40GB", "a100_40gb"),
    ("NVIDIA A100-PCIE-40GB", "a100_40gb"), ("NVIDIA H100 80GB HBM3", "h100_sxm"),
    ("NVIDIA H100 PCIe", "h100_pcie"), ("NVIDIA H200", "h200"), ("NVIDIA L40S", "l40s"),
    ("NVIDIA A10G", "a10g"), ("AMD Instinct MI300X", "mi300x"), ("Tesla T4", "t4"), ("NVIDIA H100 NVL", None),
])
def test_match_spec(name, spec):
    assert gpu_mod.match_spec(name) == spec


# ------------------------------------------------------------------------------------------------ numerics


@pytest.mark.slow  # a torch subprocess
@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
def test_numerics_cpu_real_torch():
    rep = num_mod.run_numerics("cpu", timeout=120)
    assert set(rep.results) == {"cpu"}
    cpu = rep.results["cpu"]
    assert isinstance(cpu, num_mod.DeviceNumerics), cpu
    assert abs(cpu.fp16_exp_overflow - 11.09) <= 0.02
    gs = cpu.gating_softmax
    assert gs.fp16_naive_nonfinite > 0 and gs.fp32_naive_nonfinite == 0 and gs.fp16_torch_softmax_nonfinite == 0
    assert abs(gs.max_logit - 12.0) < 0.01
    d = cpu.bf16_logprob_drift
    assert d.max_abs > 0 and d.mean_abs > 0 and d.max_abs >= d.mean_abs and d.vocab == 151936
    assert set(cpu.repeatable) == {"matmul", "sdpa", "index_add"}
    assert all(isinstance(v, (bool, Unknown)) for v in cpu.repeatable.values())  # report, don't assert hardware
    assert isinstance(cpu.deterministic_algorithms, bool)
    assert set(cpu.timings_ms) >= {"fp16_exp_overflow", "bf16_logprob_drift", "matmul"}
    assert rep.wall_s["cpu"] > 0


@pytest.mark.slow  # a torch subprocess
@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
def test_numerics_cuda_refused_without_gpu_facts():
    rep = num_mod.run_numerics("cuda", nvml=no_lib_nvml(), timeout=120)
    assert isinstance(rep.results["cpu"], num_mod.DeviceNumerics)
    assert isinstance(rep.results["cuda"], Unknown) and rep.results["cuda"].reason.startswith("skipped:")


def test_numerics_subprocess_timeout(monkeypatch):
    def slow(*a, **k):
        raise subprocess.TimeoutExpired(cmd="python", timeout=0.01)

    monkeypatch.setattr(num_mod.subprocess, "run", slow)
    monkeypatch.setattr(num_mod.importlib.util, "find_spec", lambda n, *a: object())
    r = num_mod.run_numerics("cpu", timeout=0.01)
    assert isinstance(r.results["cpu"], Unknown) and "timed out" in r.results["cpu"].reason


def test_numerics_subprocess_garbage(monkeypatch):
    monkeypatch.setattr(num_mod.subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 0, "not json\n", ""))
    monkeypatch.setattr(num_mod.importlib.util, "find_spec", lambda n, *a: object())
    r = num_mod.run_numerics("cpu")
    assert isinstance(r.results["cpu"], Unknown) and "no JSON" in r.results["cpu"].reason


def _facts(*gpus: dict) -> gpu_mod.GpuFacts:
    return gpu_mod.collect_gpus(fake.make_fake_nvml(list(gpus)))


def test_gpu_gate():
    busy, idle_rtx = fake.two_gpus()
    facts = _facts(busy, idle_rtx)
    ok, why = num_mod.gpu_gate(facts, index=0)
    assert not ok and "busy" in why and "4242" in why
    ok, why = num_mod.gpu_gate(facts, index=1, planned_gib=0.75)  # 23.5 GiB free -> limit 1.175 GiB
    assert ok, why
    ok, why = num_mod.gpu_gate(facts, index=1, planned_gib=1.2)
    assert not ok and "5%" in why
    nearly_full = dict(idle_rtx, mem_gib=(24.0, 20.0))  # 4 GiB free -> limit 0.2 GiB < 0.75 planned
    ok, why = num_mod.gpu_gate(_facts(nearly_full), index=0)
    assert not ok and "5%" in why
    assert num_mod.gpu_gate(facts, index=0, force=True)[0] is True
    assert num_mod.gpu_gate(_facts(nearly_full), index=0, force=True)[0] is True
    assert num_mod.gpu_gate(facts, index=5)[0] is False
    unk = dict(idle_rtx, procs=fake.NVMLError_NotSupported())
    ok, why = num_mod.gpu_gate(_facts(unk), index=0)
    assert not ok and "cannot tell" in why
    ok, why = num_mod.gpu_gate(gpu_mod.collect_gpus(no_lib_nvml()))
    assert not ok and "no GPU facts" in why


def test_run_numerics_gate_refuses_busy_gpu_without_running_cuda(monkeypatch):
    devices = []

    def fake_run_device(device, timeout, env=None):
        devices.append((device, (env or {}).get("CUDA_VISIBLE_DEVICES")))
        return Unknown(reason=f"stub {device}")

    monkeypatch.setattr(num_mod, "_run_device", fake_run_device)
    monkeypatch.setattr(num_mod.importlib.util, "find_spec", lambda n, *a: object())
    facts = _facts(*fake.two_gpus())
    r = num_mod.run_numerics("cuda", gpus=facts)
    assert devices == [("cpu", "")] and r.results["cuda"].reason.startswith("skipped:")
    devices.clear()
    num_mod.run_numerics("cuda:1", gpus=facts)
    assert devices == [("cpu", ""), ("cuda", "1")]
    devices.clear()
    num_mod.run_numerics("cuda:0", gpus=facts, force=True)
    assert devices == [("cpu", ""), ("cuda", "0")]


# ------------------------------------------------------------------------------------------------ collect


def test_host_facts_keys_with_fake_gpus(monkeypatch):
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.setenv("VLLM_SECRET_THING", "x")
    rep = collect_mod.collect_host(runner=runner_127, nvml=fake.make_fake_nvml(fake.two_gpus()))
    f = collect_mod.host_facts(rep)
    assert f["probe.gpu_count"] == 2
    assert f["probe.gpu_names"] == ["NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090"]
    assert f["probe.gpu_bf16"] is True
    assert f["probe.gpu_min_free_gib"] == 23.5
    assert f["probe.gpu_busy"] is True
    assert f["probe.driver_version"] == "550.54.15"
    assert f["probe.env.NCCL_DEBUG"] == "WARN" and f["probe.env.VLLM_SECRET_THING"] == "<redacted>"
    assert isinstance(f["probe.conflicts"], list)
    assert isinstance(f.get("probe.ulimit_nofile", 1), int)
    assert isinstance(f.get("probe.dev_shm_gib", 1.0), float)
    assert "probe.fp16_exp_overflow" not in f  # numerics not run
    for k, v in f.items():
        assert k.startswith("probe.") and not isinstance(v, Unknown)
    if HAS_TORCH:
        assert f["probe.versions.torch"] and "probe.torch_cuda" in f
    text = collect_mod.render_host_text(rep)
    assert "NVIDIA GeForce RTX 4090" in text and "pid 4242" in text and "...deadbeef" in text


def test_host_facts_no_gpu_omits_gpu_keys():
    rep = collect_mod.collect_host(runner=runner_127, nvml=no_lib_nvml())
    f = collect_mod.host_facts(rep)
    assert not any(k.startswith("probe.gpu_") for k in f)
    assert "none: NVML init failed" in collect_mod.render_host_text(rep)


def test_gpu_bf16_false_for_old_gpu_not_in_table():
    t4 = dict(fake.two_gpus()[1], name="Tesla T4", cc=(7, 5), procs=[])
    rep = collect_mod.HostReport(env=env_mod.collect_env(runner_127, nvml=no_lib_nvml()), gpus=_facts(t4))
    f = collect_mod.host_facts(rep)
    assert f["probe.gpu_bf16"] is False and f["probe.gpu_busy"] is False


@pytest.mark.slow  # a torch subprocess
@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
def test_collect_host_with_numerics_cpu():
    rep = collect_mod.collect_host(numerics=True, device="cpu", runner=runner_127, nvml=no_lib_nvml(), timeout=120)
    f = collect_mod.host_facts(rep)
    assert abs(f["probe.fp16_exp_overflow"] - 11.09) <= 0.02
    assert "fp16 exp overflow at x = 11.09" in collect_mod.render_host_text(rep)


def test_import_collect_does_not_import_torch():
    code = ("import sys, grpo_debug.probes.collect; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'pynvml')))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
