"""Big realistic cases for the corpus and the agent-level evaluation (issue 23, "8 more are multi-run or big inputs
you build at realistic size"), each written with its ``expected.yaml`` (score_cases.py format) before any engine run.

    python bench/gen_big_cases.py OUT_DIR [--scale 1.0] [--only length,tb,sweep,healthy]

Cases (``OUT_DIR/<name>/input.*`` + ``expected.yaml``):

- ``big-verl-length-blowup-then-oom``: a verl GRPO console log (vLLM rollout chatter, Ray prefixes; ~150 MB at
  scale 1) of 3,200 steps. From step 2631 the responses run into the length cap (response_length/clip_ratio 0.02 ->
  0.9 within ~120 steps, mean length to the cap, score 0.67 -> 0.05, actor memory 44 -> 75 GB); at step 3105 the
  actor's backward runs out of CUDA memory, the other ranks' NCCL watchdogs time out and Ray reports the dead actor.
  Expected: length_blowup (root; chain cuda_oom, collective_hang), onset step 2631.
- ``tb-grad-norm-slow-climb``: a TensorBoard run of 6,000 steps (83 tags), grad_norm climbing slowly from step 3093
  (x2 every ~180 steps) while the reward still rises; no NaN. Expected: grad_norm_spike, onset 3093.
- ``sweep-30-one-entropy-bonus``: 30 logs of one sweep (lr x seed), one of them launched with
  ``actor_rollout_ref.actor.entropy_coeff=0.05`` (an entropy bonus), whose entropy climbs from step ~90 and whose score falls.
  Expected: entropy_anomaly in that run, the config difference named.
- ``big-verl-healthy-with-recovered-spikes``: a ~100 MB healthy verl log with the noise real runs have (AR(1)
  jitter, heavy-tailed steps, three one-step grad_norm spikes that recover, a warm-up where the score is 0).
  Expected: none.

Noise: AR(1) with Student-t innovations (df 4), not clean hinges; the faults start as soft ramps. The series are
synthetic (their shapes are those of the public reports the issue cites: verl #7624-style length blow-up, a slow
grad-norm climb), not copies of real runs. Chatter, tracebacks and prefixes come from bench/gen_real_log.py.
"""
from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
import gen_real_log as G  # noqa: E402


class Noise:
    """AR(1) noise with Student-t(4) innovations: ``next()`` -> a relative deviation around 0 (sd ~ ``scale``)."""

    def __init__(self, rng: random.Random, scale: float, phi: float = 0.7):
        self.rng, self.scale, self.phi, self.x = rng, scale, phi, 0.0

    def next(self) -> float:
        z = self.rng.gauss(0, 1) / math.sqrt(max(1e-9, sum(self.rng.gauss(0, 1) ** 2 for _ in range(4)) / 4))
        self.x = self.phi * self.x + math.sqrt(1 - self.phi ** 2) * z * self.scale
        return max(-0.9, self.x)  # a factor 1 + x stays positive (a norm, a length or a memory is never negative)


def _ramp(step: int, start: int, width: int) -> float:
    """0 before ``start``, a logistic ramp to 1 over ``width`` steps."""
    if step < start:
        return 0.0
    return 1.0 / (1.0 + math.exp(-(step - start - width / 2) / (width / 8)))


def _verl_line(pre: str, step: int, v: dict) -> str:
    return pre + f"step:{step} - " + " - ".join(f"{k}:{x!r}" if isinstance(x, float) else f"{k}:{x}" for k, x in v.items())


