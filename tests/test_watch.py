"""grpo-debug watch (tools/watch.py, tools/watch_state.py): a live log written by a thread, rotation, truncation,
--from-end, --state, --until-eof on healthy logs, JSONL and TensorBoard stores, --on-alert, input errors."""
from __future__ import annotations

import io
import json
import math
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from grpo_debug.skills.loader import default_rules
from grpo_debug.tools.watch import Options, Watch, WatchError, watch

ROOT = Path(__file__).resolve().parents[1]
NAN_LOG = ROOT / "tools" / "examples" / "verl_grpo_nan.log"
LINES = NAN_LOG.read_text().splitlines(keepends=True)
FIRST_NAN = next(i for i, ln in enumerate(LINES) if re.search(r"\bnan\b", ln))  # 0-based: line 55
HEADER = [ln for ln in LINES[:FIRST_NAN] if "step:" not in ln]
STEPS = [ln for ln in LINES[:FIRST_NAN] if "step:" in ln]
HEALTHY = sorted((ROOT / "tests" / "data" / "corpus" / "healthy").glob("*/input.log")) + sorted(
    Path("/work/shared/healthy").glob("*/input.log"))


def healthy_body(n: int, first_step: int = 1) -> list[str]:
    """``n`` verl step lines of the example's healthy steps, renumbered from ``first_step``."""
    return [re.sub(r"step:\d+", f"step:{first_step + i}", STEPS[i % len(STEPS)], count=1) for i in range(n)]


def nan_tail(step: int) -> list[str]:
    return [re.sub(r"step:\d+", f"step:{step}", ln, count=1) for ln in LINES[FIRST_NAN:]]


def _opts(path, **kw) -> Options:
    kw.setdefault("poll", 0.05)
    return Options(paths=[str(path)], **kw)


def drive(w: Watch, rounds: int = 1) -> list[tuple[str, dict]]:
    """Poll every follower to its end and evaluate each; the (event, record) pairs said."""
    said = []
    for _ in range(rounds):
        while w.poll_all()[0]:
            pass
        for p in list(w.followers):
            if w.due(p, time.monotonic(), False, final=True):
                said += w.evaluate(p)
    return said


@pytest.fixture(scope="module", autouse=True)
def _warm():
    default_rules()  # loaded once, so the watcher starts at once in every test


