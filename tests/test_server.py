"""The MCP server (server/app.py): in process with the SDK's Client, and over stdio as a subprocess."""
from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from grpo_debug.server.app import build_server, find_skill_md
from grpo_debug.skills.symptoms import SYMPTOMS
from grpo_debug.tools.models import TriageResult

pytestmark = pytest.mark.anyio

LOG = ("(TaskRunner pid=1234) step:1 - actor/entropy:0.912 - actor/pg_loss:0.012 - actor/grad_norm:0.412\n"
       "(WorkerDict pid=1240) WARN: rank 0 grad_norm is not finite: nan\n"
       "(TaskRunner pid=1234) step:2 - actor/entropy:0.905 - actor/pg_loss:-0.004 - actor/grad_norm:nan\n")
RESULT_KEYS = {"summary", "findings", "metrics", "coverage"}


def _text(result) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


async def test_tools_are_listed_read_only_with_schemas():
    async with Client(build_server()) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    assert {"triage", "explain_rule"} <= set(tools)
    for name in ("triage", "explain_rule"):
        t = tools[name]
        assert t.annotations.read_only_hint is True
        assert t.annotations.idempotent_hint is True and t.annotations.open_world_hint is False
        assert t.output_schema and t.output_schema["type"] == "object"
        assert t.title and t.description and len(t.description) < 600
    tri = tools["triage"]
    assert RESULT_KEYS <= set(tri.output_schema["properties"])
    props = tri.input_schema["properties"]
    assert {"text", "path", "max_findings"} <= set(props)
    assert all(props[k].get("description") for k in ("text", "path", "max_findings"))
    assert set(tools["explain_rule"].input_schema["required"]) == {"rule_id"}


async def test_triage_text_returns_structured_result():
    async with Client(build_server()) as c:
        r = await c.call_tool("triage", {"text": LOG})
    assert not r.is_error, _text(r)
    assert RESULT_KEYS <= set(r.structured_content)
    TriageResult.model_validate(r.structured_content)


@pytest.mark.parametrize("args, named", [({}, "text"), ({"text": "", "path": ""}, "path"),
                                         ({"text": LOG, "path": "/tmp/x.log"}, "path")])
async def test_triage_needs_exactly_one_input(args, named):
    async with Client(build_server()) as c:
        r = await c.call_tool("triage", args)
    assert r.is_error
    msg = _text(r)
    assert f"`{named}`" in msg and "`text`" in msg


async def test_triage_max_findings_is_validated():
    async with Client(build_server()) as c:
        r = await c.call_tool("triage", {"text": LOG, "max_findings": 0})
    assert r.is_error


async def test_triage_input_error_becomes_tool_error(monkeypatch, tmp_path):
    import grpo_debug.server.app as app
    from grpo_debug.tools.triage import InputError

    def boom(**k):
        raise InputError("/x/run.log: no such file; pass the path of a log")

    monkeypatch.setattr(app, "triage", boom)
    monkeypatch.setenv("GRPO_DEBUG_POOL", "thread")  # a patched attribute is seen in-process only (not by workers)
    (tmp_path / "run.log").write_text("step:1\n")  # paths must exist under an allowed root to reach triage
    async with Client(build_server(allowed_roots=[tmp_path])) as c:
        r = await c.call_tool("triage", {"path": str(tmp_path / "run.log")})
    assert r.is_error and "/x/run.log: no such file" in _text(r)


@pytest.mark.engine
async def test_triage_missing_path_is_a_tool_error(tmp_path):
    missing = str(tmp_path / "nope.log")
    async with Client(build_server()) as c:
        r = await c.call_tool("triage", {"path": missing})
    assert r.is_error and missing in _text(r)


@pytest.mark.engine
async def test_triage_example_finds_nan(example_log):
    async with Client(build_server()) as c:
        r = await c.call_tool("triage", {"path": str(example_log)})
    assert not r.is_error
    assert r.structured_content["findings"], r.structured_content["summary"]
    assert any(f["symptom"] == "nan_inf" for f in r.structured_content["findings"][:3])


async def test_explain_rule(rule_pack):
    async with Client(build_server()) as c:
        r = await c.call_tool("explain_rule", {"rule_id": rule_pack})
        assert not r.is_error, _text(r)
        page = r.structured_content
        assert page["id"] == rule_pack and page["symptom"] == "nan_inf"
        assert page["sources"] == [{"ref": "https://example.invalid/fixture", "status": "unverified",
                                    "note": "a fixture, not a claim"}]
        assert page["steps"] == ["first step", "second step"] and len(page["examples"]) == 2
        bad = await c.call_tool("explain_rule", {"rule_id": rule_pack + "x"})
    assert bad.is_error and rule_pack in _text(bad)