def _series(rng, steps, *, blowup=None, spikes=(), warmup=0, ecoef_climb=None):
    """Per-step metric dicts of a verl GRPO run (the faults as ramps from their start step)."""
    nz = {k: Noise(rng, s) for k, s in (("gn", 0.15), ("ent", 0.03), ("len", 0.05), ("score", 0.04), ("mem", 0.01))}
    out = []
    for s in range(1, steps + 1):
        b = _ramp(s, blowup, 120) if blowup else 0.0
        e = _ramp(s, ecoef_climb, 60) if ecoef_climb else 0.0
        score = (0.0 if s <= warmup else min(0.67, 0.25 + 0.42 * s / (steps * 0.6))) * (1 - 0.93 * b) * (1 - 0.8 * e)
        gn = 0.32 * (1 + nz["gn"].next()) * (1 + 2.5 * b) * (6.0 if s in spikes else 1.0)
        ent = (0.55 - 0.15 * s / steps) * (1 + nz["ent"].next()) * (1 + 3.0 * e)
        mean_len = min(4096.0, (620 + 80 * s / steps) * (1 + nz["len"].next()) * (1 + 5.2 * b))
        clip = max(0.0, min(1.0, 0.02 * (1 + 2 * nz["len"].x) + 0.88 * b))
        mem = 44.0 * (1 + nz["mem"].next()) + 31.0 * b
        out.append({"actor/entropy": round(ent, 5), "actor/pg_loss": round(0.01 * rng.gauss(0, 1), 6),
                    "actor/pg_clipfrac": round(0.002 * (1 + abs(rng.gauss(0, 1))), 6),
                    "actor/ppo_kl": round(1e-4 * (1 + abs(rng.gauss(0, 1))), 7),
                    "actor/kl_loss": round(0.0012 * (1 + 0.1 * rng.gauss(0, 1)) * (1 + s / steps), 6),
                    "actor/grad_norm": round(gn, 5), "actor/lr": "2e-06",
                    "actor/perf/max_memory_allocated_gb": round(mem, 3),
                    "critic/score/mean": round(max(0.0, score * (1 + nz["score"].next())), 5),
                    "response_length/mean": round(mean_len, 2), "response_length/max": 4096 if clip > 0 else 3900,
                    "response_length/clip_ratio": round(clip, 5),
                    "timing_s/gen": round(41.0 * (1 + 0.05 * rng.gauss(0, 1)) * (1 + 2.0 * b), 3),
                    "timing_s/step": round(93.0 * (1 + 0.04 * rng.gauss(0, 1)) * (1 + 1.2 * b), 3)})
    return out


LAUNCH = ("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=1024 "
          "data.max_prompt_length=1024 data.max_response_length=4096 actor_rollout_ref.rollout.name=vllm "
          "actor_rollout_ref.rollout.n=8 actor_rollout_ref.actor.ppo_mini_batch_size=256 "
          "actor_rollout_ref.actor.optim.lr={lr} actor_rollout_ref.actor.entropy_coeff={ecoef} "
          "trainer.n_gpus_per_node=8 trainer.nnodes={nodes} trainer.experiment_name={name}")


def _console_log(path: Path, steps: int, mb: float, rng: random.Random, series: list[dict], *, lr="2e-06",
                 ecoef="0", nodes=4, name="grpo", crash_at: int | None = None) -> dict:
    """Write a verl console log: launch line, per-step vLLM chatter and one metric line; returns planted lines."""
    pool, _ = G._vllm_pool(rng)
    tr = G.prefix("TaskRunner", G.TASK_RUNNER)
    workers = [G.prefix("WorkerDict", rng.randint(2000, 19999), f"10.0.0.{1 + r // 8}") for r in range(8 * nodes)]
    per_step = max(0, int(mb * 2**20 / steps / (sum(map(len, pool)) / len(pool) + 1)) - 1)
    planted: dict = {}
    with open(path, "wb") as fh:
        out = G._Out(fh)
        out.lines_([LAUNCH.format(lr=lr, ecoef=ecoef, nodes=nodes, name=name)])
        for s, v in enumerate(series, 1):
            out.lines_(rng.choices(pool, k=per_step))
            if crash_at and s == crash_at:
                planted["oom_line"] = out.lines_(G._oom_block(workers[28 % len(workers)])) + 13
                when = G.START
                planted["nccl_line"] = out.lines_(sum((G._nccl_block(w, when) for w in workers[:4]), []))
                planted["ray_line"] = out.lines_([tr + "ray.exceptions.ActorDiedError: The actor died unexpectedly "
                                                  "before finishing this task. class_name: WorkerDict, actor_id: "
                                                  "6f1c0b3a8e2d4f5a9c7b1d3e01000000, pid: 3187, namespace: verl, "
                                                  "ip: 10.0.0.4"])
                break
            ln = out.lines_([_verl_line(tr, s, v)])
            planted.setdefault("first_metric_line", ln)
            planted[f"step{s}"] = ln
        out.flush()
    return planted


def case_length(out: Path, scale: float, rng: random.Random) -> None:
    steps, onset, crash = 3200, 2631, 3105
    d = out / "big-verl-length-blowup-then-oom"
    d.mkdir(parents=True, exist_ok=True)
    p = _console_log(d / "input.log", steps, 150 * scale, rng, _series(rng, steps, blowup=onset), crash_at=crash)
    _expect(d, "length_blowup", ["cuda_oom"], ["max_response_length", "length cap", "clip_ratio", "stop token"],
            [p[f"step{s}"] for s in range(onset, onset + 40)],
            "From step 2631 responses run into the 4096-token cap (clip ratio 0.02 -> 0.9, score 0.67 -> 0.05); "
            "longer sequences grow actor memory 44 -> 75 GB until the backward at step 3105 runs out of CUDA memory; "
            "the other ranks' NCCL watchdogs then time out and Ray reports the dead actor.",
            "Find why generations stopped ending (stop tokens / EOS, reward hacking toward length) from step 2631; "
            "cap data.max_response_length or penalise overlong responses; the OOM is a consequence.",
            chain=["length_blowup", "cuda_oom", "collective_hang"], onset_step=onset)


