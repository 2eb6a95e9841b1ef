"""Extractors and detectors on lines in the frameworks' real formats (../shared/reference/log_formats.md)."""
from __future__ import annotations

import math
from pathlib import Path

from grpo_debug.tools.engine.facts import extract_facts
from grpo_debug.tools.engine.detectors import (flat, growth, length_cap, nonfinite, spike, step1_mismatch, threshold, vanished,
                                        zero_reward)
from grpo_debug.tools.engine.events import extract_events
from grpo_debug.tools.engine.metrics import extract_metrics
from grpo_debug.tools.engine.normalize import normalize


def _metrics(text):
    return extract_metrics(normalize(text))


def _events(text):
    return extract_events(normalize(text))


def _facts(text, whole=False, hint=None):
    return extract_facts(normalize(text), text if whole else None, hint)


# --- normalise ---------------------------------------------------------------------------------

def test_normalize_strips_wrappers_and_keeps_line_numbers():
    raw = ("\x1b[36m(WorkerDict pid=1234, ip=10.0.0.1)\x1b[0m frame #0: c10::Error\r\n"
           "[36m(TaskRunner pid=99)[0m step:1 - actor/grad_norm:0.5\n"
           "2026-01-01T06:50:07.810058421Z [2026-01-01 06:50:07] Received sigquit from a child process.\n"
           "(WorkerDict pid=1234) after load model cls [repeated 3x across cluster] (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable)\n"
           "  0%|          | 9/100 [00:19<37:53:00,  2.14s/it]\r 10%|#         | 10/100 [00:21<00:00]\rstep:2 - actor/grad_norm:0.6\n"
           "(EngineCore_0 pid=1234) (VllmWorker TP1 pid=1240) INFO 08-25 11:01:23 [default_loader.py:267] Loading weights took 1.13 seconds\n"
           "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout\n")
    lines = normalize(raw)
    assert [ln.no for ln in lines] == [1, 2, 3, 4, 5, 6, 7]
    assert lines[0].text == "frame #0: c10::Error" and lines[0].source == "WorkerDict pid=1234, ip=10.0.0.1"
    assert lines[1].text == "step:1 - actor/grad_norm:0.5" and lines[1].source == "TaskRunner pid=99"
    assert lines[2].text.startswith("[2026-01-01 06:50:07] Received sigquit")
    assert lines[3].text == "after load model cls" and lines[3].repeated == 3
    assert lines[4].text == "step:2 - actor/grad_norm:0.6"
    assert lines[5].text.startswith("INFO 08-25") and lines[5].source.startswith("EngineCore_0")
    assert lines[6].text.startswith("[E321 02:07:08")


def test_normalize_cuts_a_huge_line():
    (ln,) = normalize("x" * 100_000)
    assert ln.cut and len(ln.text) == 20_000


# --- metrics -----------------------------------------------------------------------------------

def test_verl_metric_line_old_and_new_format():
    t = _metrics("(TaskRunner pid=1) step:83 - actor/entropy_loss:0.317 - actor/grad_norm:0.006 - actor/lr:0.000 - timing_s/gen:29.641\n"
                 "(TaskRunner pid=1) step:84 - actor/ppo_kl:-8.163164312320433e-06 - actor/pg_loss:np.float64(0.0123) - actor/grad_norm:nan\n")
    assert t.series["actor/grad_norm"][0].value == 0.006 and t.series["actor/grad_norm"][0].step == 83
    assert math.isnan(t.series["actor/grad_norm"][1].value) and t.series["actor/grad_norm"][1].line == 2
    assert t.series["actor/pg_loss"][0].value == 0.0123
    assert t.series["timing_s/gen"][0].value == 29.641
    assert t.formats == {"verl"}


