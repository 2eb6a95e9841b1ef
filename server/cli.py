"""The ``grpo-debug`` command line: triage a log, read a rule, list rules, run the MCP server.

Start-up stays lean: heavy modules (the triage engine, rich, the MCP SDK) are imported inside the
sub-command that needs them, never at module top, and nothing here imports torch, ray or pynvml.
Errors the user can fix print one line ``grpo-debug: error: ...`` to stderr and exit 2; no traceback
unless ``--debug`` is given.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Sequence

from grpo_debug.server import example_names, example_path, find_skill_md, version
from grpo_debug.server.cli_versions import add_versions_arg
from grpo_debug.server.cli_runs import add_run_parsers
from grpo_debug.server.cli_watch import add_watch_parser

PROG = "grpo-debug"
DEFAULT_EXAMPLE = "verl_grpo_nan"


class CliError(Exception):
    """A problem the user can fix; printed as one line, exit status 2."""


def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {s!r}") from None
    if not 1 <= v <= 100:
        raise argparse.ArgumentTypeError(f"must be between 1 and 100, got {v}")
    return v


def _color() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def _width() -> int | None:
    if sys.stdout.isatty():
        import shutil

        return shutil.get_terminal_size().columns
    return None


def _out(s: str, *, as_json: bool = False) -> None:
    """Write one answer to stdout. Text from inputs never reaches the terminal raw: control and escape
    characters are shown as text (``\\x1b``), JSON gets ``\\u`` escapes for C1 (tools/render/safe.py)."""
    from grpo_debug.tools.render.safe import json_safe, terminal_safe

    s = json_safe(s) if as_json else terminal_safe(s, keep_sgr=_color())
    sys.stdout.write(s if s.endswith("\n") else s + "\n")


def _err(s: str) -> None:
    from grpo_debug.tools.render.safe import terminal_safe

    print(terminal_safe(s), file=sys.stderr)


# ---------------------------------------------------------------------------- commands

def cmd_triage(args: argparse.Namespace) -> int:
    given = [x for x in (args.path is not None, args.example is not None) if x]
    if len(given) != 1:
        raise CliError("triage needs exactly one input: a PATH, '-' to read stdin, or --example [NAME] "
                       f"(bundled: {', '.join(example_names())})")

    from grpo_debug.tools.rundir import InputError, triage_any as triage  # a run folder or metric store too

    text = path = None
    if args.example is not None:
        found = example_path(args.example)
        if found is None:
            raise CliError(f"no bundled example {args.example!r}; available: {', '.join(example_names()) or 'none'}")
        path = str(found)
        label = f"example {args.example}"
    elif args.path == "-":
        if sys.stdin is None:
            raise CliError("'-' given but there is no stdin; pass a PATH instead")
        text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
        label = "stdin"
    else:
        path = args.path
        label = path
    from grpo_debug.server.progress_bar import triage_bar

    progress, bar = triage_bar(path)  # rich, stderr, TTY only: bytes processed, then the analysis phase
    try:
        result = triage(text=text, path=path, max_findings=args.max_findings, progress=progress, versions=args.versions,
                        runs=getattr(args, "runs", None))
    except InputError as e:
        hint = f"; or pipe the text in with '{PROG} triage -'" if "no such file" in str(e) else ""
        raise CliError(f"{e}{hint}") from e
    except IsADirectoryError:
        raise CliError(f"{label} is a folder; give a log, config or launch-script file inside it") from None
    except FileNotFoundError:
        raise CliError(f"{label} does not exist; check the path, or pipe the text in with "
                       f"'{PROG} triage -'") from None
    except PermissionError:
        raise CliError(f"{label} cannot be read (permission denied); fix its permissions or pipe it "
                       f"in with '{PROG} triage -'") from None
    except OSError as e:
        raise CliError(f"cannot read {label}: {e.strerror or e}; check the path, or pipe the text in with "
                       f"'{PROG} triage -'") from None
    finally:
        if bar is not None:
            bar.stop()

    return _print_triage(args, result)


def _print_triage(args: argparse.Namespace, result) -> int:
    """Print a TriageResult (triage and check) as JSON or as text for a person."""
    if args.format == "json":
        _out(result.model_dump_json(indent=2), as_json=True)
    else:
        from grpo_debug.tools.render.triage import render_triage_text

        _out(render_triage_text(result, color=_color(), width=_width(), verbose=getattr(args, "verbose", True),
                                command="check" if getattr(args, "command", "") == "check" else "triage"))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from grpo_debug.tools.check_config import ConfigParseError, check_config
    from grpo_debug.tools.triage import InputError

    text = path = None
    if args.path == "-":
        text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    else:
        path = args.path
    if args.fix and path is None:
        raise CliError("--fix writes the file in place: give a PATH, not '-' (use --diff for stdin)")
    try:
        result = check_config(text=text, path=path, max_findings=args.max_findings, versions=args.versions)
    except (InputError, ConfigParseError) as e:
        raise CliError(str(e)) from e
    if args.fix or args.diff:
        from grpo_debug.server.fix import fix_file, print_diff

        try:
            return fix_file(path, result, _out) if args.fix else print_diff(result, _err)
        except ValueError as e:
            raise CliError(str(e)) from None
    return _print_triage(args, result)


def cmd_probe(args: argparse.Namespace) -> int:
    from grpo_debug.tools.probe_report import run_probe, unknown_gpu

    estimate = None
    if args.estimate:
        estimate = {k: v for k, v in {
            "params_b": args.params_b, "config_json": args.model_config, "dtype": args.dtype, "zero_stage": args.zero_stage,
            "fsdp": args.fsdp, "dp": args.dp, "tp": args.tp, "lora_rank": args.lora_rank, "ref_model": not args.no_ref,
            "rollout_mem_fraction": args.rollout_mem_fraction, "seq_len": args.seq_len, "micro_batch": args.micro_batch,
            "gpu": args.gpu, "optimizer_offload": args.optimizer_offload, "param_offload": args.param_offload,
        }.items() if v is not None}
        if "params_b" not in estimate and "config_json" not in estimate:
            raise CliError("--estimate needs --params-b N (billions) or --model-config PATH (a config.json or model folder)")
    config_text = ""
    if args.config:
        try:
            with open(args.config, encoding="utf-8", errors="replace") as fh:
                config_text = fh.read()
        except OSError as e:
            raise CliError(f"{args.config}: cannot read: {e.strerror or e}") from None
    if args.gpu and (unknown := unknown_gpu(args.gpu)):
        raise CliError(unknown)
    if args.tokenizer and not args.stop:
        raise CliError("--tokenizer needs at least one --stop STRING to look up")
    res = run_probe(numerics=args.numerics, device=args.device, force=args.force, checkpoint=args.checkpoint,
                    tokenizer=args.tokenizer, stop=args.stop, estimate=estimate, ray_address=args.ray_address,
                    config_text=config_text, host=not args.no_host)
    from grpo_debug.tools.render.probe import error_results, render_probe_text

    _out(res.model_dump_json(indent=2), as_json=True) if args.format == "json" else _out(render_probe_text(res))
    return 2 if error_results(res) else 0  # a missing shard, an unreachable cluster: exit 2 (the input's problem)


def _rules():
    from grpo_debug.skills.loader import default_rules

    return default_rules()


def cmd_rule(args: argparse.Namespace) -> int:
    from grpo_debug.tools.rule_page import UnknownRuleError, find_rule, rule_page

    try:
        rule = find_rule(_rules(), args.rule_id)
    except UnknownRuleError as e:
        raise CliError(f"{e}") from None
    page = rule_page(rule)
    if args.format == "json":
        _out(page.model_dump_json(indent=2), as_json=True)
    else:
        from grpo_debug.tools.render.rule import render_rule_text

        _out(render_rule_text(page, color=_color(), width=_width()))
    return 0


def cmd_rules(args: argparse.Namespace) -> int:
    rules = sorted(_rules(), key=lambda r: (r.symptom, r.id))
    if args.symptom:
        from grpo_debug.skills.symptoms import SYMPTOMS

        if args.symptom not in SYMPTOMS:
            raise CliError(f"unknown symptom code {args.symptom!r}; codes: {', '.join(SYMPTOMS)}")
        rules = [r for r in rules if r.symptom == args.symptom]
    if args.format == "json":
        import json

        _out(json.dumps([{"id": r.id, "symptom": r.symptom, "title": r.title} for r in rules], indent=2), as_json=True)
        return 0
    from grpo_debug.tools.render.lists import render_rule_list_text

    _out(render_rule_list_text(rules, args.symptom))
    return 0


# a word that can only be a file name: a path from /, ./, ../ or ~/, or a config/log/script file name
_PATH_LIKE = re.compile(r"^(?:\.{0,2}/|~/)|\.(?:json|ya?ml|sh|log|py|txt|toml|cfg|gz|zst)$", re.I)


def cmd_family(args: argparse.Namespace) -> int:
    """playbook | nan_guide | muon_clipping | stream_safety | knowledge_map OPERATION [INPUT] [--text] [--gpu]."""
    from grpo_debug.tools.families import FamilyError, run_family
    from grpo_debug.tools.triage import InputError

    text, path = args.text, None
    if args.input:
        joined = " ".join(args.input)
        if len(args.input) == 1 and not os.path.exists(joined) and _PATH_LIKE.search(joined):
            raise CliError(f"{joined}: no such file; give an existing file, or words (symptoms, a metric, a rule id)")
        if len(args.input) == 1 and (os.path.exists(joined) or joined == "-"):
            if joined == "-":
                text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
            else:
                path = joined
        else:
            text = joined if text is None else f"{text} {joined}"
    try:
        rep = run_family(args.family, args.operation, text=text, path=path, gpu=args.gpu)
    except (FamilyError, InputError) as e:
        raise CliError(str(e)) from None
    if args.format == "json":
        _out(rep.model_dump_json(indent=2), as_json=True)
    else:
        from grpo_debug.tools.render.family import render_family_text

        _out(render_family_text(rep, width=_width()))
    return 0


def _add_family_parser(sub, spec) -> None:
    """One sub-command per family (``tools/families``' catalogue): OPERATION [INPUT ...] [--text] [--gpu]."""
    fp = sub.add_parser(spec.name, aliases=[spec.name.replace("_", "-")], help=spec.help, description=spec.help)
    fp.add_argument("operation", choices=spec.choices, help="sub-command (rtx4090 = gpu for the RTX 4090)")
    fp.add_argument("input", nargs="*", metavar="INPUT",
                    help="a file (config, launch script, log, Python snippet) or words (symptoms, a bug number, a rule id)")
    fp.add_argument("--text", help="input as text instead of a file")
    fp.add_argument("--gpu", help="GPU id or name (rtx4090, a100_80gb, h100_sxm, mi300x, ...)")
    fp.add_argument("--format", choices=("text", "json"), default="text")
    fp.set_defaults(func=cmd_family, family=spec.name)


def cmd_suggest(args: argparse.Namespace) -> int:
    from grpo_debug.tools.suggest import suggest

    res = suggest(" ".join(args.words))
    if args.format == "json":
        _out(res.model_dump_json(indent=2), as_json=True)
        return 0
    from grpo_debug.tools.render.lists import render_suggestion_text

    _out(render_suggestion_text(res))
    return 0


def cmd_skill(args: argparse.Namespace) -> int:
    """Copy SKILL.md to DIR/grpo-debug/SKILL.md (default .claude/skills), where agents look for skills."""
    src = find_skill_md()
    if src is None:
        raise CliError("SKILL.md is not shipped with this installation")
    dest_dir = os.path.join(args.dir, "grpo-debug")
    os.makedirs(dest_dir, exist_ok=True)
    dest = os.path.join(dest_dir, "SKILL.md")
    with open(src, encoding="utf-8") as fi, open(dest, "w", encoding="utf-8") as fo:
        fo.write(fi.read())
    _out(f"installed {dest}")
    return 0


def _read_token(args: argparse.Namespace) -> str | None:
    """The bearer token from --token-file, else $GRPO_DEBUG_TOKEN; None when neither is given. CliError (exit 2)
    when it cannot be read or fails the policy of server/token_policy.py (at least 32 characters and 128 bits)."""
    from grpo_debug.server.http import TOKEN_ENV
    from grpo_debug.server.token_policy import token_problem

    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as fh:
                token = fh.read(65536).strip()
        except (OSError, UnicodeDecodeError) as e:
            raise CliError(f"--token-file {args.token_file}: cannot read: {getattr(e, 'strerror', None) or e}") from None
        try:
            if os.stat(args.token_file).st_mode & 0o077:
                print(f"{PROG}: warning: {args.token_file} is readable by other users; chmod 600 it",
                      file=sys.stderr)
        except OSError:
            pass
        where = f"--token-file {args.token_file}"
    else:
        token = os.environ.get(TOKEN_ENV, "").strip()
        where = f"${TOKEN_ENV}"
        if not token:
            return None
    problem = token_problem(token, where)
    if problem:
        raise CliError(problem)
    return token


def cmd_serve(args: argparse.Namespace) -> int:
    from grpo_debug.probes.cluster import check_address
    from grpo_debug.server.app import RAY_ADDRESS_ENV, TOKEN_ENV, build_server, is_loopback  # MCP SDK imported here
    from grpo_debug.server.paths import default_roots

    ray_address = args.ray_address or os.environ.get(RAY_ADDRESS_ENV) or None
    if ray_address:
        try:
            ray_address = check_address(ray_address)
        except ValueError as e:
            raise CliError(f"--ray-address: {e}") from None

    for d in args.allow or ():
        if not os.path.isdir(d):
            raise CliError(f"--allow {d}: not a folder")
    if args.transport == "stdio":
        if args.host or args.port or args.stateless or args.token_file or args.allow_host:
            raise CliError("--host, --port, --stateless, --token-file and --allow-host need --transport http")
        if sys.stdin is not None and sys.stdin.isatty():  # a person ran it: say what it waits for
            _err(f"{PROG}: MCP server on stdio, waiting for an MCP client (Ctrl-C to stop). Register it with "
                 f"your client instead, e.g. `claude mcp add grpo-debug -- {PROG} serve`, or for CLI use run "
                 f"`{PROG} triage FILE`.")
        server = build_server(allowed_roots=default_roots(args.allow or (), note=_err), ray_address=ray_address)
        from grpo_debug.server.clip import clip_log_records

        clip_log_records()  # a 100 KB name in a logged traceback stalled the event loop for minutes
        server.run("stdio")
        return 0

    from grpo_debug.server.app import run_http

    host = args.host or "127.0.0.1"
    port = 8765 if args.port is None else args.port
    token = _read_token(args)
    if not is_loopback(host) and token is None:
        raise CliError(f"refusing to serve on {host}: a non-loopback address needs a bearer token; give "
                       f"--token-file FILE or set {TOKEN_ENV} (clients then send 'Authorization: Bearer <token>'), "
                       "or bind 127.0.0.1")
    server = build_server(allowed_roots=default_roots(args.allow or (), transport="http", note=_err),
                          ray_address=ray_address)
    roots = ", ".join(str(r) for r in server.allowed_roots)
    shown = f"[{host}]" if ":" in host else host
    print(f"{PROG}: MCP over streamable HTTP at http://{shown}:{port}/mcp"
          f"{' (stateless)' if args.stateless else ''}; bearer token {'required' if token else 'off'}; "
          f"paths readable under: {roots}", file=sys.stderr, flush=True)
    try:
        run_http(server, host=host, port=port, stateless=args.stateless, token=token,
                 allow_hosts=args.allow_host or ())
    except OSError as e:
        raise CliError(f"cannot listen on {shown}:{port}: {e.strerror or e}") from None
    return 0


def _port(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {s!r}") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"must be between 0 and 65535, got {v}")
    return v


# ---------------------------------------------------------------------------- parser

def _add_probe_parser(sub) -> None:
    """The ``probe`` sub-command: host facts, numerics, checkpoint, tokenizer, memory estimate."""
    pr = sub.add_parser("probe", help="read this host: environment, GPUs (NVML), numerics, checkpoint, tokenizer, memory",
                        description="On-host facts as values or 'unknown' with the reason; rules over them. Read-only "
                                    "unless --numerics (a torch subprocess; GPUs only with --device cuda when free).")
    pr.add_argument("--numerics", action="store_true", help="measure fp16 overflow, bf16 drift, repeatability (torch)")
    pr.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    pr.add_argument("--force", action="store_true", help="use a GPU even if busy or short of memory")
    pr.add_argument("--no-host", action="store_true", help="skip the environment/GPU probes")
    pr.add_argument("--checkpoint", metavar="DIR", help="inspect a Megatron / DeepSpeed / HF checkpoint folder")
    pr.add_argument("--tokenizer", metavar="DIR", help="tokenizer folder or tokenizer.json, with --stop")
    pr.add_argument("--stop", action="append", metavar="STRING", help="a stop string to turn into stop_token_ids")
    pr.add_argument("--config", metavar="PATH", help="a config/launch script to combine with host facts")
    pr.add_argument("--ray-address", metavar="ADDR", help="probe every node of this Ray cluster (e.g. 10.0.0.5:6379)")
    pr.add_argument("--estimate", action="store_true", help="estimate GPU memory per component")
    pr.add_argument("--params-b", type=float, help="model parameters in billions (for --estimate)")
    pr.add_argument("--model-config", metavar="PATH", help="config.json or model folder (for --estimate)")
    pr.add_argument("--dtype", default=None, choices=("bf16", "fp16", "fp32"))
    pr.add_argument("--zero-stage", type=int, choices=(0, 1, 2, 3))
    pr.add_argument("--fsdp", action="store_true", default=None)
    pr.add_argument("--dp", type=int)
    pr.add_argument("--tp", type=int)
    pr.add_argument("--lora-rank", type=int)
    pr.add_argument("--no-ref", action="store_true", help="no reference model")
    pr.add_argument("--rollout-mem-fraction", type=float, help="colocated rollout engine memory fraction")
    pr.add_argument("--seq-len", type=int)
    pr.add_argument("--micro-batch", type=int)
    pr.add_argument("--optimizer-offload", action="store_true", default=None)
    pr.add_argument("--param-offload", action="store_true", default=None)
    pr.add_argument("--gpu", help="GPU id from the spec table (default h100_sxm)")
    pr.add_argument("--format", choices=("text", "json"), default="text")
    pr.set_defaults(func=cmd_probe)


def _add_serve_parser(sub) -> None:
    """The ``serve`` sub-command: the MCP server over stdio or streamable HTTP."""
    s = sub.add_parser("serve", help="run the MCP server (stdio, or streamable HTTP)",
                       description="Run the MCP server (tools triage, check_config, probe_host, the families, suggest, "
                                   "explain_rule; rule:// resources) over stdio, for Claude Code, Cursor, VS Code and "
                                   "other MCP clients, or over streamable HTTP at http://HOST:PORT/mcp for several "
                                   "agents. Tools read files only under the allowed folders (the working directory "
                                   "and --allow).")
    s.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    s.add_argument("--host", default=None, help="HTTP: address to bind (default 127.0.0.1); any non-loopback "
                                                "address needs a bearer token")
    s.add_argument("--port", type=_port, default=None, help="HTTP: port (default 8765)")
    s.add_argument("--stateless", action="store_true",
                   help="HTTP: no sessions, JSON responses (for replicas behind a load balancer)")
    s.add_argument("--token-file", metavar="FILE",
                   help="HTTP: file holding the bearer token clients must send (else $GRPO_DEBUG_TOKEN)")
    s.add_argument("--allow-host", action="append", metavar="NAME",
                   help="HTTP: a Host name clients use to reach the server (non-loopback binds; repeatable)")
    s.add_argument("--allow", action="append", metavar="DIR",
                   help="a folder whose files the tools may read, besides the working directory (repeatable; "
                        "also $GRPO_DEBUG_ALLOW, os.pathsep-separated)")
    s.add_argument("--ray-address", metavar="ADDR",
                   help="the Ray cluster probe_host(cluster=true) fans out over (HOST:PORT, ray://HOST:PORT or auto; "
                        "also $GRPO_DEBUG_RAY_ADDRESS); clients can never name another address")
    s.set_defaults(func=cmd_serve)


def build_parser() -> argparse.ArgumentParser:
    from grpo_debug.tools.render.safe import SafeArgumentParser

    p = SafeArgumentParser(
        prog=PROG,
        description="Diagnose RL post-training runs of LLMs (GRPO/PPO on verl, slime, OpenRLHF, TRL, "
                    "Megatron-LM, DeepSpeed) from logs, configs and launch scripts.")
    p.add_argument("--version", action="version", version=f"{PROG} {version()}")
    p.add_argument("--debug", action="store_true", help="show a traceback on internal errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    t = sub.add_parser("triage", help="triage a training log, config or launch script",
                       description="Find what broke in a run: findings with the lines that prove them, "
                                   "the cause and the fix.")
    t.add_argument("path", nargs="?", metavar="PATH", help="file or run folder to read, or '-' for stdin")
    t.add_argument("--example", nargs="?", const=DEFAULT_EXAMPLE, metavar="NAME",
                   help=f"triage a bundled example log instead (default {DEFAULT_EXAMPLE})")
    t.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: the top finding in full, the others one line each (--verbose: all); json: the whole result")
    t.add_argument("--verbose", action="store_true", help="text: write out every finding, cause, series and hint")
    t.add_argument("--max-findings", type=_positive_int, default=10, metavar="N",
                   help="at most N findings (1-100, default 10)")
    add_versions_arg(t)
    g = t.add_mutually_exclusive_group()  # several runs in one input: tools/rundir/runs.py
    g.add_argument("--one-run", dest="runs", action="store_const", const="one",
                   help="read the input as one run (never split a paste or a folder into runs)")
    g.add_argument("--split-runs", dest="runs", action="store_const", const="split",
                   help="split into runs on weaker signs too (any restart of the step numbering, every log of a folder)")
    t.set_defaults(func=cmd_triage)

    c = sub.add_parser("check", help="check a config or launch script: what the settings will cause, exact edits",
                       description="Check a verl/Hydra YAML, DeepSpeed JSON, accelerate YAML, TRL/HF args or a launch "
                                   "script (slime, Megatron, OpenRLHF, verl overrides) against the rule base.")
    c.add_argument("path", metavar="PATH", help="file to read, or '-' for stdin")
    c.add_argument("--format", choices=("text", "json"), default="text")
    c.add_argument("--verbose", action="store_true", help="every evidence line, cause, setting and hint")
    c.add_argument("--max-findings", type=_positive_int, default=20, metavar="N")
    add_versions_arg(c)
    c.add_argument("--diff", action="store_true",
                   help="print the edits as one unified diff (apply it with: patch -p0 PATH < the.diff)")
    c.add_argument("--fix", action="store_true",
                   help="write the edits into PATH in place, after saving the original as PATH.orig")
    c.set_defaults(func=cmd_check)

    _add_probe_parser(sub)

    r = sub.add_parser("rule", help="show one rule: what, why, fix, sources",
                       description="Show one rule of the knowledge base.")
    r.add_argument("rule_id", metavar="ID")
    r.add_argument("--format", choices=("text", "json"), default="text")
    r.set_defaults(func=cmd_rule)

    rs = sub.add_parser("rules", help="list rule ids with symptom and title")
    rs.add_argument("--symptom", metavar="CODE", help="only rules for this symptom code")
    rs.add_argument("--format", choices=("text", "json"), default="text")
    rs.set_defaults(func=cmd_rules)

    from grpo_debug.tools.families import FAMILY_SPECS  # the catalogue only: no engine

    for spec in FAMILY_SPECS.values():
        _add_family_parser(sub, spec)

    sg = sub.add_parser("suggest", help="which tool, operation and rules to try for a question")
    sg.add_argument("words", nargs="+", metavar="WORDS")
    sg.add_argument("--format", choices=("text", "json"), default="text")
    sg.set_defaults(func=cmd_suggest)

    sk = sub.add_parser("skill", help="install the Agent Skill (SKILL.md) where agents look for it")
    sk.add_argument("action", choices=("install",))
    sk.add_argument("--dir", default=os.path.join(".claude", "skills"),
                    help="skills folder (default .claude/skills); SKILL.md goes to DIR/grpo-debug/")
    sk.set_defaults(func=cmd_skill)

    _add_serve_parser(sub)
    add_run_parsers(sub)  # plot, compare (server/cli_runs.py)
    add_watch_parser(sub)  # watch (server/cli_watch.py)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 on usage errors, 0 on --help/--version
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.func(args)
    except CliError as e:
        _err(f"{PROG}: error: {e}")
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. piped into head
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except (RecursionError, MemoryError) as e:  # an input that exhausts a resource: the input's problem
        _err(f"{PROG}: error: {_input_name(args)}: too {'deeply nested' if isinstance(e, RecursionError) else 'large'} "
             f"to process ({type(e).__name__}); give a smaller file, or the part around the first error")
        return 2
    except Exception as e:  # noqa: BLE001 - last resort: one line, no traceback
        from grpo_debug.skills.loader import RuleBaseError

        if isinstance(e, ValueError) and "integer string conversion" in str(e):
            _err(f"{PROG}: error: {_input_name(args)}: holds an integer of more than 4300 digits, which is not "
                 "read; shorten it (or quote it as a string)")
            return 2
        if isinstance(e, RuleBaseError):
            _err(f"{PROG}: error: rule base: {e} (check GRPO_DEBUG_RULES)")
            return 2
        if args.debug:
            raise
        _err(f"{PROG}: internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback "
             "and report it)")
        return 1
    except BaseException as e:  # a native library's panic (pyo3 PanicException) is not an Exception
        if isinstance(e, (SystemExit, GeneratorExit)):
            raise
        _err(f"{PROG}: error: {_input_name(args)}: a native library failed on this input "
             f"({type(e).__name__}: {str(e)[:200]}); the input is likely corrupt or hostile")
        return 2


def _input_name(args: argparse.Namespace) -> str:
    """What the command read, for an error message: the path, '-' (stdin), a folder or 'the input'."""
    for k in ("path", "checkpoint", "tokenizer", "config", "example"):
        v = getattr(args, k, None)
        if v:
            return "stdin" if v == "-" else str(v)
    v = getattr(args, "input", None)
    return " ".join(v)[:200] if v else "the input"


if __name__ == "__main__":
    raise SystemExit(main())
