"""The rules of the issue-24 harvest (docs/harvest_index.md, rows 'accepted'): none cites a held-out thread (any
thread named under tests/data or /work/shared/cases), and each one's own match examples make it the top cause."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from grpo_debug.skills.loader import default_rules
from grpo_debug.tools.triage import triage_text

ROOT = Path(__file__).resolve().parents[1]
INDEX = ROOT / "docs" / "harvest_index.md"
HELD = [ROOT / "tests" / "data", Path("/work/shared/cases")]
# repositories renamed on GitHub: a thread is the same under either owner
ALIASES = {"verl-project/verl": ("volcengine/verl",), "areal-project/AReaL": ("inclusionAI/AReaL",)}
_URL = re.compile(r"github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull)/(\d+)")


def harvest_rule_ids() -> list[str]:
    """Rule ids in the 'accepted' rows of the harvest index (third column of `| threads | accepted | id ... |`)."""
    ids = []
    for line in INDEX.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1] == "accepted":
            ids.append(cells[2].split()[0])
    return sorted(set(ids))


def _held_text() -> str:
    parts = []
    for root in HELD:
        if root.exists():
            parts += [p.read_text(errors="ignore") for p in root.rglob("*") if p.is_file() and p.stat().st_size < 2_000_000]
    return "\n".join(parts)


RULES = {r.id: r for r in default_rules()}
IDS = harvest_rule_ids()


def test_the_index_names_the_harvest_rules():
    assert len(IDS) >= 20 and all(i in RULES for i in IDS), [i for i in IDS if i not in RULES]


def test_no_harvest_rule_cites_a_held_out_thread():
    held = _held_text()
    hits = []
    for rid in IDS:
        for src in RULES[rid].sources:
            for repo, num in _URL.findall(src.ref):
                for name in (repo, *ALIASES.get(repo, ())):
                    # a URL, 'owner/repo#N', or a list after the repo in one cell/line ('owner/repo#1, #2')
                    pat = rf"{re.escape(name)}(?:/(?:issues|pull)/{num}|[^\n|]*?#{num})(?!\d)"
                    if re.search(pat, held, re.I):
                        hits.append((rid, f"{name}#{num}"))
    assert not hits, hits


@pytest.mark.parametrize("rid", IDS)
def test_a_harvest_rule_is_the_top_cause_of_its_own_examples(rid):
    for ex in RULES[rid].examples:
        if ex.expect != "match" or ex.mode != "triage":
            continue
        res = triage_text(ex.input)
        assert res.findings, (rid, ex.name)
        assert res.findings[0].causes[0].rule_id == rid, (rid, ex.name, [c.rule_id for c in res.findings[0].causes])
