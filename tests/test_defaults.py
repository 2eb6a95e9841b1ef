"""Framework defaults by release (issue 23 item 5): scripts/extract_defaults.py over a release history, the
lookup of tools/engine/defaults.py, and the checks that read implicit values through it."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.script_loader import load_script

from grpo_debug.tools.engine import defaults as D
from grpo_debug.tools.engine.config_checks import CHECKS
from grpo_debug.tools.engine.facts import extract_facts
from grpo_debug.tools.engine.normalize import normalize



def _extractor():
    return load_script("scripts/extract_defaults.py")


def _facts(text: str, hint: str = "shell"):
    return extract_facts(normalize(text), text, hint)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"})


def test_extract_keeps_runs_of_equal_defaults_across_release_tags(tmp_path):
    repo = tmp_path / "verl"
    cfg = repo / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
    cfg.parent.mkdir(parents=True)
    _git(repo, "init", "-q")
    for tag, mbt, extra in (("v0.3.0", 8192, ""), ("v0.4.0", 8192, "    new_key: 1\n"), ("v0.4.1rc1", 1, ""),
                            ("v0.5.0", 4096, "")):
        cfg.write_text("defaults: [x]\nactor_rollout_ref:\n  rollout:\n    max_num_batched_tokens: "
                       f"{mbt}\n    max_model_len: null\n    prompt_length: ${{data.max_prompt_length}}\n{extra}")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", tag)
        _git(repo, "tag", tag)
    doc = _extractor().extract("verl", str(repo / ".git"), (0, 3, 0))
    assert [r["version"] for r in doc["releases"]] == ["0.3.0", "0.4.0", "0.5.0"]  # rc skipped
    k = doc["keys"]
    assert k["actor_rollout_ref.rollout.max_num_batched_tokens"] == [[0, 1, 8192], [2, 2, 4096]]
    assert k["actor_rollout_ref.rollout.max_model_len"] == [[0, 2, None]]
    assert k["actor_rollout_ref.rollout.prompt_length"] == [[0, 2, "${data.max_prompt_length}"]]
    assert k["actor_rollout_ref.rollout.new_key"] == [[1, 1, 1]] and "defaults" not in k


def test_shipped_defaults_name_their_releases_and_files():
    for fw in ("verl", "trl"):
        doc = json.loads((D.DEFAULTS_DIR / f"{fw}.json").read_text())
        assert len(doc["releases"]) >= 10 and all(len(r["commit"]) == 12 and r["file"] for r in doc["releases"])
        assert len(doc["keys"]) > 50


def test_lookup_by_release_and_across_releases():
    d = D.lookup("verl", "actor_rollout_ref.rollout.max_num_batched_tokens", "0.6.1")
    assert d.value == 8192 and d.version == "0.6.1" and d.origin == "default of verl 0.6.1"
    assert D.lookup("verl", "actor_rollout_ref.rollout.max_num_batched_tokens", "0.8.5").version == "0.8.0"
    assert D.lookup("verl", "actor_rollout_ref.rollout.max_num_batched_tokens", "0.1.0") is None  # before every release read
    assert D.lookup("verl", "rollout.max_num_batched_tokens") is None  # a tail several roles share: ambiguous
    assert D.lookup("verl", "no.such.key") is None and D.lookup("nosuchframework", "x") is None
    beta_old, beta_new = D.lookup("trl", "beta", "0.18.2"), D.lookup("trl", "beta", "0.19.0")
    assert beta_old.value != beta_new.value  # the default changed between these releases (trl grpo_config.py)
    across = D.lookup("trl", "beta")
    assert across.version is None and len(across.values) >= 2 and across.value is None
    assert D.resolve(_facts("x: 1\n", "yaml"), "beta", "trl") is None  # releases disagree, no version: undecided
    f = D.resolve(_facts("x: 1\n", "yaml"), "num_generations", "trl")
    assert f.value == 8 and f.line == 0 and D.is_default(f) and D.input_lines(f) == []


VERL_OFF = ("python3 -m verl.trainer.main_ppo \\\n    data.max_prompt_length=4096 \\\n    data.max_response_length=8192 \\\n"
            "    actor_rollout_ref.rollout.name=vllm \\\n    actor_rollout_ref.rollout.enable_chunked_prefill=False\n")


@pytest.mark.parametrize("version, fires", [("0.6.1", True), ("0.5.0", True), ("0.8.0", False), (None, False)])
def test_chunked_prefill_off_reads_the_release_default_budget(version, fires):
    text = (f"# pip: verl=={version}\n" if version else "") + VERL_OFF
    fs = _facts(text)
    assert (D.version_of(fs, "verl") == version)
    got = CHECKS["batched_tokens_below_context"](fs)
    assert bool(got) == fires
    if fires:
        lines, msg, patch = got
        assert f"default of verl {version}" in msg and "12288" in msg and 0 not in lines
        assert patch == {"actor_rollout_ref.rollout.max_num_batched_tokens": 12288,
                         "actor_rollout_ref.rollout.max_model_len": 12288}


def test_chunked_prefill_off_with_an_explicit_budget_needs_no_version():
    text = VERL_OFF.replace("name=vllm \\\n", "name=vllm \\\n    actor_rollout_ref.rollout.max_num_batched_tokens=8192 \\\n")
    assert "max_num_batched_tokens=8192 \\\n" in text
    got = CHECKS["batched_tokens_below_context"](_facts(text))
    assert got and "default" not in got[1]


def test_trl_default_num_generations_only_for_grpo_configs():
    got = CHECKS["trl_generations_not_divisible"](_facts("per_device_train_batch_size: 3\nmax_completion_length: 1024\n", "yaml"))
    assert got and "num_generations 8 (default of trl" in got[1] and got[0] == [1]
    assert CHECKS["trl_generations_not_divisible"](_facts("per_device_train_batch_size: 3\n", "yaml")) is None
    assert CHECKS["trl_generations_not_divisible"](_facts("per_device_train_batch_size: 16\nuse_vllm: true\n", "yaml")) is None
