"""Fixes that apply (issue 12, part 5): `check --diff` is a unified diff the real `patch` program applies,
`--fix` writes it after a backup, MCP check_config carries it; several fixes of one line are one edit; an
added key lands where the syntax needs it; re-checking the patched file no longer raises the rules the
edits addressed; an edit never moves a value against its rule nor writes another framework's key or path."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from grpo_debug.server.cli import main
from grpo_debug.skills.loader import default_rules
from grpo_debug.tools.check_config import check_config
from grpo_debug.tools.engine.edits import edits_for_patch, rule_patch
from grpo_debug.tools.triage import build_context, triage_text

needs_patch = pytest.mark.skipif(shutil.which("patch") is None, reason="the patch program is not installed")

DS_JSON = """{
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 8,
  "gradient_clipping": 0.0,
  "bf16": {"enabled": true},
  "fp16": {"enabled": true, "loss_scale": 0},
  "zero_optimization": {
    "stage": 2,
    "overlap_comm": true
  }
}
"""
SLIME_ARRAY = """#!/bin/bash
ROLLOUT_ARGS=(
   --rollout-batch-size 32
   --n-samples-per-prompt 8
   --rollout-max-response-len 8192
   --global-batch-size 256
)
python3 train.py --colocate --actor-num-nodes 1 --actor-num-gpus-per-node 4 ${ROLLOUT_ARGS[@]}
"""
SLIME_CONT = """python3 train.py \\
   --colocate \\
   --actor-num-nodes 2 \\
   --actor-num-gpus-per-node 4 \\
   --rollout-batch-size 16 --n-samples-per-prompt 8 --global-batch-size 128
"""
VERL_YAML = """algorithm:
  adv_estimator: grpo
actor_rollout_ref:
  actor:
    entropy_coeff: 0
    ppo_mini_batch_size: 64
  rollout:
    name: vllm
    n: 2
