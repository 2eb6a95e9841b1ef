"""Kinds of miss found by the held-out corpus2 (tests/data/corpus2/INDEX.md), each fixed as a kind: every test
reads the corpus2 report's own text and a second example of the same kind that the corpus did not supply (the
framework's own format, taken from its source, or another public report), so a fix for one case only fails here.

Kind 2, "format not parsed": a logger prefix before the decisive line, an error returned as a JSON body, a
``ray status`` demand block, an exception named in the middle of non-English prose.
Kind 1, "no rule for the mechanism": see the rule tests at the end."""
from __future__ import annotations

from pathlib import Path

import pytest

from grpo_debug.tools.engine.errors_classify import classify_all, clean
from grpo_debug.tools.engine.normalize import json_message, normalize
from grpo_debug.tools.triage import triage_text

CASES = Path(__file__).parent / "data" / "corpus2" / "cases"


def _case(name: str) -> str:
    return next((CASES / name).glob("input.*")).read_text()


def _first(text: str):
    r = triage_text(text)
    assert r.findings, "no finding"
    return r.findings[0]


def _rules(text: str, top: int = 3) -> list[str]:
    return [c.rule_id for f in triage_text(text).findings[:top] for c in f.causes]


# --- logger prefixes: "<name> <LEVEL>: " (AReaL / ReaLHF), BASIC_FORMAT, Hydra -------------------------------

@pytest.mark.parametrize("line,rest", [
    # AReaL realhf/base/logging.py LOG_FORMAT, pasted without its date (corpus2 areal case)
    ("controller CRITICAL: Ray does not have enough resources", "Ray does not have enough resources"),
    # the full format with a logger name of two words (AReaL issue 145's log)
    ("20250701-22:52:55.939 master worker INFO: Dumped recover info to file.", "Dumped recover info to file."),
    ("20250616-06:38:13.855 realhf.system.model_function_call ERROR: RuntimeError: boom", "RuntimeError: boom"),
    ("ERROR:root:ValueError: bad value", "ValueError: bad value"),  # logging.BASIC_FORMAT
    ("[2024-01-02 10:11:12,345][__main__][ERROR] - RuntimeError: boom", "RuntimeError: boom"),  # Hydra job_logging
])
def test_logger_prefix_is_removed_before_the_message(line, rest):
    assert clean(line) == rest


@pytest.mark.parametrize("line", ["step:1 - loss:0.3 - reward:0.5", "I got this error: ValueError: x",
                                  "Some words then more words ERROR: x"])
def test_prose_and_metric_lines_keep_their_text(line):
    assert clean(line) == line


def test_exception_behind_an_areal_prefix_is_an_exception_record():
    recs = classify_all(normalize("20250616-06:38:13.855 model_worker ERROR: torch.OutOfMemoryError: CUDA out of "
                                  "memory. Tried to allocate 2.00 GiB."))
    assert recs and recs[0].exc_type == "torch.OutOfMemoryError"


# --- an OpenAI-compatible server's error body ---------------------------------------------------------------

def test_sglang_error_body_with_escaped_apostrophe_is_read():
    text = _case("sglang-serving-input-61709-tokens-over-context-40960")
    line = text.splitlines()[2]
    assert json_message(line) == ("BadRequestError: The input (61709 tokens) is longer than the model's context "
                                  "length (40960 tokens).")
    f = _first(text)
    assert f.symptom == "context_overflow" and 3 in [e.line for e in f.evidence]


def test_vllm_nested_error_body_is_read():
    # vLLM's ErrorResponse(error=ErrorInfo(message, type, param, code)) and its context message
    # (vllm/entrypoints/openai/protocol.py; "This model's maximum context length is N tokens. However, ...")
    body = ('{"error":{"message":"This model\'s maximum context length is 4096 tokens. However, you requested '
            '5120 tokens (1024 in the messages, 4096 in the completion). Please reduce the length of the messages '
            'or completion.","type":"BadRequestError","param":null,"code":400}}')
    assert json_message(body).startswith("BadRequestError: This model's maximum context length is 4096")
    assert _first("curl returned:\n" + body).symptom == "context_overflow"


