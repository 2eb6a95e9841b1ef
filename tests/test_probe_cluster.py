"""Ray fan-out against a local head that the test starts (RAY_AUTH_MODE=disabled) and stops."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_debug.probes.cluster import NodeReport, compare_nodes, probe_cluster


def test_compare_nodes_flags_differences_only():
    a = NodeReport(node_id="a", ip="10.0.0.1", facts={"probe.versions.torch": "2.6.0", "probe.ulimit_nofile": 65535,
                                                        "probe.mem_available_gib": 100})
    b = NodeReport(node_id="b", ip="10.0.0.2", facts={"probe.versions.torch": "2.7.0", "probe.ulimit_nofile": 65535,
                                                        "probe.mem_available_gib": 90})
    diffs = compare_nodes([a, b])
    assert [d.fact for d in diffs] == ["probe.versions.torch"]
    assert diffs[0].values == {"10.0.0.1": "2.6.0", "10.0.0.2": "2.7.0"}
    assert compare_nodes([a, NodeReport(node_id="c", error="timeout")]) == []


def test_no_cluster_is_a_report_not_an_exception():
    pytest.importorskip("ray")
    rep = probe_cluster("127.0.0.1:1", timeout=10)
    assert rep.error and "could not probe" in rep.summary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_fan_out_on_a_local_head(tmp_path, monkeypatch):
    """The node task imports no torch and the wait is bounded only by a generous ceiling (600 s), so the test
    does not depend on how fast Ray starts workers on this machine; a healthy run answers in seconds."""
    pytest.importorskip("ray")
    ray_cli = Path(sys.executable).with_name("ray")
    if not ray_cli.exists():
        ray_cli = shutil.which("ray")
    if not ray_cli:
        pytest.skip("ray CLI not found")
    import tempfile

    short = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # AF_UNIX socket paths must stay under 107 bytes
    port = _free_port()
    for k, v in {"RAY_AUTH_MODE": "disabled", "HOME": str(tmp_path), "RAY_USAGE_STATS_ENABLED": "0"}.items():
        monkeypatch.setenv(k, v)
    start = subprocess.run([str(ray_cli), "start", "--head", f"--port={port}", "--num-cpus=1", "--num-gpus=0",
                            "--include-dashboard=false", f"--temp-dir={short}"],
                           capture_output=True, text=True, timeout=600, env=dict(os.environ))
    if start.returncode != 0:
        pytest.skip(f"could not start a local Ray head: {start.stderr[-300:]}")
    try:
        rep = probe_cluster(f"127.0.0.1:{port}", timeout=600)
        assert rep.error is None, rep
        assert len(rep.nodes) == 1
        node = rep.nodes[0]
        assert node.error is None and node.hostname, node
        assert "probe.python" in node.facts and "probe.ulimit_nofile" in node.facts
    finally:
        subprocess.run([str(ray_cli), "stop", "--force"], capture_output=True, timeout=300, env=dict(os.environ))
        shutil.rmtree(short, ignore_errors=True)
