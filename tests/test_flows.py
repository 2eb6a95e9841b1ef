"""One flow per trigger, the same in SKILL.md and in the MCP prompts (skills/flows.yaml), each starting from
the evidence (triage), and a generic loss plateau sent to muon_clipping only when Muon is involved."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from grpo_debug.server.app import build_server
from grpo_debug.skills.flows import FIRST, LAST, flow_steps, flows

ROOT = Path(__file__).resolve().parents[1]


def _flat(s: str) -> str:
    return " ".join(s.split())


def test_skill_md_says_every_flow_step():
    skill = _flat((ROOT / "SKILL.md").read_text(encoding="utf-8"))
    assert (ROOT / "skills" / "SKILL.md").read_text(encoding="utf-8") == (ROOT / "SKILL.md").read_text(encoding="utf-8")
    assert _flat(FIRST) in skill and _flat(LAST) in skill
    for name, f in flows().items():
        assert f"`{name}`" in skill, name
        for step in f.then:
            assert _flat(step) in skill, (name, step)


@pytest.mark.anyio
async def test_prompts_say_the_same_flow_starting_from_the_evidence():
    async with Client(build_server()) as c:
        names = {p.name for p in (await c.list_prompts()).prompts}
        assert names == {"triage_log", *flows()}
        for name in flows():
            text = (await c.get_prompt(name, {"details": "step 40: loss flat"})).messages[0].content.text
            steps = re.findall(r"^\d+\. (.*)$", text, re.M)
            assert steps == flow_steps(name), name
            assert "`triage`" in steps[0] and "step 40: loss flat" in text


def test_a_generic_loss_plateau_reaches_muon_clipping_only_with_muon():
    for step in flows()["debug_loss_plateau"].then:
        assert "muon_clipping" not in step or step.startswith("only if the optimizer is Muon"), step


def test_agentskills_validate_cli(tmp_path):
    exe = shutil.which("agentskills") or str(Path(sys.executable).with_name("agentskills"))
    if not Path(exe).exists():
        pytest.skip("agentskills (skills-ref, the test extra) is not installed")
    d = tmp_path / "grpo-debug"
    d.mkdir()
    shutil.copy(ROOT / "SKILL.md", d / "SKILL.md")
    out = subprocess.run([exe, "validate", str(d)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "Valid skill" in out.stdout, out.stdout + out.stderr
