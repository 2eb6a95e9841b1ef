"""The MCP triage answer is concise by default (server/concise.py, issue 26): sizes over the shared cases, every
finding's contract fields in both forms, detail='full' is the complete result, the text block is compact."""
from __future__ import annotations

import json
import os
import re
import statistics
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from grpo_debug.server.app import build_server
from grpo_debug.server.budget import bound_triage
from grpo_debug.server.concise import CONCISE_BUDGET, concise_answer
from grpo_debug.server.schemas import TriageAnswer
from grpo_debug.tools.models import Cause, Coverage, Evidence, Finding, SeriesSummary, TriageResult

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path("/work/shared/cases")
CASES = sorted(p for p in SHARED.glob("*/input*")) if SHARED.is_dir() else []
CORPUS = sorted((ROOT / "tests/data/corpus/cases").glob("*/input*"))[:12]
INPUTS = CASES or CORPUS


def _text(r) -> str:
    return "".join(getattr(b, "text", "") for b in r.content)


def _compact(d) -> int:
    return len(json.dumps(d, separators=(",", ":"), ensure_ascii=False))


async def _triage_all(paths, **extra) -> list[tuple[Path, object]]:
    roots = sorted({str(p.parent) for p in paths})
    async with Client(build_server(allowed_roots=roots)) as c:
        return [(p, await c.call_tool("triage", {"path": str(p), **extra})) for p in paths]


@pytest.fixture(scope="module")
def answers():
    """(path, concise result, full result) for each shared case, through the SDK's in-process client."""
    os.environ.setdefault("GRPO_DEBUG_POOL", "thread")
    concise = anyio.run(_triage_all, INPUTS)
    full = anyio.run(lambda: _triage_all(INPUTS, detail="full"))
    return [(p, c, f) for (p, c), (_, f) in zip(concise, full)]


def test_sizes_over_the_shared_cases(answers):
    """Median at most 4 kB of text and of structured content, the largest at most 8 kB; smaller than full."""
    assert len(answers) >= 10 and not any(c.is_error for _, c, _ in answers)
    texts = [len(_text(c)) for _, c, _ in answers]
    structs = [_compact(c.structured_content) for _, c, _ in answers]
    assert statistics.median(texts) <= 4000 and statistics.median(structs) <= 4000, (texts, structs)
    assert max(texts) <= 8000 and max(structs) <= 8000, (texts, structs)
    full = [_compact(f.structured_content) for _, _, f in answers]
    assert sum(structs) < 0.7 * sum(full), (sum(structs), sum(full))


def _contract(f: dict) -> None:
    assert f["symptom"] and f["confidence"] in ("high", "medium", "low"), f
    assert f["evidence"] and isinstance(f["evidence"][0]["line"], int), f
    assert f["fix"] and "\n" not in f["fix"], f


def test_every_finding_keeps_its_contract_fields_in_both_forms(answers):
    checked = 0
    for p, c, full in answers:
        sc, fc = c.structured_content, full.structured_content
        TriageAnswer.model_validate(sc)
        TriageResult.model_validate(sc)
        assert sc["verdict"] == fc["verdict"] and fc["more"] == "", p
        assert [f["symptom"] for f in sc["findings"]] == [f["symptom"] for f in fc["findings"]][: len(sc["findings"])]
        text = _text(c)
        for i, (f, ff) in enumerate(zip(sc["findings"], fc["findings"]), 1):
            if ff["evidence"]:
                _contract(f)
                assert f["evidence"][0]["line"] == ff["evidence"][0]["line"], p
                assert f"L{f['evidence'][0]['line']}" in text, (p, i)
            onset = {k: v for k, v in (ff.get("onset") or {}).items() if v is not None} or None
            assert f.get("onset") == onset, p  # onset where the engine gives one
            if onset:
                assert f"step {onset['step']}" in text or f"step {float(onset['step']):.4g}" in text, p
            assert f.get("consequence_of") == ff.get("consequence_of"), p
            assert f"{i}. {'risk ' if f.get('risk') else ''}{f['symptom']} ({f['confidence']})" in text, (p, i)
            assert f["fix"][:60] in text, (p, i)
            if i > 1 and f.get("causes"):
                assert f["causes"][0]["rule_id"] in text
            checked += 1
        if fc["findings"]:  # the top finding complete: every evidence line (as bounded), its cause, its edits
            top, ftop = sc["findings"][0], fc["findings"][0]
            assert [e["line"] for e in top["evidence"]] == [e["line"] for e in ftop["evidence"]], p
            assert top["causes"][0]["rule_id"] == ftop["causes"][0]["rule_id"] and top["causes"][0]["why"], p
            assert len(top.get("edits", [])) == min(len(ftop["edits"]), 6), p
    assert checked >= len(answers)


