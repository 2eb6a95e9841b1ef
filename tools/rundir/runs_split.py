"""Which parts of one input are separate runs (issue 23 item 4): the segments of a paste, the logs of a folder.

A paste (:func:`split_text`), tried in this order:

1. line labels: ``[A] ...`` / ``[B] ...``, ``[run1] ...``, ``Run A: ...``, ``run1| ...`` with at least two labels
   of at least two lines each (and a fifth of the non-blank lines labelled): a labelled line goes to its run (the
   label cut off), an unlabelled line to every run (a header, a config printed once for both). One-letter log
   levels (``[I]``, ``[W]``, ``[E]``, ...) are not labels;
2. header lines: a short line that is only a run label (``Run A:``, ``=== run B (commit def456) ===``, ``[B]``)
   with at least two labels: each header opens its run, the lines before the first go to every run;
3. the step numbering starting again: a record of the same metric format at or below the current run's first
   step, after that run logged at least 3 records over at least 2 steps, cut at a second launch line
   (``python3 -m verl.trainer.main_ppo ...``, ``torchrun``, ``accelerate launch``, ``deepspeed``) or a separator
   line (``---``, ``===``, ``#``, "run B", "other commit", "second run") just before it. A launch line after which
   the steps go on is a resume (one run). With ``force`` any restart cuts, a blank line being enough;
4. a second launch line after an attempt that logged no metric record and ended in an error (a failed attempt,
   then another).

Each segment keeps, for each of its lines, the line number in the paste: findings are reported in the paste's own
numbering.

A folder (:func:`group_folder`): the console logs found (``discover.find_inputs``) become units (one per log, or
one per top-level run folder when the logs sit in two or more sub-folders and none at the top); each unit's head
(its first 256 KiB, at most 1500 non-blank lines) gives its config facts, launch line and first steps. The units are ONE run (None: the folder
triage merges them) when their names differ only by a rank tag (``rank3``, ``node1``, ``worker-2``, ``gpu0``,
``tp1``, an IP) or only by an untagged number with the same config facts, or when fewer than two units look like a
run (a launch line, three config facts or three metric records). They are SEVERAL runs when a config fact (other
than a rank's own id) differs between them, when the names differ by a sweep tag (``seed3``, ``run2``,
``trial4``, ``lr1e-5``, ``v2``), or when each has its own launch line and their names differ by words. A config or
script sits with the unit of its own folder when that folder holds one unit; else it is shared by every run.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field

_LEVELS = set("DEFIVWT")
_ID = r"(?:[A-Za-z]\d{0,3}|\d{1,4})"
_PREFIX = re.compile(rf"^\s*(?:\[(?P<b>[A-Za-z]|(?:run|exp|trial)[ _-]?{_ID})\]|(?P<c>(?:run|exp|trial)[ _-]?{_ID})"
                     r"\s*[:|])[ \t]?", re.I)
_HEADER = re.compile(rf"^\s*+(?:(?:#++|=++|-++|\*++)\s*+)?(?:\[(?P<b>[A-Za-z]|(?:run|exp|trial)[ _-]?{_ID})\]|(?P<c>(?:run|exp|"
                     rf"trial)[ _-]?{_ID}))\b\s*(?:\([^()]{{0,60}}\)|[-,:]\s*[\w .,/@#()-]{{0,60}}?)?\s*:?\s*"
                     r"(?:=+|-+|#+|\*+)?\s*$", re.I)
LAUNCH = re.compile(r"^\W{0,4}(?:\+\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:python3?\s+(?:-u\s+)?(?:-m\s+)?[\w./-]*"
                    r"(?:main_ppo|main_grpo|train|grpo|ppo|rl|launch|run)[\w./-]*|torchrun\s|accelerate\s+launch\s|"
                    r"deepspeed\s+\S|ray\s+job\s+submit\s)", re.I)
_SEP = re.compile(r"^\s*(?:#|---|===|\*\*\*)|\b(?:run|attempt|try)\s*(?:[b-z2-9]|two|new|again)\b|\bnew run\b|"
                  r"\b(?:other|another|second|new|next|different)\s+(?:commit|run|attempt|launch|config|try)\b|"
                  r"\bcommit\s+[0-9a-f]{6,}\b|\bsame (?:script|config)\b", re.I)
_ERROR = re.compile(r"Traceback \(most recent call last\)|\b\w*(?:Error|Exception)\b:|\bFATAL\b|\bSegmentation fault\b")


@dataclass
class Segment:
    """One run of a paste: ``name``; ``nos`` its lines' 1-based numbers in the paste; ``texts`` the lines (a label
    prefix cut off)."""

    name: str
    nos: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    how: str = ""
    span: tuple[int, int] | None = None  # first and last line of its own (a shared prelude not counted)

    def add(self, no: int, text: str) -> None:
        """Append paste line ``no`` (1-based) with the text this run reads there."""
        self.nos.append(no)
        self.texts.append(text)

    @property
    def text(self) -> str:
        """The run's text, its lines joined by newlines."""
        return "\n".join(self.texts)

    def where(self) -> str:
        """'lines 1-40' (first to last line of the paste it holds, a prelude it shares not counted)."""
        a, b = self.span or ((self.nos[0], self.nos[-1]) if self.nos else (0, 0))
        return f"lines {a}-{b}" if b else "no lines"