def test_live_log_fail_on_nan_exits_within_2s_of_the_nan_line_and_not_before(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    out, result, t = io.StringIO(), {}, {}

    def run():
        result["rc"] = watch(_opts(log, fail_on={"nan_inf"}), out=out)
        t["end"] = time.monotonic()
    th = threading.Thread(target=run, daemon=True)
    th.start()
    lines = HEADER + healthy_body(150)  # 196 lines at ~400 lines/s, then the NaN lines
    with open(log, "a") as fh:
        for i in range(0, len(lines), 20):
            fh.write("".join(lines[i:i + 20]))
            fh.flush()
            time.sleep(0.05)
        assert th.is_alive(), out.getvalue()  # nothing before the NaN line
        fh.write(nan_tail(151)[0])
        fh.flush()
        t["nan"] = time.monotonic()
        for ln in nan_tail(151)[1:]:
            fh.write(ln)
            fh.flush()
            time.sleep(0.0025)
    th.join(10)
    assert result.get("rc") == 1, out.getvalue()
    assert t["end"] >= t["nan"] and t["end"] - t["nan"] < 2.0, t["end"] - t["nan"]
    nan = [ln for ln in out.getvalue().splitlines() if ln.startswith("ALERT nan_inf")]
    assert nan[0].startswith("ALERT nan_inf (high)") and f"line {len(lines) + 1}," in nan[0]


def test_each_byte_read_once_while_the_log_grows(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("")
    w = Watch(_opts(log), out=io.StringIO())
    w.discover()
    body = HEADER + healthy_body(200)
    for i in range(0, len(body), 7):  # appends in pieces, some mid-line
        with open(log, "a") as fh:
            fh.write("".join(body[i:i + 7])[:-3] if i + 7 < len(body) else "".join(body[i:]))
        while w.poll_all()[0]:
            pass
        with open(log, "a") as fh:
            if i + 7 < len(body):
                fh.write("".join(body[i:i + 7])[-3:])
    drive(w)
    f = w.followers[str(log)]
    assert f.bytes_read == log.stat().st_size
    assert f.counts() == (len(body), 200)
    assert max(p.step for p in snapshot_points(f, "actor/entropy")) == 200


def snapshot_points(f, key):
    from grpo_debug.tools.watch_state import snapshot

    return snapshot(f)[0].metrics.series[key]


def test_truncation_reads_the_new_content_from_byte_0(tmp_path):
    log = tmp_path / "t.log"
    log.write_text("".join(HEADER + healthy_body(40)))
    w = Watch(_opts(log), out=io.StringIO())
    w.discover()
    assert not [r for e, r in drive(w) if r["symptom"] == "nan_inf"]
    log.write_text("".join(HEADER[:3] + nan_tail(5)))  # truncated in place (shorter), then written
    said = drive(w)
    f = w.followers[str(log)]
    assert any("truncated" in n for n in f.notes) and f.generation == 1
    nan = [r for e, r in said if r["symptom"] == "nan_inf"]
    assert nan and nan[0]["onset_line"] == 4 and nan[0]["generation"] == 1


def test_rotation_drains_the_old_file_then_reopens_the_name(tmp_path):
    log = tmp_path / "r.log"
    log.write_text("".join(HEADER + healthy_body(30)))
    w = Watch(_opts(log), out=io.StringIO())
    w.discover()
    drive(w)
    os.rename(log, tmp_path / "r.log.1")
    with open(tmp_path / "r.log.1", "a") as fh:  # the writer still had the old file open
        fh.write("".join(healthy_body(2, 31)))
    log.write_text("".join(nan_tail(33)))
    said = drive(w, rounds=2)
    f = w.followers[str(log)]
    assert any("rotated" in n for n in f.notes) and f.generation == 1
    assert f.bytes_read == (tmp_path / "r.log.1").stat().st_size + log.stat().st_size
    nan = [r for e, r in said if r["symptom"] == "nan_inf"]
    assert nan and nan[0]["onset_line"] == 1


def test_a_link_swapped_in_at_rotation_is_refused_not_followed(tmp_path):
    log = tmp_path / "s.log"
    log.write_text("".join(HEADER))
    secret = tmp_path / "secret.log"
    secret.write_text("".join(nan_tail(1)))
    w = Watch(_opts(log), out=io.StringIO())
    w.discover()
    drive(w)
    os.rename(log, tmp_path / "s.log.1")
    os.symlink(secret, log)
    assert not [r for e, r in drive(w, 2) if r["symptom"] == "nan_inf"]
    assert "symbolic link" in (w.followers[str(log)].error or "")


def test_from_end_skips_history_and_alerts_on_new_lines(tmp_path):
    log = tmp_path / "e.log"
    log.write_text(NAN_LOG.read_text())  # history with a NaN in it
    w = Watch(_opts(log, from_end=True), out=io.StringIO())
    w.discover()
    assert drive(w) == []
    with open(log, "a") as fh:
        fh.write("".join(nan_tail(20)))
    said = drive(w)
    nan = [r for e, r in said if r["symptom"] == "nan_inf"]
    assert nan and nan[0]["onset_line"] == len(LINES) + 1  # real line numbers, history counted


def test_state_resume_does_not_repeat_an_alert(tmp_path):
    log, state = tmp_path / "s.log", tmp_path / "watch.json"
    log.write_text(NAN_LOG.read_text())
    out1, out2 = io.StringIO(), io.StringIO()
    assert watch(_opts(log, state=str(state), until_eof=True, idle=0.2), out=out1) == 0
    assert "ALERT nan_inf" in out1.getvalue()
    saved = json.loads(state.read_text())
    assert saved["files"][str(log)]["offset"] == log.stat().st_size
    # restarted with --fail-on nan_inf: the NaN was already said, so it is neither repeated nor a failure
    assert watch(_opts(log, state=str(state), until_eof=True, idle=0.2, fail_on={"nan_inf"}), out=out2) == 0
    assert "ALERT" not in out2.getvalue()
    with open(log, "a") as fh:  # a new symptom after the restart is said
        fh.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                 "capacity of 79.15 GiB of which 1.12 GiB is free.\n")
    out3 = io.StringIO()
    assert watch(_opts(log, state=str(state), until_eof=True, idle=0.2, fail_on={"cuda_oom"}), out=out3) == 1
    assert "ALERT cuda_oom" in out3.getvalue() and "nan_inf" not in out3.getvalue()


def test_state_from_end_resumes_at_the_saved_offset(tmp_path):
    log, state = tmp_path / "o.log", tmp_path / "st.json"
    log.write_text("".join(HEADER + healthy_body(10)))
    assert watch(_opts(log, state=str(state), until_eof=True, idle=0.2), out=io.StringIO()) == 0
    with open(log, "a") as fh:  # written while the watcher was down
        fh.write("".join(nan_tail(11)))
    out = io.StringIO()
    assert watch(_opts(log, state=str(state), from_end=True, until_eof=True, idle=0.2), out=out) == 0
    assert "ALERT nan_inf" in out.getvalue()


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: p.parent.name)
def test_until_eof_exits_0_without_alert_on_healthy_logs(path, tmp_path):
    out = io.StringIO()
    assert watch(_opts(path, until_eof=True, idle=0.2, fail_on={"any"}), out=out) == 0
    assert "ALERT" not in out.getvalue()


