"""The disk cache of compiled hyperscan databases (tools/engine/hs_cache.py): a second engine over the same
patterns loads instead of compiling and finds the same lines; a corrupt, unwritable or disabled cache still gives
a working engine."""
from __future__ import annotations

import pytest

hyperscan = pytest.importorskip("hyperscan")

from grpo_debug.tools.engine import hs_cache  # noqa: E402
from grpo_debug.tools.engine.large_logs import build_patterns  # noqa: E402
from grpo_debug.tools.engine.prefilter import _Engine  # noqa: E402

LOG = (b"(TaskRunner pid=1) step:3 - actor/grad_norm:nan - actor/pg_loss:0.1\n"
       b"[2025-01-01 00:00:00 TP0] Decode batch. #running-req: 3, #token: 100\n"
       b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
       b"Traceback (most recent call last):\n")


def _patterns():
    return build_patterns([r"CUDA out of memory", r"(?i)watchdog caught collective operation timeout"])


def test_second_engine_loads_the_cached_database(tmp_path, monkeypatch):
    monkeypatch.setenv(hs_cache.CACHE_ENV, str(tmp_path))
    first = _Engine(_patterns(), kind="hyperscan")
    files = list((tmp_path / "hyperscan").glob("*.db"))
    assert len(files) == 1 and files[0].stat().st_size > 1000

    def no_compile(items):
        raise AssertionError("compiled although the database is cached")
    items_seen = []
    real = hs_cache.load_or_compile

    def spy(items, compile_db):
        items_seen.append(len(items))
        return real(items, no_compile)
    monkeypatch.setattr(hs_cache, "load_or_compile", spy)
    second = _Engine(_patterns(), kind="hyperscan")
    assert items_seen and second.line_hits(LOG) == first.line_hits(LOG)
    starts, ids = second.line_hits(LOG)
    assert len(starts) == 3  # the metric line, the OOM line, the Traceback line; not the decode chatter


def test_corrupt_cache_file_is_compiled_again(tmp_path, monkeypatch):
    monkeypatch.setenv(hs_cache.CACHE_ENV, str(tmp_path))
    good = _Engine(_patterns(), kind="hyperscan").line_hits(LOG)
    (f,) = (tmp_path / "hyperscan").glob("*.db")
    f.write_bytes(b"not a database" * 100)
    assert _Engine(_patterns(), kind="hyperscan").line_hits(LOG) == good
    assert f.read_bytes()[:14] != b"not a database"  # rewritten with the compiled one


def test_disabled_or_unwritable_cache_still_scans(tmp_path, monkeypatch):
    monkeypatch.setenv(hs_cache.CACHE_ENV, "")
    assert hs_cache.cache_dir() is None
    good = _Engine(_patterns(), kind="hyperscan").line_hits(LOG)
    blocker = tmp_path / "a-file"  # the cache folder would be under a file: mkdir fails (even as root)
    blocker.write_text("x")
    monkeypatch.setenv(hs_cache.CACHE_ENV, str(blocker))
    assert _Engine(_patterns(), kind="hyperscan").line_hits(LOG) == good


def test_old_databases_are_pruned(tmp_path, monkeypatch):
    monkeypatch.setenv(hs_cache.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(hs_cache, "MAX_FILES", 2)
    for k in range(4):
        _Engine(build_patterns([f"pattern number {k}"]), kind="hyperscan")
    assert len(list((tmp_path / "hyperscan").glob("*.db"))) == 2