def _label(raw: str | None) -> str | None:
    if not raw or (len(raw) == 1 and raw.upper() in _LEVELS):
        return None
    m = re.match(r"(run|exp|trial)[ _-]?(.+)$", raw, re.I)
    if m is None:
        return raw.upper()
    return m.group(2).upper() if len(m.group(2)) == 1 else m.group(1).lower() + m.group(2)  # "Run A" A, "run_1" run1


def _split_prefixed(lines: list[str]) -> list[Segment] | None:
    labels = []
    for ln in lines:
        m = _PREFIX.match(ln)
        lab = _label((m.group("b") or m.group("c")) if m else None)
        labels.append((lab, m.end() if lab else 0))
    counts = Counter(lab for lab, _ in labels if lab)
    runs = [lab for lab, c in counts.items() if c >= 2]
    nonblank = sum(1 for ln in lines if ln.strip())
    if len(runs) < 2 or sum(counts[x] for x in runs) < 0.2 * nonblank:
        return None
    segs = {lab: Segment(lab, how="labels") for lab in runs}
    for no, (ln, (lab, end)) in enumerate(zip(lines, labels), 1):
        if lab in segs:
            segs[lab].add(no, ln[end:])
        else:  # unlabelled (or a label of one line): every run's
            for s in segs.values():
                s.add(no, ln)
    return list(segs.values())


def _split_headers(lines: list[str]) -> list[Segment] | None:
    heads = [(no, lab) for no, ln in enumerate(lines, 1) if len(ln) <= 120 and (m := _HEADER.match(ln))
             and (lab := _label(m.group("b") or m.group("c")))]
    if len({lab for _, lab in heads}) < 2:
        return None
    segs: dict[str, Segment] = {}
    pre = list(range(1, heads[0][0]))
    bounds = [no for no, _ in heads] + [len(lines) + 1]
    for (no, lab), end in zip(heads, bounds[1:]):
        s = segs.get(lab)
        if s is None:
            s = segs[lab] = Segment(lab, how="headers")
            for p in pre:
                s.add(p, lines[p - 1])
        for k in range(no, end):
            s.add(k, lines[k - 1])
    if any(sum(1 for t in s.texts if t.strip()) < len(pre) + 2 for s in segs.values()):
        return None
    return list(segs.values())


def _cut_before(lines: list[str], after: int, at: int, force: bool) -> int | None:
    """The line that opens the next run, between record lines ``after`` and ``at`` (1-based): a launch line (the
    first), else the last separator line (a blank one too with ``force``); None when none."""
    for no in range(after + 1, at):
        if LAUNCH.match(lines[no - 1]):
            return no
    for no in range(at - 1, after, -1):
        t = lines[no - 1]
        if _SEP.search(t) or (force and not t.strip()):
            return no
    return at if force else None


def _restart_cuts(lines: list[str], recs, force: bool) -> list[int]:
    cuts: list[int] = []
    if len(recs) < 4:
        return cuts
    first = recs[0]
    top, n, prev = first.step, 1, first.line
    for r in recs[1:]:
        if r.fmt == first.fmt and r.step <= first.step and top >= first.step + 1 and n >= 3:
            cut = _cut_before(lines, prev, r.line, force)
            if cut is not None:
                cuts.append(cut)
                first, top, n, prev = r, r.step, 1, r.line
                continue
        if r.fmt == first.fmt:
            top, n = max(top, r.step), n + 1
        prev = r.line
    return cuts


