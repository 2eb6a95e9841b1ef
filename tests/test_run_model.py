"""The run model (tools/run): built from a console log, an engine Context and a metric store."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from grpo_debug.tools.engine.normalize import normalize
from grpo_debug.tools.run import Point, Run, build_run, from_store
from grpo_debug.tools.run import build as run_build

SHARED = Path("/work/shared/cases")
LATE_CLIMB = SHARED / "verl-late-gradnorm-climb" / "input.log"


def _fake_canon(table: dict[str, str]):
    return lambda key, framework=None: table.get(key)


@pytest.mark.skipif(not LATE_CLIMB.exists(), reason="shared case not mounted")
def test_console_log_becomes_run_with_lines_and_framework():
    run = build_run(normalize(LATE_CLIMB.read_text()))
    assert run.framework == "verl"
    assert 1 in run.frameworks[0].lines  # the launch command names verl.trainer.main_ppo
    s = run.series_of("actor/grad_norm")
    assert s is not None and s.axis == "step"
    p = next(p for p in s.points if p.step == 301)
    assert p.line == 302 and p.raw_key == "actor/grad_norm"
    assert run.fact("rollout.n").value == 8 and run.fact("rollout.n").line == 1


def test_canonical_names_and_shared_canonical_keeps_longest():
    from grpo_debug.tools.engine.metrics import extract_metrics

    text = "\n".join(f"step:{i} - actor/grad_norm:{0.5 + i / 10} - critic/grad_norm:1.0 - actor/entropy:0.3" for i in range(1, 5))
    text += "\nstep:5 - actor/grad_norm:0.9"
    lines = normalize(text)
    run = Run()
    canon = _fake_canon({"actor/grad_norm": "grad_norm", "critic/grad_norm": "grad_norm"})
    run_build.add_table(run, extract_metrics(lines), canon)
    assert run.series_of("grad_norm").raw_keys == ["actor/grad_norm"]
    assert run.series_of("grad_norm") is run.series_of("actor/grad_norm")
    assert run.series_of("critic/grad_norm").canonical is False
    assert run.series_of("actor/entropy").name == "actor/entropy"  # unknown to the table: raw name
    assert any("kept raw" in n for n in run.notes)


def test_store_run_becomes_run_with_where():
    from grpo_debug.tools.readers import Series, StoreRun

    st = StoreRun(source="/x/events.out.tfevents.1", kind="tensorboard",
                  series={"actor/grad_norm": Series("actor/grad_norm", "step", [(1.0, 0.4, "f:1"), (2.0, math.nan, "f:2")])},
                  config={"actor_rollout_ref.rollout.n": 8, "trainer.n_gpus_per_node": 8}, console=[], notes=["n1"])
    run = from_store(st, canon=_fake_canon({"actor/grad_norm": "grad_norm"}))
    s = run.series_of("grad_norm")
    assert s.points[1].where == "f:2" and s.points[1].line is None and s.first_nonfinite().step == 2.0
    assert run.framework == "verl" and run.notes == ["n1"]
    assert run.fact("rollout.n").value == 8 and run.fact("rollout.n").where == st.source


def test_samples_of_verl_reward_manager_prints():
    text = "[prompt] What is 2+2?\n[response] Let me think\nIt is 4\n[ground_truth] 4\n[score] 1.0\nstep:1 - a:1 - b:2"
    run = build_run(normalize(text))
    roles = [(s.role, s.lines) for s in run.samples]
    assert roles[:2] == [("prompt", [1]), ("response", [2, 3])]
    assert run.samples[1].text == "Let me think\nIt is 4"


def test_point_finite():
    assert Point(1, math.inf, "k").finite is False


CORPUS_HEALTHY = Path(__file__).resolve().parent / "data" / "corpus" / "healthy"


@pytest.mark.parametrize("case,framework", [
    ("openrlhf-reinforce-baseline-hybrid-engine-script/input.sh", "openrlhf"),  # launched with -m openrlhf.cli...
    ("nemo-rl-grpo-math-1b-yaml/input.yaml", "nemo_rl"),  # grpo.num_prompts_per_step, policy.dtensor_cfg
    ("roll-qwen25-7b-rlvr-megatron-yaml/input.yaml", "roll"),  # actor_train:, actor_infer:
    ("skyrl-gsm8k-example-script/input.sh", "skyrl"),
    ("areal-gsm8k-grpo-yaml/input.yaml", "areal"),
])
def test_framework_of_example_configs_and_scripts(case, framework):
    path = CORPUS_HEALTHY / case
    text = path.read_text()
    run = build_run(normalize(text), text=text, hint=path.suffix.lstrip("."))
    assert run.framework == framework, [(h.name, h.score, h.evidence[:2]) for h in run.frameworks]
