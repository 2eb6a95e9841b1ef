"""The MCP conformance suite (`@modelcontextprotocol/conformance`, server mode, over streamable HTTP) against
`grpo-debug serve --transport http`: every generic scenario must pass (rc 0, no FAILURE or WARNING check).

Version 0.1.13 is the last that runs on Node 20 (0.1.14+ need Node 22). Scenarios that call the reference
"everything" server's fixture tools/resources/prompts (tools-call-*, resources-read-*, prompts-get-*, ...) do
not apply to this server and are not run; resources-subscribe/unsubscribe are not offered (subscribe: false).
Skips cleanly when npx is missing or the npm registry cannot be reached (and the package is not cached).
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

PKG = "@modelcontextprotocol/conformance@0.1.13"
SCENARIOS = ["server-initialize", "ping", "tools-list", "resources-list", "prompts-list",
             "dns-rebinding-protection", "server-sse-multiple-streams", "logging-set-level", "completion-complete"]
# stateless + JSON responses has no session, so server-sse-multiple-streams warns there by design
STATELESS_SCENARIOS = ["server-initialize", "ping", "tools-list", "resources-list", "prompts-list",
                       "dns-rebinding-protection", "logging-set-level", "completion-complete"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def conformance() -> list[str]:
    """The command prefix to run the suite; skips without npx or the package."""
    npx = shutil.which("npx")
    if not npx:
        pytest.skip("npx is not installed")
    cmd = [npx, "-y", PKG]
    try:
        p = subprocess.run([*cmd, "list", "--server"], capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.skip(f"{PKG}: npx timed out (npm registry unreachable?)")
    if p.returncode != 0:
        pytest.skip(f"{PKG} unavailable (npm registry unreachable or node too old): {(p.stderr or p.stdout)[-300:]}")
    return cmd


def run_scenario(cmd: list[str], port: int, scenario: str, out: Path) -> tuple[int, list[dict], str]:
    p = subprocess.run([*cmd, "server", "--url", f"http://127.0.0.1:{port}/mcp", "--scenario", scenario,
                        "-o", str(out)], capture_output=True, text=True, timeout=180)
    checks = []
    for f in sorted(out.glob(f"server-{scenario}-*/checks.json")):
        checks += json.loads(f.read_text())
    return p.returncode, checks, (p.stdout + p.stderr)[-3000:]


@pytest.mark.parametrize("mode", ["stateful", "stateless"])
def test_conformance_generic_scenarios(conformance, tmp_path, mode, serve_http):
    scenarios = SCENARIOS if mode == "stateful" else STATELESS_SCENARIOS
    results = {}
    with serve_http(*(["--stateless"] if mode == "stateless" else [])) as (port, _):
        for s in scenarios:
            rc, checks, tail = run_scenario(conformance, port, s, tmp_path / s)
            results[s] = (rc, [(c["id"], c["status"]) for c in checks])
            assert checks, f"{s}: no checks recorded\n{tail}"
            bad = [c for c in checks if c["status"] in ("FAILURE", "WARNING")]
            assert rc == 0 and not bad, f"{s} rc={rc}: {bad}\n{tail}"
    print(f"conformance ({mode}):")
    for s, (rc, checks) in results.items():
        print(f"  {s}: rc={rc} " + ", ".join(f"{i}={st}" for i, st in checks))