def test_concise_metrics_are_only_the_series_the_findings_name(answers):
    for p, c, full in answers:
        sc, fc = c.structured_content, full.structured_content
        assert set(sc["metrics"]) <= set(fc["metrics"]), p
        named = json.dumps([{k: f.get(k) for k in ("title", "causes", "fix", "onset")} for f in fc["findings"]])
        for key in sc["metrics"]:
            assert key in named or key.rsplit("/", 1)[-1] in named or key in sc["summary"], (p, key)


def test_detail_full_is_the_complete_result(answers):
    from grpo_debug.tools.rundir import triage_any

    for p, _, full in answers[:5]:
        want = bound_triage(triage_any(path=str(p))).model_dump(mode="json")
        got = dict(full.structured_content)
        assert got.pop("more") == ""
        assert got == want, p
        assert "detail='full'" not in _text(full)


def test_text_block_is_compact_not_json(answers):
    for p, c, full in answers:
        for r in (c, full):
            text = _text(r)
            with pytest.raises(ValueError):
                json.loads(text)
            assert '{\n  "' not in text and not re.search(r'^\s+"\w+": ', text, re.M), p
            assert "log matches /" not in text and "log line matches /" not in text, p  # no raw regexes
            lines = [x for x in text.splitlines() if len(x) > 40]
            if r is c:  # nothing said twice (a full answer writes out each finding, shared evidence lines too)
                assert len(lines) == len(set(lines)), (p, [x for x in lines if lines.count(x) > 1][:2])
        sc = c.structured_content
        if sc["more"]:  # a cut answer says how to get the rest
            assert "detail='full'" in sc["more"] and f"more: {sc['more']}" in _text(c) and sc["truncated"], p


@pytest.mark.anyio
async def test_output_schema_accepts_both_forms_and_lists_detail():
    import jsonschema

    log = ROOT / "tests/data/corpus/cases"
    path = next(iter(sorted(log.glob("*/input.log"))))
    async with Client(build_server(allowed_roots=[str(log)])) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        for name in ("triage", "check_config"):
            assert tools[name].input_schema["properties"]["detail"]["enum"] == ["concise", "full"]
        results = [await c.call_tool("triage", {"path": str(path), "detail": d}) for d in ("concise", "full")]
        bad = await c.call_tool("triage", {"path": str(path), "detail": "everything"})
    for r in results:
        assert not r.is_error, _text(r)
        jsonschema.validate(r.structured_content, tools["triage"].output_schema)
    assert bad.is_error and "concise" in _text(bad) and "full" in _text(bad)


CONFIG = """actor_rollout_ref:
  actor:
    optim:
      lr: 1e-5
      clip_grad: 0.0
    ppo_mini_batch_size: 256
    ppo_micro_batch_size_per_gpu: 8
  rollout:
    n: 1
    gpu_memory_utilization: 0.9
data:
  train_batch_size: 128
"""


@pytest.mark.anyio
async def test_check_config_is_concise_with_its_diff_and_full_on_request():
    async with Client(build_server()) as c:
        short = await c.call_tool("check_config", {"text": CONFIG})
        full = await c.call_tool("check_config", {"text": CONFIG, "detail": "full"})
    assert not short.is_error and not full.is_error, _text(short)
    sc, fc = short.structured_content, full.structured_content
    assert fc["more"] == "" and fc["findings"] and len(sc["findings"]) <= len(fc["findings"])
    assert sc["findings"][0]["symptom"] == fc["findings"][0]["symptom"]
    assert _text(short).startswith("check_config: ") and len(_text(short)) <= len(_text(full))
    if fc["diff"] and len(fc["diff"]) <= 2500:
        assert sc["diff"] == fc["diff"] and fc["diff"].splitlines()[0] in _text(short)


