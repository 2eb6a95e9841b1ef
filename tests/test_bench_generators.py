"""bench/gen_real_log.py: the realistic benchmark log is reproducible and its planted.json is true of the file
(each planted line number holds the planted text, found with grep; the expected answers match the file's own
metric lines). The slow test triages a ~20 MB realistic log through the CLI (streamed path) and checks the answers."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _gen():
    spec = importlib.util.spec_from_file_location("gen_real_log", ROOT / "bench" / "gen_real_log.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _gen()
VARIANTS = {"sglang": {"engine": "sglang"}, "vllm": {"engine": "vllm"},
            "sglang-ranks8": {"engine": "sglang", "ranks": 8}, "vllm-ranks4-3f": {"engine": "vllm", "ranks": 4,
                                                                                 "value_format": "3f"}}


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _grep_first(pattern: str, path: Path) -> int:
    """1-based number of the first line containing the fixed string (grep -n -m1 -F)."""
    out = subprocess.run(["grep", "-a", "-n", "-m1", "-F", pattern, str(path)], capture_output=True, text=True,
                         errors="replace").stdout
    return int(out.split(":", 1)[0]) if out else 0


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a, b, c = tmp_path / "a.log", tmp_path / "b.log", tmp_path / "c.log"
    pa = GEN.generate(str(a), 1, seed=3)
    pb = GEN.generate(str(b), 1, seed=3)
    pc = GEN.generate(str(c), 1, seed=4)
    assert _sha(a) == _sha(b) and pa == pb
    assert _sha(a) != _sha(c)
    assert json.loads(Path(str(a) + ".planted.json").read_text()) == pa


@pytest.mark.skipif(shutil.which("grep") is None, reason="needs grep")
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_planted_lines_hold_the_planted_text(tmp_path, variant):
    log = tmp_path / "r.log"
    p = GEN.generate(str(log), 2, **VARIANTS[variant])
    raw = log.read_bytes()
    lines = raw.split(b"\n")
    assert raw.endswith(b"\n") and len(lines) - 1 == p["lines"] and len(raw) == p["bytes"]

    def at(n: int) -> str:
        return lines[n - 1].decode("utf-8")

    # each planted line is the first line in the file with its text (grep), and holds the expected step
    assert _grep_first("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate", log) == p["oom_line"]
    assert _grep_first("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=", log) == p["nccl_line"]
    assert "OpType=ALLREDUCE" in at(p["nccl_line"]) and "Timeout(ms)=600000) ran for" in at(p["nccl_line"])
    assert _grep_first("actor/grad_norm:nan", log) == p["nan_line"]
    assert f"step:{p['first_nonfinite_step']} - " in at(p["nan_line"])
    one = "1.000" if VARIANTS[variant].get("value_format") == "3f" else "1.0"
    assert f"step:{p['climb_start_step']} - " in at(p["climb_line"])
    assert f"actor/grad_norm:{one} - " in at(p["climb_line"])
    # planted mid-file, in the order of the run
    assert 0.2 < p["oom_line"] / p["lines"] < p["nccl_line"] / p["lines"] < p["climb_line"] / p["lines"] < 0.95
    assert p["climb_line"] < p["nan_line"]
    # the expected answers are those of the file's metric lines
    rows = [(int(m.group(1)), float(m.group(2))) for m in re.finditer(
        rb"step:(\d+) - .*?actor/grad_norm:([^ ]+) - ", raw)]
    assert len(rows) == p["metric_lines"] - 1  # step 0 carries validation keys only
    assert len(rows) == p["steps"] * p["ranks"]
    assert max(v for _, v in rows if v == v) == p["grad_norm_max"] == 128.0
    assert min(s for s, v in rows if v != v) == p["first_nonfinite_step"]
    assert max(v for s, v in rows if s < p["climb_start_step"]) < 0.5 <= min(
        v for s, v in rows if p["climb_start_step"] <= s < p["first_nonfinite_step"])


@pytest.mark.parametrize("engine,chatter", [("sglang", r"\[2026-\d\d-\d\d \d\d:\d\d:\d\d (?:DP\d )?TP\d\] Decode batch\. "
                                                       r"#running-req: \d+, #token: \d+, token usage: \d\.\d\d, cuda graph: "
                                                       r"True, gen throughput \(token/s\): [\d.]+, #queue-req: \d+, $"),
                                            ("vllm", r"INFO \d\d-\d\d \d\d:\d\d:\d\d \[loggers\.py:\d+\] Engine \d{3}: Avg "
                                                     r"prompt throughput: [\d.]+ tokens/s, Avg generation throughput: "
                                                     r"[\d.]+ tokens/s, Running: \d+ reqs, Waiting: \d+ reqs, GPU KV cache "
                                                     r"usage: [\d.]+%, Prefix cache hit rate: [\d.]+%$")])
def test_shape_of_a_realistic_log(tmp_path, engine, chatter):
    log = tmp_path / "r.log"
    p = GEN.generate(str(log), 2, engine=engine)
    text = log.read_bytes().decode("utf-8")  # not read_text: universal newlines would turn tqdm's \r into lines
    lines = text.split("\n")[:-1]
    ray = re.compile(r"^\x1b\[36m\((WorkerDict|TaskRunner|SGLangHttpServer|vLLMHttpServer|AgentLoopWorker) pid=\d+"
                     r"(?:, ip=10\.0\.0\.\d+)?\)\x1b\[0m ")
    assert sum(bool(ray.match(ln)) for ln in lines) > 0.95 * len(lines)
    decode = [ln for ln in lines if re.search(chatter, ln)]
    assert len(decode) == p["decode_lines"] and 0.4 < p["decode_lines"] / p["lines"] < 0.7  # about half, as issue 15
    assert abs(p["bytes"] - 2 * 2**20) < 0.05 * 2 * 2**20
    bars = [ln for ln in lines if "\rTraining Progress: " in ln]
    assert len(bars) == p["steps"] and all(ln.count("\r") == 2 for ln in bars)
    assert text.count("validation generation end") >= 3 and "FutureWarning: FSDP.state_dict_type()" in text


def test_metric_density_option_sets_the_metric_line_count(tmp_path):
    few = GEN.generate(str(tmp_path / "a.log"), 2, ranks=4, metric_lines=400, value_format="3f")
    many = GEN.generate(str(tmp_path / "b.log"), 2, ranks=4, metric_lines=2000, value_format="3f")
    assert few["metric_lines"] == 401 and many["metric_lines"] == 2001  # + step 0
    assert few["steps"] == 100 and many["steps"] == 500
    with pytest.raises(ValueError):
        GEN.generate(str(tmp_path / "c.log"), 1, engine="tgi")


@pytest.mark.slow
def test_cli_triage_of_a_realistic_20mb_log_finds_the_planted_faults(tmp_path):
    log = tmp_path / "real20.log"
    p = GEN.generate(str(log), 20)
    assert log.stat().st_size > 16 * 2**20  # above the streaming threshold (tools/inputs.py)
    r = subprocess.run([sys.executable, "-m", "grpo_debug.server.cli", "triage", str(log), "--format", "json"],
                       capture_output=True, text=True, timeout=600)
    out = json.loads(r.stdout)
    cited = {e["line"] for f in out["findings"] for e in f["evidence"]}
    assert {k: p[k] in cited for k in ("oom_line", "nccl_line", "climb_line", "nan_line")} == dict.fromkeys(
        ("oom_line", "nccl_line", "climb_line", "nan_line"), True)
    gn = out["metrics"]["actor/grad_norm"]
    assert gn["first_nonfinite_step"] == p["first_nonfinite_step"]
    assert gn["max"] == p["grad_norm_max"]