def case_tb(out: Path, scale: float, rng: random.Random) -> None:
    import struct

    from tests.hostile.tfwrite import event, record

    steps, onset = 6000, 3093
    d = out / "tb-grad-norm-slow-climb" / "input.run"
    d.mkdir(parents=True, exist_ok=True)
    tags = ["actor/grad_norm", "actor/pg_loss", "critic/score/mean", "actor/entropy"] + [f"timing_s/x{i}" for i in range(79)]
    nz = {t: Noise(rng, 0.05) for t in tags}
    gnz = Noise(rng, 0.18)
    with open(d / "events.out.tfevents.1764500000.node0.1234.0", "wb") as fh:
        fh.write(record(b"\x09" + struct.pack("<d", 1.7645e9) + b"\x1a\x0dbrain.Event:2"))
        for s in range(1, steps + 1):
            for t in tags:
                if t == "actor/grad_norm":
                    v = 0.3 * (1 + gnz.next()) * (2 ** (max(0, s - onset) / 180))
                elif t == "critic/score/mean":
                    v = 0.2 + 0.5 * s / steps + 0.03 * nz[t].next()
                else:
                    v = 1.0 + nz[t].next()
                fh.write(record(event(s, 1.7645e9 + 30 * s, t, v)))
    _expect(d.parent, "grad_norm_spike", ["nan_inf"], ["grad_norm", "clip", "learning rate", "lr"], [],
            "actor/grad_norm climbs steadily from step 3093 (doubling about every 180 steps, 0.3 -> ~30 by step 6000) "
            "while the reward still rises: the update is diverging before the loss or reward shows it.",
            "Lower the actor learning rate or enable/tighten gradient clipping before the climb reaches NaN.",
            chain=["grad_norm_spike"], onset_step=onset)


def case_sweep(out: Path, scale: float, rng: random.Random) -> None:
    d = out / "sweep-30-one-entropy-bonus" / "input.run"
    d.mkdir(parents=True, exist_ok=True)
    bad = 17
    for i in range(30):
        r = random.Random(1000 + i)
        lr = ["1e-06", "2e-06", "5e-06"][i % 3]
        ser = _series(r, 300, ecoef_climb=90 if i == bad else None, warmup=r.randint(0, 5))
        _console_log(d / f"run{i:02d}.log", 300, 1.4 * scale, r, ser, lr=lr, ecoef="0.05" if i == bad else "0",
                     nodes=1, name=f"sweep_lr{lr}_s{i}")
    _expect(d.parent, "entropy_anomaly", [], ["entropy_coeff", "entropy"], [1],
            "One run of the sweep (run17.log) was launched with actor_rollout_ref.actor.entropy_coeff=0.05 (an entropy "
            "bonus; verl subtracts entropy_coeff * entropy from the policy loss): its entropy climbs from step ~90 and "
            "its score falls; the other 29 runs (entropy_coeff=0) are healthy.",
            "Set actor_rollout_ref.actor.entropy_coeff back to 0 (the sweep's value) in run17's launch.",
            chain=["entropy_anomaly"], onset_step=90, run="run17.log")


def case_healthy(out: Path, scale: float, rng: random.Random) -> None:
    d = out / "big-verl-healthy-with-recovered-spikes"
    d.mkdir(parents=True, exist_ok=True)
    steps = 2000
    _console_log(d / "input.log", steps, 100 * scale, rng, _series(rng, steps, spikes=(411, 1230, 1777), warmup=6))
    _expect(d, "none", [], [], [], "A healthy run: three one-step grad_norm spikes that recover, a 6-step warm-up "
            "with score 0.", "Nothing to fix.", chain=[], onset_step=None)


def _expect(d: Path, symptom, also, terms, lines, cause, fix, *, chain, onset_step, run=None) -> None:
    doc = {"symptom": symptom, "also_accepted": also, "fix_terms": terms, "evidence_lines": lines,
           "root_cause": cause, "fix": fix, "confidence": "high", "chain": chain, "onset_step": onset_step,
           "basis": "planted by bench/gen_big_cases.py (synthetic series, realistic chatter)", "source": "generated"}
    if run:
        doc["run"] = run
    (d / "expected.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, width=110), encoding="utf-8")


CASES = {"length": case_length, "tb": case_tb, "sweep": case_sweep, "healthy": case_healthy}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--scale", type=float, default=1.0, help="size factor (1.0: ~150 MB, ~100 MB, 30 x 1.4 MB logs)")
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    for name in a.only.split(","):
        CASES[name](Path(a.out), a.scale, random.Random(a.seed))
        print(f"wrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
