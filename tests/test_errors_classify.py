"""The error classifier (tools/engine/errors_classify.py, classes in error_classes.py) and the generic
error findings (tools/error_findings.py): every class's own examples, traceback forms (chained, Ray-wrapped,
loguru, rich, JSON lines, logger prefixes, cut pastes) and real reports from the corpus."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from grpo_debug.skills.symptoms import SYMPTOMS
from grpo_debug.tools.engine.error_classes import CLASSES
from grpo_debug.tools.engine.errors_classify import classify_all
from grpo_debug.tools.engine.normalize import normalize
from grpo_debug.tools.triage import triage, triage_text

CORPUS = Path(__file__).parent / "data" / "corpus" / "cases"


def _classes(text: str) -> list[str]:
    return [r.cls.name for r in classify_all(normalize(text))]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.name)
def test_every_class_names_a_known_symptom_and_a_source(cls):
    assert cls.symptom in SYMPTOMS
    assert cls.source and cls.cause and cls.check


@pytest.mark.parametrize("cls,example", [(c, e) for c in CLASSES for e in c.examples],
                         ids=lambda x: getattr(x, "name", "")[:40])
def test_each_class_example_is_classified_as_its_class(cls, example):
    assert _classes(example)[0] == cls.name


def test_chained_cause_decides_the_class():
    text = """Traceback (most recent call last):
  File "/x/site-packages/verl/workers/rollout.py", line 10, in load
    model.load_weights(w)
  File "/x/site-packages/vllm/model_executor/models/qwen2.py", line 400, in load_weights
    param = params_dict[name]
KeyError: 'model.layers.0.mlp.experts.w13_weight'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/x/site-packages/verl/trainer/main_ppo.py", line 5, in main
    run()
RuntimeError: worker failed
"""
    recs = classify_all(normalize(text))
    assert len(recs) == 1
    r = recs[0]
    assert r.exc_type == "RuntimeError" and r.causes[0].exc_type == "KeyError"
    assert r.cls.name == "weights_key_error" and r.cls.symptom == "checkpoint_load_error"


def test_ray_wrapped_error_uses_the_inner_exception_and_its_frames():
    text = """ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_compute_log_prob() (pid=1, ip=10.0.0.1)
  File "/v/site-packages/verl/workers/fsdp_workers.py", line 700, in compute_log_prob
    output = self.actor.compute_log_prob(data)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 79.3 GiB of which 1.2 GiB is free.
"""
    (r,) = classify_all(normalize(text))
    assert r.cls.name == "cuda_oom" and r.wrapper.startswith("ray.exceptions.RayTaskError")
    assert r.decisive_frame.func == "compute_log_prob" and r.line == 4


def test_loguru_traceback_cut_before_the_exception_after_a_weight_update():
    """prime-rl (loguru backtrace with │/└ annotations), the paste ends inside httpx."""
    r = triage(path=str(CORPUS / "prime-rl-update-weights-httpx-readtimeout" / "input.log"))
    top = r.findings[0]
    assert top.symptom == "collective_hang" and "timeout" in top.fix.lower()
    assert {e.line for e in top.evidence} & {11, 13}


def test_rich_boxed_traceback_and_logger_prefixes():
    text = """╭───────────────── Traceback (most recent call last) ─────────────────╮
│ /app/prime_rl/orchestrator/client.py:88 in update_weights            │
│ /app/.venv/site-packages/httpx/_client.py:1700 in send               │
╰──────────────────────────────────────────────────────────────────────╯
ReadTimeout
"""
    assert _classes(text.replace("ReadTimeout", "httpx.ReadTimeout")) == ["http_timeout"]
    vllm = ('ERROR 09-05 10:48:28 [core.py:700] Traceback (most recent call last):\n'
            'ERROR 09-05 10:48:28 [core.py:700]   File "/s/site-packages/vllm/v1/engine/core.py", line 10, in run\n'
            'ERROR 09-05 10:48:28 [core.py:700] OSError: [Errno 12] Cannot allocate memory\n')
    (r,) = classify_all(normalize(vllm))
    assert r.cls.name == "host_enomem" and r.decisive_frame.func == "run"


def test_json_lines_log_is_read_through_its_message_field():
    r = triage(path=str(CORPUS / "skyrl-vllm-compile-cache-shared-across-devices" / "input.log"))
    assert r.findings and r.findings[0].symptom == "compile_cache_error"


def test_process_death_and_time_limit_lines():
    assert _classes("[12.3] Out of memory: Killed process 4242 (python) total-vm:9000kB") == ["process_killed_oom"]
    assert _classes("slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT 2025-01-01T00:00:00 DUE TO TIME LIMIT ***") == [
        "slurm_time_limit"]


def test_an_unclassified_error_still_gets_a_low_confidence_finding_that_names_it():
    text = """step 1 loss 0.5
