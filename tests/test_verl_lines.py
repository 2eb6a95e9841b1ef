"""The verl metric-line fast path (tools/engine/verl_lines.py) gives what the general path gives, or nothing."""
from __future__ import annotations

import math
import random

from grpo_debug.tools.engine.metrics import MetricTable, extract_metrics
from grpo_debug.tools.engine.normalize import normalize_line
from grpo_debug.tools.engine.verl_lines import VerlTemplates

KEYS = ["global_seqlen/min", "actor/entropy", "actor/kl_loss", "actor/grad_norm", "critic/score/mean",
        "timing_s/update_weights", "perf/throughput", "response_length/clip_ratio"]
PREFIXES = ["", "\x1b[36m(TaskRunner pid=1234)\x1b[0m ", "(TaskRunner pid=77, ip=10.0.0.3) ", "[rank0]: ",
            "2025-03-01T10:00:00.123Z ", "[36m(TaskRunner pid=1)[0m ", "(main_task pid=9) "]
PLAIN = ["0.5", "1", "-3", "0.05970491448229495", "1e-05", "nan", "inf", "-inf", "128.0", "2.5E+3"]
ODD = ["np.float64(0.5)", "1.2.3", "True", "0.5 ", "", "1_000", "0x10", "[0.1]"]


def general(text: str) -> tuple[float, tuple, list] | None:
    """(step, keys, values) the general path reads from one line, if it reads it as verl."""
    t = MetricTable()
    extract_metrics([normalize_line(text, 1)], table=t, counters={})
    recs = [r for r in t.records if r.fmt == "verl"]
    if len(recs) != 1:
        return None
    keys = tuple(t.series)
    return recs[0].step, keys, [t.series[k][0].value for k in keys]


def same(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b))


def line(prefix: str, step: int, keys: list[str], vals: list[str], sep: str = " - ") -> str:
    return f"{prefix}step:{step}{sep}" + sep.join(f"{k}:{v}" for k, v in zip(keys, vals))


def test_fast_path_agrees_with_the_general_path_on_every_line_it_takes():
    rng = random.Random(7)
    taken = 0
    for trial in range(400):
        prefix = rng.choice(PREFIXES)
        keys = rng.sample(KEYS, rng.randint(1, len(KEYS)))
        first = line(prefix, trial, keys, [rng.choice(PLAIN) for _ in keys])
        got = general(first)
        assert got is not None, first
        fast = VerlTemplates()
        assert fast.learn(first.encode(), got[1]), first  # a plain line of a known prefix is learned
        # the next step: the same layout, values sometimes odd, the line sometimes damaged
        vals = [rng.choice(ODD) if rng.random() < 0.1 else rng.choice(PLAIN) for _ in keys]
        nxt = line(prefix, trial + 1, keys, vals)
        nxt = rng.choice([nxt, nxt, nxt, nxt + " ", nxt + "\r", nxt.replace(" - ", "  - ", 1), nxt + "é"])
        want, have = general(nxt), fast.parse(nxt.encode("utf-8"))
        if have is not None:
            taken += 1
            assert want is not None and want[0] == have[0] and want[1] == have[1] and same(want[2], have[2]), nxt
    assert taken > 60  # about 4 lines in 7 are undamaged, 3 in 5 of those all plain: the fast path takes them


def test_a_line_with_other_keys_or_an_unknown_prefix_is_left_to_the_general_path():
    fast = VerlTemplates()
    first = line(PREFIXES[1], 1, KEYS, ["1"] * len(KEYS))
    assert fast.learn(first.encode(), tuple(KEYS))
    assert fast.parse(line(PREFIXES[1], 2, KEYS, ["2"] * len(KEYS)).encode())[0] == 2.0
    assert fast.parse(line(PREFIXES[1], 2, KEYS[:-1], ["2"] * (len(KEYS) - 1)).encode()) is None
    assert fast.parse(line("some text ", 2, KEYS, ["2"] * len(KEYS)).encode()) is None
    assert fast.parse(line(PREFIXES[1], 2, KEYS, ["2"] * len(KEYS)).encode() + b" [repeated 3x across cluster]") is None
    # a template that does not reproduce its line is refused
    assert not VerlTemplates().learn(first.encode(), tuple(KEYS[1:]))


def test_streamed_store_is_the_same_with_and_without_the_fast_path(tmp_path, monkeypatch):
    from grpo_debug.tools.engine import large_logs, verl_lines
    from grpo_debug.tools.engine.large_logs import scan_file
    from grpo_debug.tools.engine.series_store import SeriesStore

    rng = random.Random(3)
    rows = []
    for s in range(1, 3000):
        if s % 500 == 0:
            rows.append(f"(WorkerDict pid=5) some chatter at {s}")
        keys = KEYS if s % 97 else KEYS[:3]  # a second layout now and then
        vals = ["nan" if s == 2500 and k == "actor/grad_norm" else repr(rng.random() * (1 + s / 100)) for k in keys]
        rows.append(line(PREFIXES[1], s, keys, vals))
    p = tmp_path / "run.log"
    p.write_text("\n".join(rows) + "\n")
    monkeypatch.setattr(large_logs, "CHUNK", 32 * 1024)  # many chunks: layouts learned in one, used in the next

    def scan() -> tuple:
        store = SeriesStore()
        scan_file(p, store=store)
        table, _ = store.materialize()
        return ({k: [(q.step, q.value, q.line) for q in v] for k, v in table.series.items()},
                [(r.fmt, r.step, r.line, r.keys) for r in table.records], dict(table.counts))
    calls = []
    real = verl_lines.VerlTemplates.parse
    monkeypatch.setattr(verl_lines.VerlTemplates, "parse", lambda self, raw: calls.append(r := real(self, raw)) or r)
    with_fast = scan()
    taken = sum(c is not None for c in calls)
    monkeypatch.setattr(verl_lines.VerlTemplates, "parse", lambda self, raw: None)
    without = scan()
    assert taken > 2000
    assert repr(with_fast) == repr(without)  # repr: nan == nan