def _huge_result(n_findings: int = 40) -> TriageResult:
    """A result far over any budget: long titles, evidence, mechanisms and fixes, 200 series."""
    long = "word " * 400
    fs = [Finding(symptom="nan_inf", title=f"finding {i} " + long[:300], confidence="medium",
                  evidence=[Evidence(line=10 * i + j + 1, text=f"step:{j} " + "x" * 290) for j in range(8)],
                  causes=[Cause(rule_id=f"rule-{i}-{j}", title=long[:200], why=long[:1500], fix=long[:1500],
                                verified=True, matched=["grad_norm climbs " + long[:250]]) for j in range(4)],
                  fix=f"fix {i} " + long[:1490], next_checks=[long[:300]] * 6, sharpen=[long[:300]] * 6)
          for i in range(n_findings)]
    metrics = {f"actor/grad_norm_{k}": SeriesSummary(points=100, first_step=1, last_step=100, first=0.1, last=2.0,
                                                     min=0.1, max=9.0) for k in range(200)}
    return TriageResult(summary="Most likely: nan_inf - x (medium confidence). Fix: " + long[:1000], findings=fs,
                        metrics=metrics, coverage=Coverage(input="/x/run.log", unknown_config_keys=["k"] * 50))


def test_a_huge_result_still_fits_the_budget_with_a_complete_first_finding():
    r = concise_answer(_huge_result())  # as the engine gave it, before the MCP budget
    sc, text = r.structured_content, _text(r)
    assert _compact(sc) <= CONCISE_BUDGET + 500 and len(text) <= CONCISE_BUDGET + 500, (_compact(sc), len(text))
    TriageAnswer.model_validate(sc)
    top = sc["findings"][0]
    assert top["evidence"] and top["causes"][0]["why"] and top["fix"].startswith("fix 0")
    assert "detail='full'" in sc["more"] and "more findings" in sc["more"]
    for f in sc["findings"]:
        _contract(f)


@pytest.mark.slow
def test_a_sweep_folder_of_30_logs_fits(tmp_path):
    """30 generated rank logs in one folder: at most 8 kB of text and of structured content, first finding whole."""
    sys.path.insert(0, str(ROOT / "bench"))
    from gen_real_log import generate

    run = tmp_path / "sweep"
    run.mkdir()
    for i in range(30):
        generate(str(run / f"rank{i}.log"), mb=0.5, seed=i)
        os.remove(run / f"rank{i}.log.planted.json")
    os.environ.setdefault("GRPO_DEBUG_POOL", "thread")

    async def go():
        async with Client(build_server(allowed_roots=[str(tmp_path)])) as c:
            return await c.call_tool("triage", {"path": str(run)})

    r = anyio.run(go)
    assert not r.is_error, _text(r)
    assert len(_text(r)) <= 8000 and _compact(r.structured_content) <= 8000
    top = r.structured_content["findings"][0]
    _contract(top)
    assert top["causes"][0]["why"]


def test_cli_text_follows_the_concise_form_and_json_stays_complete(capsys):
    """CLI text: the top finding written out, the others one line (rule id, fix); --verbose all; json complete."""
    from grpo_debug.server.cli import main
    from grpo_debug.tools.rundir import triage_any

    path = SHARED / "verl-late-gradnorm-climb" / "input.log"
    if not path.exists():
        pytest.skip("needs the shared cases")
    res = triage_any(path=str(path))
    assert len(res.findings) >= 2
    assert main(["triage", str(path)]) == 0
    short = capsys.readouterr().out
    assert main(["triage", str(path), "--verbose"]) == 0
    long = capsys.readouterr().out
    assert main(["triage", str(path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(res.model_dump_json())
    top, second = res.findings[0], res.findings[1]
    assert all(f"L{e.line}:" in short for e in top.evidence)  # the top finding complete
    flat = " ".join(short.split())
    assert f"rule {second.causes[0].rule_id}" in flat and "fix: " + " ".join(second.fix.split())[:40] in flat
    assert short.count("Causes:") == 1 and long.count("Causes:") == len(res.findings)
    assert "Signals:" in short and "log matches /" not in short
    assert len(short) < len(long) and "--verbose" in short


def test_a_cut_metric_line_keeps_its_step_in_the_excerpt():
    """Evidence of a long metric line is cut around the key that proves the finding; the line's step field stays in
    front of the cut, so the excerpt says which step it is."""
    from grpo_debug.tools.triage import excerpt

    line = ("(TaskRunner pid=77) step:2799 - actor/entropy:0.31 - " + " - ".join(f"k{i}/x:{i}.5" for i in range(60))
            + " - response_length/clip_ratio:0.9")
    got = excerpt(line, ["response_length/clip_ratio"])
    assert got.startswith("step:2799 ...") and "response_length/clip_ratio:0.9" in got
    assert excerpt("step:3 - a:1", ["a"]) == "step:3 - a:1"