def _failed_attempt_cuts(lines: list[str], recs, cuts: list[int]) -> list[int]:
    """Second launch lines after an attempt with no metric record that ended in an error (rule 4)."""
    launches = [no for no, ln in enumerate(lines, 1) if LAUNCH.match(ln)]
    out = []
    for a, b in zip(launches, launches[1:]):
        body = lines[a:b - 1]
        if (b - a < 4 or any(a < r.line < b for r in recs) or not any(_ERROR.search(t) for t in body)
                or not any(c.strip() and not LAUNCH.match(c) for c in lines[b:])):
            continue
        out.append(b)
    return sorted(set(cuts) | set(out))


def _name_of(lines: list[str], cut: int, k: int) -> str:
    """Run k's name: its opening line when it is a short separator that names it, else 'run k'."""
    t = lines[cut - 1].strip().strip("#=-*: ")
    if t and len(t) <= 40 and not LAUNCH.match(lines[cut - 1]) and _SEP.search(lines[cut - 1]):
        return t
    return f"run {k}"


def _split_contiguous(text: str, lines: list[str], force: bool) -> list[Segment] | None:
    from grpo_debug.tools.engine.metrics import extract_metrics
    from grpo_debug.tools.engine.normalize import normalize

    recs = sorted(extract_metrics(normalize(text)).records, key=lambda r: r.line)
    cuts = _failed_attempt_cuts(lines, recs, _restart_cuts(lines, recs, force))
    if not cuts:
        return None
    segs = []
    bounds = [1] + cuts + [len(lines) + 1]
    prelude = range(1, min([r.line for r in recs if r.line < bounds[1]] or [1]))
    for k, (a, b) in enumerate(zip(bounds, bounds[1:]), 1):
        s = Segment(_name_of(lines, a, k) if k > 1 else "run 1", how="restart", span=(a, b - 1))
        if k > 1 and not any(LAUNCH.match(lines[no - 1]) for no in range(a, b)):
            for no in prelude:  # "same script, other commit": run 1's launch and config are this run's too
                s.add(no, lines[no - 1])
        for no in range(a, b):
            s.add(no, lines[no - 1])
        segs.append(s)
    names = Counter(s.name for s in segs)
    for k, s in enumerate(segs, 1):
        if names[s.name] > 1:
            s.name = f"run {k}"
    return segs


SPLIT_MAX_CHARS = 4 << 20  # a paste larger than this is not searched for several runs
RESTART_MAX_CHARS = 1 << 20  # ... nor, above this, for a restart of the step numbering (a second metrics pass)


def split_text(text: str, force: bool = False) -> list[Segment] | None:
    """The runs of a paste (module docstring), or None when it holds one run. ``force``: any restart of the step
    numbering cuts (the CLI's ``--split-runs``)."""
    if not text or "\n" not in text or len(text) > SPLIT_MAX_CHARS:
        return None  # a paste of several runs is small; a big log is one run (an 11 MiB log took 74 s here)
    lines = text.split("\n")
    return (_split_prefixed(lines) or _split_headers(lines)
            or (_split_contiguous(text, lines, force) if len(text) <= RESTART_MAX_CHARS else None))


# ---------------------------------------------------------------------------- a folder of logs

HEAD_BYTES = 256 << 10
HEAD_LINES = 1500
_HINTS = {"yaml": "yaml", "yml": "yaml", "json": "json"}
_RANK_TAG = re.compile(r"(?<![a-z])(?:rank|node|worker|gpu|proc|process|local_?rank|device|host|tp|dp|pp|ep|shard)"
                       r"[_-]?\d+|\b\d{1,3}(?:[._-]\d{1,3}){3}\b", re.I)
_SWEEP_TAG = re.compile(r"(?<![a-z])(?:seed|run|trial|exp|sweep|lr|job|try|cfg|config|v|version|ablation)[_-]?\d",
                        re.I)
RANK_KEYS = re.compile(r"(?:^|[._])(?:local_?rank|node_?rank|rank|hostname|host|master_(?:addr|port)|pid|ip)$", re.I)


