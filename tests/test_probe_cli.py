"""`grpo-debug probe` for people: reports as text (not JSON) in text mode, an unknown GPU refused with the list,
error-severity results (a missing shard, an unreachable Ray address) exit 2, V100 and T4 in the GPU table."""
from __future__ import annotations

import json

from grpo_debug.server.cli import main
from grpo_debug.skills.knowledge import find_gpu


def test_estimate_is_text_for_people(capsys):
    assert main(["probe", "--no-host", "--estimate", "--params-b", "7", "--gpu", "t4"]) == 0
    out = capsys.readouterr().out
    assert "optimizer" in out and "GiB" in out and "total" in out and not out.lstrip().startswith("{")
    assert '"components"' not in out


def test_unknown_gpu_is_refused_with_the_list(capsys):
    assert main(["probe", "--no-host", "--estimate", "--params-b", "7", "--gpu", "voodoo5"]) == 2
    err = capsys.readouterr().err
    assert "unknown GPU" in err and "t4" in err and "v100" in err


def test_missing_shard_exits_2_with_the_issue_as_text(tmp_path, capsys):
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    assert main(["probe", "--no-host", "--checkpoint", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "[error]" in out and "missing" in out and "fix:" in out
    assert main(["probe", "--no-host", "--checkpoint", str(tmp_path), "--format", "json"]) == 2
    assert json.loads(capsys.readouterr().out)["checkpoint"]["hf"]["missing_shards"]


def test_unreachable_ray_address_exits_2(capsys):
    assert main(["probe", "--no-host", "--ray-address", "127.0.0.1:1"]) == 2
    assert "could not probe the Ray cluster" in capsys.readouterr().out


def test_gpus_without_bf16_are_in_the_table():
    for name, cc in (("V100", "7.0"), ("Tesla T4", "7.5")):
        g = find_gpu(name)
        assert g is not None and g.compute_capability == cc and not g.bf16 and g.sources
