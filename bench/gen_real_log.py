"""Generate a realistic verl + SGLang (or vLLM) GRPO console log with faults planted at known lines.

What a new user's log looks like (issue 15), as the Ray driver prints it: every worker line carries a Ray
actor prefix in cyan (``\\x1b[36m(WorkerDict pid=1234, ip=10.0.0.2)\\x1b[0m``); about half the lines are the
rollout engine's scheduler chatter (SGLang ``[2026-11-30 12:00:00 TP0] Decode batch. ...`` or vLLM
``Engine 000: Avg prompt throughput ...``), then HTTP access lines, FutureWarnings, tqdm bars redrawn with
``\\r`` on one physical line, validation prints and one verl metric line per step (``--ranks N``: N lines per
step, one per rank).

Planted, mid-file (never only in the head or tail): a CUDA OOM traceback (~35% of the steps), an NCCL
watchdog timeout (~55%), a late grad-norm climb (~72%, doubling each step up to 128.0) and, a few steps
after, the first ``nan`` of ``actor/grad_norm`` (it stays nan to the end). ``<out>.planted.json`` holds each
planted line number (keys ending in ``_line``, 1-based, counted in ``\\n``) and the expected answers.

Sources of the line formats (text kept exactly, numbers are placeholders):
  - SGLang: sgl-project/sglang python/sglang/srt/managers/scheduler_metrics_mixin.py, ``log_prefill_stats`` /
    ``log_decode_stats`` ("Prefill batch. #new-seq: ..." / "Decode batch. #running-req: ..., #token: ...,
    token usage: ..., cuda graph: ..., gen throughput (token/s): ..., #queue-req: ..., "); the rank prefix
    ``[%(asctime)s{prefix}]`` of ``configure_logger`` (prefix " TP0", " DP1 TP3") and the uvicorn access line
    as in /work/shared/reference/log_formats.md section 6.1.
  - vLLM: vllm-project/vllm vllm/v1/metrics/loggers.py, ``LoggingStatLogger.log`` ("Engine %03d: Avg prompt
    throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, Waiting: %d reqs,
    GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%"); logger format ``%(levelname)s %(asctime)s
    [%(fileinfo)s:%(lineno)d]`` (log_formats.md 6.2; the line number after loggers.py is a placeholder).
  - verl: LocalLogger ``step:N - key:value`` (verl/utils/logger/aggregate_logger.py, pformat values), key set
    from log_formats.md 1.2; ``print("validation generation end")`` (verl/trainer/ppo/ray_trainer.py);
    ``print(f"WARN: rank {torch.distributed.get_rank()} grad_norm is not finite: {grad_norm}")``
    (verl/workers/actor/dp_actor.py); the "Training Progress" tqdm bar of ``fit()``.
  - PyTorch: the OOM message of c10/cuda/CUDACachingAllocator.cpp (pytorch/pytorch); the watchdog text of
    torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp ``WorkNCCL::checkTimeout`` (logPrefix() "[Rank N] " +
    "Watchdog caught collective operation timeout: " + ``WorkNCCL(SeqNum=, OpType=, NumelIn=, NumelOut=,
    Timeout(ms)=)`` + " ran for N milliseconds before timing out."), the glog prefix as pasted in
    LlamaFactory #7396; the FSDP FutureWarning of torch/distributed/fsdp/fully_sharded_data_parallel.py.
  - Ray: prefixes, colours and " [repeated 7x across cluster]" (log_formats.md 0.1).

Usage: python bench/gen_real_log.py OUT --mb 160 [--ranks 8] [--engine sglang|vllm] [--seed 0]
       [--metric-lines N]   (N metric lines in all; default one step per ~40 kB, as bench/gen_log.py)
       [--value-format repr|3f]  (verl's full-repr values, or the older 3 decimals: shorter metric lines)
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import random

CYAN, RESET = "\x1b[36m", "\x1b[0m"
TS_FULL, TS_VLLM = "\x01", "\x02"  # placeholders, replaced per time segment: "2026-11-30 12:00:00", "11-30 12:00:00"
START = _dt.datetime(2026, 11, 30, 12, 0, 0)
STEP_SECONDS = 60
SEGMENTS = 6  # time segments per step (distinct timestamps)
BYTES_PER_STEP = 40_000  # default density: one step per ~40 kB (bench/gen_log.py's)
TASK_RUNNER = 1234
SITE = "/usr/local/lib/python3.10/dist-packages"

CLIMB_AT, OOM_AT, NCCL_AT = 0.72, 0.35, 0.55  # fractions of the steps
CLIMB_STEPS = 8  # grad_norm doubles each step from 1.0 to 128.0, then nan
GRAD_NORM_MAX = 128.0


def prefix(name: str, pid: int, ip: str | None = None) -> str:
    """Ray's coloured remote-output prefix: ``\\x1b[36m(Name pid=N, ip=I)\\x1b[0m `` (ip only off the head node)."""
    return f"{CYAN}({name} pid={pid}{', ip=' + ip if ip else ''}){RESET} "