@dataclass
class Unit:
    """One candidate run of a folder: ``name`` (a log's path relative to the folder, or a sub-folder), its text
    inputs and stores; ``facts`` (canonical name -> value, from the head of its logs), ``launch`` (a launch line in
    a head), ``records`` (metric records in the heads) and ``steps`` (first, last step seen in the heads)."""

    name: str
    texts: list = field(default_factory=list)
    stores: list = field(default_factory=list)
    facts: dict = field(default_factory=dict)
    launch: bool = False
    records: int = 0
    steps: tuple | None = None
    signed: bool = False

    @property
    def looks_like_run(self) -> bool:
        """A launch line, three config facts or three metric records in its logs: a run, not a side log."""
        return self.launch or len(self.facts) >= 3 or self.records >= 3


def _head_text(path: str) -> str:
    from grpo_debug.tools import safefs

    raw = safefs.head(path, HEAD_BYTES)
    if raw[:2] == b"\x1f\x8b":
        import zlib

        try:
            raw = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, HEAD_BYTES)
        except zlib.error:
            raw = b""
    elif raw[:4] == b"\x28\xb5\x2f\xfd":
        raw = b""  # a zstd log: no head signature (it is still triaged)
    text = raw.decode("utf-8", "replace")
    text = text[: text.rfind("\n") + 1] if len(raw) >= HEAD_BYTES else text
    # the signature needs settings, a launch line and the first steps: blank lines are dropped and at most
    # HEAD_LINES kept (a gzip's first MiB of newlines was a million lines: 22 s a file)
    return "".join([ln for ln in text.splitlines(True) if ln.strip()][:HEAD_LINES])


def _launch_in(text: str) -> bool:
    """``any(LAUNCH.match(ln.text) for ln in normalize(text))``, normalising line by line up to the first launch
    line (a sweep's logs open with theirs)."""
    from grpo_debug.tools.engine.normalize import normalize_line, split_lines

    return any(LAUNCH.match(normalize_line(raw, i + 1).text) for i, raw in enumerate(split_lines(text)[:5000]) if raw)


def _sign(unit: Unit, full: bool = True) -> None:
    """Fill ``unit``'s signature from the heads of its logs and its configs/scripts (bounded: HEAD_BYTES each).
    ``full=False``: only ``launch`` when a log's head has a launch line (enough for ``looks_like_run``), else the
    whole signature; ``unit.signed`` says whether it is whole."""
    from grpo_debug.tools.engine.normalize import normalize
    from grpo_debug.tools.run.build import build_run

    if not full and any(t.role == "log" and _launch_in(_head_text(t.path)) for t in unit.texts):
        unit.launch = True
        return
    unit.signed = True
    for t in unit.texts:
        text = _head_text(t.path)
        lines = normalize(text)
        run = build_run(lines, events=[], text=text if t.role == "config" else None,
                        hint=_HINTS.get(t.path.rsplit(".", 1)[-1].lower()))
        for f in sorted(run.facts, key=lambda f: f.line or 0):
            if not RANK_KEYS.search(f.raw_key):
                unit.facts[f.name] = f.value
        if t.role != "log":
            continue
        unit.launch = unit.launch or any(LAUNCH.match(ln.text) for ln in lines[:5000])
        steps = [p.step for s in run.series.values() if s.axis == "step" for p in s.points]
        unit.records += len({p.line for s in run.series.values() for p in s.points})
        if steps:
            lo, hi = min(steps), max(steps)
            unit.steps = (min(lo, unit.steps[0]), max(hi, unit.steps[1])) if unit.steps else (lo, hi)


def _units(inv) -> list[Unit]:
    """One unit per log; or one per top-level sub-folder when two or more hold logs/stores and no log is at the top."""
    logs = [t for t in inv.texts if t.role == "log"]
    top = lambda rel: rel.split(os.sep, 1)[0] if os.sep in rel else None  # noqa: E731
    store_rel = [(inv.rel(s.path), s) for s in inv.stores]
    dirs = {top(t.rel) for t in logs} | {top(r) for r, _ in store_rel}
    if None not in dirs and len(dirs) >= 2:
        units = {d: Unit(d) for d in sorted(dirs)}
        for t in inv.texts:
            (units[top(t.rel)].texts if top(t.rel) in units else []).append(t)
        for r, s in store_rel:
            units[top(r)].stores.append(s)
        return list(units.values())
    units = {t.rel: Unit(t.rel, texts=[t]) for t in logs}
    by_dir = Counter(os.path.dirname(t.rel) for t in logs)
    for t in inv.texts:
        d = os.path.dirname(t.rel)
        if t.role != "log" and by_dir.get(d) == 1:
            units[next(x.rel for x in logs if os.path.dirname(x.rel) == d)].texts.append(t)
    for r, s in store_rel:
        d = os.path.dirname(r)
        if by_dir.get(d) == 1:
            units[next(x.rel for x in logs if os.path.dirname(x.rel) == d)].stores.append(s)
    return list(units.values())