def test_slime_step_and_rollout_dicts():
    t = _metrics("(MegatronTrainRayActor pid=1234) [2026-01-01 00:00:00] model.py:918 - step 1: {'train/loss': 0.10, 'train/ppo_kl': 0.0, "
                 "'train/grad_norm': 2955012562.8240876, 'train/lr-pg_0': 1e-07, 'train/step': 1}\n"
                 "(MegatronTrainRayActor pid=1234) [2025-11-17 23:38:59] data.py:119 - rollout 0: {'rollout/raw_reward': -0.109, "
                 "'rollout/ref_log_probs': -0.12787111476063728, 'rollout/log_probs': -0.12787111476063728}\n"
                 "2026-01-01 00:00:00 | INFO | relax.backends.megatron.model:918 step 3: {'train/loss': nan, 'train/grad_norm': inf}\n")
    assert t.series["train/grad_norm"][0].value == 2955012562.8240876
    assert t.series["rollout/log_probs"][0].step == 0
    assert math.isnan(t.series["train/loss"][1].value) and math.isinf(t.series["train/grad_norm"][1].value)


def test_hf_trl_dicts_including_quoted_values_and_openrlhf():
    t = _metrics("{'loss': 0.0, 'grad_norm': 0.0866, 'reward': 1.71, 'frac_reward_zero_std': 0.25, 'epoch': 0.31}\n"
                 "{'loss': '0.0123', 'grad_norm': '0.4567', 'epoch': '0.32'}\n"
                 "✨ Global step 7: {'policy_loss': 0.01, 'actor_grad_norm': 1.5, 'rollout/truncated_rate': 0.2}\n")
    assert [p.value for p in t.series["grad_norm"]] == [0.0866, 0.4567]
    assert [p.step for p in t.series["grad_norm"]] == [1, 2]
    assert t.series["actor_grad_norm"][0].step == 7
    assert {"hf_trainer", "openrlhf"} <= t.formats