def _servers(rng: random.Random, engine: str) -> list[tuple[str, str]]:
    """(Ray prefix, SGLang rank tag) of the rollout servers: 4 servers, TP-only and DP-attention ones."""
    name = "SGLangHttpServer" if engine == "sglang" else "vLLMHttpServer"
    out = []
    for s in range(4):
        pre = prefix(name, rng.randint(20000, 60000), f"10.0.0.{s + 1}")
        tags = [" TP0"] if s % 2 == 0 else [f" DP{d} TP{d}" for d in range(8)]
        out += [(pre, t) for t in tags]
    return out


def _sglang_pool(rng: random.Random, n: int = 1200) -> tuple[list[str], list[bool]]:
    """Scheduler chatter of SGLang servers (decode ~60%, prefill ~12%, access ~28%) and which lines are decode."""
    servers = _servers(rng, "sglang")
    pool, is_decode = [], []
    for i in range(n):
        pre, tag = rng.choice(servers)
        r = rng.random()
        if r < 0.60:
            run = rng.randint(1, 256)
            tok = run * rng.randint(300, 1800)
            pool.append(f"{pre}[{TS_FULL}{tag}] Decode batch. #running-req: {run}, #token: {tok}, token usage: "
                        f"{min(tok / 400_000, 0.99):.2f}, cuda graph: True, gen throughput (token/s): "
                        f"{rng.uniform(300, 9000):.2f}, #queue-req: {rng.choice((0, 0, 0, rng.randint(1, 64)))}, ")
            is_decode.append(True)
            continue
        if r < 0.72:
            seq = rng.randint(1, 64)
            pool.append(f"{pre}[{TS_FULL}{tag}] Prefill batch. #new-seq: {seq}, #new-token: {seq * rng.randint(80, 900)}, "
                        f"#cached-token: {rng.randint(0, 20000)}, token usage: {rng.uniform(0, 0.9):.2f}, "
                        f"#running-req: {rng.randint(0, 256)}, #queue-req: {rng.randint(0, 32)}, ")
        else:
            pool.append(f'{pre}[{TS_FULL}] INFO:     127.0.0.1:{rng.randint(30000, 65000)} - "POST /generate HTTP/1.1" 200 OK')
        is_decode.append(False)
    return pool, is_decode


def _vllm_pool(rng: random.Random, n: int = 1200) -> tuple[list[str], list[bool]]:
    """vLLM servers' periodic stats lines (~62%) and access lines; which lines are the stats chatter."""
    servers = sorted({pre for pre, _ in _servers(rng, "vllm")})
    pool, is_decode = [], []
    for i in range(n):
        pre = rng.choice(servers)
        if rng.random() < 0.62:
            pool.append(f"{pre}INFO {TS_VLLM} [loggers.py:123] Engine {rng.randint(0, 7):03d}: Avg prompt throughput: "
                        f"{rng.uniform(0, 20000):.1f} tokens/s, Avg generation throughput: {rng.uniform(300, 9000):.1f} "
                        f"tokens/s, Running: {rng.randint(0, 256)} reqs, Waiting: {rng.randint(0, 64)} reqs, GPU KV cache "
                        f"usage: {rng.uniform(0, 95):.1f}%, Prefix cache hit rate: {rng.uniform(0, 80):.1f}%")
            is_decode.append(True)
        else:
            pool.append(f'{pre}INFO:     127.0.0.1:{rng.randint(30000, 65000)} - "POST /v1/completions HTTP/1.1" 200 OK')
            is_decode.append(False)
    return pool, is_decode


