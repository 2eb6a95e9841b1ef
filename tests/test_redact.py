"""Secrets redaction (tools/redact.py): generated secret names in every form, URL userinfo, token prefixes, key
material; what must survive (commit SHAs, checkpoint hashes, config keys that contain the letters)."""
from __future__ import annotations

import random
import string
from pathlib import Path

import pytest

from grpo_debug.tools.redact import SECRET_WORDS, holds_secret, redact, redact_mapping, secret_name

REPO = Path(__file__).resolve().parents[1]
_RNG = random.Random(2113)
WORDS = ["TOKEN", "KEY", "SECRET", "PASS", "PASSWD", "PASSWORD", "AUTH", "CRED", "CREDENTIALS", "COOKIE",
         "SESSION", "PRIVATE", "CERT"]


def _random_word(n: int = 9) -> str:
    return "".join(_RNG.choice(string.ascii_uppercase) for _ in range(n))


def _value() -> str:
    return "".join(_RNG.choice(string.ascii_letters + string.digits) for _ in range(24))


NAMES = [(f"{_random_word()}_{w}", w) for w in WORDS for _ in range(3)]


def test_generated_names_appear_nowhere_in_the_repository():
    """The generated names are new: no rule, fixture or list in the repository can make these cases pass."""
    texts = [p.read_text("utf-8", "replace") for p in (REPO / "tools").rglob("*.py")]
    texts += [p.read_text("utf-8", "replace") for p in (REPO / "skills").rglob("*.yaml")]
    blob = "\n".join(texts).upper()
    for name, _ in NAMES:
        assert name.split("_")[0] not in blob


@pytest.mark.parametrize("name,word", NAMES)
@pytest.mark.parametrize("form", ["{n}={v}", "export {n}={v}", "{n}: {v}", '"{n}": "{v}"', "--{n} {v}",
                                  "--{n}={v}", "  {n} = '{v}'", "{low}: {v}", "--{dash} {v}"])
def test_generated_secret_names_are_redacted_in_every_form(name, word, form):
    v = _value()
    line = "prefix " + form.format(n=name, v=v, low=name.lower(), dash=name.lower().replace("_", "-")) + " tail"
    out = redact(line)
    assert v not in out and "***" in out, (line, out)
    assert out.startswith("prefix ") and name.split("_")[0] in out.upper()  # the name stays, only the value goes
    assert holds_secret(line)


@pytest.mark.parametrize("name,word", NAMES)
def test_generated_secret_names_in_a_mapping(name, word):
    v = _value()
    out = redact_mapping({"env": {name: v, f"probe.env.{name}": v}, "n": 3, "ok": "plain"})
    assert out["env"] == {name: "***", f"probe.env.{name}": "***"} and out["n"] == 3 and out["ok"] == "plain"


def test_every_documented_word_is_a_secret_word():
    assert set(WORDS) <= SECRET_WORDS
    for w in WORDS:
        assert secret_name(f"{_random_word()}_{w}") == "strong"
        assert secret_name(f"{_random_word().lower()}{w.capitalize()}") == "strong"  # camelCase: fooToken


@pytest.mark.parametrize("text", [
    "commit 0548200a1b2c3d4e5f60718293a4b5c6d7e8f901",
    "git_sha: 0548200a1b2c3d4e5f60718293a4b5c6d7e8f901",
    '"git_commit": "0548200a1b2c3d4e5f60718293a4b5c6d7e8f901"',
    "0548200a1b2c3d4e5f60718293a4b5c6d7e8f901",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "checkpoints/global_step_100/actor",
    "actor_rollout_ref.rollout.max_tokens=2048",
    "max_tokens: 512", "--max-new-tokens 128", "tokenizer: Qwen/Qwen2.5-7B", "tokenizer_path=/models/tok",
    "num_key_value_heads: 8", "key_value_heads=4", "kv_cache_dtype: fp8", "pass@k: 0.62", "pass@1=0.5",
    "session_len: 4096", "--input_key prompt --label_key answer --output_key response",
    "eos_token: <|im_end|>", 'pad_token: "<pad>"', "forward_pass: true", "use_auth: false",
    "HF_TOKEN=$HF_TOKEN", "WANDB_API_KEY=${WANDB_API_KEY}", 'api_key = os.environ["OPENAI_API_KEY"]',
    "if token == expected:", "KeyError: 'input_key'", "hub_private_repo: true", "key: val_loss",
    "step:10 loss:0.31 reward:0.5", "http://localhost:8265/#/jobs", "https://github.com/volcengine/verl",
    "ray.init(address='ray://head:10001')", "ssh-keygen -t ed25519",
    "/etc/passwd: outside the allowed roots (allowed roots: /work)", "see ./secrets/token: a folder",
])
def test_must_survive(text):
    assert redact(text) == text
    assert not holds_secret(text)