Traceback (most recent call last):
  File "/w/site-packages/myfw/train.py", line 12, in step
    do()
ZeroDivisionError: division by zero
"""
    r = triage_text(text)
    assert len(r.findings) == 1
    f = r.findings[0]
    assert f.confidence == "low" and "ZeroDivisionError: division by zero" in f.title
    assert {e.line for e in f.evidence} >= {5} and f.sharpen


def test_a_warning_is_not_an_error():
    text = """WARNING 01-01 00:00:00 [config.py:10] Casting torch.bfloat16 to torch.float16.
UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly
step:1 - actor/pg_loss:0.1 - actor/grad_norm:0.5
"""
    assert not [f for f in triage_text(text).findings if f.confidence != "low"]
    assert classify_all(normalize(text)) == []


def test_rules_explain_the_error_before_the_generic_finding():
    text = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.5 GiB is free.\n"
    r = triage_text(text)
    assert r.findings[0].symptom == "cuda_oom"
    assert not r.findings[0].causes[0].rule_id.startswith("error-class:")


def test_nonfinite_values_in_an_unknown_format_get_a_low_confidence_finding():
    from grpo_debug.tools.engine.match import Context
    from grpo_debug.tools.engine.metrics import MetricTable
    from grpo_debug.tools.error_findings import _nonfinite
    from grpo_debug.tools.triage import line_map

    lines = normalize("run A, step 38: 1.5178\nrun A, step 39: NaN\nINFO nan_to_num is used for logits\n")
    ctx = Context(lines=lines, events=[], metrics=MetricTable(), facts=None)
    f = _nonfinite(ctx, line_map(lines))
    assert f.symptom == "nan_inf" and f.confidence == "low" and [e.line for e in f.evidence] == [2]
    r = triage(path=str(CORPUS / "deepspeed-0140-zero2-gradnorm-nan-allreduce-regression" / "input.log"))
    assert r.findings[0].symptom == "nan_inf" and {11, 13, 22} & {e.line for e in r.findings[0].evidence}
    assert not triage_text("INFO model loaded; nan_to_num is used for logits").findings


def test_slurm_time_limit_after_silence_names_the_silence_and_the_last_line():
    text = ("2025-03-01 10:00:00 INFO step 41 loss 0.3\n"
            "2025-03-01 10:01:10 INFO Updating weights (broadcast to rollout)\n"
            "slurmstepd: error: *** JOB 123 ON node7 CANCELLED AT 2025-03-01T14:01:10 DUE TO TIME LIMIT ***\n")
    f = triage_text(text).findings[0]
    assert f.symptom == "collective_hang" and "240 min without output" in f.title
    assert [e.line for e in f.evidence] == [2, 3]


def test_rule_finding_carries_the_classified_error_as_a_cause():
    r = triage(path=str(CORPUS / "trl-async-grpo-fsdp2-weight-sync-watchdog" / "input.log"))
    f = next(f for f in r.findings if f.symptom == "collective_hang")
    assert f.causes[0].rule_id == "nccl-watchdog-timeout"
    assert any(c.rule_id == "error-class:nccl_watchdog_timeout" for c in f.causes)


def test_every_line_level_class_example_passes_the_line_hint_prefilter():
    from grpo_debug.tools.engine.errors_classify import has_line_hint

    for c in CLASSES:
        if c.line_level:
            for e in c.examples:
                assert all(has_line_hint(x) for x in e.splitlines() if re.search(c.text, x)), (c.name, e)


def test_a_long_log_is_classified_in_linear_time():
    import time

    line = "(TaskRunner pid=1) step:%d - actor/pg_loss:0.1 - actor/grad_norm:0.5 - critic/score/mean:0.3\n"
    tb = 'Traceback (most recent call last):\n  File "/x/a.py", line 1, in f\n    g()\nValueError: x\n'
    text = "".join(line % i for i in range(20000)) + tb * 500
    t = time.perf_counter()
    recs = classify_all(normalize(text))
    assert len(recs) == 500 and time.perf_counter() - t < 10


def test_quoted_source_lines_of_plain_rich_and_loguru_tracebacks():
    """The code a traceback quotes is marked (facts.py reads no settings from it); the lines around it are not."""
    from grpo_debug.tools.engine.errors_classify import quoted_source_lines

    plain = """step 3 lr=1e-6 beta=0.04