# verl's console keys in dict order (log_formats.md 1.2 and the verl #7412 line); grad_norm and the
# training/* keys are written per step, the rest comes from pools of rendered variants.
KEYS_A = ["global_seqlen/min", "global_seqlen/max", "global_seqlen/minmax_diff", "global_seqlen/balanced_min",
          "global_seqlen/balanced_max", "global_seqlen/mean", "actor/entropy", "perf/mfu/actor_infer",
          "actor/pg_clipfrac", "actor/ppo_kl", "actor/pg_clipfrac_lower", "actor/pg_loss", "actor/kl_loss",
          "actor/kl_coef", "actor/loss"]
KEYS_B = ["actor/perf/max_memory_allocated_gb", "actor/perf/max_memory_reserved_gb",
          "actor/perf/cpu_memory_used_gb", "actor/lr", "perf/mfu/actor"]
KEYS_C = ["critic/score/mean", "critic/score/max", "critic/score/min", "critic/rewards/mean", "critic/rewards/max",
          "critic/rewards/min", "critic/advantages/mean", "critic/advantages/max", "critic/advantages/min",
          "critic/returns/mean", "critic/returns/max", "critic/returns/min", "response_length/mean",
          "response_length/max", "response_length/min", "response_length/clip_ratio", "response/aborted_ratio",
          "prompt_length/mean", "prompt_length/max", "prompt_length/min", "prompt_length/clip_ratio",
          "timing_s/start_profile", "timing_s/gen", "timing_s/reward", "timing_s/old_log_prob", "timing_s/ref",
          "timing_s/adv", "timing_s/update_actor", "timing_s/update_weights", "timing_s/step",
          "timing_s/stop_profile", "timing_per_token_ms/gen", "timing_per_token_ms/ref", "timing_per_token_ms/adv",
          "timing_per_token_ms/update_actor", "perf/total_num_tokens", "perf/time_per_step", "perf/throughput"]
VAL_KEYS = ["val-core/openai/gsm8k/acc/mean@1", "val-aux/openai/gsm8k/reward/mean@1",
            "val-aux/openai/gsm8k/score/mean@1"]
INT_KEYS = {k for k in KEYS_A + KEYS_C if k.startswith(("global_seqlen/", "perf/total_num_tokens"))} | {
    "response_length/max", "response_length/min", "prompt_length/max", "prompt_length/min"}


def _value(rng: random.Random, key: str) -> str:
    """One value as verl's pformat prints it (full repr; ints for counts)."""
    if key in INT_KEYS:
        return str(rng.randint(1000, 600_000) if key.startswith(("global", "perf")) else rng.randint(20, 4096))
    if key == "actor/lr":
        return "2e-06"
    if key == "actor/kl_coef":
        return "0.0010000000000000002"
    if key.startswith(("critic/score", "critic/rewards", "response", "prompt")) and "clip" not in key:
        return repr(rng.uniform(-1, 1) if "score" in key or "reward" in key else rng.uniform(0.0, 1.0) * 1000)
    return repr(rng.uniform(0.0, 1.0) * (100 if key.startswith(("timing", "perf", "actor/perf")) else 0.1))


def fmt_value(v: str | float, fmt: str) -> str:
    """verl's console value: ``repr`` (pformat, verl since 2025-07) or ``3f`` (``f"{v:.3f}"``, verl before)."""
    if fmt == "3f":
        return f"{float(v):.3f}"
    return v if isinstance(v, str) else repr(v)


