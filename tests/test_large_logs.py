"""Large logs in bounded memory (tools/engine/large_logs.py, line_quota.py, series_store.py, tools/streaming.py).

Logs of a few MB go through the streaming path with small quotas, chunks and series budgets (monkeypatched), so
the cases a 1 GB log meets (more candidate lines than the quotas, series downsampled, chatter set aside) happen
here: the planted answers of bench/gen_real_log.py must still come out at their lines, and every cut is said."""
from __future__ import annotations

import gzip
import importlib.util
import io
import math
import random
import re
import zlib
from pathlib import Path

import pytest

import grpo_debug.tools.engine.large_logs as ll
import grpo_debug.tools.engine.line_quota as lq
import grpo_debug.tools.engine.series_store as ss
from grpo_debug.skills.loader import default_rules
from grpo_debug.tools.streaming import read_streamed
from grpo_debug.tools.triage import triage_stream

ROOT = Path(__file__).resolve().parents[1]


def _gen():
    spec = importlib.util.spec_from_file_location("gen_real_log", ROOT / "bench" / "gen_real_log.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def real_log(tmp_path_factory):
    """A 4 MiB realistic verl + SGLang log, two metric lines per step (ranks), with planted answers."""
    path = tmp_path_factory.mktemp("big") / "run.log"
    planted = _gen().generate(str(path), mb=4, ranks=2, metric_lines=3000)
    return path, planted


@pytest.fixture
def small_limits(monkeypatch):
    """Chunks, quotas and series budgets small enough for a few MB to overflow them all."""
    monkeypatch.setattr(ll, "CHUNK", 256 * 2**10)
    monkeypatch.setattr(ll, "HIT_LIMIT", 4000)
    monkeypatch.setattr(lq, "QUOTA", 30)
    monkeypatch.setattr(lq, "ERROR_QUOTA", 60)
    monkeypatch.setattr(lq, "NOISY_LINES", 300)
    monkeypatch.setattr(ss, "STORE_POINTS", 20_000)
    monkeypatch.setattr(ss, "SERIES_CAP", (64, 512))
    monkeypatch.setattr(ss, "TABLE_POINTS", 4000)
    monkeypatch.setattr(ss, "TABLE_CAP", (64, 400))
    monkeypatch.setattr(ss, "PENDING", 64)


def _finding(res, symptom):
    return next((f for f in res.findings if f.symptom == symptom), None)


def test_planted_answers_survive_quotas_and_downsampling(real_log, small_limits):
    path, planted = real_log
    res = triage_stream(path)
    gn = res.metrics["actor/grad_norm"]
    assert gn.points == 2 * planted["steps"]  # the true number of points, not the kept one
    assert gn.max == planted["grad_norm_max"]
    assert (gn.first_nonfinite_step, gn.first_nonfinite_line) == (planted["first_nonfinite_step"], planted["nan_line"])
    nan = _finding(res, "nan_inf")
    assert nan and planted["nan_line"] in {e.line for e in nan.evidence}
    assert any("actor/grad_norm:nan" in e.text for e in nan.evidence if e.line == planted["nan_line"])  # read back
    climb = [f for f in res.findings if any(f"climbs from step {planted['climb_start_step']} (line "
                                            f"{planted['climb_line']})" in m for c in f.causes for m in c.matched)]
    assert climb, [c.matched for f in res.findings for c in f.causes]
    assert planted["oom_line"] in {e.line for e in _finding(res, "cuda_oom").evidence}
    assert planted["nccl_line"] in {e.line for e in _finding(res, "collective_hang").evidence}
    skipped = res.coverage.skipped
    assert re.search(r"actor/grad_norm: [\d,]+ points kept as [\d,]+", " ".join(skipped)), skipped
    first_note = next(i for i, s in enumerate(skipped) if "not kept" in s or "no longer scanned" in s)
    assert first_note < next(i for i, s in enumerate(skipped) if s.startswith("streamed with"))  # drops said first


def test_kept_lines_stay_within_the_quotas(tmp_path, small_limits, monkeypatch):
    """A chatty log (the generator's default density: ~40 kB of engine chatter a step): the lines kept as text are
    bounded by the quotas, not by the file; every metric line's values are still read."""
    monkeypatch.setattr(ll, "HEAD_LINES", 300)
    monkeypatch.setattr(ll, "TAIL_LINES", 100)
    path = tmp_path / "chatty.log"
    planted = _gen().generate(str(path), mb=5)
    st = read_streamed(path, default_rules())
    rules = {p for r in default_rules() for sig in r.match.signals() if (p := getattr(sig, "pattern", None))}
    patterns = len(ll.build_patterns(rules)) + 20  # + alternatives split off chatter patterns
    bound = ll.HEAD_LINES + ll.TAIL_LINES + 2 * lq.TRACEBACK_QUOTA + 2 * lq.ERROR_QUOTA * patterns
    assert len(st.lines) < min(bound, planted["lines"] // 5), (len(st.lines), planted["lines"])
    assert len(st.ctx.metrics.lines) == planted["metric_lines"]  # every metric line's values were read
    assert planted["nan_line"] in {p.line for p in st.ctx.metrics.series["actor/grad_norm"]}


DECODE = ("[2026-11-30 12:00:{s:02d} TP{tp}] Decode batch. #running-req: 37, #token: 41234, token usage: 0.31, "
          "cuda graph: True, gen throughput (token/s): 2561.23, #queue-req: 0, ")  # sglang scheduler_metrics_mixin.py


def _flood_log(path: Path, n: int, error_at: int) -> None:
    """``n`` lines of rank-prefixed SGLang decode chatter behind Ray prefixes; at ``error_at`` the scheduler's own
    error line (sglang python/sglang/srt/managers/scheduler.py: logger.error(f"Scheduler hit an exception: ..."))."""
    with path.open("w") as fh:
        for i in range(1, n + 1):
            pre = f"\x1b[36m(SGLangEngine pid=2{i % 8}31, ip=10.0.0.{i % 8})\x1b[0m "
            if i == error_at:
                fh.write(pre + "[2026-11-30 12:00:00 TP3] Scheduler hit an exception: Traceback (most recent call last):\n")
                fh.write(pre + "RuntimeError: CUDA error: an illegal memory access was encountered\n")
            else:
                fh.write(pre + DECODE.format(s=i % 60, tp=i % 4) + "\n")


def test_chatter_flood_is_set_aside_with_a_note_and_an_error_inside_it_is_kept(tmp_path, small_limits):
    log = tmp_path / "flood.log"
    _flood_log(log, 60_000, error_at=41_234)
    st = read_streamed(log, default_rules())
    kept = {ln.no for ln in st.lines}
    assert {41_234, 41_235} <= kept  # the error line shares a regex with the chatter: its alternative is still scanned
    assert len(kept) < ll.HEAD_LINES + ll.TAIL_LINES + 200 + 2 * lq.TRACEBACK_QUOTA
    note = next(s for s in st.skipped if "TP" in s)
    assert "`\\bTP\\d+\\]`" in note and "no longer scanned for" in note and "not kept" in note, st.skipped
    assert st.skipped.index(note) < next(i for i, s in enumerate(st.skipped) if s.startswith("streamed with"))


def _climb_series(n: int, climb: int, seed: int = 0) -> list[float]:
    rnd = random.Random(seed)
    out = [rnd.uniform(0.30, 0.45) if i < climb else 2.0 ** min(7, i - climb) for i in range(n)]
    out[n // 3], out[n // 5] = 99.0, -5.0  # the extremes
    for i in range(climb + 8, n):
        out[i] = math.nan
    return out


def test_bucket_keeps_what_its_docstring_promises():
    """series_store._keep against its specification written out plainly (min and max finite value, the first
    value above / below the previous range, up to BREAKOUTS values beyond it by more than its width; the first
    index alone when nothing is finite), on random buckets with nan and +-inf mixed in."""
    rnd = random.Random(3)

    def spec(vals, start, stop, lo, hi):
        idx = range(start, stop)
        fin = [i for i in idx if math.isfinite(vals[i])]
        if not fin:
            return [start], lo, hi
        mn, mx = min(vals[i] for i in fin), max(vals[i] for i in fin)
        out = {next(i for i in fin if vals[i] == mn), next(i for i in fin if vals[i] == mx)}
        far = hi - lo if hi > lo else 0.0
        if mx > hi:
            out.add(next(i for i in idx if vals[i] > hi))
            out.update([i for i in idx if vals[i] > hi + far][:ss.BREAKOUTS])
        if mn < lo:
            out.add(next(i for i in idx if vals[i] < lo))
            out.update([i for i in idx if vals[i] < lo - far][:ss.BREAKOUTS])
        return sorted(out), mn, mx
    odd = [math.nan, math.inf, -math.inf, 0.0, 50.0, -50.0]
    for _ in range(20_000):
        n = rnd.randint(1, 40)
        vals = ss.array("d", [rnd.choice(odd) if rnd.random() < 0.15 else rnd.gauss(0, 1) for _ in range(n)])
        a = rnd.randint(0, n - 1)
        b = rnd.randint(a + 1, n)
        lo, hi = sorted((rnd.gauss(0, 1), rnd.gauss(0, 1))) if rnd.random() < 0.8 else (math.inf, -math.inf)
        assert ss._keep(vals, a, b, lo, hi) == spec(vals, a, b, lo, hi), (list(vals), a, b, lo, hi)


def test_buckets_filed_with_numpy_are_the_buckets_filed_one_by_one(monkeypatch):
    """_Series files whole buckets with numpy (series_store._keep_rows), and _thin keeps whole groups with it; the
    entries, bucket starts and ranges, and the thinned indices, must be those of _keep applied bucket by bucket:
    random walks, plateaus, climbs, nan and inf stretches."""
    rnd = random.Random(11)

    def fill(values) -> tuple:
        s = ss._Series(1)
        s.cap = 200
        for k, v in enumerate(values):
            s.pv.append(v)
            s.pr.append(k)
            if len(s.pv) >= max(64, s.width):
                s.file()
        s.file(final=True)
        return list(s.vals), list(s.recs), list(s.bnd), s.width, s.lo, s.hi
    wide = 0
    for trial in range(60):
        n = rnd.randint(500, 6000)
        x, values = 0.0, []
        for i in range(n):
            x += rnd.gauss(0, 1) if trial % 3 else (0.0 if i % 50 else rnd.gauss(0, 5))  # plateaus: ties
            values.append(2.0 ** min(60, (i - n // 2) / 10) if trial % 4 == 0 and i > n // 2 else x)
        if trial % 5 == 0:
            for i in range(n - n // 7, n - n // 9):
                values[i] = rnd.choice([math.nan, math.inf, -math.inf])
        budget = rnd.choice([50, 300, 1000])
        with_numpy = fill(values), ss._thin(ss.array("d", values), budget)
        monkeypatch.setattr(ss, "_keep_rows", lambda *a: None)
        one_by_one = fill(values), ss._thin(ss.array("d", values), budget)
        monkeypatch.undo()
        assert with_numpy[1] == one_by_one[1], trial  # materialize's thinning, both ways
        with_numpy, one_by_one = with_numpy[0], one_by_one[0]
        assert with_numpy[3] >= 16, trial  # merged: buckets filed both ways
        wide += with_numpy[3] >= 64
        assert repr(with_numpy) == repr(one_by_one), trial
    assert wide > 20  # and often merged again


def test_series_store_keeps_extremes_first_nan_and_climb_start(monkeypatch):
    monkeypatch.setattr(ss, "STORE_POINTS", 3000)
    monkeypatch.setattr(ss, "SERIES_CAP", (256, 1024))
    monkeypatch.setattr(ss, "TABLE_POINTS", 600)
    monkeypatch.setattr(ss, "TABLE_CAP", (64, 300))
    monkeypatch.setattr(ss, "PENDING", 128)
    n, climb = 50_000, 41_003
    vals = _climb_series(n, climb)
    st = ss.SeriesStore()
    for i, v in enumerate(vals):
        st.add("verl", float(i), 10 + 2 * i, 100 * i, {"actor/grad_norm": v, "actor/pg_loss": 0.5})
        if i % 997 == 0:  # another format in between (a different key set)
            st.add("val", float(i), 11 + 2 * i, -1, {"val/score": 1.0})
    table, index = st.materialize()
    pts = table.series["actor/grad_norm"]
    assert table.count("actor/grad_norm") == n and len(pts) < 2000
    by_value = {p.value: p for p in pts if math.isfinite(p.value)}
    assert (by_value[99.0].step, by_value[99.0].line) == (n // 3, 10 + 2 * (n // 3))
    assert (by_value[-5.0].step, by_value[-5.0].line) == (n // 5, 10 + 2 * (n // 5))
    assert (by_value[1.0].step, by_value[128.0].step) == (climb, climb + 7)  # the climb's first point and its peak
    bad = next(p for p in pts if not math.isfinite(p.value))
    assert (bad.step, bad.line) == (climb + 8, 10 + 2 * (climb + 8))
    assert (pts[0].step, pts[-1].step) == (0, n - 1)
    assert all(a.line < b.line for a, b in zip(pts, pts[1:]))
    assert index.get(by_value[99.0].line) == 100 * (n // 3)  # where its line starts, to read it back
    assert len(table.lines) == n + len(range(0, n, 997))


def test_progress_is_monotone_ends_at_the_total_then_says_analysing(real_log, monkeypatch):
    monkeypatch.setattr(ll, "CHUNK", 256 * 2**10)
    path, _ = real_log
    calls, plain = [], []
    triage_stream(path, progress=lambda done, total, phase: calls.append((done, total, phase)))
    size = path.stat().st_size
    reading = [c for c in calls if c[2] == "reading"]
    assert len(reading) > 10 and all(a[0] <= b[0] for a, b in zip(reading, reading[1:]))
    assert reading[-1][:2] == (size, size) and calls[-1][2] == "analysing"
    ll.scan_file(path, progress=lambda done, total: plain.append((done, total)))  # the two-argument form
    assert plain == [c[:2] for c in reading]


def test_gzip_log_reads_cited_metric_lines_back_and_counts_its_own_bytes(tmp_path, real_log, small_limits):
    path, planted = real_log
    gz = tmp_path / "run.log.gz"
    with gzip.open(gz, "wb") as g:
        g.write(path.read_bytes())
    seen = []
    res = triage_stream(gz, progress=lambda d, t: seen.append((d, t)))
    nan = _finding(res, "nan_inf")
    ev = next(e for e in nan.evidence if e.line == planted["nan_line"])
    assert "actor/grad_norm:nan" in ev.text  # read back from the spool of metric lines
    assert seen[-1] == (gz.stat().st_size,) * 2 and all(d <= t for d, t in seen)


def test_compressed_log_not_read_to_its_end_says_so_in_the_summary(tmp_path, real_log, small_limits, monkeypatch):
    """A .gz cut by the decompression cap, and a truncated .gz (a log gzipped while still written, a partial
    download), are triaged as far as they go, and the summary, not only coverage, says the rest was not seen (a
    newcomer's gzipped 292 MB log lost its NaN to the old 256 MiB cap, and the only sign was the last coverage
    line). The per-pattern bookkeeping notes stay out of the summary."""
    path, planted = real_log
    data = path.read_bytes()
    gz = tmp_path / "run.log.gz"
    gz.write_bytes(gzip.compress(data))
    monkeypatch.setattr(ll, "MAX_DECOMPRESSED_BYTES", len(data) // 2)
    res = triage_stream(gz)
    assert "Note: only the first" in res.summary and "not seen" in res.summary
    assert res.coverage.skipped[0].startswith("only the first") and "`" not in res.summary.split("Note:")[1]
    assert res.coverage.lines_read < planted["lines"] // 2 + 1000

    monkeypatch.setattr(ll, "MAX_DECOMPRESSED_BYTES", 16 * 2**30)
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(gzip.compress(data)[: len(gzip.compress(data)) * 3 // 4])
    res = triage_stream(cut)
    assert "the input ends early (a truncated or corrupt compressed file" in res.summary and "EOFError" in res.coverage.skipped[0]
    assert 0 < res.coverage.lines_read < planted["lines"] and res.findings
    # every line the cut file still holds is read (gzip.GzipFile dropped its last read: up to 4 MiB, the crash)
    recoverable = zlib.decompressobj(31).decompress(cut.read_bytes()).count(b"\n")
    assert res.coverage.lines_read >= recoverable
    whole = triage_stream(gz)  # read to the end: nothing partial to say in the summary
    assert "Note:" not in whole.summary and whole.coverage.lines_read == planted["lines"]


def test_truncated_zstd_log_says_it_ends_early(tmp_path, real_log, small_limits):
    """zstandard's reader ends a cut .zst silently; the frame walk (engine/zstd_frames.py) finds the cut and the
    summary says the rest was not seen. Whole files (one frame with a checksum, several frames, a skippable frame,
    a streamed frame without a content size) are whole."""
    zstandard = pytest.importorskip("zstandard")
    from grpo_debug.tools.engine.zstd_frames import truncation

    path, planted = real_log
    data = path.read_bytes()
    one = zstandard.ZstdCompressor(write_checksum=True).compress(data)
    skip = b"\x50\x2a\x4d\x18" + (5).to_bytes(4, "little") + b"12345"
    streamed = zstandard.ZstdCompressor().compressobj()
    streamed = streamed.compress(data[:100_000]) + streamed.flush()
    whole = {"one": one, "frames": one + zstandard.ZstdCompressor().compress(b"x\n"), "skippable": skip + one,
             "streamed": streamed}
    for name, blob in whole.items():
        f = tmp_path / f"{name}.zst"
        f.write_bytes(blob)
        with open(f, "rb") as fh:
            assert truncation(fh) is None, name
    for cut in (len(one) - 3, len(one) // 2, 5):
        f = tmp_path / "cut.zst"
        f.write_bytes(one[:cut])
        with open(f, "rb") as fh:
            assert "ends inside" in truncation(fh), cut
    f = tmp_path / "run.log.zst"
    f.write_bytes(one[: len(one) * 3 // 4])
    res = triage_stream(f)
    assert "the input ends early" in res.summary and "zstd frame" in res.summary
    assert 0 < res.coverage.lines_read < planted["lines"]
    f.write_bytes(one)
    assert "Note:" not in triage_stream(f).summary


def test_text_above_the_dense_line_limit_streams_and_reads_cited_lines_back(real_log, monkeypatch):
    import grpo_debug.tools.triage as tr

    path, planted = real_log
    monkeypatch.setattr(tr, "MAX_DENSE_LINES", 1000)
    res = tr.triage_text(path.read_bytes().decode("utf-8"))  # (read_text would turn tqdm \r into new lines)
    ev = next(e for e in _finding(res, "nan_inf").evidence if e.line == planted["nan_line"])
    assert "actor/grad_norm:nan" in ev.text


def test_fast_paths_agree_with_the_regexes():
    """strip_ansi's find-then-match and _verl_pairs' split on ' - ' give what the regexes give."""
    from grpo_debug.tools.engine.metrics import _PAIR_SEP, _verl_pairs
    from grpo_debug.tools.engine.normalize import _ANSI, strip_ansi
    from grpo_debug.tools.engine.values import to_float

    rnd = random.Random(7)
    ansi = ["\x1b", "[", "]", "m", "0", "3", ";", "a", " ", "(", ")", "B", "\x07", "_", "\x1b[36m", "[0m"]
    for _ in range(20_000):
        s = "".join(rnd.choice(ansi) for _ in range(rnd.randint(0, 24)))
        assert strip_ansi(s) == _ANSI.sub("", s), repr(s)

    def ref(rest):
        out = {}
        for item in _PAIR_SEP.split(rest):
            k, sep, v = item.strip().rpartition(":")
            if sep and k and " " not in k and v.strip() and (f := to_float(v.split()[0])) is not None:
                out[k] = f
        return out
    parts = ["a", ":", "1", ".", "-", " ", "  ", "\t", "nan", "'", "np.float64(", ")", "e", "k/v", "\xa0", " - ", "inf"]
    for _ in range(20_000):
        s = "".join(rnd.choice(parts) for _ in range(rnd.randint(0, 24)))
        got, want = _verl_pairs(s), ref(s)
        assert list(got) == list(want) and all(a == b or (a != a and b != b) for a, b in zip(got.values(), want.values())), s


def test_bytes_stream_without_a_store_keeps_metric_lines_as_lines():
    """scan_stream without a store (tools/rundir/merge.py) still returns every metric line as a line."""
    text = "".join(f"step:{i} - actor/grad_norm:0.{i % 9 + 1}\n" + "chatter\n" * 3 for i in range(1, 2001))
    sl = ll.scan_stream(io.BytesIO(text.encode()))
    assert sum(1 for _, t in sl.lines if t.startswith("step:")) == 2000 and sl.total_lines == 8000


def test_run_folder_streams_its_big_log_like_a_single_file(tmp_path, real_log, small_limits, monkeypatch):
    """A run folder whose console log is over the folder's stream limit: read as single-file triage streams it
    (every metric value, bounded series, read-back evidence, the cuts said in coverage), line numbers the file's
    own. Before, the folder path kept metric lines as text under a silent 400k-line cap and built full series."""
    import shutil

    from grpo_debug.tools.rundir import discover
    from grpo_debug.tools.rundir.analyze import triage_any

    path, planted = real_log
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(path, run / "train.log")
    (run / "config.yaml").write_text("actor_rollout_ref:\n  actor:\n    optim:\n      lr: 1.0e-6\n")
    res = triage_any(path=run, limits=discover.Limits(stream_bytes=1 << 20))
    gn = res.metrics["actor/grad_norm"]
    assert gn.points == 2 * planted["steps"] and gn.max == planted["grad_norm_max"]
    nan = _finding(res, "nan_inf")
    ev = {e.line: e for e in nan.evidence}
    assert planted["nan_line"] in ev and "actor/grad_norm:nan" in ev[planted["nan_line"]].text  # read back
    assert "train.log" in (ev[planted["nan_line"]].source or "")
    assert planted["oom_line"] in {e.line for e in _finding(res, "cuda_oom").evidence}
    skipped = " ".join(res.coverage.skipped)
    assert "train.log: " in skipped and re.search(r"actor/grad_norm: [\d,]+ points kept as [\d,]+", skipped), skipped


def test_plot_and_compare_stream_a_big_log_and_mark_steps_from_kept_points(real_log, small_limits, monkeypatch):
    """analyze() (behind plot and compare) streams a file over the stream threshold as triage does (before, it read
    up to 256 MiB densely and cut the rest with a note); a finding's start step comes from the kept points, not
    from the coarse runs of records a streamed table keeps."""
    import grpo_debug.tools.triage as tr
    from grpo_debug.tools.rundir.analyze import analyze
    from grpo_debug.tools.rundir.plot import finding_marks

    path, planted = real_log
    monkeypatch.setattr(tr, "STREAM_THRESHOLD", 1 << 20)
    a = analyze(path=str(path))
    assert any(s.startswith("streamed with") for s in a.result.coverage.skipped), a.result.coverage.skipped
    gn = a.ctx.metrics.series["actor/grad_norm"]
    assert max(p.value for p in gn if math.isfinite(p.value)) == planted["grad_norm_max"]
    marks = dict(finding_marks(a))
    first_bad = next(p.step for p in gn if not math.isfinite(p.value))
    assert planted["first_nonfinite_step"] - 1 <= first_bad <= planted["first_nonfinite_step"]
    nan = next(f for f in a.result.findings if f.symptom == "nan_inf")  # marked at its onset (issue 26): where the
    assert marks["nan_inf"] == nan.onset.step <= first_bad, marks      # change that ends in the NaN starts


def test_line_numbers_and_traceback_lines_from_the_prefilter_match_a_plain_count():
    """_newlines_before (numpy for a large chunk) gives bytes.count's numbers; _add_context marks the same frames
    whether it is given the Traceback lines or searches for them."""
    from grpo_debug.tools.engine.large_logs import TRACE, _add_context, _newlines_before

    rnd = random.Random(5)
    lines = [rnd.choice([b"x" * rnd.randint(0, 300), b"Traceback (most recent call last):", b"  File a.py"])
             for _ in range(30_000)]
    chunk = b"\n".join(lines) + b"\n"
    assert len(chunk) > 2**20
    order = sorted(rnd.sample(range(len(chunk)), 2000))
    want = [chunk.count(b"\n", 0, s) for s in order]
    assert _newlines_before(chunk, order) == (want, chunk.count(b"\n"))
    assert _newlines_before(chunk[:5000], [s for s in order if s < 5000]) == (
        [chunk.count(b"\n", 0, s) for s in order if s < 5000], chunk[:5000].count(b"\n"))
    starts = [0] + [i + 1 for i, c in enumerate(chunk[:-1]) if c == 10]
    tb = [s for s in starts if chunk.startswith(b"Traceback", s)]
    a, b = {}, {}
    assert _add_context(a, chunk, 3, 10**6) == _add_context(b, chunk, 3, 10**6, tb_lines=tb)
    assert a == b and sum(TRACE in p for p in a.values()) > 1000


def test_streamed_triage_is_the_same_without_numpy(real_log, small_limits, monkeypatch):
    """numpy (the fast extra) only speeds up the chunk index and the bucket filing: with it made unimportable the
    streamed triage gives the same findings, metrics and coverage."""
    import sys

    monkeypatch.setattr(ll, "CHUNK", 2 * 2**20)  # chunks large enough for the numpy line index
    path, _ = real_log
    with_numpy = triage_stream(path).model_dump_json()
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` raises ImportError
    with pytest.raises(ImportError):
        import numpy  # noqa: F401
    assert triage_stream(path).model_dump_json() == with_numpy


def test_a_log_cut_mid_line_says_so_and_counts_its_own_bytes(real_log, small_limits, tmp_path):
    path, _ = real_log
    data = path.read_bytes()
    cut = tmp_path / "cut.log"
    cut.write_bytes(data[: len(data) // 2 + 17])  # mid-line: a log copied while it was written
    res = triage_stream(cut)
    assert res.coverage.bytes_read == cut.stat().st_size
    assert any("has no newline: the log ends mid-line" in s for s in res.coverage.skipped)
    assert not any("ends mid-line" in s for s in triage_stream(path).coverage.skipped)


def test_a_gzip_log_is_read_in_the_same_chunks_as_the_plain_file(real_log, small_limits, tmp_path):
    """The gzip reader fills each chunk as a plain file does, so the kept lines (the tail included) and the flood
    handling are the same for run.log and run.log.gz (a reader returning one 64 KiB input's worth per call kept
    fewer tail lines and demoted chatter later)."""
    path, _ = real_log
    gz = tmp_path / "run.log.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    plain, packed = ll.scan_file(path), ll.scan_file(gz)
    assert plain.lines == packed.lines and plain.demoted == packed.demoted and plain.total_lines == packed.total_lines


def test_a_pattern_with_a_back_reference_keeps_the_lines_of_its_other_alternatives(tmp_path):
    """No bytes engine takes a back-reference without a literal; such a pattern's other alternatives are scanned
    for, so the lines they match are kept (and matched whole with Python later), and the note says which part was
    not read (regex_literals.candidate_branches)."""
    import gzip

    from grpo_debug.tools.engine.large_logs import scan_file
    from grpo_debug.tools.engine.regex_literals import candidate_branches

    pat = r"!{6,}|(\b\w+\b)(?:\s+\1){8,}"
    assert candidate_branches(pat) == ["!{6,}"]
    assert candidate_branches(r"(a)\1") == [] and candidate_branches(r"(?i)foo|(x)\1|bar") == ["(?i)foo", "(?i)bar"]
    body = ["(vLLMHttpServer pid=2) INFO Engine 000: Avg prompt throughput: 12.0 tokens/s"] * 60000
    for k in (30000, 45000):
        body[k] = "(TaskRunner pid=77) [response] " + "!" * 40
    p = tmp_path / "run.log.gz"
    with gzip.open(p, "wt") as fh:
        fh.write("\n".join(body) + "\n")
    out = scan_file(str(p), [pat])
    kept = {no for no, _ in out.lines}
    assert {30001, 45001} <= kept
    if pat in out.unprefiltered:  # the bytes engines (hyperscan, RE2): the alternative was scanned for instead
        assert out.partly[pat] == ["!{6,}"]
