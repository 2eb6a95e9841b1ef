"""Install grpo-debug the ways a user would, each in a fresh environment, and check the MCP server answers.

    python scripts/check_dist.py [--dist dist] [--only pip,uvx,pipx,mcpb]

Needs the outputs of ``scripts/build_dist.py`` and the package index (dependencies are downloaded). Each check:

- ``pip``:  ``python -m venv``, ``pip install dist/<wheel>`` (the core install: no torch, Ray or matplotlib is
  pulled in, checked), ``grpo-debug triage --example`` names nan_inf, then the MCP handshake below;
- ``uvx``:  ``uvx --from dist/<wheel> grpo-debug serve`` as the server command of the handshake;
- ``pipx``: ``pipx run --spec dist/<wheel> grpo-debug serve``, likewise;
- ``mcpb``: the bundle unpacked, its manifest checked against the MCPB 0.4 rules the bundle uses (and by
  ``mcpb validate`` when ``npx``/``mcpb`` is on PATH), then the manifest's own ``mcp_config`` command run from the
  unpacked folder (``${__dirname}`` and ``${user_config.allowed_folder}`` substituted) as the server.

The handshake: the MCP SDK's stdio client starts the server command, ``initialize``, ``tools/list`` (triage among
them) and one ``triage`` call on a small verl log in the allowed folder, whose answer must name ``nan_inf``.
uv and pipx, when not on PATH, are installed into a scratch venv (``pip install uv pipx``).
Prints one line per check (``ok``, ``FAIL: why`` or ``skipped: why``); exits 1 when any check fails.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "ray", "matplotlib")
LOG = ("step:1 - actor/pg_loss:0.12 - actor/grad_norm:0.9 - critic/score/mean:0.31\n"
       "step:2 - actor/pg_loss:0.10 - actor/grad_norm:1.1 - critic/score/mean:0.33\n"
       "step:3 - actor/pg_loss:nan - actor/grad_norm:nan - critic/score/mean:0.0\n")


def _run(cmd: list[str], timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def _tail(p: subprocess.CompletedProcess) -> str:
    return (p.stdout + p.stderr).strip()[-600:]


def handshake(command: str, args: list[str], cwd: Path, env: dict | None = None, path: str = "run.log") -> str:
    """Start ``command args`` as an MCP stdio server in ``cwd``; '' when initialize, tools/list and a triage of
    ``cwd/run.log`` (passed as ``path``: relative, or absolute where the server's cwd is elsewhere) work and the answer names nan_inf, else what went wrong."""
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def go() -> str:
        params = StdioServerParameters(command=command, args=args, cwd=str(cwd), env=env)
        with anyio.fail_after(300):
            return await talk(params)

    async def talk(params) -> str:
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                names = [t.name for t in (await s.list_tools()).tools]
                if "triage" not in names:
                    return f"tools/list lacks triage: {names[:8]}"
                res = await s.call_tool("triage", {"path": path})
                text = " ".join(getattr(c, "text", "") for c in res.content)
                return "" if "nan_inf" in text else f"triage answer lacks nan_inf: {text[:200]!r}"

    (cwd / "run.log").write_text(LOG, encoding="utf-8")
    try:
        return anyio.run(go)
    except Exception as e:  # noqa: BLE001 - any failure of the check is reported, not raised
        return f"{type(e).__name__}: {str(e)[:300]}"


def _tools(scratch: Path) -> dict[str, str]:
    """Paths of uv, uvx and pipx: on PATH, else installed into a scratch venv."""
    found = {n: shutil.which(n) for n in ("uv", "uvx", "pipx")}
    if all(found.values()):
        return found
    venv = scratch / "tools-venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    p = _run([str(venv / "bin" / "pip"), "install", "-q", "uv", "pipx"])
    if p.returncode != 0:
        raise RuntimeError("pip install uv pipx failed: " + _tail(p))
    return {n: found[n] or str(venv / "bin" / n) for n in found}


def check_pip(wheel: Path, scratch: Path) -> str:
    venv = scratch / "pip-venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    p = _run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)])
    if p.returncode != 0:
        return "pip install failed: " + _tail(p)
    heavy = [h for h in HEAVY if _run([str(venv / "bin" / "python"), "-c", f"import {h}"]).returncode == 0]
    if heavy:
        return f"the core install pulled in {heavy}"
    p = _run([str(venv / "bin" / "grpo-debug"), "triage", "--example"])
    if p.returncode not in (0, 1) or "nan_inf" not in p.stdout:
        return f"grpo-debug triage --example: exit {p.returncode}: {_tail(p)}"
    return handshake(str(venv / "bin" / "grpo-debug"), ["serve"], _work(scratch, "pip"))


def _work(scratch: Path, name: str) -> Path:
    d = scratch / f"work-{name}"
    d.mkdir(exist_ok=True)
    return d


def _isolated_env(scratch: Path) -> dict:
    env = dict(os.environ)
    for k in ("VIRTUAL_ENV", "PYTHONPATH"):
        env.pop(k, None)
    env.update(UV_CACHE_DIR=str(scratch / "uv-cache"), PIPX_HOME=str(scratch / "pipx-home"),
               PIPX_BIN_DIR=str(scratch / "pipx-bin"), UV_TOOL_DIR=str(scratch / "uv-tools"))
    return env


def check_uvx(wheel: Path, scratch: Path, tools: dict) -> str:
    return handshake(tools["uvx"], ["--from", str(wheel), "grpo-debug", "serve"], _work(scratch, "uvx"),
                     _isolated_env(scratch))


def check_pipx(wheel: Path, scratch: Path, tools: dict) -> str:
    return handshake(tools["pipx"], ["run", "--spec", str(wheel), "grpo-debug", "serve"], _work(scratch, "pipx"),
                     _isolated_env(scratch))


def manifest_problems(m: dict) -> list[str]:
    """The MCPB 0.4 rules this bundle relies on (required fields, the uv server, the user setting's fields)."""
    out = [f"missing {k}" for k in ("name", "version", "description", "author", "server") if k not in m]
    if m.get("manifest_version") != "0.4":
        out.append(f"manifest_version {m.get('manifest_version')!r} != '0.4'")
    srv = m.get("server", {})
    if srv.get("type") not in ("python", "node", "binary", "uv") or not srv.get("entry_point"):
        out.append(f"server.type/entry_point invalid: {srv.get('type')!r}")
    if not srv.get("mcp_config", {}).get("command"):
        out.append("server.mcp_config.command missing")
    for key, uc in m.get("user_config", {}).items():
        missing = [f for f in ("type", "title", "description") if f not in uc]
        if missing:
            out.append(f"user_config.{key} lacks {missing}")
    return out


def check_mcpb(bundle: Path, scratch: Path, tools: dict) -> str:
    d = scratch / "bundle"
    with zipfile.ZipFile(bundle) as z:
        z.extractall(d)
    m = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
    problems = manifest_problems(m)
    mcpb = shutil.which("mcpb")
    if mcpb:
        p = _run([mcpb, "validate", str(d / "manifest.json")])
        if p.returncode != 0:
            problems.append("mcpb validate: " + _tail(p))
    if problems:
        return "; ".join(problems)
    allowed = _work(scratch, "mcpb")
    cfg = m["server"]["mcp_config"]
    subst = {"${__dirname}": str(d), "${user_config.allowed_folder}": str(allowed)}
    args = [subst.get(a, a) for a in cfg.get("args", [])]
    command = tools["uv"] if cfg["command"] == "uv" else cfg["command"]
    # uv run --directory starts the server in the bundle, so the tool gets an absolute path under --allow
    return handshake(command, args, allowed, _isolated_env(scratch), path=str(allowed / "run.log"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dist", default=str(ROOT / "dist"))
    ap.add_argument("--only", default="pip,uvx,pipx,mcpb")
    a = ap.parse_args(argv)
    dist = Path(a.dist)
    wheels, bundles = sorted(dist.glob("grpo_debug-*.whl")), sorted(dist.glob("grpo-debug-*.mcpb"))
    if not wheels or not bundles:
        print(f"check_dist: no wheel or bundle in {dist}; run python scripts/build_dist.py first", file=sys.stderr)
        return 2
    failed = False
    with tempfile.TemporaryDirectory(prefix="grpo-debug-dist-") as tmp:
        scratch = Path(tmp)
        tools: dict = {}
        for name in a.only.split(","):
            try:
                if name != "pip" and not tools:
                    tools = _tools(scratch)
                why = {"pip": lambda: check_pip(wheels[-1], scratch),
                       "uvx": lambda: check_uvx(wheels[-1], scratch, tools),
                       "pipx": lambda: check_pipx(wheels[-1], scratch, tools),
                       "mcpb": lambda: check_mcpb(bundles[-1], scratch, tools)}[name]()
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                why = f"{type(e).__name__}: {str(e)[:300]}"
            failed |= bool(why)
            print(f"{name}: {'ok' if not why else 'FAIL: ' + why}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