def differing_facts(units: list[Unit]) -> list[str]:
    """Config facts set to different values in two units; a fact some units lack counts only when every unit has
    its own launch line (each printed its whole configuration)."""
    every = all(u.launch for u in units)
    out = []
    for k in dict.fromkeys(k for u in units for k in u.facts):
        vals = [repr(u.facts[k]) for u in units if k in u.facts]
        if len(set(vals)) > 1 or (every and len(vals) < len(units)):
            out.append(k)
    return out


def _rank_named(names: list[str]) -> bool:
    """Every name carries a rank/node tag and they differ only there (rank0.log .. rank7.log)."""
    return len({_RANK_TAG.sub("<R>", n) for n in names}) == 1 and all(_RANK_TAG.search(n) for n in names)


def _sweep_named(names: list[str]) -> bool:
    """A sweep's tag (seed, run, trial, lr, ...) and one numbering for every name (run00.log .. run29.log)."""
    return any(_SWEEP_TAG.search(n) for n in names) and len({re.sub(r"\d+", "#", n) for n in names}) == 1


def _one_run(units: list[Unit]) -> bool:
    """True when the units are the parts (ranks, nodes, attempts) of one run (module docstring)."""
    names = [u.name for u in units]
    if _rank_named(names):
        return True
    if differing_facts(units):
        return False  # a config fact differs: a sweep
    if _sweep_named(names):
        return False
    if len({re.sub(r"\d+", "#", n) for n in names}) == 1:
        return True  # numbered the same way, same config: ranks or attempts of one run
    spans = sorted(u.steps for u in units if u.steps)
    if len(spans) == len(units) and all(a[1] < b[0] for a, b in zip(spans, spans[1:])):
        return True  # steps go on from one log to the next: a resumed run
    return not all(u.launch for u in units)


@dataclass
class Group:
    """A run of a folder: ``name``, its text inputs and stores (the shared configs/scripts included)."""

    name: str
    texts: list
    stores: list


def group_folder(inv, force: bool = False) -> list[Group] | None:
    """The runs of a folder's inventory (``discover.Inventory``), or None when it is one run (module docstring).
    ``force`` (``--split-runs``): every unit that looks like a run is one, whatever the names say."""
    units = _units(inv)
    if len(units) < 2:
        return None
    owned = {id(t) for u in units for t in u.texts} | {id(s) for u in units for s in u.stores}
    shared_t = [t for t in inv.texts if id(t) not in owned and t.role != "log"]
    shared_s = [s for s in inv.stores if id(s) not in owned]
    if not force and _rank_named([u.name for u in units]):
        return None  # _one_run's first test, by the names alone: the rank logs of one run (no head read)
    for u in units:  # the facts only when the names do not decide (a sweep's 30 heads cost 12 s through build_run)
        _sign(u, full=False)
    runs = [u for u in units if u.looks_like_run]
    if len(runs) < 2:
        return None
    if not force and not (not _rank_named([u.name for u in runs]) and _sweep_named([u.name for u in runs])):
        for u in runs:
            if not u.signed:
                _sign(u)
        if _one_run(runs):
            return None
    aux = [u for u in units if not u.looks_like_run]
    for a in aux:  # job.err beside job.out: with its run; else shared when small
        stem = os.path.basename(a.name).split(".")[0]
        mate = next((u for u in runs if os.path.basename(u.name).split(".")[0] == stem), None)
        if mate is not None:
            mate.texts += a.texts
            mate.stores += a.stores
            continue
        shared_s += a.stores  # (a store of no one run's folder: every run's)
        if sum(t.size for t in a.texts) <= 4 << 20:
            shared_t += a.texts
    return [Group(u.name, u.texts + shared_t, u.stores + shared_s) for u in runs]