@pytest.mark.parametrize("text,gone,kept", [
    ("RAY_ADDRESS=ray://alice:hunter2pw@head:10001", "hunter2pw", "ray://alice:***@head:10001"),
    ("https://oauth2:glpat-abcdefghijklmnopqrstuv@gitlab.com/x.git", "glpat-abc", "https://oauth2:***@gitlab.com"),
    ("redis://:r3dispw@cache:6379/0", "r3dispw", "redis://:***@cache:6379/0"),
    ("postgres://bob:pa55w0rd@db:5432/mlflow", "pa55w0rd", "postgres://bob:***@db:5432/mlflow"),
    ("using hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "AbCdEf", "hf_***"),
    ("git clone https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/a/b", "ghp_abc", "ghp_***"),
    ("gho_abcdefghijklmnopqrstuvwxyz0123456789", "gho_abc", "gho_***"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "11ABCDEFG", "github_pat_***"),
    ("OPENAI key sk-proj-abcdefghijklmnopqrstuvwx1234", "abcdefghijkl", "sk-proj-***"),
    ("claude sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "api03-abc", "sk-ant-***"),
    ("slack xoxb-123456789012-abcdefghijklmn", "123456789012", "xoxb-***"),
    ("slack xoxp-123456789012-abcdefghijklmn", "123456789012", "xoxp-***"),
    ("aws AKIAIOSFODNN7EXAMPLE here", "IOSFODNN7", "AKIA***"),
    ("gitlab glpat-xYzAbCdEfGhIjKlMnOpQ", "xYzAbC", "glpat-***"),
    ("WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567", "0123456789abcdef", "WANDB_API_KEY=***"),
    ("wandb login 0123456789abcdef0123456789abcdef01234567", "0123456789abcdef", "wandb login ***"),
    ("Authorization: Bearer abcdefghijklmnop123", "abcdefghijklmnop123", "Bearer ***"),
    ("machine api.wandb.ai login user password s3cr3tpass", "s3cr3tpass", "password ***"),
    ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0wmN/Cr3JXqmLW7u+g9pTh+wyqDHpSQEIQczXkVx9q me@h", "AAAAC3", "ssh-ed25519 ***"),
    ("step: 1 loss: 0.5 auth_token: abc123 lr: 1e-5", "abc123", "lr: 1e-5"),
    ("key: abc123def456ghi", "abc123def456", "key: ***"),
])
def test_secret_forms(text, gone, kept):
    out = redact(text)
    assert gone not in out and kept in out, out


def test_private_key_block_keeps_its_lines_and_nothing_of_the_key():
    body = ["b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
            "QyNTUxOQAAACCtMJjfwq9yV6pi1u7voPaU4fsMqg6Uk0BCEHM15FcfagAAAJgAAAAAAAAA"]
    text = "\n".join(["before", "-----BEGIN OPENSSH PRIVATE KEY-----", *body, "-----END OPENSSH PRIVATE KEY-----",
                      "after"])
    out = redact(text)
    assert out.count("\n") == text.count("\n") and "before" in out and "after" in out
    assert not any(b[:12] in out for b in body)
    cut = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAzL0+abcdefgh"  # a block cut before its END line
    assert "MIIEow" not in redact(cut)
    # one line of a key out of its block (compare_runs once returned one): mixed-case base64 alone on a line
    assert redact(body[1]) == "***" and redact("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAA") == "***"


def test_redact_mapping_keeps_types_and_redacts_nested_strings():
    d = {"host": {"env": {"RAY_ADDRESS": "ray://u:pw@h:1", "NCCL_DEBUG": "WARN"}, "gpus": [{"uuid": "GPU-1"}]},
         "facts": {"probe.env.NCCL_IB_PASS": "hunter2", "probe.gpu_count": 8, "probe.bf16": True},
         "list": ["export MY_SECRET=zzz", 1.5, None], "eos_token": "</s>"}
    out = redact_mapping(d)
    assert out["host"]["env"] == {"RAY_ADDRESS": "ray://u:***@h:1", "NCCL_DEBUG": "WARN"}
    assert out["facts"] == {"probe.env.NCCL_IB_PASS": "***", "probe.gpu_count": 8, "probe.bf16": True}
    assert out["list"] == ["export MY_SECRET=***", 1.5, None] and out["eos_token"] == "</s>"
    assert d["facts"]["probe.env.NCCL_IB_PASS"] == "hunter2"  # a new value; the input is not changed


def test_redact_is_idempotent_and_linear_on_hostile_text():
    import time

    text = "export A_TOKEN=abc\nRAY_ADDRESS=ray://u:p@h\n" * 2000
    once = redact(text)
    assert redact(once) == once
    t0 = time.perf_counter()
    for hostile in ("a." * 200_000 + "://", "token" * 100_000 + ":", "x: " + "a " * 150_000, "machine " * 50_000):
        redact(hostile)
    assert time.perf_counter() - t0 < 5


# ---- the outputs: probe, compare_runs ---------------------------------------------------------------------

def test_probe_output_is_redacted_in_json_and_text(monkeypatch, capsys):
    from grpo_debug.server.cli import main

    secrets = {"RAY_CLIENT_AUTH": _value(), "VLLM_PASSWD": _value(), "NCCL_IB_PASS": _value(),
               "SGLANG_CREDENTIALS": _value(), f"VLLM_{_random_word()}_PASS": _value()}
    for k, v in secrets.items():
        monkeypatch.setenv(k, v)
    pw = _value()
    monkeypatch.setenv("RAY_ADDRESS", f"ray://user:{pw}@head:10001")
    assert main(["probe", "--format", "json"]) == 0
    as_json = capsys.readouterr().out
    assert main(["probe"]) == 0
    as_text = capsys.readouterr().out
    for out in (as_json, as_text):
        assert not any(v in out for v in [*secrets.values(), pw])
    assert "ray://user:***@head:10001" in as_json and '"probe.env.NCCL_IB_PASS": "***"' in as_json


def _secret_run(lr: str, seed: int, filler: str) -> str:
    rnd = random.Random(seed)
    launch = (f"python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.optim.lr={lr} "
              f"+custom.api_key=k{seed}{filler[:6]}x9 trainer.project_name=ray://me:pw{seed}secret@head:1 "
              + " ".join(f"+custom.k{i}={filler}{i}" for i in range(200)))
    rows = [f"step:{s} - actor/grad_norm:{1 + 0.02 * rnd.random():.4f} - m{'x' * 3000}:{rnd.random():.3f}"
            for s in range(1, 31)]
    return "\n".join([launch, *rows])


def test_compare_runs_is_redacted_and_bounded():
    from grpo_debug.tools.rundir.compare import bound_compare, compare_runs

    res = compare_runs(a_text=_secret_run("1e-6", 1, "a" * 20_000), b_text=_secret_run("1e-5", 2, "b" * 20_000))
    full = res.model_dump_json()
    assert "pw1secret" not in full and "pw2secret" not in full and "k1aaaaaax9" not in full
    row = next(d for d in res.config_diff if d["key"].endswith("api_key"))
    assert row["a"] == row["b"] == "***"
    assert res.truncated  # 20k-character values were cut before redaction
    small = bound_compare(res, 28_000)
    assert len(small.model_dump_json()) <= 28_000 and small.truncated and "(truncated:" in small.summary
    assert small.config_diff[0]["key"] == "lr"  # the rows that matter come first and stay


@pytest.mark.anyio
async def test_mcp_compare_runs_answer_is_bounded_and_redacted(tmp_path):
    from mcp import Client

    from grpo_debug.server.app import build_server

    (tmp_path / "a.log").write_text(_secret_run("1e-6", 1, "a" * 5_000))
    (tmp_path / "b.log").write_text(_secret_run("1e-5", 2, "b" * 5_000))
    async with Client(build_server(allowed_roots=[tmp_path])) as c:
        r = await c.call_tool("compare_runs", {"a": str(tmp_path / "a.log"), "b": str(tmp_path / "b.log")})
    assert not r.is_error
    body = r.content[0].text
    assert len(body) < 40_000 and r.structured_content["truncated"] is True
    assert "pw1secret" not in body and "k1aaaaaax9" not in body and "truncated" in r.structured_content["summary"]


# ---- edits never touch a line that holds a secret -------------------------------------------------------

DS_SECRET = """{
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 8,
  "gradient_clipping": 0.0, "wandb_api_key": "%s",
  "bf16": {"enabled": true},
  "fp16": {"enabled": true, "loss_scale": 0}
}
"""


def test_an_edit_never_rewrites_a_line_that_holds_a_secret(tmp_path, capsys):
    from grpo_debug.server.cli import main
    from grpo_debug.tools.check_config import check_config

    key = _value()
    f = tmp_path / "ds.json"
    f.write_text(DS_SECRET % key)
    clean = check_config(text=(DS_SECRET % key).replace(f', "wandb_api_key": "{key}"', ""))
    assert any(e.line == 4 and "gradient_clipping" in e.key for x in clean.findings for e in x.edits)  # the control
    res = check_config(path=str(f))
    edits = [e for x in res.findings for e in x.edits]
    assert not any(e.line == 4 for e in edits)
    assert not [ln for ln in res.diff.splitlines() if key in ln and ln[:1] in "+-"]  # context at most
    held = [e for e in edits if e.line is None and "holds a secret" in e.note]
    assert held and "gradient_clipping" in held[0].key and "line 4" in held[0].note
    assert main(["check", str(f), "--fix"]) == 0
    capsys.readouterr()
    lines = f.read_text().splitlines()
    assert lines[3] == f'  "gradient_clipping": 0.0, "wandb_api_key": "{key}",'  # untouched, secret intact
    assert '"enabled": false' in lines[5]  # the other edits were written


@pytest.mark.anyio
async def test_every_mcp_answer_is_redacted_at_the_last_step_line_numbers_kept(tmp_path):
    """A secret on an evidence line (a launch line echoed in the log) leaves the MCP answer redacted in its text
    and its structured content; the finding, its line numbers and the other evidence are the CLI's."""
    from mcp import Client

    from grpo_debug.server.app import build_server
    from grpo_debug.tools.triage import triage

    tok, pw = "hf_" + _value() + "abcdefgh", _value()
    lines = [f"step:{s} - actor/grad_norm:{'nan' if s >= 3 else 1.0} - actor/entropy:1.1" for s in range(1, 6)]
    lines[2] += f" HF_TOKEN={tok} RAY_ADDRESS=ray://me:{pw}@head:10001"
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    plain = triage(path=str(log))
    async with Client(build_server(allowed_roots=[tmp_path])) as c:
        r = await c.call_tool("triage", {"path": str(log)})
        bad = await c.call_tool("triage", {"path": str(tmp_path / f"x HF_TOKEN={tok}")})
    assert not r.is_error
    text, sc = r.content[0].text, r.structured_content
    assert tok not in text and pw not in text and tok not in str(sc) and pw not in str(sc)
    assert [f["symptom"] for f in sc["findings"]] == [f.symptom for f in plain.findings]
    ev = [(e["line"], e["text"]) for f in sc["findings"] for e in f["evidence"]]
    assert [n for n, _ in ev] == [e.line for f in plain.findings for e in f.evidence][:len(ev)]
    assert any(n == 3 and "HF_TOKEN=hf_***" in t and "ray://me:***@head" in t for n, t in ev), ev
    assert bad.is_error and tok not in bad.content[0].text  # error messages too
