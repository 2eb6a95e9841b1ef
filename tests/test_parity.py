"""One input, one answer, whatever way it arrives (issue 22's parity test): pasted text, a file, a .gz of it and the
file inside a run folder give the same findings (symptom, first cause's rule id, confidence, first evidence line).
A sample of the corpus runs in the default run; every corpus and shared case in the slow run."""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from grpo_debug.tools.rundir.analyze import triage_any

ROOT = Path(__file__).resolve().parent / "data"
CASES = sorted(p for base in ("corpus/cases", "corpus2/cases", "corpus3/cases") for p in (ROOT / base).glob("*/input.*")
               if p.suffix in (".log", ".txt", ".md"))
SHARED = Path(__file__).resolve().parents[2] / "shared" / "cases"
SHARED_LOGS = sorted(p for p in SHARED.glob("*/input.*") if p.suffix in (".log", ".txt", ".md")) if SHARED.is_dir() else []


def _key(res) -> list[tuple]:
    return [(f.symptom, f.causes[0].rule_id if f.causes else None, f.confidence,
             f.evidence[0].line if f.evidence else None) for f in res.findings]


def _ways(src: Path, tmp: Path) -> dict[str, list[tuple]]:
    text = src.read_text(encoding="utf-8", errors="replace")
    gz = tmp / (src.stem + ".log.gz")
    with gzip.open(gz, "wb") as fh:
        fh.write(src.read_bytes())
    run = tmp / "run"
    run.mkdir()
    shutil.copy(src, run / "train.log")
    return {"text": _key(triage_any(text=text)), "file": _key(triage_any(path=str(src))),
            "gz": _key(triage_any(path=str(gz))), "folder": _key(triage_any(path=str(run)))}


def _check(src: Path, tmp: Path) -> None:
    from grpo_debug.tools.rundir.runs_split import split_text

    if split_text(src.read_text(encoding="utf-8", errors="replace")):
        pytest.skip("a paste of several runs: split as text or file, not yet inside a folder or a .gz (streamed)")
    ways = _ways(src, tmp)
    assert ways["file"] == ways["text"] == ways["gz"] == ways["folder"], (src.parent.name, ways)


SAMPLE = [p for p in CASES if p.parent.name in {
    "slime-miles-blackwell-trtllm-bf16-moe-weight-update-corruption",  # the streamed table dropped the row axis
    "slime-style-qwen35-moe-gibberish-after-first-weight-sync",  # the folder read fewer sample kinds
    "verl-agent-r1-multiturn-retokenize-nan", "sglang-alloc-req-slots-runs-out-of-memory",
    "trl-grpo-loss-zero-reward-std-zero-within-groups", "openrlhf-vllm-v1-llmengine-no-model-executor"}]


@pytest.mark.parametrize("src", SAMPLE, ids=lambda p: p.parent.name)
def test_the_same_log_gives_the_same_findings_every_way(src, tmp_path):
    _check(src, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("src", CASES + SHARED_LOGS, ids=lambda p: p.parent.name)
def test_every_corpus_log_gives_the_same_findings_every_way(src, tmp_path):
    _check(src, tmp_path)
