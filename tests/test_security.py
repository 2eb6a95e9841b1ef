"""Hostile clients: no tool argument makes the server connect anywhere or run code (marker `security`).

Each test names the attack it stands for; each failed on the main before the fix.
"""
from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path

import pytest
from mcp import Client

from grpo_debug.server.app import build_server

pytestmark = [pytest.mark.anyio, pytest.mark.security]


class _Listener:
    """A TCP listener on loopback that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop = True
        self._t.join(2)
        self.sock.close()


async def test_a_client_cannot_name_a_ray_address():
    """Attack 1: probe_host(ray_address=...) made the server ray.init against any address and unpickle."""
    lis = _Listener()
    try:
        async with Client(build_server()) as c:
            r = await c.call_tool("probe_host", {"ray_address": f"127.0.0.1:{lis.port}", "cluster": True})
            assert r.is_error
            text = " ".join(getattr(x, "text", "") for x in r.content)
            assert "no Ray cluster configured" in text and "--ray-address" in text
        tools = {t.name: t for t in (await _list_tools())}
        assert "ray_address" not in tools["probe_host"].input_schema.get("properties", {})
    finally:
        lis.close()
    assert lis.accepted == 0


async def _list_tools():
    async with Client(build_server()) as c:
        return (await c.list_tools()).tools


async def test_owner_address_is_used_from_a_child_process():
    """The owner's address is probed from a child (python -I) whose report crosses as JSON; a refused
    address is a report, not an exception."""
    async with Client(build_server(ray_address="127.0.0.1:1")) as c:
        r = await c.call_tool("probe_host", {"cluster": True})
        assert not r.is_error
        cluster = r.structured_content["cluster"]
        assert cluster["error"] and "could not probe" in cluster["summary"]


def test_bad_owner_address_is_refused():
    from grpo_debug.probes.cluster import check_address, probe_cluster

    for bad in ("evil; rm -rf /", "a" * 300, "host:port", ""):
        with pytest.raises(ValueError):
            check_address(bad)
        assert probe_cluster(bad, timeout=1).error == "bad address"
    assert check_address("ray://10.0.0.5:10001") == "ray://10.0.0.5:10001"


def test_child_processes_never_import_from_the_working_directory(tmp_path, monkeypatch):
    """Attack 6: a planted `torch/` in the server's working directory ran in the numerics child."""
    import subprocess

    from grpo_debug.probes.base import child_argv

    marker = tmp_path / "PWNED"
    pkg = tmp_path / "json"  # a stdlib name the child bootstrap itself imports first
    pkg.mkdir()
    (pkg / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n", encoding="utf-8")
    (tmp_path / "grpo_debug.py").write_text(f"open({str(marker)!r}, 'w').write('y')\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    argv = child_argv("grpo_debug.probes.cluster", "--address", "127.0.0.1:1", "--timeout", "1")
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert not marker.exists(), p.stderr[-500:]
    assert '"error"' in p.stdout
    assert str(Path(sys.executable)) == argv[0] and "-I" in argv


def test_host_probe_does_not_import_torch():
    """probe_host imported torch into the server process (seconds, GBs) for facts metadata gives."""
    import subprocess

    code = ("import sys; from grpo_debug.probes.collect import collect_host, host_facts; "
            "f = host_facts(collect_host()); print('torch' in sys.modules, f.get('probe.torch_version'))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    imported, version = p.stdout.split()[:2]
    assert imported == "False", p.stderr[-500:]
    try:
        from importlib.metadata import version as v

        assert version == v("torch")
    except Exception:  # noqa: BLE001 - torch not installed: the fact is absent
        assert version == "None"
