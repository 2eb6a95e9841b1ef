"""The server's readable folders (server/paths.py): the working directory is an implicit root over stdio only, and
never when it is /, $HOME (or above it) or a system folder; over HTTP only --allow folders; /proc, /sys and /dev
are never readable, not even under --allow /."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from grpo_debug.server.paths import PathNotAllowed, default_roots, resolve_path, unsafe_implicit_root

needs_proc = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home" / "alice"
    (h / "project").mkdir(parents=True)
    (h / ".ssh").mkdir()
    (h / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n")
    monkeypatch.setenv("HOME", str(h))
    return h


@pytest.mark.parametrize("folder", ["/", "/etc", "/usr", "/usr/lib", "/var", "/var/lib", "/proc", "/sys", "/dev",
                                    "/boot", "/run", "/root"])
def test_system_folders_are_never_implicit_roots(folder, home):
    if not Path(folder).is_dir():
        pytest.skip(f"{folder} is not on this machine")
    assert unsafe_implicit_root(folder) is not None
    notes: list[str] = []
    assert default_roots(cwd=folder, note=notes.append) == []
    assert notes and "--allow DIR" in notes[0] and folder in notes[0]


def test_home_and_above_are_not_implicit_roots_a_project_below_is(home):
    assert "home folder" in unsafe_implicit_root(home)
    assert "holds the home folder" in unsafe_implicit_root(home.parent)
    assert default_roots(cwd=home, env={"HOME": str(home)}) == []
    assert default_roots(cwd=home / "project", env={"HOME": str(home)}) == [(home / "project").resolve()]
    # an explicit folder is the owner's choice: --allow $HOME is served (only /proc, /sys, /dev never are)
    assert default_roots([home], cwd="/", env={"HOME": str(home)}) == [home.resolve()]


def test_over_http_only_explicit_folders_are_roots(tmp_path, home):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    notes: list[str] = []
    assert default_roots(cwd=tmp_path, transport="http", env={"HOME": str(home)}, note=notes.append) == []
    assert notes and "HTTP" in notes[0] and "--allow DIR" in notes[0]
    got = default_roots([b], cwd=tmp_path, transport="http", env={"HOME": str(home), "GRPO_DEBUG_ALLOW": str(a)})
    assert got == [a.resolve(), b.resolve()]
    assert default_roots(cwd=a, env={"HOME": str(home)}) == [a.resolve()]  # stdio: the cwd
    assert default_roots(cwd=tmp_path, env={"HOME": str(home)}) == []  # tmp_path holds this test's $HOME


@needs_proc
def test_proc_sys_dev_are_never_readable_even_under_allow_root(tmp_path):
    assert default_roots(["/proc", "/sys", "/dev"], cwd=tmp_path, transport="http") == []
    for p, kind in (("/proc/self/environ", "file"), ("/proc/self/status", "file"), ("/sys/kernel", "dir"),
                    ("/dev/shm", "dir"), ("/proc/1/../self/environ", "file")):
        with pytest.raises(PathNotAllowed, match="never readable"):
            resolve_path(p, ["/"], kind=kind)
    (tmp_path / "env.log").symlink_to("/proc/self/environ")  # a link inside the root, planted at test time
    for roots in ([tmp_path], ["/"]):
        with pytest.raises(PathNotAllowed, match="outside the allowed roots|never readable"):
            resolve_path(tmp_path / "env.log", roots)
    assert resolve_path("/etc/hostname", ["/"]) == Path("/etc/hostname").resolve()  # --allow / is explicit


def _texts(r) -> str:
    return " ".join(getattr(x, "text", "") for x in r.content)


@needs_proc
@pytest.mark.anyio
@pytest.mark.parametrize("where", ["root", "home"])
async def test_in_process_server_started_from_root_or_home_reads_nothing_outside(where, home, monkeypatch):
    from grpo_debug.server.app import build_server

    monkeypatch.chdir("/" if where == "root" else home)
    monkeypatch.setenv("GRPO_DEBUG_ALLOW", "")
    server = build_server()
    assert all(not Path(r).resolve() in (Path("/"), home.resolve()) for r in server.allowed_roots)
    async with Client(server) as c:
        env = await c.call_tool("compare_runs", {"a": "/proc/self/environ", "b": "/proc/self/environ"})
        pw = await c.call_tool("triage", {"path": "/etc/passwd"})
        key = await c.call_tool("triage", {"path": str(home / ".ssh" / "id_ed25519")})
    for r in (env, pw, key):
        assert r.is_error and "outside the allowed roots" in _texts(r), _texts(r)
    async with Client(build_server(allowed_roots=["/"])) as c:  # even --allow / never serves /proc
        env = await c.call_tool("compare_runs", {"a": "/proc/self/environ", "b": "/proc/self/environ"})
    assert env.is_error and "never readable" in _texts(env)


@needs_proc
@pytest.mark.slow
@pytest.mark.anyio
async def test_stdio_server_started_from_root_says_so_and_refuses(home, tmp_path):
    """A real `grpo-debug serve` over stdio started from / (a systemd unit or a Docker image without WORKDIR):
    a note on stderr at start, and /proc/self/environ and /etc/passwd refused."""
    errlog = tmp_path / "stderr.txt"
    env = {**os.environ, "HOME": str(home), "GRPO_DEBUG_ALLOW": ""}
    params = StdioServerParameters(command=sys.executable, args=["-m", "grpo_debug.server.cli", "serve"],
                                   cwd="/", env=env)
    with anyio.fail_after(90), errlog.open("w") as fe:
        async with stdio_client(params, errlog=fe) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                env_r = await session.call_tool("compare_runs", {"a": "/proc/self/environ", "b": "/etc/passwd"})
                pw = await session.call_tool("triage", {"path": "/etc/passwd"})
    assert env_r.is_error and pw.is_error and "outside the allowed roots" in _texts(pw)
    assert "is not readable by the tools" in errlog.read_text() and "--allow DIR" in errlog.read_text()


@pytest.mark.slow
def test_http_server_does_not_serve_its_working_directory(tmp_path, serve_http):
    (tmp_path / "run.log").write_text("step:1 - actor/grad_norm:nan\n")

    async def call(port: int) -> tuple[bool, str]:
        async with Client(f"http://127.0.0.1:{port}/mcp") as c:
            r = await c.call_tool("triage", {"path": str(tmp_path / "run.log")})
        return r.is_error, _texts(r)

    with serve_http(cwd=str(tmp_path)) as (port, _):
        err, text = anyio.run(call, port)
    assert err and "outside the allowed roots" in text
    with serve_http("--allow", str(tmp_path), cwd=str(tmp_path)) as (port, _):
        err, text = anyio.run(call, port)
    assert not err, text


# ---------------------------------------------------------------- roots a client declares (stdio / in-process)

def _roots_client(server, roots):
    """An in-process client on a handshake-era connection (where roots live) declaring ``roots`` (paths)."""
    import warnings

    from mcp import types

    async def list_roots(_ctx):
        return types.ListRootsResult(roots=[types.Root(uri=Path(r).as_uri()) for r in roots])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the roots capability is deprecated from the 2026-07-28 spec on
        return Client(server, mode="legacy", list_roots_callback=list_roots)


LOG = "step:1 - actor/grad_norm:0.4 - actor/pg_loss:0.1\nstep:2 - actor/grad_norm:nan - actor/pg_loss:nan\n"


@pytest.fixture
def served(tmp_path):
    d = tmp_path / "served"
    d.mkdir()
    (d / "own.log").write_text(LOG)
    return d


@pytest.mark.parametrize("declared", ["/", "/etc", "/usr", "/var", "/root", "/boot", "/proc", "/sys", "/dev"])
def test_unsafe_client_roots_follow_the_implicit_root_policy(declared, home):
    from grpo_debug.server.paths import unsafe_client_root

    if not Path(declared).is_dir():
        pytest.skip(f"{declared} is not on this machine")
    assert unsafe_client_root(Path(declared).resolve()) is not None
    assert "home folder" in unsafe_client_root(home)
    assert "holds the home folder" in unsafe_client_root(home.parent)
    assert unsafe_client_root(home / "project") is None


def test_declared_roots_pickle_with_what_was_refused(home):
    import pickle

    from grpo_debug.server.paths import DeclaredRoots

    d = DeclaredRoots([home / "project"], [(home, "it is the home folder")])
    back = pickle.loads(pickle.dumps(d))
    assert back == (home / "project",) and back.refused == ((home, "it is the home folder"),)
    assert [*back] == [home / "project"]


@needs_proc
@pytest.mark.anyio
@pytest.mark.parametrize("declared", ["/", "home", "above_home", "/etc", "/proc"])
async def test_a_client_declaring_root_home_or_a_system_folder_reads_nothing_there(declared, home, served):
    """A stdio/in-process client that declares `/`, $HOME, a folder above $HOME or a system folder as its MCP
    root used to read all of it (the SSH key, /etc/passwd, /proc/self/environ); the root is now not accepted and
    the error says so, why, and that --allow DIR grants a folder. The server's own roots still work."""
    from grpo_debug.server.app import build_server

    root = {"home": home, "above_home": home.parent}.get(declared, Path(declared))
    targets = {"/": ["/etc/passwd", home / ".ssh" / "id_ed25519"], "home": [home / ".ssh" / "id_ed25519"],
               "above_home": [home / ".ssh" / "id_ed25519"], "/etc": ["/etc/passwd"],
               "/proc": ["/proc/self/environ"]}[declared]
    async with _roots_client(build_server(allowed_roots=[served]), [root]) as c:
        for t in targets:
            r = await c.call_tool("triage", {"path": str(t)})
            text = _texts(r)
            assert r.is_error and "--allow DIR" in text, text
            if declared != "/proc":  # /proc: refused anyway, 'never readable' (the root is refused too)
                assert "your client declared the root" in text and str(root.resolve()) in text, text
                assert "outside the allowed roots" in text, text
        r = await c.call_tool("compare_runs", {"a": "/proc/self/environ", "b": str(served / "own.log")})
        assert r.is_error and "HF_TOKEN" not in _texts(r)
        ok = await c.call_tool("triage", {"path": str(served / "own.log")})  # the owner's --allow root still works
        assert not ok.is_error and ok.structured_content["findings"], _texts(ok)


@pytest.mark.anyio
async def test_a_project_folder_under_home_declared_as_a_root_stays_readable(home, served):
    (home / "project" / "run.log").write_text(LOG)
    (home / "project" / "key.log").symlink_to(home / ".ssh" / "id_ed25519")  # still confined to the root
    from grpo_debug.server.app import build_server

    async with _roots_client(build_server(allowed_roots=[served]), [home / "project", home]) as c:
        ok = await c.call_tool("triage", {"path": str(home / "project" / "run.log")})
        assert not ok.is_error and ok.structured_content["findings"], _texts(ok)
        key = await c.call_tool("triage", {"path": str(home / ".ssh" / "id_ed25519")})
        assert key.is_error and "your client declared the root" in _texts(key) and "home folder" in _texts(key)
        link = await c.call_tool("triage", {"path": str(home / "project" / "key.log")})
        assert link.is_error and "symlink" in _texts(link), _texts(link)
        assert "BEGIN OPENSSH" not in _texts(key) + _texts(link)
