"""``grpo-debug watch PATH...``: follow a live run and speak when a finding first reaches medium or high confidence.

The incremental form of the streamed triage (tools/streaming.py): each followed file (tools/watch_state.py) is
read once, only its new bytes, into the same scanner, series store and line quotas a whole-file scan uses. A
snapshot of a follower is evaluated (its store materialised and the rules run, tools/triage.py ``_result``, as
the streamed path does) at once (at most every ``min_gap`` seconds) when a new kind of event, error or non-finite
line arrives; after ``metric_every`` new metric lines; within ``interval`` of a rule pattern's first line; else
when what the rules read changed (new metric or candidate lines, not chatter) and the follower's interval has
passed: ``interval`` seconds, doubled after each evaluation that said nothing new up to ``max_interval`` (default
``BACKOFF`` x ``interval``), back to ``interval`` after an alert or update (:meth:`Watch.due`). **Cost**: a poll is
proportional to the new bytes (31 ms of CPU per MiB on the benchmark's verl log, bench/bench_watch.py); a
snapshot is bounded by the store (at most ``TABLE_POINTS`` points) and the kept lines (quotas), never by the
file's size (0.3-0.5 s); memory is bounded the same way. A slow change over the metric series (a late climb) is
seen within one interval, at most ``max_interval`` seconds after the deciding step's line.

Alerts: a finding (symptom, top rule) of one run (a PATH argument) is said once, when it first reaches medium or
high confidence, with its onset (first evidence line and the step there). A later snapshot where it is more
confident or its onset moved is an ``update``, not a new alert; ``--on-alert`` runs once per finding.
Exit codes (:func:`watch`): 1 at the first alert whose symptom is in ``fail_on`` ("any": every alert); 0 when
``until_eof`` and no new bytes came for ``idle`` seconds; 2 for input errors (:class:`WatchError`).
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from grpo_debug.tools import safefs
from grpo_debug.tools.watch_state import (JsonlFollower, LogFollower, TfeventsFollower, load_state, save_state,
                                          snapshot)

CONF = {"low": 0, "medium": 1, "high": 2}
MAX_FOLLOWERS = 64
RESCAN_S = 5.0          # a folder is listed again for new store files this often
ALERT_TIMEOUT = 30.0    # seconds an --on-alert command may run
BACKOFF = 6             # the interval doubles while evaluations say nothing new, up to BACKOFF x --interval


class WatchError(Exception):
    """An input or usage error (exit code 2): the message names the input and the fix."""


@dataclass
class Options:
    """What :func:`watch` does (the CLI's flags; seconds are wall-clock seconds)."""

    paths: list[str]
    from_end: bool = False
    fail_on: set[str] = field(default_factory=set)  # symptom codes, or {"any"}
    fmt: str = "text"                                # "text" or "jsonl"
    status_every: float | None = None
    until_eof: bool = False
    idle: float = 5.0
    on_alert: str | None = None
    state: str | None = None
    interval: float = 10.0
    metric_every: int = 2000
    min_gap: float = 0.5
    poll: float = 0.2
    max_interval: float | None = None  # the interval backs off to this (None: BACKOFF x interval)


def parse_fail_on(text: str | None) -> set[str]:
    """``"nan_inf,oom"`` or ``"any"`` as a set; raises WatchError for an unknown symptom code."""
    if not text:
        return set()
    from grpo_debug.skills.symptoms import SYMPTOMS

    codes = {c.strip() for c in text.split(",") if c.strip()}
    if "any" in codes:
        return {"any"}
    bad = sorted(codes - set(SYMPTOMS))
    if bad:
        raise WatchError(f"--fail-on: unknown symptom code {bad[0][:60]!r}; use 'any' or codes from: "
                         + ", ".join(sorted(SYMPTOMS)))
    return codes


def _kind_of(path: str):
    """The follower class for a file by its name and first line."""
    from grpo_debug.tools.readers.tfevents import is_event_file
    from grpo_debug.tools.readers.textstores import sniff_verl_line

    name = os.path.basename(path)
    if is_event_file(name):
        return TfeventsFollower
    if name.endswith(".jsonl"):
        return JsonlFollower
    head = safefs.head(path, 65536).split(b"\n", 1)[0]
    return JsonlFollower if head.startswith(b"{") and sniff_verl_line(head) else LogFollower


def _store_files(folder: str, depth: int = 4) -> list[str]:
    """Files of a run folder to follow: console logs (.log .out .err .txt), JSONL, TensorBoard event files."""
    from grpo_debug.tools.readers.tfevents import is_event_file

    out: list[str] = []
    try:
        entries = safefs.scandir(folder, 20_000)
    except OSError:
        return out
    for e in entries:
        if e.is_dir() and depth > 0 and not e.name.startswith("."):
            out += _store_files(e.path, depth - 1)
        elif e.is_file() and (is_event_file(e.name) or e.name.endswith((".jsonl", ".log", ".out", ".err", ".txt"))):
            out.append(e.path)
    return out


class Watch:
    """The watcher's state: followers by path, alerted findings, counters (see the module docstring)."""

    def __init__(self, opts: Options, rules=None, out=None):
        from grpo_debug.skills.loader import default_rules
        from grpo_debug.tools.engine.large_logs import build_patterns

        self.opts, self.out = opts, out or sys.stdout
        self.rb = rules or default_rules()
        self.patterns = build_patterns(self.rb.regex_patterns())
        self.followers: dict[str, object] = {}
        self.run_of: dict[str, str] = {}
        self.seen: dict[str, dict] = {}  # follower path -> {t, urgent, metric, bytes} at its last evaluation
        self.state = load_state(opts.state) if opts.state else {}
        self.alerted: dict[str, dict] = dict(self.state.get("alerted", {}))
        self.failed: dict | None = None
        self.threads: list[threading.Thread] = []
        self.last_rescan = 0.0
        self.evals = 0
        self.eval_s = 0.0
        self.last_new = time.monotonic()
        self.current: dict[str, dict] = {}  # key -> the latest record of each medium/high finding (MCP resource)
        self.sink = None  # a callable(event, record): said there instead of printed (server/watch_resource.py)

    # -- inputs --------------------------------------------------------------------------------------------
    def discover(self, first: bool = True) -> None:
        """Followers for the PATH arguments (a folder: its store files, listed again every RESCAN_S). ``first``:
        a PATH that is a link or not a regular file raises WatchError (later, a follower says it)."""
        self.last_rescan = time.monotonic()
        for arg in self.opts.paths:
            kind = safefs.kind(arg)
            if kind == "dir":
                files = _store_files(arg)
            elif kind in ("link", "other") and not first:
                continue
            elif kind in ("link", "other"):
                raise WatchError(f"{arg[:200]}: {'a symbolic link' if kind == 'link' else 'not a regular file'}; "
                                 "name the file itself")
            else:
                files = [arg]
            for p in files:
                if p not in self.followers and len(self.followers) < MAX_FOLLOWERS:
                    self._add(p, arg)

    def _add(self, path: str, run: str) -> None:
        cls = _kind_of(path) if os.path.exists(path) else (JsonlFollower if path.endswith(".jsonl") else LogFollower)
        f = cls(path, self.patterns) if cls is LogFollower else cls(path)
        saved = self.state.get("files", {}).get(path)
        try:
            if f.open(0) and self.opts.from_end:
                same = saved and f.ident == tuple(saved.get("ident", ())) and f.head_id() == saved.get("head")
                start = saved["offset"] if same else os.fstat(f.fd).st_size
                f.close()
                f.open(start)
        except safefs.Refused as e:
            raise WatchError(f"{str(e)[:240]}; name a regular file") from None
        except OSError as e:
            raise WatchError(f"{path[:200]}: cannot read ({e.strerror or e}); check the path and permissions") from None
        self.followers[path], self.run_of[path] = f, run
        self.seen[path] = {"t": 0.0, "urgent": 0, "sig": (0, 0, 0, 0), "bytes": 0, "every": self.opts.interval}

    # -- the loop ------------------------------------------------------------------------------------------
    def poll_all(self) -> tuple[int, bool]:
        """Read every follower's new bytes; (new bytes, whether a follower has more waiting: a backlog)."""
        if self.opts.paths and time.monotonic() - self.last_rescan > RESCAN_S:
            self.discover(first=False)
        new, backlog = 0, False
        from grpo_debug.tools.watch_state import BLOCK
        for f in self.followers.values():
            try:
                n = f.poll()
            except safefs.Refused as e:
                f.error = str(e)[:240]
                n = 0
            new += n
            backlog |= n >= BLOCK
        return new, backlog

    def due(self, path: str, now: float, backlog: bool, final: bool = False) -> bool:
        """Whether the follower at ``path`` is evaluated now: at the end (``final``); at once (at most every
        ``min_gap`` s) for a new kind of urgent line; after ``metric_every`` new metric lines; a rule pattern's
        first line within the base ``interval``; else every ``every`` seconds (the interval, doubled after each
        evaluation that said nothing new, up to ``max_interval``) when what the rules read changed (follower
        ``signature``: metric lines, candidate lines); bytes no rule reads (chatter) are never evaluated for."""
        f, s = self.followers[path], self.seen[path]
        if f.bytes_read == s["bytes"]:
            return False
        if final:
            return True
        sig, old = f.signature(), s["sig"]
        since = now - s["t"]
        if since >= s["every"] and sig != old or sig[2] != old[2] and since >= self.opts.interval:
            return True
        if backlog:
            return False
        return (sig[0] - old[0] >= self.opts.metric_every
                or (f.urgent() != s["urgent"] and since >= self.opts.min_gap))

    def evaluate(self, path: str) -> list[tuple[str, dict]]:
        """Run the rules on the follower's snapshot; the (event, record) pairs to say: alert or update. The next
        interval (``due``) is the base one after an alert or update, else twice the last (capped)."""
        from grpo_debug.tools.triage import _result

        f, t0 = self.followers[path], time.monotonic()
        every = self.seen[path]["every"]
        self.seen[path] = s = {"t": t0, "urgent": f.urgent(), "sig": f.signature(), "bytes": f.bytes_read,
                               "every": every}
        if f.fd is None and f.bytes_read == 0:
            return []
        ctx, lines = snapshot(f)
        res = _result(ctx, lines, label=path, skipped=[], rules=self.rb, max_findings=50,
                      lines_read=f.counts()[0], bytes_read=f.bytes_read, streamed=True)
        self.evals += 1
        self.eval_s += time.monotonic() - t0
        out = []
        for fd in res.findings:
            if CONF[fd.confidence] < 1:
                continue
            rec = self._record(path, fd, ctx, res)
            self.current[rec["key"]] = rec
            said = self.alerted.get(rec["key"])
            if said is None:
                out.append(("alert", rec))
            elif CONF[fd.confidence] > CONF[said["confidence"]] or (
                    rec["generation"] == said.get("generation") and rec["onset_line"] != said.get("onset_line")):
                out.append(("update", rec))
            else:
                continue
            self.alerted[rec["key"]] = {k: rec[k] for k in ("confidence", "onset_line", "onset_step", "generation")}
        cap = self.opts.max_interval or BACKOFF * self.opts.interval
        s["every"] = self.opts.interval if out else min(cap, max(every * 2, self.opts.interval))
        return out

    def _record(self, path: str, fd, ctx, res) -> dict:
        """What an alert says: the key (run, symptom, rule), the onset (first evidence line and its step; a metric
        store's finding without a readable line: the first non-finite step for nan_inf) and the finding."""
        rule = fd.causes[0].rule_id if fd.causes else ""
        run = self.run_of[path]
        line = min((e.line for e in fd.evidence), default=None)
        step = _step_at(ctx.metrics, line)
        if line is None and fd.symptom == "nan_inf":
            step = min((m.first_nonfinite_step for m in res.metrics.values() if m.first_nonfinite_step is not None),
                       default=None)
        return {"key": f"{run}|{fd.symptom}|{rule}", "run": run, "file": path, "symptom": fd.symptom, "rule": rule,
                "confidence": fd.confidence, "onset_line": line, "onset_step": step,
                "generation": self.followers[path].generation, "finding": fd.model_dump(mode="json")}

    def say(self, event: str, rec: dict) -> None:
        """Print an alert or update (text or one JSON line) and run --on-alert for a new alert; with a ``sink``,
        hand it the (event, record) instead (no print, no hook, no fail-on)."""
        if self.sink is not None:
            self.sink(event, rec)
            return
        if self.opts.fmt == "jsonl":
            line = json.dumps({"event": event, "time": time.time(), **{k: v for k, v in rec.items() if k != "key"}})
        else:
            fd = rec["finding"]
            where = f"line {rec['onset_line']}" if rec["onset_line"] else "no line"
            step = f", step {rec['onset_step']:g}" if rec["onset_step"] is not None else ""
            ev = next((e["text"] for e in fd["evidence"] if e["line"] == rec["onset_line"]), "")
            line = (f"{'ALERT' if event == 'alert' else 'UPDATE'} {rec['symptom']} ({rec['confidence']}) "
                    f"{fd['title']} [rule {rec['rule']}] at {where}{step} of {rec['file']}\n  {ev[:200]}\n"
                    f"  fix: {fd['fix'][:300]}")
        print(line, file=self.out, flush=True)
        if event == "alert" and self.opts.on_alert:
            th = threading.Thread(target=_run_hook, args=(self.opts.on_alert, rec), daemon=True)
            th.start()
            self.threads.append(th)
        fail = self.opts.fail_on
        if event == "alert" and self.failed is None and ("any" in fail or rec["symptom"] in fail):
            self.failed = rec

    def status(self) -> None:
        """One status line: files, bytes, lines, metric lines, alerts, evaluation cost."""
        lines = sum(f.counts()[0] for f in self.followers.values())
        metric = sum(f.counts()[1] for f in self.followers.values())
        read = sum(f.bytes_read for f in self.followers.values())
        waiting = [p for p, f in self.followers.items() if f.fd is None]
        d = {"files": len(self.followers), "waiting_for": waiting[:5], "bytes_read": read, "lines": lines,
             "metric_lines": metric, "alerts": len(self.alerted), "evaluations": self.evals,
             "evaluation_s": round(self.eval_s, 3)}
        if self.opts.fmt == "jsonl":
            print(json.dumps({"event": "status", "time": time.time(), **d}), file=self.out, flush=True)
        else:
            print(f"status: {d['files']} file(s), {read:,} bytes, {lines:,} lines, {metric:,} metric lines, "
                  f"{len(self.alerted)} alert(s), {self.evals} evaluations in {self.eval_s:.2f} s"
                  + (f"; waiting for {', '.join(waiting[:3])}" if waiting else ""), file=self.out, flush=True)

    def save(self) -> None:
        if not self.opts.state:
            return
        files = {p: {"ident": list(f.ident or ()), "head": f.head_id(), "offset": f.offset - len(f.carry),
                     "kind": f.kind, "generation": f.generation} for p, f in self.followers.items()}
        save_state(self.opts.state, files, self.alerted)

    def finish(self) -> None:
        for th in self.threads:
            th.join(ALERT_TIMEOUT + 1)
        self.save()
        for f in self.followers.values():
            f.close()


def _step_at(metrics, line: int | None) -> float | None:
    """The step of the metric point at ``line``, else of the last metric point before it (None when none)."""
    if line is None:
        return None
    best = None
    for pts in metrics.series.values():
        for p in pts:
            if p.line == line:
                return p.step
            if p.line < line and (best is None or p.line > best[0]):
                best = (p.line, p.step)
    return best[1] if best else None


def _run_hook(cmd: str, rec: dict) -> None:
    """The user's --on-alert command, without a shell, the finding as JSON on stdin, under ALERT_TIMEOUT."""
    try:
        subprocess.run(shlex.split(cmd), input=json.dumps({k: v for k, v in rec.items() if k != "key"}).encode(),
                       timeout=ALERT_TIMEOUT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        print(f"watch: --on-alert {cmd[:80]!r} failed: {str(e)[:160]}", file=sys.stderr, flush=True)


def watch(opts: Options, rules=None, out=None, stop: threading.Event | None = None) -> int:
    """Follow ``opts.paths`` until a fail-on alert (1), the end of input with ``until_eof`` (0), ``stop`` being set
    (0) or an interrupt. Raises WatchError for input errors (the caller exits 2)."""
    if opts.on_alert:
        try:
            if not shlex.split(opts.on_alert):
                raise ValueError("empty")
        except ValueError as e:
            raise WatchError(f"--on-alert: cannot split {opts.on_alert[:80]!r} into a command ({e}); quote it "
                             "as one argument, e.g. --on-alert 'notify-send grpo'") from None
    try:
        w = Watch(opts, rules, out)
    except ValueError as e:
        raise WatchError(str(e)) from None
    w.discover()
    if not w.followers:
        raise WatchError(f"{opts.paths[0][:200]}: no log or metric store to follow (a folder needs .log/.jsonl/"
                         "tfevents files); name a file or a run folder")
    try:
        return _loop(w, opts, stop)
    finally:
        w.finish()


def follow(w: Watch, stop: threading.Event) -> int:
    """Run an already discovered :class:`Watch` until ``stop`` is set (a background follower: give it a ``sink``
    and no ``fail_on``), as :func:`watch` runs it; 0 when stopped, 1 at a fail-on alert."""
    return _loop(w, w.opts, stop)


def _loop(w: Watch, opts: Options, stop: threading.Event | None) -> int:
    last_status = last_save = time.monotonic()
    while True:
        new, backlog = w.poll_all()
        now = time.monotonic()
        if new:
            w.last_new = now
        idle_end = opts.until_eof and not new and now - w.last_new >= opts.idle
        for path in list(w.followers):
            if w.due(path, now, backlog, final=idle_end):
                for event, rec in w.evaluate(path):
                    w.say(event, rec)
                    if w.failed is not None:
                        return 1
        if opts.status_every and now - last_status >= opts.status_every:
            w.status()
            last_status = now
        if opts.state and now - last_save >= 5.0:
            w.save()
            last_save = now
        if idle_end:
            missing = [p for p, f in w.followers.items() if f.fd is None]
            if missing and len(missing) == len(w.followers):
                raise WatchError(f"{missing[0][:200]}: never appeared within --idle {opts.idle:g} s; check the path")
            return 0
        if stop is not None and stop.is_set():
            return 0
        if not backlog:
            time.sleep(opts.poll)