Traceback (most recent call last):
  File "/app/train.py", line 42, in main
    probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
            ~~~~~~~~~~~~~^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.
    max_len=4096 group=8"""
    assert quoted_source_lines(normalize(plain)) == {3, 4, 5}
    rich = """╭───────────────────── Traceback (most recent call last) ──────────────────────╮
│ /app/train.py:42 in main                                                     │
│                                                                              │
│   41 │   │   logits = model(batch)                                           │
│ ❱ 42 │   │   probs = torch.softmax(logits, dim=-1, dtype=torch.float32)      │
╰──────────────────────────────────────────────────────────────────────────────╯
OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."""
    assert quoted_source_lines(normalize(rich)) == {2, 4, 5}
    loguru = """Traceback (most recent call last):
> File "/app/train.py", line 42, in main
    probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
            │     │       └ tensor([[0.1, 0.2]])
            │     └ <function softmax at 0x7f0000000000>
            └ <module 'torch' from '/usr/lib/python3/torch/__init__.py'>
RuntimeError: boom"""
    assert quoted_source_lines(normalize(loguru)) == {2, 3, 4, 5, 6}


def test_error_event_names_the_process_that_raised_it():
    from grpo_debug.tools.engine.errors_classify import error_events

    text = """(SGLangHttpServer pid=30211) Traceback (most recent call last):
(SGLangHttpServer pid=30211)   File "/usr/local/lib/python3.10/dist-packages/sglang/srt/managers/scheduler.py", line 2571, in run_scheduler_process
(SGLangHttpServer pid=30211)     scheduler.event_loop_overlap()
(SGLangHttpServer pid=30211) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.16 GiB."""
    (ev,) = error_events(normalize(text))
    assert ev.fields["process"] == "SGLangHttpServer pid=30211" and ev.text.endswith("\nprocess: SGLangHttpServer pid=30211")
    assert ev.text.startswith("[cuda_oom] torch.OutOfMemoryError")


def test_vllm_worker_rank_prefix_is_a_process_prefix():
    """vLLM V1's multiprocess workers print '(VllmWorker rank=N pid=P)' (vllm issue #14452): the prefix is read as
    the process, so the exception line under it is a Python exception."""
    text = """(VllmWorker rank=0 pid=10672) ERROR 03-16 06:12:38 [multiproc_executor.py:375]   File "/workspace/vllm/vllm/v1/worker/gpu_model_runner.py", line 1292, in _dummy_sampler_run
(VllmWorker rank=0 pid=10672) ERROR 03-16 06:12:38 [multiproc_executor.py:375]     raise RuntimeError(
(VllmWorker rank=0 pid=10672) ERROR 03-16 06:12:38 [multiproc_executor.py:375] RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine."""
    (r,) = classify_all(normalize(text))
    assert r.exc_type == "RuntimeError" and r.frames and r.frames[0].func == "_dummy_sampler_run"
    assert normalize(text)[0].source == "VllmWorker rank=0 pid=10672"


def test_torch_cuda_check_out_of_memory_is_cuda_oom():
    """torch's CUDA check (c10/cuda/CUDAException.cpp c10_cuda_check_implementation) raises 'CUDA error: ' +
    cudaGetErrorString(err): for cudaErrorMemoryAllocation 'CUDA error: out of memory', as RuntimeError (TORCH_CHECK)
    or, in newer releases, torch.AcceleratorError. vllm#19186: raised from capture_end during CUDA-graph capture."""
    frames = """(VllmWorker rank=3 pid=1090) ERROR 06-05 06:18:13 [multiproc_executor.py:470]   File "/usr/local/lib/python3.10/site-packages/torch/cuda/graphs.py", line 84, in capture_end
(VllmWorker rank=3 pid=1090) ERROR 06-05 06:18:13 [multiproc_executor.py:470]     super().capture_end()
(VllmWorker rank=3 pid=1090) ERROR 06-05 06:18:13 [multiproc_executor.py:470] """
    assert _classes(frames + "RuntimeError: CUDA error: out of memory") == ["cuda_oom"]
    assert _classes("torch.AcceleratorError: CUDA error: out of memory\n") == ["cuda_oom"]
    # another CUDA error of the same check, and a RuntimeError without OOM text, stay out of the class
    assert _classes("RuntimeError: CUDA error: an illegal memory access was encountered\n") == ["illegal_memory_access"]
    assert _classes("RuntimeError: Expected all tensors to be on the same device, but found at least two devices\n") \
        != ["cuda_oom"]
    f = triage_text(frames + "RuntimeError: CUDA error: out of memory").findings[0]
    assert f.symptom == "cuda_oom" and f.causes[0].rule_id == "cuda-graph-capture-oom"
