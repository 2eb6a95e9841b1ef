"""Distribution (issue 26): the wheel, the Claude Desktop bundle (.mcpb), server.json and the install links, from
scripts/build_dist.py; the slow test installs each of them in fresh environments (scripts/check_dist.py)."""
from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.script_loader import load_script

ROOT = Path(__file__).resolve().parent.parent


build_dist = load_script("scripts/build_dist.py")
check_dist = load_script("scripts/check_dist.py")
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    wheel = build_dist.build_wheel(out)
    return wheel, build_dist.build_bundle(wheel, out)


def test_server_json_follows_the_registry_schema_rules_and_pyproject():
    """The rules of the registry's server.schema.json (2025-09-29) for the fields server.json uses: name in
    reverse-DNS with one slash, description <= 100 chars, a fixed version (no range), a pypi package with
    identifier, version and a stdio transport, positional arguments with a value."""
    sj = json.loads((ROOT / "server.json").read_text())
    assert sj["$schema"].endswith("/2025-09-29/server.schema.json")
    assert re.fullmatch(r"[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+", sj["name"])
    assert 1 <= len(sj["description"]) <= 100
    assert not re.search(r"[\^~><*x]|latest", sj["version"]) and sj["version"] == PROJECT["version"]
    (pkg,) = sj["packages"]
    assert pkg["registryType"] == "pypi" and pkg["identifier"] == PROJECT["name"]
    assert pkg["version"] == PROJECT["version"] and pkg["transport"] == {"type": "stdio"}
    for arg in pkg["packageArguments"]:
        assert arg["type"] in ("positional", "named")
        assert "value" in arg or "valueHint" in arg or arg["type"] == "named"
    assert build_dist.server_json_problems() == []


@pytest.mark.slow  # the wheel is built with pip's build isolation (~15 s)
def test_wheel_holds_the_rules_and_skill_and_no_tests(dist):
    wheel, _ = dist
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("grpo_debug/skills/rules/") and n.endswith(".yaml") for n in names)
    assert "grpo_debug/skills/SKILL.md" in names and "grpo_debug/server/cli.py" in names
    assert not any(n.startswith(("tests/", "grpo_debug/tests/")) for n in names)
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    core = [ln for ln in meta.splitlines() if ln.startswith("Requires-Dist:") and "extra ==" not in ln]
    assert core and not any(h in ln for ln in core for h in ("torch", "ray", "matplotlib"))


@pytest.mark.slow
def test_bundle_manifest_pyproject_and_entry(dist):
    wheel, bundle = dist
    z = zipfile.ZipFile(bundle)
    assert set(z.namelist()) == {"manifest.json", "pyproject.toml", "server/main.py", f"wheels/{wheel.name}"}
    m = json.loads(z.read("manifest.json"))
    assert check_dist.manifest_problems(m) == []
    assert m["version"] == PROJECT["version"] and m["server"]["type"] == "uv"
    args = m["server"]["mcp_config"]["args"]
    assert args[:3] == ["run", "--directory", "${__dirname}"] and "${user_config.allowed_folder}" in args
    assert m["user_config"]["allowed_folder"]["type"] == "directory"
    bp = tomllib.loads(z.read("pyproject.toml").decode())
    assert bp["project"]["dependencies"] == ["grpo-debug"]
    assert bp["tool"]["uv"]["sources"]["grpo-debug"]["path"] == f"wheels/{wheel.name}"
    compile(z.read("server/main.py"), "server/main.py", "exec")


def test_manifest_problems_names_what_is_missing():
    m = build_dist.manifest(PROJECT["version"])
    del m["author"]
    m["server"]["mcp_config"].pop("command")
    m["user_config"]["allowed_folder"].pop("title")
    got = check_dist.manifest_problems(m)
    assert "missing author" in got and "server.mcp_config.command missing" in got
    assert any("allowed_folder" in g and "title" in g for g in got)


def test_install_links_decode_to_the_server_config(tmp_path):
    wheel = tmp_path / "grpo_debug-0.1.0-py3-none-any.whl"
    links = build_dist.install_links(wheel)
    vs = json.loads(unquote(links["vscode"].split("?", 1)[1]))
    assert vs == {"name": "grpo-debug", "command": "uvx", "args": ["--from", str(wheel), "grpo-debug", "serve"]}
    cur = links["cursor"]
    assert cur.startswith("cursor://anysphere.cursor-deeplink/mcp/install?name=grpo-debug&config=")
    assert json.loads(base64.b64decode(cur.split("config=", 1)[1])) == build_dist.server_config(wheel)
    assert build_dist.server_config()["args"] == ["--from", "grpo-debug", "grpo-debug", "serve"]


def _index_reachable() -> bool:
    p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", "/tmp/grpo-debug-probe",
                        "pipx"], capture_output=True, timeout=120)
    return p.returncode == 0


@pytest.mark.slow
def test_installs_from_the_built_wheel_and_bundle(tmp_path):
    """pip (core install: no torch/Ray/matplotlib), uvx, pipx and the unpacked .mcpb (through its manifest's own
    command) each start a server that lists triage and finds nan_inf in a small log (scripts/check_dist.py)."""
    if not _index_reachable():
        pytest.skip("the package index is not reachable: scripts/check_dist.py needs it for the dependencies")
    out = tmp_path / "dist"
    build_dist.build_wheel(out)
    build_dist.build_bundle(next(out.glob("*.whl")), out)
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_dist.py"), "--dist", str(out)],
                       capture_output=True, text=True, timeout=1200)
    lines = [ln for ln in p.stdout.splitlines() if re.match(r"^(pip|uvx|pipx|mcpb): ", ln)]
    assert len(lines) == 4 and all(ln.endswith(": ok") for ln in lines), p.stdout[-3000:] + p.stderr[-3000:]
    shutil.rmtree(out, ignore_errors=True)
