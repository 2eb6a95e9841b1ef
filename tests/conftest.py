"""Shared fixtures: the anyio backend, a tiny user rule pack, and the shared case folder."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

FIXTURE_RULE_ID = "fixture-grad-norm-not-finite"
FIXTURE_RULE = f"""\
id: {FIXTURE_RULE_ID}
title: Fixture rule for the CLI and server tests
symptom: nan_inf
confidence: high
match:
  any:
    - kind: regex
      pattern: 'grad_norm is not finite'
what: A test rule that fires on verl's non-finite grad-norm warning.
why: Exists only so the CLI and MCP tests have a known rule id, whatever the packaged rule base holds.
fix:
  summary: Set actor_rollout_ref.actor.optim.clip_grad=1.0 (test text only).
  steps: ["first step", "second step"]
  patch: {{actor_rollout_ref.actor.optim.clip_grad: 1.0}}
  safety: review
  safety_note: test only
applies_to:
  frameworks: [verl]
sources:
  - ref: https://example.invalid/fixture
    status: unverified
    note: a fixture, not a claim
examples:
  - name: fires
    input: "WARN: rank 0 grad_norm is not finite: nan"
    expect: match
  - name: quiet
    input: "step:1 - actor/grad_norm:0.4"
    expect: no_match
"""


def pytest_configure(config):
    config.addinivalue_line("markers", "engine: needs the real triage engine (real findings)")
    # compiled hyperscan databases go to a folder of this test session, not the user's ~/.cache (hs_cache.py)
    if "GRPO_DEBUG_CACHE_DIR" not in os.environ:
        import tempfile

        os.environ["GRPO_DEBUG_CACHE_DIR"] = config._grpo_cache = tempfile.mkdtemp(prefix="grpo-debug-test-cache-")


def pytest_unconfigure(config):
    cache = getattr(config, "_grpo_cache", None)
    if cache:
        import shutil

        shutil.rmtree(cache, ignore_errors=True)


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def rule_pack(tmp_path, monkeypatch):
    """A user rule pack with one known rule, loaded through GRPO_DEBUG_RULES; returns the rule id."""
    from grpo_debug.skills.loader import default_rules

    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "fixture.yaml").write_text(FIXTURE_RULE, encoding="utf-8")
    prev = os.environ.get("GRPO_DEBUG_RULES")
    monkeypatch.setenv("GRPO_DEBUG_RULES", os.pathsep.join(x for x in (prev, str(pack)) if x))
    default_rules.cache_clear()
    yield FIXTURE_RULE_ID
    monkeypatch.undo()
    default_rules.cache_clear()


def shared_dir() -> Path | None:
    """../shared next to the repo (or $GRPO_DEBUG_SHARED); None when absent, e.g. on a bare clone."""
    for cand in (os.environ.get("GRPO_DEBUG_SHARED"), REPO.parent / "shared", "/work/shared"):
        if cand and (Path(cand) / "cases").is_dir():
            return Path(cand)
    return None


@pytest.fixture
def shared_root() -> Path | None:
    return shared_dir()


@pytest.fixture
def shared_case() -> Path:
    """The input file of one shared case (a verl NaN log); skips when ../shared/cases is missing."""
    root = shared_dir()
    case = root / "cases" / "verl-nan-gradnorm-microbatch" if root else None
    if case is None or not case.is_dir():
        pytest.skip("shared cases folder not present")
    return next(p for p in case.iterdir() if p.name.startswith("input."))


@pytest.fixture
def example_log() -> Path:
    from grpo_debug.server import example_path

    return example_path("verl_grpo_nan")


def _has_cuda() -> bool:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    import subprocess
    import sys

    code = "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    try:  # in a subprocess: importing torch here would slow every test session down
        return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pytest_collection_modifyitems(config, items):
    """Skip @pytest.mark.gpu tests on machines without a CUDA GPU (scripts/gpu_check.py runs them on one)."""
    gpu_items = [it for it in items if it.get_closest_marker("gpu")]
    if gpu_items and not _has_cuda():
        skip = pytest.mark.skip(reason="needs a CUDA GPU (run scripts/gpu_check.py on a GPU machine)")
        for it in gpu_items:
            it.add_marker(skip)


# ---- a real `grpo-debug serve --transport http` for the HTTP, load and conformance tests ----------

import socket as _socket  # noqa: E402
import subprocess as _subprocess  # noqa: E402
import sys as _sys  # noqa: E402
import tempfile as _tempfile  # noqa: E402
import time as _time  # noqa: E402
from contextlib import contextmanager as _contextmanager  # noqa: E402


def free_port() -> int:
    with _socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@_contextmanager
def http_server(*args: str, env: dict | None = None, cwd: str | None = None, timeout: float = 60):
    """`grpo-debug serve --transport http` on a free port; yields (port, process); stops it afterwards."""
    port = free_port()
    log = _tempfile.TemporaryFile("w+")
    cmd = [_sys.executable, "-m", "grpo_debug.server.cli", "serve", "--transport", "http", "--port", str(port), *args]
    proc = _subprocess.Popen(cmd, stdout=log, stderr=_subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=cwd)
    try:
        deadline = _time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise AssertionError(f"server exited with {proc.returncode}: {log.read()[-2000:]}")
            try:
                with _socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if _time.monotonic() > deadline:
                    raise AssertionError("server did not start listening") from None
                _time.sleep(0.1)
        yield port, proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except _subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


@pytest.fixture
def serve_http():
    """Factory: `with serve_http(*cli_args, env=..., cwd=...) as (port, process):` a server on a free port."""
    return http_server
