"""process_crash and the crash classes (tools/error_findings.py, tools/engine/error_classes_crash.py): an error no class
explains is a process_crash finding naming the exception, its decisive frame and what to paste next, never
config_error, and not ray_actor_died / collective_hang for passing through Ray or torch.distributed frames; the
classes real reports show (vLLM EngineDeadError, driver errors in compiled kernels, Ascend NPU errors, bind() port
overflow, native signals); a fresh run's start-up messages (verl's checkpoint tracker, Megatron's empty --load) are
not findings."""
from __future__ import annotations

import re

from grpo_debug.tools.engine.errors_classify import classify_all
from grpo_debug.tools.engine.normalize import normalize
from grpo_debug.tools.triage import triage_text

STEP = "(TaskRunner pid=1) step:{n} - actor/pg_loss:0.1 - actor/grad_norm:0.5 - critic/score/mean:0.3\n"

RAY_TB = """Traceback (most recent call last):
  File "/w/verl/trainer/main_ppo.py", line 40, in main
    ray.get(runner.run.remote(config))
  File "/usr/lib/python3.10/site-packages/ray/_private/worker.py", line 2600, in get
    raise value.as_instanceof_cause()
ray.exceptions.RayTaskError(ZeroDivisionError): ray::TaskRunner.run() (pid=1, ip=10.0.0.1)
  File "/w/verl/trainer/ppo/ray_trainer.py", line 900, in fit
    ratio = a / b
ZeroDivisionError: division by zero
"""

DIST_TB = """Traceback (most recent call last):
  File "/w/myfw/train.py", line 80, in train_step
    dist.all_reduce(t)
  File "/usr/lib/python3.10/site-packages/torch/distributed/c10d_logger.py", line 81, in wrapper
    return func(*args, **kwargs)
  File "/usr/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 2501, in all_reduce
    work = group.allreduce([tensor], opts)
TypeError: unsupported operand type(s) for +: 'NoneType' and 'int'
"""

TOP_TB = """Traceback (most recent call last):
  File "/w/train.py", line 12, in <module>
    main()
  File "/w/train.py", line 9, in main
    table[key]
LookupError: no entry for 'reward_fn'
"""


def _findings(text: str):
    return triage_text(text).findings


def _contract(f) -> None:
    assert f.symptom and f.confidence in ("high", "medium", "low")
    assert f.evidence and all(isinstance(e.line, int) for e in f.evidence)
    assert f.fix and "\n" not in f.fix


def test_unclassified_error_through_ray_frames_is_a_process_crash_not_a_dead_actor():
    text = STEP.format(n=1) + RAY_TB
    fs = _findings(text)
    assert [f.symptom for f in fs] == ["process_crash"]
    f = fs[0]
    _contract(f)
    assert "ZeroDivisionError: division by zero" in f.title and "ray_trainer.py:900 in fit" in f.title
    assert f.confidence in ("low", "medium")
    assert 10 in {e.line for e in f.evidence}  # the exception line
    assert 8 in {e.line for e in f.evidence}  # the decisive frame's line
    assert any(c.startswith("paste the full traceback") for c in f.next_checks)
    assert "fit (ray_trainer.py:900)" in f.fix


def test_unclassified_error_through_torch_distributed_is_not_a_collective_hang():
    fs = _findings(DIST_TB)
    assert [f.symptom for f in fs] == ["process_crash"]
    assert "TypeError: unsupported operand" in fs[0].title
    assert "train.py:80 in train_step" in fs[0].title  # decisive frame: the last frame outside torch plumbing
    assert "config_error" not in {f.symptom for f in fs}


def test_an_uncaught_exception_at_top_level_is_medium_and_low_when_training_went_on():
    f = _findings(STEP.format(n=1) + TOP_TB)[0]
    assert f.symptom == "process_crash" and f.confidence == "medium"
    assert "LookupError: no entry for 'reward_fn'" in f.title
    went_on = STEP.format(n=1) + TOP_TB + STEP.format(n=2) + STEP.format(n=3)
    f2 = next(f for f in _findings(went_on) if f.symptom == "process_crash")
    assert f2.confidence == "low"


def test_native_crash_lines_are_process_crash():
    for text, line in (("step 3 loading\nFatal Python error: Segmentation fault\n\nThread 0x7f (most recent call "
                        "first):\n  File \"/w/x.py\", line 3 in f\n", 2),
                       ("[E ProcessGroupNCCL] something\n    exitcode  : -11 (pid: 4242)\n", 2),
                       ("+ python train.py\nbash: line 1:  4242 Segmentation fault      (core dumped) python train.py\n", 2)):
        fs = _findings(text)
        f = next(f for f in fs if f.symptom == "process_crash")
        _contract(f)
        assert f.confidence == "medium" and line in {e.line for e in f.evidence}, (text, fs)


