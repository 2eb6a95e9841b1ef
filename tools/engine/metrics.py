"""Metric series per step, from the console formats the RL frameworks print.

Recognised shapes (each matched anywhere in a normalised line, so YAML comments and tqdm-glued lines
work):

- verl ``step:N - key:value - key:value`` (LocalLogger; ``{v:.3f}`` or full repr, ``np.float64(x)``);
- a Python/JSON dict after a label: slime/Relax ``step N: {...}``, ``rollout N: {...}``, ``perf N:``,
  ``eval N:``; OpenRLHF ``Global step N: {...}``;
- a bare dict line (HF Trainer / TRL / ms-swift ``{'loss': ..., 'grad_norm': ...}``; values may be
  quoted ``.4g`` strings); the step is the dict's ``step``/``global_step`` key, else (the console dict of
  ``Trainer.log`` has none) the dict's ordinal on the ``log_record`` axis, never called a step;
- Megatron-LM ``iteration N/ M | name: value | ...`` (the set of fields per line is kept, so a field
  that disappears, e.g. ``lm loss`` on a NaN step in Megatron-DeepSpeed, can be detected);
- DeepSpeed ``OVERFLOW! ... Attempted loss scale: X, reducing to Y`` (series ``deepspeed/loss_scale``)
  and ``step=N, skipped=K`` progress lines;
- OpenRLHF tqdm postfixes ``[..., act_loss=0.1, reward=0.5, grad_norm=1.2]``;
- generic ``global_step: N, name: value, ...`` / ``[step N] name=value`` lines (PaddleNLP and kin);
- the formats of engine/metric_formats/, one unit each: SkyRL, AReaL, NeMo-RL, ROLL, prime-rl, verl JSONL,
  trainer_state.json log_history, W&B run summary, markdown tables, ``key: value   key: value`` summaries.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from grpo_debug.tools.engine.command_lines import setting_lines
from grpo_debug.tools.engine.normalize import Line
from grpo_debug.tools.engine.values import parse_dict_text, to_float  # noqa: F401  (re-exported)

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf(?:inity)?"

_VERL = re.compile(r"\bstep:\s*(\d+)\s+-\s+(.+)$")
_LABEL_DICT = re.compile(r"(?:^|[\s\]:-])((?:critic-)?step|rollout|perf|eval|Global step|global step)\s+(\d+)\s*:\s*(\{.*\})\s*$")
_BARE_DICT = re.compile(r"^\s*(\{['\"].*\})\s*$")
_MEGATRON = re.compile(r"\biteration\s+(\d+)\s*/\s*\d+\s*\|(.*)$")
_DS_OVERFLOW = re.compile(r"(?:OVERFLOW!|[Oo]verflow detected|overflow!).*?Attempted loss scale:\s*([\d.e+]+)(?:,\s*(?:but hysteresis.*|reducing to\s*([\d.e+]+)))?")
_DS_PROGRESS = re.compile(r"\bstep=(\d+),\s*skipped=(\d+)")
# tqdm postfix "| 3/10 [00:01<00:09, 1.2it/s, loss=1, lr=2]": pairs split only at commas (no nested repeats;
# linear on hostile lines), the text before them holds no '='
_TQDM_POSTFIX = re.compile(r"\|\s*\d+/\d+\s*\[[^\]=]*?,\s*([\w/]+=[^,\]]+(?:,\s*[\w/]+=[^,\]]+)+)(?:,\s*)?\]")
_GENERIC_STEP = re.compile(r"(?:\bglobal_step|\bstep|\biteration|\biter)(?:\s*[:=]\s*|\s+)#?(\d+)\b", re.I)
_GENERIC_PAIR = re.compile(r"(?<![\w./|@-])([A-Za-z_][\w./@-]*)\s*[:=]\s*(" + _NUM + r")(?![\w.])")
_PAIR_SEP = re.compile(r"(?<!\s)\s+-\s+")  # starts only at a run's first blank: linear on long blank runs


@dataclass(slots=True)
class Point:
    step: float
    value: float
    line: int


@dataclass(slots=True)
class Record:
    """One metric line: its format, step, line number and the metric names it carried."""

    fmt: str
    step: float
    line: int
    keys: frozenset[str]


class LineSet(set):
    """Line numbers of metric lines, of which a streamed log holds only some: ``in`` and iteration see the held
    ones, ``len()`` is ``total``, the number of metric lines of the whole input (engine/series_store.py)."""

    total: int = 0

    def __len__(self) -> int:
        return max(self.total, set.__len__(self))


@dataclass
class MetricTable:
    series: dict[str, list[Point]] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)
    formats: set[str] = field(default_factory=set)
    lines: set[int] = field(default_factory=set)
    axes: dict[str, str] = field(default_factory=dict)  # raw key -> x axis when a format says it is not 'step'
    # raw key -> the number of points the input had, when ``series`` holds a downsample (a streamed log)
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, key: str) -> int:
        """The number of points of series ``key`` in the input (``len(series[key])`` unless downsampled)."""
        return self.counts.get(key, len(self.series.get(key, ())))

    def add(self, fmt: str, step: float, line: int, values: dict[str, float]) -> None:
        if not values:
            return
        for k, v in values.items():
            self.series.setdefault(k, []).append(Point(step, v, line))
        self.records.append(Record(fmt, step, line, frozenset(values)))
        self.formats.add(fmt)
        self.lines.add(line)

    def keys(self, pattern: str | re.Pattern[str]) -> list[str]:
        rx = re.compile(pattern, re.I) if isinstance(pattern, str) else pattern
        return [k for k in self.series if rx.search(k)]


def _numeric(d: dict) -> dict[str, float]:
    out = {}
    for k, v in d.items():
        f = to_float(v)
        if f is not None:
            out[str(k)] = f
    return out


_ODD_BLANKS = ("  ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f")  # ASCII blanks but one space


def _verl_pairs(rest: str) -> dict[str, float]:
    """``key:value`` pairs of a verl LocalLogger line after ``step:N - ``; items split at ``" - "``."""
    if rest.isascii() and rest[:1] != " " and rest[-1:] != " " and not any(b in rest for b in _ODD_BLANKS):
        # single inner spaces only: str.split splits as _PAIR_SEP does and no item needs strip()
        parts = [item.rpartition(":") for item in rest.split(" - ")]
        if all(sep and k and " " not in k for k, sep, _ in parts):  # else a colon in a value: item by item
            try:
                return {k: float(v) for k, _, v in parts}
            except ValueError:  # a value that is not a plain number (quoted, np.float64(...), with a unit)
                pass
    out = {}
    for item in _PAIR_SEP.split(rest):
        item = item.strip()
        k, sep, v = item.rpartition(":")
        f = to_float(v.split()[0]) if sep and k and " " not in k and v.strip() else None
        if f is None and "tensor(" in item:  # a torch repr: blanks and colons inside it (device='cuda:0')
            k, sep, v = item.partition(":")
            f = to_float(v) if sep and k and " " not in k else None
        if f is not None:
            out[k] = f
    return out


def _megatron_fields(rest: str) -> dict[str, float]:
    out = {}
    for part in rest.split("|"):
        k, sep, v = part.partition(":")
        if not sep:
            continue
        f = to_float(v.strip().split(" ")[0]) if v.strip() else None
        if f is not None:
            out[k.strip()] = f
    return out


def parse_line(ln: Line, table: MetricTable, counters: dict[str, int]) -> bool:
    """Add the metrics of one normalised line to ``table``. Returns True if the line carried metrics."""
    t = ln.text
    if not t or len(t) < 6:
        return False
    if "step:" in t:
        m = _VERL.search(t)
        if m:
            vals = _verl_pairs(m.group(2))
            if vals:
                table.add("verl", float(m.group(1)), ln.no, vals)
                return True
    if "{" in t:
        m = _LABEL_DICT.search(t)
        if m:
            d = parse_dict_text(m.group(3))
            if d:
                label = m.group(1).lower()
                fmt = "openrlhf" if label == "global step" else "slime"
                table.add(fmt, float(m.group(2)), ln.no, _numeric(d))
                return True
        m = _BARE_DICT.match(t)
        if m:
            d = parse_dict_text(m.group(1))
            if d:
                vals = _numeric(d)
                if vals:
                    counters["hf"] = counters.get("hf", 0) + 1
                    step = vals.get("step", vals.get("global_step"))
                    if step is None or not math.isfinite(step):  # HF's console dict has no step: its x counts dicts
                        step = counters["hf"]
                        for k in vals:
                            table.axes.setdefault(k, "log_record")
                    table.add("hf_trainer", float(step), ln.no, vals)
                    return True
    if "iteration" in t and "|" in t:
        m = _MEGATRON.search(t)
        if m:
            table.add("megatron", float(m.group(1)), ln.no, _megatron_fields(m.group(2)))
            return True
    if "verflow" in t or "OVERFLOW" in t:
        m = _DS_OVERFLOW.search(t)
        if m:
            scale = to_float(m.group(2) or m.group(1))
            if scale is not None:
                counters["ds_overflow"] = counters.get("ds_overflow", 0) + 1
                table.add("deepspeed", float(counters["ds_overflow"]), ln.no, {"deepspeed/loss_scale": scale})
                return True
    if "skipped=" in t:
        m = _DS_PROGRESS.search(t)
        if m:
            table.add("deepspeed", float(m.group(1)), ln.no, {"deepspeed/skipped_steps": float(m.group(2))})
            return True
    if "=" in t and "|" in t and "[" in t:
        m = _TQDM_POSTFIX.search(t)
        if m:
            vals = {}
            for kv in m.group(1).split(","):
                k, _, v = kv.partition("=")
                f = to_float(v)
                if k.strip() and f is not None:
                    vals[k.strip()] = f
            if vals:
                counters["tqdm"] = counters.get("tqdm", 0) + 1
                table.add("openrlhf_tqdm", float(counters["tqdm"]), ln.no, vals)
                return True
    if ":" in t or "=" in t:
        m = _GENERIC_STEP.search(t)
        if m:
            pairs = {k: to_float(v) for k, v in _GENERIC_PAIR.findall(t[m.end():])}
            pairs = {k: v for k, v in pairs.items() if v is not None}
            if len(pairs) >= 2:
                table.add("generic", float(m.group(1)), ln.no, pairs)
                return True
    return False


def extract_metrics(lines: list[Line], table: MetricTable | None = None, counters: dict | None = None) -> MetricTable:
    """Metric series of all lines, in input order: the multi-line formats of engine/metric_formats first (a block
    consumes its lines), then per line its ``BEFORE`` units, the built-in shapes above, and its ``AFTER`` units.
    ``table`` and ``counters`` (the formats' running state) carry over between calls on successive pieces of one
    input (a streamed log, read chunk by chunk)."""
    from grpo_debug.tools.engine.metric_formats import AFTER, BEFORE, BLOCKS

    table = MetricTable() if table is None else table
    counters = {} if counters is None else counters
    settings = setting_lines(lines)  # launch commands and printed configs: settings, never metric values
    i, n = 0, len(lines)
    while i < n:
        if lines[i].no in settings:
            i += 1
            continue
        used = 0
        for unit in BLOCKS:
            used = unit(lines, i, table, counters)
            if used:
                break
        if used:
            i += used
            continue
        ln = lines[i]
        if _plain_verl(ln.text):  # no BEFORE unit takes it: straight to the verl parser (a third of its cost)
            if not parse_line(ln, table, counters):
                any(u(ln, table, counters) for u in AFTER)
        elif not any(u(ln, table, counters) for u in BEFORE) and not parse_line(ln, table, counters):
            any(u(ln, table, counters) for u in AFTER)
        i += 1
    return table


def _plain_verl(t: str) -> bool:
    """A verl ``step:N - key:value - ...`` line that no BLOCKS or BEFORE unit of engine/metric_formats can start
    at or take: each of those needs a first character, a trailing ':', a '•' or a word this excludes (tests/
    test_metric_formats.py checks the two paths agree)."""
    return (t.startswith("step:") and not t.endswith(":") and "•" not in t and "Step " not in t
            and "Train step" not in t and "log_history" not in t)


is_finite = math.isfinite  # (not nan and not +-inf; the C function, called per point by the detectors)