def _metric_parts(rng: random.Random, fmt: str, n: int = 97) -> tuple[list[str], list[str], list[str]]:
    """Rendered variants of the key runs before grad_norm (A), between it and training/* (B) and after (C)."""
    def render(keys: list[str]) -> str:
        vals = {k: _value(rng, k) for k in keys}
        if "global_seqlen/min" in vals:  # consistent sequence-balancing figures: min <= mean <= max
            lo, hi = sorted(rng.randint(300_000, 600_000) for _ in range(2))
            vals.update({"global_seqlen/min": str(lo), "global_seqlen/max": str(hi), "global_seqlen/minmax_diff":
                         str(hi - lo), "global_seqlen/balanced_min": str((lo + hi) // 2),
                         "global_seqlen/balanced_max": str((lo + hi) // 2 + 1), "global_seqlen/mean": repr((lo + hi) / 2)})
        return " - ".join(f"{k}:{fmt_value(v, fmt)}" for k, v in vals.items())
    return ([render(KEYS_A) for _ in range(n)], [render(KEYS_B) for _ in range(n)], [render(KEYS_C) for _ in range(n)])


def _grad_norm(step: int, climb: int, nan_step: int, rng: random.Random) -> float:
    """grad_norm: baseline 0.30-0.45, doubling from 1.0 at ``climb`` (128.0 at ``nan_step - 1``), nan from ``nan_step``."""
    if step >= nan_step:
        return float("nan")
    if step >= climb:
        return float(2 ** (step - climb))
    return rng.uniform(0.30, 0.45)


def _bar(step: int, steps: int, elapsed_s: int) -> str:
    """One tqdm redraw of verl's "Training Progress" bar (the format of tqdm's default bar)."""
    pct = step * 100 // steps
    fill = step * 10 // steps
    bar = "\u2588" * fill + (" " * (10 - fill))
    left = (steps - step) * STEP_SECONDS

    def hms(s: int) -> str:
        h, r = divmod(s, 3600)
        return f"{h}:{r // 60:02d}:{r % 60:02d}" if h else f"{r // 60:02d}:{r % 60:02d}"
    return f"Training Progress: {pct:3d}%|{bar}| {step}/{steps} [{hms(elapsed_s)}<{hms(left)}, {STEP_SECONDS:.2f}s/it]"


def _oom_block(pre: str) -> list[str]:
    """A CUDA OOM traceback from the actor update as a Ray worker prints it; the last line is the error."""
    frames = [
        (f"{SITE}/verl/single_controller/ray/base.py", 701, "func", "return getattr(self.worker_dict[key], name)(*args, **kwargs)"),
        (f"{SITE}/verl/workers/fsdp_workers.py", 866, "update_actor", "metrics = self.actor.update_policy(data=data)"),
        (f"{SITE}/verl/workers/actor/dp_actor.py", 470, "update_policy", "loss.backward()"),
        (f"{SITE}/torch/_tensor.py", 626, "backward", "torch.autograd.backward("),
        (f"{SITE}/torch/autograd/__init__.py", 347, "backward", "_engine_run_backward("),
        (f"{SITE}/torch/autograd/graph.py", 823, "_engine_run_backward",
         "return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass"),
    ]
    out = [pre + "Traceback (most recent call last):"]
    for path, no, fn, code in frames:
        out += [f'{pre}  File "{path}", line {no}, in {fn}', f"{pre}    {code}"]
    out.append(pre + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.82 GiB. GPU 0 has a total capacity "
               "of 79.19 GiB of which 1.47 GiB is free. Process 4242 has 77.71 GiB memory in use. Of the allocated "
               "memory 71.02 GiB is allocated by PyTorch, and 5.12 GiB is reserved by PyTorch but unallocated. If "
               "reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
               "to avoid fragmentation.  See documentation for Memory Management  "
               "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
    return out


def _nccl_block(pre: str, when: _dt.datetime) -> list[str]:
    """The ProcessGroupNCCL watchdog timeout (glog lines of rank 3); the first line is the timeout."""
    g = when.strftime("%m%d %H:%M:%S")
    return [f"{pre}[rank3]:[E{g}.408271257 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=48211, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
            "600043 milliseconds before timing out.",
            f"{pre}[rank3]:[E{g}.465150152 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank 3] Exception "
            "(either an error or timeout) detected by watchdog at work: 48211, last enqueued NCCL work: 48212, last "
            "completed NCCL work: 48210."]


FSDP_WARNING = (f"{SITE}/torch/distributed/fsdp/fully_sharded_data_parallel.py:690: FutureWarning: FSDP.state_dict_type()"
                " and FSDP.set_state_dict_type() are being deprecated. Please use APIs, get_state_dict() and "
                "set_state_dict(), which can support different parallelisms, FSDP1, FSDP2, DDP. API doc: "
                "https://pytorch.org/docs/stable/distributed.checkpoint.html#torch.distributed.checkpoint.state_dict."
                "get_state_dict .Tutorial: https://pytorch.org/tutorials/recipes/distributed_checkpoint_recipe.html .")


def _head(engine: str, workers: list[str], steps: int) -> list[str]:
    """Launch command and start-up lines (model load, server ready, initial validation, step 0)."""
    tr = prefix("TaskRunner", TASK_RUNNER)
    srv = prefix("SGLangHttpServer" if engine == "sglang" else "vLLMHttpServer", 23456, "10.0.0.1")
    out = [f"python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=1024 "
           f"actor_rollout_ref.rollout.name={engine} actor_rollout_ref.rollout.mode=async actor_rollout_ref.rollout.n=8 "
           "actor_rollout_ref.actor.ppo_mini_batch_size=256 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 "
           f"actor_rollout_ref.actor.optim.lr=2e-6 trainer.n_gpus_per_node=8 trainer.nnodes=4 trainer.total_training_steps={steps}"]
    out += [w + FSDP_WARNING for w in workers[:2]] + [workers[0] + "  warnings.warn("]
    out += [prefix("AgentLoopWorker", 31000 + i, "10.0.0.2") + "Performing class-level ToolAgentLoop initialization"
            for i in range(2)]
    if engine == "sglang":
        out += [f"{srv}[2026-11-30 11:58:01 TP0] Load weight begin. avail mem=44.00 GB",
                f"{srv}[2026-11-30 11:58:05 TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, "
                "avail mem=28.91 GB, mem usage=15.09 GB.",
                f"{srv}[2026-11-30 11:58:05 TP0] KV Cache is allocated. #tokens: 183133, K size: 11.18 GB, V size: 11.18 GB",
                f"{srv}[2026-11-30 11:58:06 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=5.00 GB",
                f"{srv}[2026-11-30 11:58:30] The server is fired up and ready to roll!"]
    else:
        out += [f"{srv}INFO 11-30 11:58:05 [default_loader.py:267] Loading weights took 1.13 seconds",
                f"{srv}INFO 11-30 11:58:20 [abstract.py:330] It took 0.273367 seconds to wake up tags {{'weights', 'kv_cache'}}."]
    out += [f"{tr}(\"Initial validation metrics: {{'val-core/openai/gsm8k/acc/mean@1': 0.5083, \"",
            f"{tr} \"'val-aux/openai/gsm8k/reward/mean@1': 0.5651}}\")",
            f"{tr}step:0 - val-core/openai/gsm8k/acc/mean@1:0.5083 - val-aux/openai/gsm8k/reward/mean@1:0.5651 - "
            "val-aux/openai/gsm8k/score/mean@1:0.5651"]
    return out


class _Out:
    """Buffered binary writer that counts lines (``\\n``) and bytes; ``add`` returns the first line's number."""

    def __init__(self, fh, flush_bytes: int = 8 * 2**20):
        self.fh, self.flush_bytes = fh, flush_bytes
        self.buf: list[bytes] = []
        self.pending = self.bytes = self.lines = 0

    def add(self, text: str, n: int) -> int:
        """Append ``text`` (``n`` lines, each ending in ``\\n``); returns the 1-based number of its first line."""
        b = text.encode("utf-8")
        self.buf.append(b)
        self.pending += len(b)
        self.bytes += len(b)
        first = self.lines + 1
        self.lines += n
        if self.pending >= self.flush_bytes:
            self.flush()
        return first

    def lines_(self, lines: list[str]) -> int:
        return self.add("\n".join(lines) + "\n", len(lines)) if lines else self.lines + 1

    def flush(self) -> None:
        self.fh.write(b"".join(self.buf))
        self.buf, self.pending = [], 0


class _Run:
    """The planted schedule and the per-run pools (everything drawn from one seeded Random)."""

    def __init__(self, size: int, ranks: int, engine: str, seed: int, metric_lines: int | None, fmt: str):
        if engine not in ("sglang", "vllm"):
            raise ValueError(f"engine must be sglang or vllm, not {engine!r}")
        if fmt not in ("repr", "3f"):
            raise ValueError(f"value format must be repr or 3f, not {fmt!r}")
        self.fmt = fmt
        self.rng = rng = random.Random(seed)
        self.ranks, self.engine = max(1, ranks), engine
        self.steps = max(60, (metric_lines // self.ranks) if metric_lines else size // BYTES_PER_STEP)
        self.climb = int(self.steps * CLIMB_AT)
        self.nan_step = self.climb + CLIMB_STEPS
        self.oom_step, self.nccl_step = int(self.steps * OOM_AT), int(self.steps * NCCL_AT)
        self.val_every = max(10, self.steps // 20)
        self.pool, _ = (_sglang_pool if engine == "sglang" else _vllm_pool)(rng)
        self.decode_mark = "] Decode batch. " if engine == "sglang" else ": Avg prompt throughput: "
        self.parts = _metric_parts(rng, fmt)
        self.workers = [prefix("WorkerDict", rng.randint(2000, 19999), f"10.0.0.{1 + r // 8}")
                        for r in range(max(self.ranks, 8))]
        self.metric_prefixes = [prefix("TaskRunner", TASK_RUNNER)] if self.ranks == 1 else self.workers[:self.ranks]
        self.task_runner = prefix("TaskRunner", TASK_RUNNER)

    def metric_line(self, pre: str, step: int, gn: float) -> str:
        """One verl console metric line (LocalLogger: ``step:N - key:value - ...``)."""
        rng, (a, b, c) = self.rng, self.parts
        val = ""
        if step % self.val_every == 0:
            val = " - " + " - ".join(f"{k}:{fmt_value(rng.uniform(0.4, 0.7), self.fmt)}" for k in VAL_KEYS)
        f = self.fmt
        return (f"{pre}step:{step} - {rng.choice(a)} - actor/grad_norm:{fmt_value(gn, f)} - {rng.choice(b)} - "
                f"training/global_step:{fmt_value(step, f)} - training/epoch:{fmt_value(step * 8 // self.steps, f)}{val}"
                f" - {rng.choice(c)}")

    def fixed_bytes_per_step(self) -> int:
        """Bytes a step writes besides the engine chatter (metric lines, bar, warnings): for the size budget."""
        one = len(self.metric_line(self.metric_prefixes[0], self.steps, 0.3).encode())
        return one * self.ranks + 2 * len(FSDP_WARNING) + 300

    def pool_line_bytes(self) -> float:
        """Mean size of one chatter line once its timestamp is filled in."""
        return sum(len(p.encode()) + 20 * (TS_FULL in p or TS_VLLM in p) for p in self.pool) / len(self.pool)


def _write_step(run: _Run, out: _Out, step: int, n_chatter: int, planted: dict) -> None:
    """One training step: chatter in time segments (OOM / NCCL mid-step where planted), validation print,
    non-finite warnings, the FSDP warning, the metric line(s) and the progress bar."""
    rng, t0 = run.rng, START + _dt.timedelta(seconds=step * STEP_SECONDS)
    chosen = rng.choices(run.pool, k=n_chatter)
    for s in range(SEGMENTS):
        when = t0 + _dt.timedelta(seconds=s * STEP_SECONDS // SEGMENTS)
        if s == SEGMENTS // 2 and step == run.oom_step:
            planted["oom_line"] = out.lines_(_oom_block(run.workers[2])) + 13
        if s == SEGMENTS // 2 and step == run.nccl_step:
            planted["nccl_line"] = out.lines_(_nccl_block(run.workers[3], when))
        seg = chosen[s * n_chatter // SEGMENTS:(s + 1) * n_chatter // SEGMENTS]
        if seg:
            text = ("\n".join(seg) + "\n").replace(TS_FULL, when.strftime("%Y-%m-%d %H:%M:%S"))
            text = text.replace(TS_VLLM, when.strftime("%m-%d %H:%M:%S"))
            planted["decode_lines"] += text.count(run.decode_mark)
            out.add(text, len(seg))
    tr, lines = run.task_runner, []
    if step % run.val_every == 0:
        lines.append(tr + "validation generation end")
    gn = _grad_norm(step, run.climb, run.nan_step, rng)
    if gn != gn:  # nan
        lines += [run.workers[r] + f"WARN: rank {r} grad_norm is not finite: tensor(nan, device='cuda:{r % 8}')"
                  for r in range(run.ranks)]
    w = run.workers[step % len(run.workers)]
    lines += [w + FSDP_WARNING + " [repeated 7x across cluster]", w + "  warnings.warn( [repeated 7x across cluster]"]
    first = out.lines_(lines) + len(lines)
    out.lines_([run.metric_line(p, step, gn) for p in run.metric_prefixes])
    planted["metric_lines"] += len(run.metric_prefixes)
    if step == run.climb:
        planted["climb_line"] = first
    if step == run.nan_step:
        planted["nan_line"] = first
        planted["nan_warning_at"] = first - len(lines) + (step % run.val_every == 0)
    el = step * STEP_SECONDS
    out.lines_([tr + "\r" + _bar(step, run.steps, el - 1) + "\r" + _bar(step, run.steps, el)])


def generate(path: str, mb: float = 160, *, ranks: int = 1, engine: str = "sglang", seed: int = 0,
             metric_lines: int | None = None, value_format: str = "repr") -> dict:
    """Write the log to ``path`` and ``path + ".planted.json"``; return the planted dict.

    Args:
        path: output file (overwritten).
        mb: target size in MiB (the result is within a few kB, or larger when the metric lines alone exceed it).
        ranks: metric lines per step (one per rank, Ray prefixes of the rank's WorkerDict; 1 = the TaskRunner).
        engine: "sglang" or "vllm" (the rollout servers' chatter).
        seed: the Random seed: the same arguments give the same bytes.
        metric_lines: metric lines in all (steps = metric_lines // ranks, at least 60); default one step per 40 kB.
        value_format: "repr" (verl's pformat values, ~2.4 kB a line) or "3f" (older verl, ~1.4 kB a line).

    Returns:
        planted: ``climb_line``, ``nan_line``, ``oom_line``, ``nccl_line`` (1-based line numbers) and the expected
        answers ``climb_start_step``, ``first_nonfinite_step``, ``grad_norm_max`` (finite), ``grad_norm_max_step``,
        plus ``metric_lines``, ``lines``, ``bytes``, ``decode_lines``, ``steps``, ``engine``, ``ranks``, ``seed``.

    Raises:
        ValueError: an unknown engine or value format. OSError: the path cannot be written.
    """
    size = int(mb * 2**20)
    run = _Run(size, ranks, engine, seed, metric_lines, value_format)
    planted = {"climb_line": None, "nan_line": None, "oom_line": None, "nccl_line": None,
               "climb_start_step": run.climb, "first_nonfinite_step": run.nan_step, "grad_norm_max": GRAD_NORM_MAX,
               "grad_norm_max_step": run.nan_step - 1, "metric_lines": 0, "decode_lines": 0, "steps": run.steps,
               "engine": engine, "ranks": run.ranks, "seed": seed, "value_format": value_format}
    with open(path, "wb") as fh:
        out = _Out(fh)
        out.lines_(_head(engine, run.workers, run.steps))
        planted["metric_lines"] += 1  # step 0 (validation only)
        per_step = (size - out.bytes) / run.steps - run.fixed_bytes_per_step()
        lines_per_step = max(0.0, per_step / run.pool_line_bytes())
        carry = 0.0
        for step in range(1, run.steps + 1):
            carry += lines_per_step
            n = int(carry)
            carry -= n
            _write_step(run, out, step, n, planted)
        out.flush()
    planted.update(lines=out.lines, bytes=out.bytes, decode_fraction=round(planted["decode_lines"] / out.lines, 3))
    with open(path + ".planted.json", "w", encoding="utf-8") as fh:
        json.dump(planted, fh, indent=1)
    return planted


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=160, help="target size in MiB (default 160)")
    ap.add_argument("--ranks", type=int, default=1, help="metric lines per step, one per rank (default 1)")
    ap.add_argument("--engine", choices=("sglang", "vllm"), default="sglang")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--metric-lines", type=int, default=None,
                    help="metric lines in all (default: one step per ~40 kB of log)")
    ap.add_argument("--value-format", choices=("repr", "3f"), default="repr",
                    help="verl's metric values: full repr (since 2025-07, default) or 3 decimals (before)")
    a = ap.parse_args(argv)
    print(json.dumps(generate(a.out, a.mb, ranks=a.ranks, engine=a.engine, seed=a.seed, metric_lines=a.metric_lines,
                              value_format=a.value_format)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