@pytest.mark.parametrize("line,want", [
    ('{"level":"info","message":"hello world","ts":1}', "hello world"),  # a JSON-lines record: message only
    ('{"error":"Model x is currently loading","estimated_time":35.6}', None),  # no message field
    ('{"object":"error","message":"Not found","type":"invalid_request_error","code":404}', "Not found"),
])
def test_json_lines_and_other_error_bodies(line, want):
    assert json_message(line) == want


# --- ray status demand block --------------------------------------------------------------------------------

def test_ray_status_pending_in_placement_group_case():
    f = _first(_case("ray-actor-pending-in-pg-fractional-gpu-bundles"))
    assert f.symptom == "ray_resources_pending" and 10 in [e.line for e in f.evidence]
    assert f.causes[0].rule_id == "ray-pending-inside-placement-group"


def test_ray_status_pending_demand_second_report():
    # a ray status of a full CPU cluster (format of ray/autoscaler/_private/util.py get_demand_report)
    text = ("======== Autoscaler status: 2024-09-23 01:17:18.277326 ========\nResources\n"
            "---------------------------------------------------------------\nTotal Usage:\n 68.0/68.0 CPU\n"
            " 0B/368.27GiB memory\n\nFrom request_resources:\n (none)\nPending Demands:\n"
            " {'CPU': 1.0}: 408+ pending tasks/actors\n")
    f = _first(text)
    assert f.symptom == "ray_resources_pending" and f.causes[0].rule_id == "ray-status-pending-demand"


def test_ray_status_without_demands_is_quiet():
    text = "Resources\nTotal Usage:\n 8.0/64.0 CPU\n 8.0/8.0 GPU\nPending Demands:\n (no resource demands)\n"
    assert not any(f.symptom == "ray_resources_pending" for f in triage_text(text).findings)


# --- an exception named inside non-English prose ------------------------------------------------------------

def test_exception_after_chinese_prose_case():
    f = _first(_case("deepspeed-accelerate-bf16-mixed-precision-vs-fp16-ds-config"))
    assert f.symptom == "config_error" and 1 in [e.line for e in f.evidence]