async def test_rule_resource(rule_pack):
    from grpo_debug.skills.loader import default_rules

    packaged = next((r.id for r in default_rules() if r.id != rule_pack), None)
    async with Client(build_server()) as c:
        templates = [t.uri_template for t in (await c.list_resource_templates()).resource_templates]
        assert "rule://{rule_id}" in templates
        res = await c.read_resource(f"rule://{rule_pack}")
        assert res.contents[0].mime_type == "text/markdown"
        md = res.contents[0].text
        assert md.startswith(f"# {rule_pack}: ") and "## Why" in md and "[unverified]" in md
        if packaged:  # any rule of the packaged base reads too
            md = (await c.read_resource(f"rule://{packaged}")).contents[0].text
            assert md.startswith(f"# {packaged}: ")
        with pytest.raises(Exception, match="unknown rule id"):
            await c.read_resource("rule://no-such-rule")


async def test_symptom_codes_resource(rule_pack):
    async with Client(build_server()) as c:
        uris = {str(r.uri) for r in (await c.list_resources()).resources}
        assert "symptoms://codes" in uris
        assert ("skill://grpo-debug/SKILL.md" in uris) == (find_skill_md() is not None)
        codes = json.loads((await c.read_resource("symptoms://codes")).contents[0].text)
    assert set(codes) == set(SYMPTOMS)
    assert rule_pack in codes["nan_inf"]["rules"]


async def test_triage_log_prompt():
    async with Client(build_server()) as c:
        prompts = {p.name: p for p in (await c.list_prompts()).prompts}
        assert "triage_log" in prompts
        got = await c.get_prompt("triage_log", {"log": "step:3 - actor/grad_norm:nan ```"})
    text = got.messages[0].content.text
    assert "`triage`" in text and "evidence" in text and "step:3 - actor/grad_norm:nan ```" in text


# ---------------------------------------------------------------------------- over stdio

async def test_stdio_server(tmp_path, example_log, shared_root):
    allow = ["--allow", str(shared_root)] if shared_root else []  # tools read only under allowed folders
    params = StdioServerParameters(command=sys.executable, args=["-m", "grpo_debug.server.cli", "serve", *allow],
                                   cwd=str(tmp_path))
    inputs = [str(example_log)]
    if shared_root:  # a shared case too, when ../shared/cases is there
        inputs.append(str(shared_root / "cases" / "verl-nan-gradnorm-microbatch" / "input.log"))
    with anyio.fail_after(90):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.server_info.name == "grpo-debug"
                names = {t.name for t in (await session.list_tools()).tools}
                assert {"triage", "explain_rule"} <= names
                for path in inputs:
                    r = await session.call_tool("triage", {"path": path})
                    assert not r.is_error, _text(r)
                    assert RESULT_KEYS <= set(r.structured_content)


def test_building_the_server_does_not_import_torch(tmp_path):
    code = "import sys, grpo_debug.server.app as a; a.build_server(); print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


@pytest.mark.anyio
async def test_triage_of_a_large_file_reports_progress(tmp_path):
    """Files above the streaming threshold are read in chunks; the MCP triage tool sends progress."""
    from grpo_debug.tools.triage import STREAM_THRESHOLD

    log = tmp_path / "big.log"
    line = "(WorkerDict pid=1) INFO chatter chatter chatter chatter chatter chatter chatter chatter\n"
    with log.open("w") as fh:
        fh.write("step:1 - actor/grad_norm:0.4\n")
        fh.write(line * (STREAM_THRESHOLD // len(line) + 200_000))
        fh.write("step:2 - actor/grad_norm:nan\n")
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total))

    async with Client(build_server(allowed_roots=[tmp_path])) as c:
        r = await c.call_tool("triage", {"path": str(log)}, progress_callback=on_progress)
    assert not r.is_error, r.content
    assert r.structured_content["findings"][0]["symptom"] == "nan_inf"
    assert seen and seen[-1][0] == seen[-1][1] == log.stat().st_size


# ---------------------------------------------------------------------------- large files over stdio, progress

def _big_log(path, nan_at: int) -> int:
    """A log above the streaming threshold: verl metric lines among Ray-prefixed chatter, grad_norm nan at line
    ``nan_at`` (1-based). Returns its size in bytes."""
    from grpo_debug.tools.triage import STREAM_THRESHOLD

    chatter = '(AgentLoopWorker pid=812) INFO:     10.0.0.3:35262 - "POST /generate HTTP/1.1" 200 OK\n'
    lines = STREAM_THRESHOLD // len(chatter) + 50_000
    with path.open("w") as fh:
        for i in range(1, lines + 1):
            if i == nan_at:
                fh.write(f"(TaskRunner pid=1234) step:{i // 1000} - actor/pg_loss:0.01 - actor/grad_norm:nan\n")
            elif i % 1000 == 0:
                fh.write(f"(TaskRunner pid=1234) step:{i // 1000} - actor/pg_loss:0.01 - actor/grad_norm:0.4\n")
            else:
                fh.write(chatter)
    return path.stat().st_size


