"""The seed skill's documented command lines, exactly as written (no arguments), from a checkout.

The seed (the grpo-debug skill) lists each script's sub-commands without an input. Each must exit 0 with
its whole view (every theory, bug chain, decision; the checklist ``check`` applies; the symptom table
``diagnose`` works from; the stream-safety analysis of the documented configurations) and say how to give
an input.
"""
from __future__ import annotations

import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The seed skill's command lines, copied as written (seed 004, "Diagnostic tools").
SEED_LINES = """
python3 tools/grpo_training_debug_playbook.py playbook
python3 tools/grpo_training_debug_playbook.py symptoms
python3 tools/grpo_training_debug_playbook.py fixes
python3 tools/grpo_training_debug_playbook.py rtx4090
python3 tools/grpo_nan_debugging_guide.py check
python3 tools/grpo_nan_debugging_guide.py diagnose
python3 tools/grpo_nan_debugging_guide.py avoid
python3 tools/grpo_nan_debugging_guide.py rtx4090
python3 tools/megatron_muon_clipping_avoidance_tool.py check
python3 tools/megatron_muon_clipping_avoidance_tool.py diagnose
python3 tools/megatron_muon_clipping_avoidance_tool.py avoid
python3 tools/megatron_muon_clipping_avoidance_tool.py rtx4090
python3 tools/cuda_stream_safety_pattern_synthesis.py map
python3 tools/cuda_stream_safety_pattern_synthesis.py analyze
python3 tools/cuda_stream_safety_pattern_synthesis.py compare
python3 tools/cuda_stream_safety_pattern_synthesis.py rtx4090
python3 tools/algorithm_infra_knowledge_map.py theory
python3 tools/algorithm_infra_knowledge_map.py bug
python3 tools/algorithm_infra_knowledge_map.py decision
python3 tools/algorithm_infra_knowledge_map.py rtx4090
python3 tools/algorithm_infra_knowledge_map.py proof
python3 tools/algorithm_infra_knowledge_map.py cross
""".strip().splitlines()

#: Operations whose no-input answer is a whole view that ends by saying how to give an input.
WHOLE_VIEWS = {"check", "diagnose", "analyze", "theory", "bug", "decision"}


def _run(line: str) -> subprocess.CompletedProcess:
    argv = shlex.split(line)
    argv[0] = sys.executable  # `python3` as written, but the interpreter running the tests
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.mark.slow  # 22 interpreters; the same operations run in-process in test_whole_views_* below
def test_every_seed_line_as_written_answers():
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(_run, SEED_LINES))
    for line, out in zip(SEED_LINES, results):
        assert out.returncode == 0, (line, out.stderr[-500:])
        text = out.stdout
        assert len(text.splitlines()) >= 8, (line, text)
        assert "needs input" not in text + out.stderr, line
        if line.split()[-1] in WHOLE_VIEWS:
            assert "whole view" in text and "For your own input" in text, (line, text[-800:])


@pytest.mark.parametrize("family,op,check", [
    ("nan_guide", "check", lambda r: {"precision-fp16-and-bf16", "bf16-config-on-gpu-without-bf16"} <= set(r.rules)),
    ("nan_guide", "diagnose", lambda r: any(i.id == "nan_inf" for i in r.items)),
    ("muon_clipping", "check", lambda r: "megatron-muon-global-clip-stall" in r.rules),
    ("muon_clipping", "diagnose", lambda r: any(i.id == "loss_plateau" for i in r.items)),
    ("stream_safety", "analyze", lambda r: any("match" in i.title and i.fields["found"] for i in r.items)),
    ("knowledge_map", "theory", lambda r: {"muon_clipping", "cuda_stream_safety"} <= {i.id for i in r.items}),
    ("knowledge_map", "bug", lambda r: "deepspeed-overlap-comm-compile-nan" in r.rules),
    ("knowledge_map", "decision", lambda r: {"MUST DO 1", "MUST NOT 17"} <= {i.id for i in r.items}),
])
def test_whole_views_hold_what_the_operation_works_from(family, op, check):
    from grpo_debug.tools.families import run_family

    rep = run_family(family, op)
    assert check(rep), rep.model_dump_json(indent=1)[:1500]
    assert any("For your own input" in n for n in rep.notes)