def test_megatron_iteration_line_and_vanished_loss():
    text = (" iteration      122/  250000 | consumed samples:       124928 | learning rate: 9.150E-06 | global batch size:  1024 | "
            "lm loss: 2.504220E+00 | loss scale: 1.0 | grad norm: 0.231 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
            " [2026-01-01 00:00:00.000000] iteration      123/  250000 | consumed samples:       126000 | learning rate: 9.150E-06 | "
            "global batch size:  1024 | loss scale: 1.0 | grad norm: 0.240 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    t = _metrics(text)
    assert t.series["lm loss"][0].value == 2.50422 and t.series["grad norm"][1].step == 123
    hit = vanished(t)
    assert hit and 2 in hit.lines and "lm loss" in hit.message


def test_deepspeed_overflow_and_generic_step_lines():
    t = _metrics("[2024-09-11 17:52:18,030] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
                 "Attempted loss scale: 4294967296, reducing to 2147483648\n"
                 "[2025-05-12 14:09:48,102] [    INFO] - global_step: 1, train/policy_loss: 0.00312, train/kl_loss: 0.01734, train/ratio_mean: 1.0191\n")
    assert t.series["deepspeed/loss_scale"][0].value == 2147483648
    assert t.series["train/ratio_mean"][0].step == 1


# --- events ------------------------------------------------------------------------------------

def test_traceback_with_chained_cause_and_ray_remote_frames():
    text = """Traceback (most recent call last):
  File "/opt/venv/lib/python3.10/site-packages/verl/trainer/main_ppo.py", line 72, in run_ppo
    ray.get(runner.run.remote(config))
ray.exceptions.RayTaskError(ValueError): ray::TaskRunner.run() (pid=8051, ip=10.0.0.5)
  File "/opt/venv/lib/python3.10/site-packages/verl/trainer/ppo/ray_trainer.py", line 141, in _check_resource_available
    raise ValueError(f"Total available GPUs {total_available_gpus} is less than total desired GPUs {total_required_gpus}")
ValueError: Total available GPUs 0 is less than total desired GPUs 8
"""
    evs = _events(text)
    (tb,) = [e for e in evs if e.kind == "traceback"]
    assert tb.fields["exc_type"] == "ValueError" and tb.fields["exc_line"] == 7
    assert any("ray_trainer.py:141" in f for f in tb.fields["frames"])
    assert {"exception", "ray_unschedulable"} <= {e.kind for e in evs}


def test_oom_numbers_and_other_event_kinds():
    text = """torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 938.00 MiB. GPU 0 has a total capacity of 79.19 GiB of which 49.44 MiB is free. Process 12345 has 948.00 MiB memory in use.
[2025-03-29 18:56:25 TP0] Scheduler hit an exception: Traceback (most recent call last):
torch.AcceleratorError: CUDA error: an illegal memory access was encountered
[2025-03-29 18:56:26] Received sigquit from a child process. It usually means the child failed.
[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.
(autoscaler +9m40s) Warning: The following resource request cannot be scheduled right now: {'CPU': 1.0, 'GPU': 1.0}.
ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.
ValueError: This model's maximum context length is 4096 tokens. However, you requested 5120 tokens.
RuntimeError: The server socket has failed to listen on any local network address. port: 46571, useIpv6: 0, code: -98, name: EADDRINUSE
torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
"""
    evs = _events(text)
    kinds = {e.kind for e in evs}
    assert {"cuda_oom", "engine_crash", "illegal_memory_access", "sigquit", "nccl_timeout", "ray_unschedulable",
            "ray_host_oom", "context_length", "port_in_use", "compile_cache_error"} <= kinds
    oom = next(e for e in evs if e.kind == "cuda_oom")
    assert oom.fields == {"tried_gib": 0.916, "total_gib": 79.19, "free_gib": 0.048}
    assert not [e for e in evs if e.kind == "cuda_oom" and e.line == 7], "Ray host OOM is not a CUDA OOM"
    assert next(e for e in evs if e.kind == "port_in_use").fields["port"] == 46571


def test_ray_host_oom_in_every_wording_and_escaped_context_error():
    """Ray's memory-monitor text changed in 2.55 ("N worker(s) were killed ...") and 2.56 ("Memory usage NB
    exceeded threshold of NB"); its advice line is the same in every release. A JSON error body pasted with
    ``model\\'s`` is still a context-length error."""
    lines = ["(raylet) 1 worker(s) were killed due to the node running low on memory. Memory on the node was 60GB",
             "Memory usage 64424509440B exceeded threshold of 61203283968B (0.95 of total)",
             "(raylet) Refer to the documentation on how to address the out of memory issue: "
             "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html.",
             '{"object":"error","message":"The input (61709 tokens) is longer than the model\\\'s context length'
             ' (40960 tokens).","type":"BadRequestError","param":null,"code":400}']
    for i, line in enumerate(lines):
        kinds = {e.kind for e in _events(line)}
        assert ("context_length" if i == 3 else "ray_host_oom") in kinds, (line, kinds)


def test_json_decode_error_outside_compile_context_is_not_a_cache_error():
    assert not [e for e in _events("json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)\n")
                if e.kind == "compile_cache_error"]


# --- config facts ------------------------------------------------------------------------------

def test_verl_overrides_flags_and_continuations():
    fs = _facts("""+ python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    +actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \\
    ++trainer.n_gpus_per_node=4 \\
    actor_rollout_ref.rollout.free_cache_engine=False
""")
    assert fs.value("algorithm.adv_estimator") == "grpo"
    assert fs.get("ppo_micro_batch_size_per_gpu").line == 3
    assert fs.value("trainer.n_gpus_per_node") == 4
    assert fs.value("rollout.free_cache_engine") is False


def test_shell_flags_bash_arrays_and_cluster_comment():
    fs = _facts("""# cluster: 2 nodes, 4 x A100 80GB each
ROLLOUT_ARGS=(
   --rollout-batch-size 16
   --n-samples-per-prompt 8
   --rollout-stop-token-ids 151645 151643
)
ray start --head --node-ip-address 0.0.0.0 --num-gpus 4
python3 train.py ${ROLLOUT_ARGS[@]} --colocate --actor-num-gpus-per-node 4
""")
    assert fs.value("cluster.gpus_per_node") == 4 and fs.value("cluster.nodes") == 2
    assert fs.value("n_samples_per_prompt") == 8 and fs.get("n_samples_per_prompt").line == 4
    assert fs.value("rollout_stop_token_ids") == [151645, 151643]
    assert fs.value("ray_start.node_ip_address") == "0.0.0.0"
    assert fs.value("colocate") is True and fs.value("actor_num_gpus_per_node") == 4


def test_json_yaml_documents_with_line_numbers():
    fs = _facts('{\n  "gradient_clipping": 0.0,\n  "zero_optimization": {"stage": 3}\n}\n', whole=True, hint="json")
    assert fs.get("gradient_clipping").line == 2 and fs.value("zero_optimization.stage") == 3
    fs = _facts("actor_rollout_ref:\n  actor:\n    entropy_coeff: 0.001   # inherited\n", whole=True, hint="yaml")
    assert fs.get("actor.entropy_coeff").line == 3 and fs.value("entropy_coeff") == 0.001


def test_kwargs_repr_deepspeed_print_and_pip_versions():
    fs = _facts("GRPOConfig(output_dir='runs/x', max_completion_length=256, bf16=True, vllm_mode='colocate')\n"
                "[2024-03-08 16:40:12,551] [INFO] [config.py:984:print]   gradient_clipping ............ 0.0\n"
                "vllm         0.3.0\n")
    assert fs.value("max_completion_length") == 256 and fs.value("vllm_mode") == "colocate"
    assert fs.value("gradient_clipping") == 0.0 and fs.value("versions.vllm") == "0.3.0"


# --- detectors ---------------------------------------------------------------------------------

def test_spike_growth_and_nonfinite():
    t = _metrics("\n".join(f"step:{i} - actor/grad_norm:{v}" for i, v in enumerate([0.4, 0.5, 0.45, 9.0, 30.0, "nan"], 1)))
    assert spike(t).lines[1] == 4
    assert growth(t, factor=5)
    nf = nonfinite(t)
    assert nf.lines == [6] and "step 6" in nf.message
    calm = _metrics("\n".join(f"step:{i} - actor/grad_norm:{v}" for i, v in enumerate([0.4, 0.5, 0.45, 0.5], 1)))
    assert spike(calm) is None and growth(calm) is None and nonfinite(calm) is None


def test_step1_mismatch_zero_reward_length_cap_threshold_flat():
    t = _metrics("step 1: {'train/ppo_kl': 0.0, 'train/kl_loss': 0.0}\nrollout 1: {'rollout/log_probs': -0.12, 'rollout/ref_log_probs': -0.12}\n")
    assert step1_mismatch(t) is None
    t = _metrics("rollout 1: {'rollout/log_probs': -0.12, 'rollout/ref_log_probs': -0.31}\n")
    assert "expected equal" in step1_mismatch(t).message
    t = _metrics("{'reward': 0.0, 'frac_reward_zero_std': 1.0, 'completions/clipped_ratio': 1.0}\n" * 3)
    assert zero_reward(t) and length_cap(t)
    t = _metrics("step:1 - training/rollout_probs_diff_mean:0.002\nstep:2 - training/rollout_probs_diff_mean:0.04\n")
    assert threshold(t, keys="rollout_probs_diff_mean", op="gt", value=0.01).lines == [2]
    t = _metrics("\n".join(f"step:{i} - actor/pg_loss:0.5" for i in range(1, 8)))
    assert flat(t, window=6)


# --- the multi-pattern prefilter ----------------------------------------------------------------

def test_prefilter_never_hides_a_match():
    """Every pattern either gets candidate lines that include all true matches, or is reported as not
    prefilterable (the caller then scans every line): relaxing may over-approximate, never under."""
    import re

    from grpo_debug.skills.loader import default_rules
    from grpo_debug.tools.engine.prefilter import lines_matching
    from grpo_debug.tools.triage import rule_patterns

    pats = rule_patterns(default_rules())
    texts = [ex.input for r in default_rules() for ex in r.examples for ex in [ex]]
    lines = [ln for t in texts for ln in t.splitlines()]
    hits = lines_matching(pats, lines, min_bytes=0)
    assert hits, 'the prefilter took no pattern'
    for k, (p, ci) in enumerate(pats):
        truth = {i for i, ln in enumerate(lines) if re.search(p, ln, re.I if ci else 0)}
        if k in hits:
            assert truth <= hits[k], p


def test_streamed_triage_matches_full_triage(tmp_path):
    """The streaming path (large or compressed files) finds what the in-memory path finds."""
    import gzip

    from grpo_debug.tools.triage import triage

    text = (Path(__file__).resolve().parents[1] / "tools" / "examples" / "verl_grpo_nan.log").read_text()
    p = tmp_path / "run.log.gz"
    with gzip.open(p, "wt") as fh:
        fh.write(text)
    full = triage(text=text)
    streamed = triage(path=p)
    assert [f.symptom for f in streamed.findings] == [f.symptom for f in full.findings]
    assert [[e.line for e in f.evidence] for f in streamed.findings] == [[e.line for e in f.evidence] for f in full.findings]
    assert "streamed" in streamed.coverage.skipped[0]


def test_zstd_log_is_read(tmp_path):
    zstd = __import__("pytest").importorskip("zstandard")
    from grpo_debug.tools.triage import triage

    p = tmp_path / "run.log.zst"
    p.write_bytes(zstd.ZstdCompressor().compress(b"step:1 - actor/grad_norm:0.4\nstep:2 - actor/grad_norm:nan\n"))
    r = triage(path=p)
    assert r.findings[0].symptom == "nan_inf" and r.findings[0].evidence[0].line == 2


def test_prefilter_keeps_caseless_and_anchored_events_in_large_logs():
    """Logs above the prefilter threshold: (?i:...) patterns stay caseless, ^ anchors at every line."""
    from grpo_debug.tools.engine.prefilter import PREFILTER_MIN_BYTES

    filler = "INFO chatter line with nothing special in it at all\n" * (PREFILTER_MIN_BYTES // 50 + 10)
    text = filler + "Loss is NaN detected at step 5\n# ... no further output, hangs\n" + filler
    assert {"nan_reported", "hang_note"} <= {e.kind for e in _events(text)}


def test_stream_keeps_traceback_frames_across_chunk_boundaries(monkeypatch):
    import io

    import grpo_debug.tools.engine.large_logs as st

    monkeypatch.setattr(st, "CHUNK", 4096)
    monkeypatch.setattr(st, "HEAD_LINES", 0)
    monkeypatch.setattr(st, "TAIL_LINES", 0)
    lines = ["x" * 60 for _ in range(66)] + ["Traceback (most recent call last):"]
    lines += [f'  File "f.py", line {i}, in g' for i in range(12)] + ["ValueError: bad"] + ["y" * 60] * 200
    sl = st.scan_stream(io.BytesIO(("\n".join(lines) + "\n").encode()))
    kept = {n for n, _ in sl.lines}
    assert set(range(67, 81)) <= kept and sl.total_lines == len(lines)


def test_overflow_line_with_garbage_numbers_does_not_crash():
    t = _metrics("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: ., reducing to e\n")
    assert "deepspeed/loss_scale" not in t.series


def test_runtime_logger_records_are_not_settings_but_config_prints_are():
    """key=value pairs in a tagged logger record (vLLM's scheduler DEBUG lines a newcomer's log had by the
    thousand) are runtime values, not config facts; a record that says it prints a config still gives its
    settings, and plain key=value lines too."""
    from grpo_debug.tools.engine.facts import extract_facts
    from grpo_debug.tools.engine.normalize import normalize

    text = ("(WorkerDict pid=23412, ip=10.0.3.18) DEBUG 12-01 04:12:50 [scheduler.py:1290] seq_group finished, "
            "reason=length, num_generated_tokens=1635, logprob=-4.2008\n"
            "INFO 12-01 04:12:50 [core.py:70] Initializing a V1 LLM engine (v0.10.2) with config: "
            "model='Qwen/Qwen2.5-7B', tokenizer='Qwen/Qwen2.5-7B', max_seq_len=4096\n"
            "lr=1e-5 clip_grad=1.0\n")
    keys = {f.key for f in extract_facts(normalize(text)).facts}
    assert {"model", "max_seq_len", "lr", "clip_grad"} <= keys
    assert not keys & {"reason", "num_generated_tokens", "logprob"}