"""


def _ids(res) -> set[str]:
    return {c.rule_id for f in res.findings for c in f.causes}


def _edited(res) -> set[str]:
    return {c.rule_id for f in res.findings if f.edits for c in f.causes}


def _patch_and_recheck(tmp_path: Path, name: str, text: str, capsys) -> tuple[str, set[str], set[str]]:
    """Write ``text``, take `check --diff`, apply it with the real `patch`; (patched text, rules the edits
    addressed, rules raised on the patched file)."""
    f = tmp_path / name
    f.write_text(text)
    before = check_config(path=str(f))
    assert main(["check", str(f), "--diff"]) == 0
    diff = capsys.readouterr().out
    assert diff.startswith("--- "), diff
    assert before.diff == diff
    p = subprocess.run(["patch", "-s", "-p0", str(f)], input=diff, text=True, capture_output=True, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    return f.read_text(), _edited(before), _ids(check_config(path=str(f)))


@needs_patch
def test_json_diff_applies_and_closes(tmp_path, capsys):
    import json

    new, fixed, again = _patch_and_recheck(tmp_path, "ds.json", DS_JSON, capsys)
    cfg = json.loads(new)
    assert cfg["gradient_clipping"] == 1.0 and cfg["fp16"]["enabled"] is False
    assert fixed and not fixed & again, (fixed, again)


@needs_patch
def test_added_flag_goes_inside_the_bash_array(tmp_path, capsys):
    new, fixed, again = _patch_and_recheck(tmp_path, "run.sh", SLIME_ARRAY, capsys)
    body = new.split("ROLLOUT_ARGS=(", 1)[1].split(")", 1)[0]
    assert "--num-gpus-per-node 4" in body and "\\" not in body
    assert "slime-colocate-gpus-per-node" in fixed and not fixed & again, (fixed, again)


@needs_patch
def test_added_flag_keeps_the_continuation(tmp_path, capsys):
    new, fixed, again = _patch_and_recheck(tmp_path, "run.sh", SLIME_CONT, capsys)
    lines = new.splitlines()
    added = [ln for ln in lines if "--num-gpus-per-node 4" in ln]
    assert added and added[0].endswith(" \\") and lines[-1].startswith("   --rollout-batch-size")
    assert not fixed & again


@needs_patch
def test_yaml_key_goes_under_its_parent(tmp_path, capsys):
    import yaml

    new, fixed, again = _patch_and_recheck(tmp_path, "cfg.yaml", VERL_YAML, capsys)
    assert yaml.safe_load(new)["actor_rollout_ref"]["rollout"]["n"] == 4
    assert not fixed & again


def test_two_fixes_on_one_line_are_one_edit():
    text = "python3 train.py --colocate --actor-num-gpus-per-node 4 --sglang-mem-fraction-static 0.85 2>&1 | tee log\n"
    ctx, lines = build_context(text)
    es = edits_for_patch({"sglang_mem_fraction_static": 0.7, "num_gpus_per_node": 4}, ctx.facts, lines)
    assert len(es) == 1 and es[0].line == 1
    assert es[0].new == ("python3 train.py --colocate --actor-num-gpus-per-node 4 --sglang-mem-fraction-static 0.7 "
                         "--num-gpus-per-node 4 2>&1 | tee log")


@needs_patch
def test_fix_writes_the_file_after_a_backup(tmp_path, capsys):
    f = tmp_path / "ds.json"
    f.write_text(DS_JSON)
    assert main(["check", str(f), "--fix"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "ds.json.orig").read_text() == DS_JSON and "ds.json.orig" in out
    g = tmp_path / "copy.json"
    g.write_text(DS_JSON)
    diff = check_config(path=str(g)).diff
    subprocess.run(["patch", "-s", "-p0", str(g)], input=diff, text=True, check=True, cwd=tmp_path)
    assert f.read_text() == g.read_text()


# ---- direction and framework -----------------------------------------------------------------------

SGLANG_IMA = """python3 train.py --colocate --sglang-mem-fraction-static {frac} --rollout-num-gpus-per-engine 2
[2026-01-01 10:02:11 TP1] TpModelWorkerClient hit an exception: Traceback (most recent call last):
RuntimeError: CUDA error: an illegal memory access was encountered
"""


def _patch_of(res, rule_id: str) -> dict:
    return next((f.patch or {} for f in res.findings if any(c.rule_id == rule_id for c in f.causes)), {})


def test_mem_fraction_is_never_raised():
    low = triage_text(SGLANG_IMA.format(frac=0.5))
    assert "slime-sglang-illegal-memory-access-oom" in _ids(low)
    assert "sglang_mem_fraction_static" not in _patch_of(low, "slime-sglang-illegal-memory-access-oom")
    high = triage_text(SGLANG_IMA.format(frac=0.85))
    assert _patch_of(high, "slime-sglang-illegal-memory-access-oom") == {"sglang_mem_fraction_static": 0.7}


@pytest.mark.parametrize("text,key", [
    ("model_name_or_path: Qwen/Qwen2.5-0.5B\nnum_generations: 1\nper_device_train_batch_size: 8\n", "num_generations"),
    (VERL_YAML, "actor_rollout_ref.rollout.n"),
])
def test_group_size_edits_reach_at_least_four(text, key):
    res = check_config(text=text)
    vals = [v for f in res.findings for k, v in (f.patch or {}).items() if k.endswith(key)]
    assert vals and min(vals) >= 4, [(f.causes[0].rule_id, f.patch) for f in res.findings]


def _rule(rule_id: str):
    return next(r for r in default_rules() if r.id == rule_id)


@pytest.mark.parametrize("entry,want", [("slime/train.py", "slime.rollout.forge_load.generate_rollout"),
                                        ("relax/entrypoints/train.py", "relax.engine.rollout.forge_load.generate_rollout")])
def test_rollout_function_path_is_the_scripts_own(entry, want):
    text = f"python3 {entry} \\\n   --load-forge-rollout-data /data/0.pt \\\n   --colocate\n"
    res = check_config(text=text)
    paths = [v for f in res.findings for k, v in (f.patch or {}).items() if k == "rollout_function_path"]
    assert paths == [want]
    assert all(want in e.new for f in res.findings for e in f.edits if "rollout-function-path" in e.new)


def test_no_deepspeed_key_in_a_megatron_or_openrlhf_launch():
    for text in ("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1 --global-batch-size 64 "
                 "--clip-grad 0 --optimizer muon\n",
                 "deepspeed --module openrlhf.cli.train_ppo_ray --actor_num_nodes 1 --zero_stage 2 --micro_train_batch_size 2\n"):
        ctx, lines = build_context(text)
        for rid in ("deepspeed-gradient-clipping-off", "deepspeed-muon-gradient-clipping-conflict"):
            r = _rule(rid)
            assert "gradient_clipping" not in rule_patch(r.fix, r.applies_to.frameworks, {}, ctx.facts, lines), (rid, text)


@pytest.mark.anyio
async def test_mcp_check_config_returns_the_same_diff(tmp_path):
    from mcp import Client

    from grpo_debug.server.app import build_server

    f = tmp_path / "ds.json"
    f.write_text(DS_JSON)
    async with Client(build_server(allowed_roots=[str(tmp_path)])) as c:
        r = await c.call_tool("check_config", {"path": str(f)})
    assert r.structured_content["diff"] == check_config(path=str(f)).diff != ""


@needs_patch
def test_removed_flags_leave_no_blank_lines_and_the_muon_rule_closes(tmp_path, capsys):
    text = Path(__file__).with_name("configs").joinpath("megatron_pretrain_bad.sh").read_text()
    new, fixed, again = _patch_and_recheck(tmp_path, "run.sh", text, capsys)
    assert "--use-distributed-optimizer" not in new and "--overlap-grad-reduce" not in new
    assert len(new.splitlines()) == len(text.splitlines()) - 2
    assert "megatron-muon-unsupported-options" in fixed and not fixed & again, (fixed, again)


def test_no_edit_for_a_rule_that_does_not_name_the_files_framework():
    text = ("python3 -m openrlhf.cli.train_ppo_ray --actor_num_nodes 1 --actor_num_gpus_per_node 8 \\\n"
            "   --vllm_num_engines 2 --colocate_all_models --micro_rollout_batch_size 16 --rollout_batch_size 256\n")
    res = check_config(text=text)
    assert not [e for f in res.findings for e in f.edits if "n_samples_per_prompt" in e.new]  # slime's default, not OpenRLHF's


def test_nothing_is_placed_into_a_cut_command():
    res = triage_text("+ python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo trainer.n_gpus_per_node=8 ...\n")
    assert all(e.line is None for f in res.findings for e in f.edits)


@needs_patch
def test_fixes_of_several_findings_on_one_line_merge(tmp_path, capsys):
    text = ("python3 train.py --colocate --actor-num-nodes 1 --actor-num-gpus-per-node 4 --max-tokens-per-gpu 4096 "
            "--rollout-batch-size 8 --n-samples-per-prompt 4 --global-batch-size 64\n")
    res = check_config(text=text)
    located = [e for f in res.findings for e in f.edits]
    assert len({f.symptom for f in res.findings if f.edits}) >= 2 and len({(e.line, e.new) for e in located}) == 1
    new, fixed, again = _patch_and_recheck(tmp_path, "one.sh", text, capsys)
    for flag in ("--global-batch-size 32", "--use-dynamic-batch-size", "--num-gpus-per-node 4"):
        assert flag in new
    assert not fixed & again, (fixed, again)
