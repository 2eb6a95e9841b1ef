"""Generate a realistic large verl-style GRPO log with planted faults (for bench/bench_triage.py).

Lines: Ray-prefixed worker chatter with ANSI colour, tqdm progress noise, one verl metric line per step,
a grad-norm blow-up, a NaN near the end and an OOM traceback at the end. The planted line numbers are
written to <out>.planted.json so the benchmark can check they are found.
"""
from __future__ import annotations

import argparse
import json
import random

CHATTER = [
    "\x1b[36m(WorkerDict pid={pid}, ip=10.0.0.{ip})\x1b[0m INFO 06-01 12:00:{s:02d} [model_runner.py:1115] Loading model weights took 1.13 GB",
    "\x1b[36m(WorkerDict pid={pid}, ip=10.0.0.{ip})\x1b[0m /usr/lib/python3.10/site-packages/torch/distributed/fsdp/_state_dict_utils.py:773: FutureWarning: FSDP.state_dict_type() is being deprecated",
    "\x1b[36m(vLLMHttpServer pid={pid})\x1b[0m INFO:     10.0.0.{ip}:35262 - \"POST /generate HTTP/1.1\" 200 OK",
    "\x1b[36m(AgentLoopWorker pid={pid})\x1b[0m [rollout] request {r} finished, prompt_tokens=412 completion_tokens={c}",
    "Training Progress:  {p}%|####      | {i}/10000 [1:02:03<2:11:00,  2.14s/it]",
    "\x1b[36m(TaskRunner pid=1234)\x1b[0m validation generation end",
]


def metric_line(step: int, gn: str) -> str:
    return (f"\x1b[36m(TaskRunner pid=1234)\x1b[0m step:{step} - global_seqlen/mean:{5400 + step % 97}.0 - actor/entropy:0.91 - "
            f"actor/kl_loss:0.001 - actor/pg_loss:0.012 - actor/pg_clipfrac:0.002 - actor/ppo_kl:0.0001 - "
            f"actor/grad_norm:{gn} - actor/lr:1e-06 - critic/score/mean:0.31 - response_length/mean:212.4 - "
            f"response_length/clip_ratio:0.01 - timing_s/gen:29.6 - timing_s/update_actor:11.2")


OOM = """\x1b[36m(WorkerDict pid=4242, ip=10.0.0.2)\x1b[0m Traceback (most recent call last):
\x1b[36m(WorkerDict pid=4242, ip=10.0.0.2)\x1b[0m   File "/opt/venv/lib/python3.10/site-packages/verl/workers/actor/dp_actor.py", line 412, in update_policy
\x1b[36m(WorkerDict pid=4242, ip=10.0.0.2)\x1b[0m     loss.backward()
\x1b[36m(WorkerDict pid=4242, ip=10.0.0.2)\x1b[0m torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.12 GiB is free. Including non-PyTorch memory, this process has 78.06 GiB memory in use."""


def generate(path: str, size_mb: float, seed: int = 0) -> dict:
    rng = random.Random(seed)
    target = int(size_mb * 2**20)
    steps_total = max(50, target // 40_000)  # ~1 metric line per 40 kB of chatter
    spike_step, nan_step = int(steps_total * 0.8), int(steps_total * 0.95)
    planted = {"spike_line": None, "nan_line": None, "oom_line": None, "lines": 0}
    written, no, step = 0, 0, 1
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        def w(s: str) -> None:
            nonlocal written, no
            fh.write(s + "\n")
            written += len(s) + 1
            no += 1
        w("+ python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo actor_rollout_ref.rollout.n=8 "
          "actor_rollout_ref.actor.ppo_mini_batch_size=64 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 "
          "trainer.n_gpus_per_node=8 trainer.nnodes=1")
        per_step = max(1, (target // steps_total) // 110)
        while step <= steps_total:
            for _ in range(per_step):
                t = rng.choice(CHATTER)
                w(t.format(pid=rng.randint(1000, 9999), ip=rng.randint(1, 8), s=rng.randint(0, 59),
                           r=rng.randint(0, 10**6), c=rng.randint(10, 4000), p=step * 100 // steps_total, i=step))
            if step < spike_step:
                gn = f"{0.4 + rng.random() * 0.05:.3f}"
            elif step < nan_step:
                gn = f"{0.4 * (1.9 ** min(step - spike_step + 1, 60)):.3f}"
            else:
                gn = "nan"
            w(metric_line(step, gn))
            if step == spike_step + 3 and planted["spike_line"] is None:
                planted["spike_line"] = no
            if gn == "nan" and planted["nan_line"] is None:
                planted["nan_line"] = no
            step += 1
        for ln in OOM.split("\n"):
            w(ln)
        planted["oom_line"] = no
    planted["lines"] = no
    planted["bytes"] = written
    with open(path + ".planted.json", "w") as fh:
        json.dump(planted, fh)
    return planted


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=100)
    a = ap.parse_args()
    print(json.dumps(generate(a.out, a.mb)))