def test_verl_jsonl_store_null_is_nan(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    js = run / "metrics.jsonl"
    rows = [{"step": s, "data": {"actor": {"grad_norm": 0.5 + 0.01 * s, "entropy": 1.0}, "critic/score/mean": 0.5}}
            for s in range(1, 30)]
    js.write_text("".join(json.dumps(r) + "\n" for r in rows))
    w = Watch(_opts(run), out=io.StringIO())
    w.discover()
    assert not [r for e, r in drive(w) if r["symptom"] == "nan_inf"]
    with open(js, "a") as fh:
        fh.write(json.dumps({"step": 30, "data": {"actor": {"grad_norm": None, "entropy": 1.0}}}) + "\n")
    nan = [r for e, r in drive(w) if r["symptom"] == "nan_inf"]
    assert nan and nan[0]["onset_step"] == 30 and nan[0]["run"] == str(run)


def test_tensorboard_records_written_in_pieces(tmp_path):
    from tests.hostile.tfwrite import event, record

    ev = tmp_path / "events.out.tfevents.1.host"
    recs = b"".join(record(event(s, 1e9 + s, "actor/grad_norm", 0.5)) for s in range(1, 40))
    recs += record(event(40, 1e9 + 40, "actor/grad_norm", math.nan))
    w = Watch(_opts(ev), out=io.StringIO())
    ev.write_bytes(b"")
    w.discover()
    for i in range(0, len(recs), 37):  # a record is often cut between two polls
        with open(ev, "ab") as fh:
            fh.write(recs[i:i + 37])
        while w.poll_all()[0]:
            pass
    f = w.followers[str(ev)]
    assert f.records == 40 and f.bytes_read == len(recs)
    nan = [r for e, r in drive(w) if r["symptom"] == "nan_inf"]
    assert nan and nan[0]["onset_step"] == 40


def test_on_alert_runs_once_per_finding_with_the_finding_on_stdin(tmp_path):
    log, got = tmp_path / "h.log", tmp_path / "hook.out"
    log.write_text(NAN_LOG.read_text())
    cmd = f"{sys.executable} -c \"import sys; open(sys.argv[1], 'a').write(sys.stdin.read() + chr(10))\" {got}"
    out = io.StringIO()
    assert watch(_opts(log, on_alert=cmd, until_eof=True, idle=0.2, fail_on={"nan_inf"}), out=out) == 1
    recs = [json.loads(x) for x in got.read_text().splitlines()]
    alerts = [ln for ln in out.getvalue().splitlines() if ln.startswith("ALERT")]
    assert len(recs) == len(alerts) == len({(r["symptom"], r["rule"]) for r in recs})  # one run per finding
    nan = next(r for r in recs if r["symptom"] == "nan_inf")
    assert nan["finding"]["causes"][0]["rule_id"] == nan["rule"] and nan["onset_line"] == FIRST_NAN + 1


def test_jsonl_format_carries_the_triage_finding_schema(tmp_path):
    from grpo_debug.tools.models import Finding

    out = io.StringIO()
    watch(_opts(NAN_LOG, fmt="jsonl", until_eof=True, idle=0.2, status_every=0.01), out=out)
    recs = [json.loads(x) for x in out.getvalue().splitlines()]
    alerts = [r for r in recs if r["event"] == "alert"]
    assert alerts and all(Finding.model_validate(r["finding"]) for r in alerts)
    assert len({(r["symptom"], r["rule"]) for r in alerts}) == len(alerts)
    assert any(r["event"] == "status" and r["bytes_read"] == NAN_LOG.stat().st_size for r in recs)


def test_input_errors_exit_2(tmp_path):
    from grpo_debug.server.cli import main

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    os.symlink(NAN_LOG, tmp_path / "link.log")
    assert main(["watch", str(fifo), "--until-eof"]) == 2
    assert main(["watch", str(tmp_path / "link.log"), "--until-eof"]) == 2
    assert main(["watch", str(NAN_LOG), "--fail-on", "not_a_code"]) == 2
    assert main(["watch", str(tmp_path / "never.log"), "--until-eof", "--idle", "0.3"]) == 2
    with pytest.raises(WatchError):
        watch(_opts(NAN_LOG, on_alert="'unclosed"))


@pytest.mark.slow
def test_cli_live_log_fail_on_nan_subprocess(tmp_path):
    """The command line as a user runs it: a log written at ~400 lines/s for 5 s, then a NaN."""
    log = tmp_path / "live.log"
    log.write_text("")
    p = subprocess.Popen([sys.executable, "-m", "grpo_debug.server.cli", "watch", str(log), "--fail-on", "nan_inf"],
                         stdout=subprocess.PIPE, text=True, cwd=ROOT)
    time.sleep(3)  # start-up (rules loaded)
    lines = HEADER + healthy_body(2000)
    with open(log, "a") as fh:
        for i in range(0, len(lines), 20):
            fh.write("".join(lines[i:i + 20]))
            fh.flush()
            time.sleep(0.05)
        assert p.poll() is None
        fh.write("".join(nan_tail(2001)))
        fh.flush()
        t_nan = time.monotonic()
    rc = p.wait(10)
    assert rc == 1 and time.monotonic() - t_nan < 2.5
    assert "ALERT nan_inf" in p.stdout.read()


def test_cli_watch_refuses_stdin_and_a_closed_pipe_is_not_a_crash(tmp_path):
    """`watch -` is a usage error at once (it waited --idle then said the path never appeared); a reader that leaves
    (| head -1) ends the watcher with 0, not the internal-error code 3 a watchdog keys on."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    exe = [sys.executable, "-m", "grpo_debug.server.cli", "watch"]
    r = subprocess.run(exe + ["-"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not stdin" in r.stderr
    log = tmp_path / "w.log"
    shutil.copy(Path(__file__).resolve().parents[1] / "tools" / "examples" / "verl_grpo_nan.log", log)
    p = subprocess.Popen(exe + [str(log), "--until-eof", "--idle", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()  # the reader leaves
    assert p.wait(timeout=60) == 0, p.stderr.read()


def test_repeated_chatter_with_an_error_word_does_not_re_trigger_but_a_new_kind_does():
    """The urgent trigger counts a line shape once (digits dropped): a warning repeated every step does not re-run
    the rules every min_gap seconds; a first NaN line still does."""
    from grpo_debug.tools.watch_state import _Gen

    g = _Gen.__new__(_Gen)
    g.urgent_kinds = set()
    assert g._new_urgent(b"step 1: WARNING Timeout waiting for 3 workers\n")
    assert not g._new_urgent(b"step 2: WARNING Timeout waiting for 4 workers\nstep 3: ok\n")
    assert g._new_urgent(b"step:9 - actor/grad_norm:nan - actor/lr:0.000\n")


def test_urgent_lines_found_by_the_prefilter_engine_are_the_urgent_regex_lines():
    """The engine's line hits (hyperscan, RE2 or pure Python, as installed) are exactly the lines URGENT matches."""
    from grpo_debug.tools.watch_state import URGENT, URGENT_LINES, urgent_engine

    texts = [NAN_LOG.read_bytes()] + [p.read_bytes()[:1 << 20] for p in HEALTHY[:6]]
    texts.append(b"x-inf y\nINFO ok\ninfo\nRuntimeError: boom\nErrors: 0\nnanoseconds 3\nloss: NaN\nKilled\n")
    for data in texts:
        data = data[:data.rfind(b"\n") + 1]
        want, pos = [], 0
        for ln in data.split(b"\n")[:-1]:
            if URGENT.search(ln):
                want.append(pos)
            pos += len(ln) + 1
        got, _ = urgent_engine().line_hits(data, URGENT_LINES)
        assert sorted(got) == want[:URGENT_LINES]


def test_chatter_is_not_evaluated_and_the_interval_backs_off_until_an_alert(tmp_path):
    log = tmp_path / "train.log"
    chatter = [f"(pid=7) rollout worker {i} heartbeat ok\n" for i in range(3100)]  # past the kept head lines
    log.write_text("".join(HEADER + healthy_body(30) + chatter))
    w = Watch(_opts(log, interval=10.0), rules=default_rules(), out=io.StringIO())
    w.discover()
    p, step = str(log), 31
    w.poll_all()
    assert w.due(p, time.monotonic(), False)  # the first evaluation: at once
    assert w.evaluate(p) == [] and w.seen[p]["every"] == 20.0  # nothing said: the interval doubles
    with open(log, "a") as fh:  # chatter no rule pattern or metric reads
        fh.write("".join(chatter[:300]))
    w.poll_all()
    t = w.seen[p]["t"]
    assert w.followers[p].bytes_read > w.seen[p]["bytes"] and not w.due(p, t + 1000, False)
    everies = []
    for _ in range(4):  # new metric lines: evaluated once the (backed-off) interval has passed
        with open(log, "a") as fh:
            fh.write("".join(healthy_body(5, step)))
        step += 5
        w.poll_all()
        every, t = w.seen[p]["every"], w.seen[p]["t"]
        assert not w.due(p, t + every - 1, False) and w.due(p, t + every, False)
        assert w.evaluate(p) == []
        everies.append(w.seen[p]["every"])
    assert everies == [40.0, 60.0, 60.0, 60.0]  # doubled up to 6 x --interval
    with open(log, "a") as fh:
        fh.write("".join(nan_tail(step)))
    w.poll_all()
    assert w.due(p, w.seen[p]["t"] + w.opts.min_gap, False)  # a NaN: at once, whatever the interval
    said = w.evaluate(p)
    assert any(r["symptom"] == "nan_inf" for _, r in said) and w.seen[p]["every"] == 10.0
    w.finish()