def test_engine_dead_error_names_the_engine_core_error_printed_above_it():
    text = """(EngineCore_DP0 pid=6903) ERROR 10-09 01:31:16 [core.py:718] EngineCore encountered a fatal error.
(EngineCore_DP0 pid=6903) ERROR 10-09 01:31:16 [core.py:718] Traceback (most recent call last):
(EngineCore_DP0 pid=6903) ERROR 10-09 01:31:16 [core.py:718]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/sample/sampler.py", line 90, in forward
(EngineCore_DP0 pid=6903) ERROR 10-09 01:31:16 [core.py:718]     idx = mapping[key]
(EngineCore_DP0 pid=6903) ERROR 10-09 01:31:16 [core.py:718] KeyError: 'logits_17'
(APIServer pid=1) ERROR 10-09 01:31:17 [async_llm.py:480] Traceback (most recent call last):
(APIServer pid=1) ERROR 10-09 01:31:17 [async_llm.py:480]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/async_llm.py", line 660, in output_handler
(APIServer pid=1) ERROR 10-09 01:31:17 [async_llm.py:480]     outputs = await engine_core.get_output_async()
(APIServer pid=1) ERROR 10-09 01:31:17 [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
"""
    assert [r.cls.name for r in classify_all(normalize(text))] == ["unclassified", "vllm_engine_dead"]
    (f,) = _findings(text)
    assert f.symptom == "process_crash" and f.confidence == "medium"  # the dead engine is the second sign of death
    assert "KeyError: 'logits_17'" in f.title and "EngineDeadError" in f.causes[0].why
    assert {5, 9} <= {e.line for e in f.evidence}


def test_engine_dead_error_after_an_oom_is_the_oom():
    text = ("(EngineCore_DP0 pid=5) ERROR 10-09 01:31:16 [core.py:718] torch.OutOfMemoryError: CUDA out of memory. "
            "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.5 GiB is free.\n"
            "(APIServer pid=1) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack "
            "trace (above) for the root cause.\n")
    syms = [f.symptom for f in _findings(text)]
    assert syms[0] == "cuda_oom" and "process_crash" not in syms


KERNEL_TB = """Traceback (most recent call last):
  File "/v/site-packages/torch/_inductor/output_code.py", line 584, in __call__
    return self.current_callable(inputs)
  File "/root/.cache/vllm/torch_compile_cache/ab12/rank_0_0/inductor_cache/x7/cx7.py", line 900, in call
    triton_poi_fused_0.run(buf0, stream=stream0)
RuntimeError: Triton Error [CUDA]: {err}
"""
CACHE_LINE = ("(EngineCore_DP0 pid=3021) INFO 09-23 18:12:30 [backends.py:161] Directly load the compiled graph(s) for "
              "dynamic shape from the cache, took 2.810 s\n")


def test_driver_error_in_a_compiled_kernel_cites_the_cache_load_line():
    (f,) = _findings(CACHE_LINE + KERNEL_TB.format(err="device kernel image is invalid"))
    assert f.symptom == "compile_cache_error" and f.confidence == "medium"
    assert {1, 7} <= {e.line for e in f.evidence}  # the cache-load line and the exception
    # without the cache line the image error says a process crashed, at low confidence
    (g,) = _findings(KERNEL_TB.format(err="device kernel image is invalid"))
    assert g.symptom == "process_crash" and g.confidence == "low" and "Triton Error [CUDA]" in g.title
    # a launch failure that is not an image mismatch is not blamed on the cache even after a cache load
    (h,) = _findings(CACHE_LINE + KERNEL_TB.format(err="invalid argument"))
    assert h.symptom == "process_crash" and 1 in {e.line for e in h.evidence}
    assert _findings(KERNEL_TB.format(err="out of memory"))[0].symptom == "cuda_oom"


def test_ascend_npu_errors():
    text = """Traceback (most recent call last):
  File "/home/x/test.py", line 30, in <module>
    generate_ids = model.generate(inputs.input_ids, max_length=512)
RuntimeError: operator():build/CMakeFiles/torch_npu.dir/compiler_depend.ts:25 NPU function error: c10_npu::acl::AclrtSynchronizeStreamWithTimeout(copy_stream), error code is 507035
[ERROR] 2025-04-29-18:46:11 (PID:1066924, Device:1, RankID:-1) ERR00100 PTA call acl api failed
[Error]: The vector core execution is abnormal.
EZ9999: Inner Error!
"""
    (f,) = _findings(text)
    assert f.symptom == "process_crash" and f.confidence == "medium" and "error code is 507035" in f.title
    assert 4 in {e.line for e in f.evidence} and "ASCEND_LAUNCH_BLOCKING=1" in f.fix
    oom = "RuntimeError: NPU out of memory. Tried to allocate 260.00 MiB (NPU 0; 28.50 GiB total capacity)\n"
    assert _findings(oom)[0].symptom == "cuda_oom"
    hccl = ("EE9999: Inner Error!\nEE9999  fftsplus task execute failed, dev_id=7, stream_id=7, task_id=5990, "
            "err_type=13[hccl fftsplus timeout][FUNC:GetError][FILE:stream.cc][LINE:1512]\n")
    assert _findings(hccl)[0].symptom == "collective_hang"


