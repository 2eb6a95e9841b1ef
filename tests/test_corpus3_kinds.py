"""Kinds of miss found by the held-out corpus3 (tests/data/corpus3/INDEX.md), each fixed as a kind: every test reads
the corpus3 report's own text and a second example of the kind the corpus did not supply (another public report's
wording or the framework's own format), so a fix for one case only fails here.

- a worker killed by SIGFPE in a GEMM (cuBLAS on H20): rule cublas-gemm-sigfpe, event sigfpe;
- vLLM's compile-cache error in its newer wording, and with Inductor's caches forced off;
- an NCCL watchdog timeout among vLLM's own tensor-parallel workers (event signal ``source``), including a log line
  pasted as inline code (normalize: one backtick each side)."""
from __future__ import annotations

from pathlib import Path

from grpo_debug.tools.engine.normalize import normalize_line
from grpo_debug.tools.triage import triage_text

CASES = Path(__file__).parent / "data" / "corpus3" / "cases"


def _case(name: str) -> str:
    return next((CASES / name).glob("input.*")).read_text()


def _top_rules(text: str, top: int = 1) -> list[str]:
    return [c.rule_id for f in triage_text(text).findings[:top] for c in f.causes]


def test_sigfpe_in_a_gemm_is_the_cause_of_the_dead_actor():
    assert "cublas-gemm-sigfpe" in _top_rules(_case("verl-searchr1-h20-cublas-floating-point-exception-actor-died"))
    # LlamaFactory #2750 / vllm #2798 wording: UCX's signal handler, cublasLt frames
    other = ("[a9970a74a52a:279  :0:279] Caught signal 8 (Floating point exception: integer divide by zero)\n"
             "==== backtrace (tid:    279) ====\n"
             " 1 0x0000000000a0bc59 cublasLt_for_cublas_ZZZ()  ???:0\n"
             "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n")
    r = triage_text(other)
    assert r.findings[0].causes[0].rule_id == "cublas-gemm-sigfpe" and "nvidia-cublas-cu12" in r.findings[0].fix
    assert "cublas-gemm-sigfpe" not in _top_rules("step:3 - actor/pg_loss:0.01 - note: floating point exception handling on", 3)


def test_vllm_compile_error_with_inductor_caches_forced_off():
    case = _case("vllm-torchinductor-force-disable-caches-breaks-vllm-compile-torch271")
    assert _top_rules(case) == ["vllm-inductor-caches-disabled"]
    # the same error from an earlier failed compile, no variable: the cache rule, at medium confidence
    plain = ("torch._dynamo.exc.BackendCompilerFailed: backend='<vllm.compilation.backends.VllmBackend object at "
             "0x7f6d3f341730>' raised:\nRuntimeError: vLLM failed to compile the model. The most likely reason for this "
             "is that a previous compilation failed, leading to a corrupted compilation artifact. We recommend trying "
             "to remove ~/.cache/vllm/torch_compile_cache and try again to see the real issue.\n")
    f = triage_text(plain).findings[0]
    assert f.symptom == "compile_cache_error" and "compile-cache-shared-dir-race" in [c.rule_id for c in f.causes]
    assert "vllm-inductor-caches-disabled" not in [c.rule_id for c in f.causes]


def test_watchdog_in_vllm_tensor_parallel_workers():
    case = _case("vllm-031-ray-worker-allreduce-watchdog-timeout-after-7-days")  # pasted as inline code
    assert "vllm-tp-collective-watchdog" in _top_rules(case, 3)
    assert "vllm-tp-collective-watchdog" in _top_rules(_case("vllm-041-gather-watchdog-timeout-custom-all-reduce"), 3)
    # vLLM's multiprocessing executor (vllm #12625's prefix), not Ray
    mp = ("(VllmWorkerProcess pid=350) [rank1]:[E129 20:00:47 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught "
          "collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=128, NumelOut=128, "
          "Timeout(ms)=600000) ran for 600003 milliseconds before timing out.\n")
    assert "vllm-tp-collective-watchdog" in _top_rules(mp, 3)
    trainer = mp.replace("VllmWorkerProcess pid=350", "WorkerDict pid=17616, ip=10.0.0.1")
    assert "vllm-tp-collective-watchdog" not in _top_rules(trainer, 3)


def test_inline_code_paste_is_unwrapped_but_fences_and_inner_code_are_not():
    ln = normalize_line(" `(RayWorkerVllm pid=1394) [E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught.`", 1)
    assert ln.source == "RayWorkerVllm pid=1394" and ln.text.startswith("[E ProcessGroupNCCL")
    for t in ("```bash", "run `ray status` first", "``x``"):
        assert normalize_line(t, 1).text == t


def test_a_dead_actor_cites_its_own_earlier_error():
    """Ray's ActorDiedError block names the dead actor's pid; the line that actor printed its error on (under its
    own ``(Name pid=N)`` prefix) is cited with the death, and another actor's error is not."""
    log = ("(WorkerDict pid=111) step 3 done\n"
           "(WorkerDict pid=222) ValueError: something else on another worker\n"
           "(WorkerDict pid=111) RuntimeError: CUDA error: unspecified launch failure\n"
           "(TaskRunner pid=9) noise\n"
           "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
           "        class_name: create_colocated_worker_cls.<locals>.WorkerDict\n"
           "        pid: 111\n"
           "        ip: 10.0.0.1\n")
    f = next(f for f in triage_text(log).findings if f.symptom == "ray_actor_died")
    cited = {e.line for e in f.evidence}
    assert 3 in cited and 2 not in cited


def test_openrlhf_and_vllm_016_collective_rpc_pairing():
    case = _case("openrlhf-async-vllm-016-collective-rpc-failed-needs-openrlhf-095")
    f = triage_text(case).findings[0]
    assert f.causes[0].rule_id == "openrlhf-async-vllm-016-collective-rpc" and "0.9.5" in f.fix
    # the dotted-CLI actor name of newer OpenRLHF (RolloutRayActor), and verl's vLLM server: not OpenRLHF
    line = "(RolloutRayActor pid=77) (EngineCore_DP0 pid=78) ERROR 03-05 00:25:45 [core.py:1094] Invocation of collective_rpc method failed\n"
    assert "openrlhf-async-vllm-016-collective-rpc" in _top_rules(line)
    assert "openrlhf-async-vllm-016-collective-rpc" not in _top_rules(line.replace("RolloutRayActor", "vLLMHttpServer"), 3)
