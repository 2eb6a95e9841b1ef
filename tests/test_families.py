"""The five seed tool families, suggest, prompts and SKILL.md: over the CLI, MCP and the seed's own
command lines, on real inputs (shared-case configs, symptom phrases, bug numbers)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_debug.server.cli import main
from grpo_debug.skills.knowledge import triggers
from grpo_debug.skills.loader import default_rules
from grpo_debug.tools.families import OPERATIONS, FamilyError, run_family

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT.parent / "shared" / "cases"
SEED_SCRIPTS = {
    "playbook": "grpo_training_debug_playbook.py", "nan_guide": "grpo_nan_debugging_guide.py",
    "muon_clipping": "megatron_muon_clipping_avoidance_tool.py",
    "stream_safety": "cuda_stream_safety_pattern_synthesis.py", "knowledge_map": "algorithm_infra_knowledge_map.py",
}
SNIPPET = """import torch
s = torch.cuda.Stream()
x = torch.randn(1024, device="cuda")
with torch.cuda.stream(s):
    y = x * 2
z = y + 1
"""
DS_BOTH = '{\n  "fp16": {"enabled": true},\n  "bf16": {"enabled": true},\n  "zero_optimization": {"stage": 2, "overlap_comm": true}\n}\n'

# (family, operation, kwargs) -> a check on the report; inputs are real formats
CASES_TABLE = [
    ("playbook", "playbook", {}, lambda r: {i.id for i in r.items} >= {"cuda_stream_safety", "muon_clipping", "singleton_degeneration", "moe_fp16_nan"}),
    ("playbook", "symptoms", {}, lambda r: len(r.items) == 20 and all(i.fields["causes"] for i in r.items if i.id == "nan_inf")),
    ("playbook", "fixes", {"text": "#8061"}, lambda r: r.items[0].id == "deepspeed-overlap-comm-compile-nan"),
    ("playbook", "gpu", {"gpu": "h100"}, lambda r: r.gpu.id == "h100_sxm" and r.gpu.fp8),
    ("nan_guide", "check", {"text": DS_BOTH}, lambda r: "precision-fp16-and-bf16" in r.rules),
    ("nan_guide", "diagnose", {"text": "MoE router NaN in fp16"}, lambda r: "moe-router-fp16-softmax-nan" in r.rules[:3]),
    ("nan_guide", "avoid", {"text": "deepspeed zero2 overlap_comm torch.compile"}, lambda r: "deepspeed-overlap-comm-compile-nan" in r.rules),
    ("nan_guide", "gpu", {"gpu": "rtx3090"}, lambda r: r.gpu.compute_capability == "8.6"),
    ("muon_clipping", "check", {"text": "torchrun pretrain_gpt.py --optimizer dist_muon --use-distributed-optimizer --clip-grad 1.0"},
     lambda r: "megatron-muon-unsupported-options" in r.rules),
    ("muon_clipping", "diagnose", {"text": "loss plateau with Muon and ChainedOptimizer"}, lambda r: "megatron-muon-global-clip-stall" in r.rules[:3]),
    ("muon_clipping", "avoid", {}, lambda r: r.items and not any(i.fields.get("patch") for i in r.items)),  # no input: conditional, no patch
    ("muon_clipping", "gpu", {"gpu": "a100_80gb"}, lambda r: r.gpu.memory_gb == 80),
    ("stream_safety", "map", {}, lambda r: "cuda-stream-record-stream-missing" in r.rules),
    ("stream_safety", "analyze", {"text": SNIPPET}, lambda r: {i.id for i in r.items} >= {"side_stream_use_without_record_stream"}),
    ("stream_safety", "analyze", {"text": DS_BOTH}, lambda r: r.items or r.findings),
    ("stream_safety", "compare", {}, lambda r: {"deepspeed", "vllm"} <= {i.id.lower() for i in r.items}),
    ("stream_safety", "gpu", {"gpu": "rtx4090"}, lambda r: any(i.id == "rtx4090-pcie-only" for i in r.items)),
    ("knowledge_map", "theory", {"text": "logprob_mismatch"}, lambda r: any(i.kind == "derivation" for i in r.items)),
    ("knowledge_map", "bug", {"text": "#5394"}, lambda r: "megatron-muon-global-clip-stall" in r.rules),
    ("knowledge_map", "decision", {"text": "MUST NOT 13"}, lambda r: r.rules == ["megatron-muon-global-clip-stall"]),
    ("knowledge_map", "proof", {"text": "fp16 overflow"}, lambda r: r.items[0].id == "fp16-exp-overflow-logit"
     and "11.09" in json.dumps(r.items[0].model_dump())),
    ("knowledge_map", "proof", {"text": "group size 1"}, lambda r: r.items[0].id == "grpo-group-size-one-advantage"
     and {p["framework"].lower().split()[0] for p in r.items[0].fields["per_framework"]} >= {"verl", "slime"}),
    ("knowledge_map", "cross", {"text": "muon_clipping"}, lambda r: len(r.items) >= 2),
    ("knowledge_map", "gpu", {"gpu": "mi300x"}, lambda r: r.gpu.vendor == "amd"),
]


def test_table_covers_every_operation():
    covered = {(f, o) for f, o, _, _ in CASES_TABLE}
    assert covered == {(f, o) for f, ops in OPERATIONS.items() for o in ops}


@pytest.mark.parametrize("family,operation,kwargs,check", CASES_TABLE,
                         ids=[f"{f}-{o}-{i}" for i, (f, o, _, _) in enumerate(CASES_TABLE)])
def test_family_operation(family, operation, kwargs, check):
    rep = run_family(family, operation, **kwargs)
    assert rep.summary and rep.family == family and rep.operation == operation
    assert check(rep), rep.model_dump_json(indent=1)[:2000]
    rules = default_rules()
    assert all(r in rules.rules for r in rep.rules), "families cite only rules of the rule base"


def test_rtx4090_reproduces_the_seed_profile_with_assumptions():
    rep = run_family("playbook", "rtx4090")
    assert rep.operation == "gpu" and rep.gpu.id == "rtx4090" and rep.gpu.memory_gb == 24
    text = rep.model_dump_json()
    assert "16.24" in text and "65.06" in text and "unverified" in text


def test_family_errors_name_the_fix():
    with pytest.raises(FamilyError, match="use one of"):
        run_family("nan_guide", "explode")
    with pytest.raises(FamilyError, match="unknown GPU"):
        run_family("playbook", "gpu", gpu="voodoo5")


@pytest.mark.skipif(not CASES.is_dir(), reason="needs the shared cases folder next to the repo")
def test_check_on_a_shared_case_config():
    rep = run_family("nan_guide", "check", path=str(CASES / "deepspeed-fp16-and-bf16" / "input.json"))
    assert rep.findings and rep.findings[0].evidence[0].line in (5, 6)


def test_cli_families_text_and_json(capsys):
    assert main(["nan_guide", "diagnose", "loss", "is", "nan", "with", "fp16", "MoE", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["family"] == "nan_guide" and d["rules"]
    assert main(["knowledge-map", "proof", "singleton"]) == 0
    assert "grpo-group-size-one-advantage" in capsys.readouterr().out
    assert main(["playbook", "gpu", "--gpu", "voodoo5"]) == 2
    assert "unknown GPU" in capsys.readouterr().err


@pytest.mark.slow  # one interpreter per operation
@pytest.mark.parametrize("family", list(SEED_SCRIPTS))
def test_seed_command_lines(family, tmp_path):
    """The seed's exact command lines, each operation, from the checkout (`python3 tools/<script> op`)."""
    script = ROOT / "tools" / SEED_SCRIPTS[family]
    cfg = tmp_path / "ds.json"
    cfg.write_text(DS_BOTH)
    inputs = {"check": [str(cfg)], "analyze": [str(cfg)], "diagnose": ["loss", "nan"], "theory": ["muon"],
              "bug": ["#8061"], "decision": ["MUST", "DO", "7"]}
    for op in [*OPERATIONS[family], "rtx4090"]:
        if op == "gpu":
            continue
        out = subprocess.run([sys.executable, str(script), op, *inputs.get(op, []), "--format", "json"],
                             capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert out.returncode == 0, (op, out.stderr[-500:])
        d = json.loads(out.stdout)
        assert d["family"] == family and d["summary"], op


def test_suggest_routes_seed_triggers():
    from grpo_debug.tools.suggest import suggest

    assert "muon_clipping" in [t.tool for t in suggest("loss plateau with Muon").tools[:2]]
    assert "muon_clipping" not in [t.tool for t in suggest("loss plateau").tools]  # Muon only when named
    assert suggest("is record_stream needed?").tools[0].tool == "stream_safety"
    assert suggest("Traceback (most recent call last):\n  File x\nRuntimeError: CUDA error: an illegal memory access").tools[0].tool == "triage"
    for t in triggers():
        res = suggest(t.phrase)
        assert (t.tool, t.operation) in {(x.tool, x.operation) for x in res.tools}, t.phrase


def test_skill_md_is_valid_and_matches_the_product(tmp_path):
    skills_ref = pytest.importorskip("skills_ref")
    d = tmp_path / "grpo-debug"
    d.mkdir()
    shutil.copy(ROOT / "SKILL.md", d / "SKILL.md")
    assert skills_ref.validate(d) == []
    text = (ROOT / "SKILL.md").read_text()
    assert len(text.splitlines()) < 500
    props = skills_ref.read_properties(d)
    assert props.name == "grpo-debug" and len(props.description) <= 1024
    tools = set(re.findall(r"`(triage|playbook|nan_guide|muon_clipping|stream_safety|knowledge_map|explain_rule|suggest|check_config|probe_host)`", text))
    assert tools >= {"triage", "playbook", "nan_guide", "muon_clipping", "stream_safety", "knowledge_map", "explain_rule", "suggest"}
    for name in re.findall(r"`(debug_\w+|triage_log)`", text):
        assert name in {t.prompt for t in triggers()} | {"triage_log"}, name


def test_skill_install(tmp_path, capsys):
    assert main(["skill", "install", "--dir", str(tmp_path)]) == 0
    assert (tmp_path / "grpo-debug" / "SKILL.md").read_text() == (ROOT / "SKILL.md").read_text()


def test_every_family_has_a_selector_in_the_catalogue():
    from grpo_debug.skills.knowledge import family_selectors
    from grpo_debug.tools.families import FAMILY_SPECS

    assert set(family_selectors()) == set(FAMILY_SPECS)