@pytest.mark.parametrize("line,exc", [
    ("训练时报错RuntimeError: CUDA error: an illegal memory access was encountered", "RuntimeError"),
    ("При запуске получаю torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "torch.OutOfMemoryError"),
])
def test_exception_inside_prose_is_a_record(line, exc):
    recs = classify_all(normalize(line))
    assert recs and recs[0].exc_type == exc


@pytest.mark.parametrize("line", ["我们使用了ValueError类来处理", "I got ValueError: x in my script",
                                  "设置 key=ValueError 之后"])
def test_prose_without_an_exception_line_is_not_one(line):
    assert not [r for r in classify_all(normalize(line)) if r.exc_type]


# --- kind 1: mechanisms with a rule now (each: the corpus2 report and a second text of the kind) -------------

def test_trl_client_waiting_for_a_server_case():
    f = _first(_case("trl-grpo-vllm-client-server-not-up-no-vllm-serve"))
    assert f.symptom == "port_conflict" and f.causes[0].rule_id == "trl-vllm-server-not-running"


def test_trl_client_gives_up_second_example():
    # TRL 0.19.1 trl/extras/vllm_client.py check_server: the ConnectionError raised after vllm_server_timeout
    text = ("Traceback (most recent call last):\n"
            '  File "/opt/conda/lib/python3.11/site-packages/trl/extras/vllm_client.py", line 152, in check_server\n'
            "    raise ConnectionError(\n"
            "ConnectionError: The vLLM server can't be reached at http://0.0.0.0:8000 after 240.0 seconds. Make sure "
            "the server is running by running `trl vllm-serve`.\n")
    assert "trl-vllm-server-not-running" in _rules(text)


def test_trl_server_that_came_up_is_quiet():
    text = ("2025-04-01 10:00:00 - INFO - trl.extras.vllm_client - Server is not up yet. Retrying in 2.0 seconds...\n"
            "2025-04-01 10:00:02 - INFO - trl.extras.vllm_client - Server is up!\n")
    assert "trl-vllm-server-not-running" not in _rules(text, top=10)


def test_cuda_graph_capture_oom_case():
    f = _first(_case("vllm-v1-cudagraph-capture-oom-gpu-memory-utilization-too-high"))
    assert f.symptom == "cuda_oom" and f.causes[0].rule_id == "cuda-graph-capture-oom"


def test_cuda_graph_capture_oom_sglang_second_example():
    # SGLang cuda_graph_runner.py: raise Exception(f"Capture cuda graph failed: {e}\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}")
    text = ("[2025-03-01 10:00:00 TP0] Capture cuda graph begin. This can take up to several minutes.\n"
            "[2025-03-01 10:00:09 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
            "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total "
            "capacity of 79.15 GiB of which 301.00 MiB is free.\n"
            "Possible solutions:\n1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n")
    f = _first(text)
    assert f.symptom == "cuda_oom" and f.causes[0].rule_id == "cuda-graph-capture-oom"


def test_chunked_prefill_variant_case_and_second_example():
    assert "vllm-v0-kv-cache-short-chunked-prefill-off" in _rules(
        _case("vllm-max-model-len-30000-kv-cache-3984-chunked-prefill-off"), top=1)
    second = ("[rank0]: ValueError: The model's max seq len (16384) is larger than the maximum number of tokens that can "
              "be stored in KV cache (9152). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
              "initializing the engine.\n")
    assert "vllm-v0-kv-cache-short-chunked-prefill-off" in _rules(second, top=1)
    long_ctx = second.replace("(16384)", "(131072)")
    assert "vllm-v0-kv-cache-short-chunked-prefill-off" not in _rules(long_ctx, top=10)


def test_accelerate_precision_conflict_case_and_second_example():
    f = _first(_case("deepspeed-accelerate-bf16-mixed-precision-vs-fp16-ds-config"))
    assert f.causes[0].rule_id == "accelerate-mixed-precision-vs-deepspeed-config"
    # the opposite direction, as accelerate's DeepSpeedPlugin.set_mixed_precision words it, behind a logger prefix
    second = ("[2024-05-01 12:00:00,001][__main__][ERROR] - ValueError: `--mixed_precision` arg cannot be set to "
              "`fp16` when `bf16` is set in the DeepSpeed config file.\n")
    assert _first(second).causes[0].rule_id == "accelerate-mixed-precision-vs-deepspeed-config"


# --- ANSI colours pasted in caret notation ("^[[31m", cat -v / less) -----------------------------------------

@pytest.mark.parametrize("raw,text,source", [
    # the lmm-r1 (OpenRLHF) report's Ray job log
    ("^[[36m(LLMRayActor pid=95409)^[[0m INFO 04-24 18:22:16 [block_pool.py:264] Successfully reset prefix cache"
     "^[[32m [repeated 7x across cluster]^[[0m", "INFO 04-24 18:22:16 [block_pool.py:264] Successfully reset prefix cache",
     "LLMRayActor pid=95409"),
    ("2025-04-24 18:57:03,337 ERR cli.py:72 -- ^[[31mJob 'raysubmit_x' failed^[[39m",
     "2025-04-24 18:57:03,337 ERR cli.py:72 -- Job 'raysubmit_x' failed", None),
    ("x ^[[1;31mERROR^[[0m y", "x ERROR y", None),  # bold red, two parameters
    ("a[0]^[x and arr[[1]]", "a[0]^[x and arr[[1]]", None),  # not a colour code
])
def test_caret_notation_colours_are_removed(raw, text, source):
    ln = normalize(raw)[0]
    assert (ln.text, ln.source) == (text, source)