def test_port_out_of_range_is_a_port_finding():
    text = """Traceback (most recent call last):
  File "/home/workspace/AReaL/areal/utils/network.py", line 88, in is_port_free
    sock.bind(("", port))
OverflowError: bind(): port must be 0-65535.
"""
    (f,) = _findings(text)
    _contract(f)
    assert f.symptom == "port_conflict" and 4 in {e.line for e in f.evidence} and "base port" in f.fix


def test_start_up_refusals_keep_their_config_class():
    text = "ValueError: train_batch_size (32) must be >= actor.ppo_mini_batch_size (64)\n"
    assert [r.cls.name for r in classify_all(normalize(text))] == ["config_value_refused"]
    assert _findings(text)[0].symptom == "config_error"
    kw = "TypeError: Llama31ModelProvider.__init__() got an unexpected keyword argument 'pipeline_split_rank'\n"
    assert _findings(kw)[0].symptom == "config_error"


VERL_FRESH = """(TaskRunner pid=247607) Using LocalLogger is deprecated. The constructor API will change
(TaskRunner pid=247607) Checkpoint tracker file does not exist: /workspace/verl/checkpoints/verl_example/smol135m_grpo/latest_checkpointed_iteration.txt
(TaskRunner pid=247607) Training from scratch
"""


def test_verl_fresh_run_checkpoint_tracker_message_is_not_a_finding():
    text = VERL_FRESH + STEP.format(n=1) + STEP.format(n=2)
    assert not [f for f in _findings(text) if f.symptom == "checkpoint_load_error"]
    assert not [f for f in _findings(text) if f.confidence != "low"]
    # a real load failure next to it still is one
    failed = VERL_FRESH + ("RuntimeError: Error(s) in loading state_dict for Qwen2ForCausalLM: Missing key(s) in "
                           "state_dict: \"model.layers.0.mlp.gate_proj.weight\".\n")
    assert _findings(failed)[0].symptom == "checkpoint_load_error"


MEGATRON_FRESH = """WARNING: could not find the metadata file /ckpt/gpt/latest_checkpointed_iteration.txt
    will not load any checkpoints and will start from random
 iteration        1/    1000 | consumed samples:          256 | lm loss: 1.089E+01 | grad norm: 3.2 |
 iteration        2/    1000 | consumed samples:          512 | lm loss: 1.079E+01 | grad norm: 3.0 |
"""


def test_megatron_fresh_start_is_not_a_finding_but_is_one_in_a_slime_run():
    assert not [f for f in _findings(MEGATRON_FRESH) if f.symptom == "checkpoint_load_error"]
    slime = "".join(f"(MegatronTrainRayActor pid=1234) {ln}\n" for ln in MEGATRON_FRESH.splitlines()[:2])
    f = _findings(slime)[0]
    assert f.symptom == "checkpoint_load_error" and f.causes[0].rule_id == "slime-garbled-megatron-load-tracker"


def test_no_checkpoint_found_is_a_finding_only_without_a_fresh_start():
    assert not _findings("No checkpoint found, training from scratch\n" + STEP.format(n=1))
    f = _findings("FileNotFoundError: No checkpoint found at /ckpt/run7 (resume_mode=must)\n")[0]
    assert f.symptom == "checkpoint_load_error"


def test_a_caught_traceback_in_a_healthy_run_is_never_medium():
    text = (STEP.format(n=1) + "WARNING retrying request after error:\n" + TOP_TB.replace("<module>", "retry")
            + "".join(STEP.format(n=i) for i in range(2, 8)))
    fs = _findings(text)
    assert not [f for f in fs if f.confidence != "low"], [(f.symptom, f.confidence) for f in fs]


def test_no_unclassified_error_is_named_config_error():
    """Every crash-shaped input of this file: whatever the symptom, an unclassified error is never config_error."""
    for text in (RAY_TB, DIST_TB, TOP_TB, "Traceback (most recent call last):\n  File \"/w/a.py\", line 3, in f\n"):
        for f in _findings(text):
            if f.causes and f.causes[0].rule_id == "error-class:unclassified":
                assert f.symptom == "process_crash" and re.match(r"Process crash", f.title)


def test_an_exception_quoted_in_report_prose_is_a_crash_not_silence():
    """A report that quotes the error inside prose (backticks, double or curly quotes) gives a process_crash
    finding with that type and message; a name without a quote before it, or without a message, stays prose."""
    from grpo_debug.tools.triage import triage

    for text, typ in (
        ("When I start training it crashes with `RuntimeError: NCCL communicator was aborted on rank 3.` after "
         "a few steps.\n", "RuntimeError"),
        ('The trainer fails at start: "TypeError: __init__() got an unexpected keyword argument \'foo\'" on '
         "every rank.\n", "TypeError"),
        ("It ends with \u201cAssertionError: world size must be divisible by tp\u201d and exits.\n", "AssertionError"),
    ):
        f = triage(text=text).findings
        assert f and f[0].symptom in ("process_crash", "collective_hang", "config_error"), text
        assert typ in f[0].title and f[0].evidence[0].line == 1
    assert not triage(text="We usually see a RuntimeError when the port is taken, not here.\n").findings
    assert not triage(text="The docs say `ValueError` is raised for bad input.\n").findings
