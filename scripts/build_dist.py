"""Build what a user installs grpo-debug from: the wheel, a Claude Desktop bundle (.mcpb) and the MCP registry
entry (server.json), all from the one version in pyproject.toml.

    python scripts/build_dist.py [--out dist]

writes ``dist/grpo_debug-<v>-py3-none-any.whl`` (``pip wheel --no-deps``), ``dist/grpo-debug-<v>.mcpb`` and checks
that ``server.json`` at the repository root carries the same version (it is committed, edited by hand; this
script says when it disagrees). ``scripts/check_dist.py`` then installs each of them in fresh environments.

The bundle follows the MCPB manifest 0.4 (``@anthropic-ai/mcpb`` 2.1.2, ``dist/mcpb-manifest-v0.4.schema.json``):
``server.type = "uv"`` (the host provides uv, which installs the dependencies of the bundle's ``pyproject.toml``),
``mcp_config`` runs ``uv run --directory ${__dirname} python -m grpo_debug.server.cli serve``. The wheel travels
inside the bundle (``wheels/``) and the bundle's pyproject points uv at it (``[tool.uv.sources]`` path source),
so the bundle does not depend on grpo-debug being on PyPI. The folder the tools may read is a user setting
(``user_config.allowed_folder``, type ``directory``) passed as ``--allow``.

Errors: exits 1 with the failing step's message (pip's output cut to its tail).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST_VERSION = "0.4"


def project() -> dict:
    """The ``[project]`` table of the repository's pyproject.toml (name, version, description, ...)."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def build_wheel(out: Path) -> Path:
    """``pip wheel --no-deps`` of the repository into ``out``; returns the wheel's path.
    Raises RuntimeError with pip's last lines when it fails."""
    out.mkdir(parents=True, exist_ok=True)
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(out),
                        str(ROOT)], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("pip wheel failed:\n" + (p.stdout + p.stderr)[-2000:])
    v = project()["version"]
    wheel = out / f"grpo_debug-{v}-py3-none-any.whl"
    if not wheel.is_file():
        raise RuntimeError(f"pip wheel succeeded but {wheel.name} is not in {out}")
    return wheel


def manifest(version: str) -> dict:
    """The bundle's manifest.json (MCPB 0.4): metadata, the uv server and the one user setting."""
    p = project()
    return {
        "manifest_version": MANIFEST_VERSION,
        "name": "grpo-debug",
        "display_name": "grpo-debug",
        "version": version,
        "description": "Diagnose failed or unhealthy RL post-training runs of LLMs from logs, configs and run folders.",
        "long_description": p["description"],
        "author": {"name": "grpo-debug maintainers"},
        "license": p.get("license", "Apache-2.0"),
        "server": {
            "type": "uv",
            "entry_point": "server/main.py",
            "mcp_config": {
                "command": "uv",
                "args": ["run", "--directory", "${__dirname}", "python", "server/main.py", "serve",
                         "--allow", "${user_config.allowed_folder}"],
                "env": {},
            },
        },
        "tools_generated": True,
        "keywords": ["grpo", "ppo", "rlhf", "verl", "trl", "vllm", "sglang", "debugging", "training-logs"],
        "compatibility": {"platforms": ["darwin", "linux"], "runtimes": {"python": p["requires-python"]}},
        "user_config": {
            "allowed_folder": {
                "type": "directory", "title": "Run folder",
                "description": "A folder of logs, configs and run outputs the tools may read.",
                "required": True,
            },
        },
    }


def bundle_pyproject(wheel_name: str, version: str, requires_python: str) -> str:
    """The bundle's own pyproject.toml: not a package (``[tool.uv] package = false``), one dependency, grpo-debug,
    resolved from the wheel inside the bundle."""
    return (f'[project]\nname = "grpo-debug-bundle"\nversion = "{version}"\nrequires-python = "{requires_python}"\n'
            f'dependencies = ["grpo-debug"]\n\n[tool.uv]\npackage = false\n\n'
            f'[tool.uv.sources]\ngrpo-debug = {{ path = "wheels/{wheel_name}" }}\n')


MAIN_PY = ('"""Entry of the grpo-debug MCP bundle: the installed CLI, its arguments passed through."""\n'
           "import sys\n\nfrom grpo_debug.server.cli import main\n\nif __name__ == \"__main__\":\n"
           "    sys.exit(main(sys.argv[1:]))\n")


def build_bundle(wheel: Path, out: Path) -> Path:
    """Write ``out/grpo-debug-<v>.mcpb`` (a zip: manifest.json, pyproject.toml, server/main.py, wheels/<wheel>)."""
    p = project()
    v = p["version"]
    path = out / f"grpo-debug-{v}.mcpb"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps(manifest(v), indent=2) + "\n")
        z.writestr("pyproject.toml", bundle_pyproject(wheel.name, v, p["requires-python"]))
        z.writestr("server/main.py", MAIN_PY)
        z.write(wheel, f"wheels/{wheel.name}")
    return path


def server_config(wheel: Path | None = None) -> dict:
    """The stdio server entry clients store (VS Code ``mcp.json``, Cursor ``mcp.json``): ``uvx`` running the
    wheel at ``wheel`` (absolute), or the PyPI package when ``wheel`` is None."""
    spec = str(wheel.resolve()) if wheel else "grpo-debug"
    return {"command": "uvx", "args": ["--from", spec, "grpo-debug", "serve"]}


def install_links(wheel: Path | None = None) -> dict[str, str]:
    """One-click install links for the server of :func:`server_config`.

    - VS Code: ``vscode:mcp/install?<url-encoded JSON {name, command, args}>``;
    - Cursor: ``cursor://anysphere.cursor-deeplink/mcp/install?name=<name>&config=<base64 of the JSON config>``
      (https://cursor.com/docs/mcp/install-links).
    """
    import base64
    from urllib.parse import quote

    cfg = server_config(wheel)
    vscode = "vscode:mcp/install?" + quote(json.dumps({"name": "grpo-debug", **cfg}, separators=(",", ":")))
    b64 = base64.b64encode(json.dumps(cfg, separators=(",", ":")).encode()).decode()
    return {"vscode": vscode, "cursor": f"cursor://anysphere.cursor-deeplink/mcp/install?name=grpo-debug&config={b64}"}


def server_json_problems() -> list[str]:
    """What in the committed server.json disagrees with pyproject.toml (empty when nothing)."""
    sj = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))
    p = project()
    out = []
    if sj.get("version") != p["version"]:
        out.append(f"server.json version {sj.get('version')!r} != pyproject {p['version']!r}")
    for pkg in sj.get("packages", []):
        if pkg.get("registryType") == "pypi" and (pkg.get("identifier") != p["name"] or pkg.get("version") != p["version"]):
            out.append(f"server.json pypi package {pkg.get('identifier')}=={pkg.get('version')} != {p['name']}=={p['version']}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "dist"), help="output folder (default: dist/)")
    ap.add_argument("--links", action="store_true", help="also print VS Code and Cursor install links for the wheel")
    a = ap.parse_args(argv)
    out = Path(a.out)
    try:
        wheel = build_wheel(out)
        bundle = build_bundle(wheel, out)
    except RuntimeError as e:
        print(f"build_dist: {e}", file=sys.stderr)
        return 1
    problems = server_json_problems()
    for p in problems:
        print(f"build_dist: {p}", file=sys.stderr)
    print(f"{wheel}\n{bundle}")
    if a.links:
        for name, link in install_links(wheel).items():
            print(f"{name}: {link}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