async def test_stdio_triage_of_a_large_path_streams_and_sends_progress(tmp_path):
    """Over stdio, `triage` of a path above the streaming threshold takes the CLI's streaming read (coverage says
    so), finds the NaN at its line, and sends increasing progress to an SDK client that asked for it, the last
    one at the file's size."""
    data = tmp_path / "runs"
    data.mkdir()
    log = data / "big.log"
    size = _big_log(log, nan_at=150_001)
    params = StdioServerParameters(command=sys.executable, cwd=str(tmp_path),
                                   args=["-m", "grpo_debug.server.cli", "serve", "--allow", str(data)])
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    with anyio.fail_after(120):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                r = await session.call_tool("triage", {"path": str(log)}, progress_callback=on_progress)
    assert not r.is_error, _text(r)
    res = r.structured_content
    assert res["coverage"]["bytes_read"] == size
    assert any("streamed" in s for s in res["coverage"]["skipped"]), res["coverage"]["skipped"]
    nan = [f for f in res["findings"] if f["symptom"] == "nan_inf"]
    assert nan and 150_001 in {e["line"] for e in nan[0]["evidence"]}, res["findings"]
    assert seen and seen[-1] == (size, size, "log read; analysing it (rules, detectors, ranking)"), seen
    assert all(a[0] < b[0] for a, b in zip(seen, seen[1:])), seen


async def test_progress_reporter_sends_few_increasing_notifications():
    """The engine's progress callback, called thousands of times from a worker thread, reaches the client at most
    once per interval, only increasing, with the first and the final (done == total, saying the analysis goes
    on) always sent."""
    import time

    from grpo_debug.server.app import _progress_reporter

    sent = []

    class Ctx:
        async def report_progress(self, progress, total=None, message=None):
            sent.append((progress, total, message))

    progress = _progress_reporter(Ctx(), "reading", "analysing", interval=0.05)

    def work():
        t = time.monotonic()
        for i in range(1, 200_001):
            progress(i, 200_000)
        progress(200_000, 200_000, "analysing")  # the engine's next phase: no new count, nothing more to send
        progress(5, 200_000)  # a smaller value after the end is never sent
        return time.monotonic() - t

    elapsed = await anyio.to_thread.run_sync(work)
    assert sent[0] == (1.0, 200_000.0, "reading") and sent[-1] == (200_000.0, 200_000.0, "analysing")
    assert {m for _, _, m in sent[:-1]} == {"reading"}
    assert all(a[0] < b[0] for a, b in zip(sent, sent[1:]))
    assert len(sent) <= 2 + elapsed / 0.05, (len(sent), elapsed)


def test_answer_budget_drops_unnamed_metric_series_before_a_finding():
    """A whole-run answer over the budget (a realistic verl log: four findings and ~100 metric series) keeps every
    finding and the series they name; the series nobody names are what is cut, and truncated says so."""
    from grpo_debug.server.budget import MAX_ANSWER_BYTES, bound_triage
    from grpo_debug.tools.models import Coverage, Evidence, Finding, SeriesSummary, TriageResult

    def finding(symptom, line, text):
        return Finding(symptom=symptom, title=f"{symptom} at line {line}", confidence="high", fix="f" * 1400,
                       evidence=[Evidence(line=line + i, text=text + " " + "e" * 250) for i in range(8)])

    findings = [finding("nan_inf", 183023, "step:951 - actor/grad_norm:nan"),
                finding("collective_hang", 138477, "Watchdog caught collective operation timeout"),
                finding("cuda_oom", 88060, "torch.OutOfMemoryError: CUDA out of memory."),
                finding("grad_norm_spike", 181486, "step:943 - actor/grad_norm:2.0")]
    metrics = {f"perf/metric_{i:03d}": SeriesSummary(points=1310, first_step=1, last_step=1310, first=0.5, last=0.25,
                                                     min=0.125, max=1.5) for i in range(100)}
    metrics["actor/grad_norm"] = SeriesSummary(points=1310, first=0.4, last=float("nan"), max=128.0,
                                               first_nonfinite_step=951, first_nonfinite_line=183026)
    res = TriageResult(summary="4 findings", findings=[f.model_copy(deep=True) for f in findings],
                       metrics=metrics, coverage=Coverage(input="run.log"))
    assert len(res.model_dump_json()) > MAX_ANSWER_BYTES
    out = bound_triage(res)
    assert len(out.model_dump_json()) <= MAX_ANSWER_BYTES and out.truncated
    kept = [(f.symptom, f.evidence[0].line) for f in out.findings]
    assert kept == [(f.symptom, f.evidence[0].line) for f in findings]
    assert out.metrics["actor/grad_norm"].first_nonfinite_line == 183026
    assert len(out.metrics) < 101
