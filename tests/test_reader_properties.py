"""Property tests of the metric readers (issue 22, "faithful readers"): random records of each known format, printed
with the values the frameworks really print (negatives, exponents, nan, +-inf, ints, ``np.float64(...)``,
``tensor(...)``), read back through every way an input arrives (pasted text, a file, a ``.gz`` file on the
streamed path, a run folder) and the Run built from them; every value must come back exactly (sign kept, NaN as
NaN), at the step its record printed (steps only from a step field), and a printed config must give no series.

How each format prints (the printing code, for the generators below):

- verl ``verl/utils/tracking.py`` LocalLogger -> ``concat_dict_to_str``: ``f"step:{step} - " + " - ".join(f"{k}:{v}")``
  (``f"{v}"`` of a float or numpy scalar; a ``np.float64(x)`` / ``tensor(x)`` where a repr reaches the line);
- slime ``step N: {dict}`` (``logger.info(f"step {step}: {log_dict}")``, the dict's repr: numpy >= 2 scalars print
  ``np.float64(x)``);
- HF Trainer / TRL ``Trainer.log`` -> ``print(output)`` of a dict (``{'loss': 0.1, ..., 'epoch': 0.5}``);
- Megatron-LM ``training_log``: `` iteration N/ M |`` then ``' {key}: {:.6E} |'`` per loss, ``' grad norm: {:.3f} |'``
  (NaN prints ``NAN`` through ``.6E``);
- SkyRL ``ConsoleLogger.log``: ``logger.info(f"Step {step}: \\n{pprint.pformat(stringify_floats(data))}")``,
  floats as ``f"{x:.4f}"`` strings, other values as pprint writes them;
- verl FileLogger JSONL ``{"step": N, "data": {...}}`` (Python's json: ``NaN``, ``Infinity`` literals);
- trainer_state.json ``log_history`` (``json.dumps(asdict(state), indent=2, sort_keys=True)``);
- the W&B chart export CSV (tools/readers/wandb_csv.py).

The default run reads ``TEXT_EXAMPLES`` random inputs per format as text and ``PATH_EXAMPLES`` through every path;
the slow run ``SLOW_EXAMPLES`` through every path.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import pprint
import shutil
import tempfile
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TEXT_EXAMPLES, PATH_EXAMPLES, SLOW_EXAMPLES = 100, 40, 300
_SETTINGS = dict(deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ---- values as printed --------------------------------------------------------------------------------------

_FINITE = st.one_of(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False),
    st.floats(min_value=-1e-3, max_value=1e-3, allow_nan=False, allow_infinity=False),  # 1.2e-05 and kin
    st.sampled_from([-0.9131, 1.2e-05, -1.2e-05, 1e-06, 0.0, -0.0, 2.5e+20, -3.75]))
_SPECIAL = st.sampled_from([math.nan, math.inf, -math.inf])
_INT = st.integers(min_value=-10_000, max_value=10_000)


@st.composite
def _value(draw, wrappers: tuple[str, ...] = ()):
    """(printed text, the float a faithful reader must give). ``wrappers``: reprs the format may print."""
    kind = draw(st.sampled_from(["float", "float", "special", "int"] + list(wrappers)))
    if kind == "int":
        n = draw(_INT)
        return str(n), float(n)
    x = draw(_SPECIAL if kind == "special" else st.one_of(_FINITE, _SPECIAL) if kind in wrappers else _FINITE)
    text = repr(x)  # Python's shortest repr: '-0.9131', '1.2e-05', 'nan', '-inf'
    if kind == "np":
        text = f"np.float64({text})"
    elif kind == "np32":
        text = f"np.float32({text})"
    elif kind == "tensor":
        text = draw(st.sampled_from([f"tensor({text})", f"tensor({text}, device='cuda:0')",
                                     f"tensor({text}, device='cuda:0', dtype=torch.bfloat16)",
                                     f"tensor([{text}], device='cuda:0')"]))
    return text, x


_KEYS = ["actor/pg_loss", "actor/entropy", "actor/grad_norm", "actor/ppo_kl", "critic/score/mean",
         "critic/rewards/mean", "response_length/mean", "actor/pg_clipfrac", "perf/throughput", "timing_s/gen",
         "val-core/openai/gsm8k/reward/mean@1", "response_length/clip_ratio", "training/global_step"]

# lines a training log holds between metric records (Ray, vLLM, tqdm chatter with numbers in them)
_NOISE = ["INFO 12-01 10:00:00 [loader.py:458] Loading weights took 3.21 seconds",
          "Training Progress:  10%|#         | 10/100 [00:10<01:30,  1.00s/it]",
          "(WorkerDict pid=5678) [2026-12-01 10:00:01] Saved checkpoint to /ckpt/global_step_20 (12.5 GB)",
          "WARNING 12-01 10:00:02 [scheduler.py:1010] Sequence group 7 is preempted by PreemptionMode.RECOMPUTE",
          "(raylet) [2026-12-01 10:00:03,123 E 42 42] file_system_monitor.cc:111: /tmp/ray is over 95% full"]
_PREFIXES = ["", "(TaskRunner pid=4242) ", "\x1b[36m(TaskRunner pid=4242)\x1b[0m "]


@st.composite
def _records(draw, keys=_KEYS, wrappers: tuple[str, ...] = (), max_records: int = 5, min_keys: int = 1):
    """[(step, {key: (printed, float)})]: increasing steps, each record ``min_keys`` or more of ``keys``."""
    n = draw(st.integers(1, max_records))
    steps = sorted(draw(st.sets(st.integers(0, 100_000), min_size=n, max_size=n)))
    out = []
    for s in steps:
        ks = draw(st.lists(st.sampled_from(keys), min_size=min_keys, max_size=len(keys), unique=True))
        out.append((s, {k: draw(_value(wrappers)) for k in ks}))
    return out


def _expected(records) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for s, vals in records:
        for k, (_, x) in vals.items():
            out.setdefault(k, []).append((float(s), x))
    return out


# ---- printers: one per format (see the module docstring) ---------------------------------------------------

def _verl(records, prefix: str = "") -> str:
    return "\n".join(prefix + f"step:{s} - " + " - ".join(f"{k}:{t}" for k, (t, _) in vals.items())
                     + "\n" + _NOISE[s % len(_NOISE)] for s, vals in records) + "\n"


def _slime(records) -> str:
    return "\n".join(f"step {s}: {{" + ", ".join(f"'{k}': {t}" for k, (t, _) in vals.items()) + "}\n"
                     + _NOISE[s % len(_NOISE)] for s, vals in records) + "\n"


def _hf(records) -> str:
    return "\n".join("{" + ", ".join(f"'{k}': {t}" for k, (t, _) in vals.items()) + f", 'global_step': {s}}}"
                     for s, vals in records) + "\n"


def _openrlhf(records) -> str:
    return "\n".join(f"Global step {s}: {{" + ", ".join(f"'{k}': {t}" for k, (t, _) in vals.items()) + "}"
                      for s, vals in records) + "\n"


def _generic(records) -> str:
    return "\n".join(f"[step {s}] " + ", ".join(f"{k}={t}" for k, (t, _) in vals.items()) for s, vals in records) + "\n"


_MEG_KEYS = ["lm loss", "grad norm", "learning rate", "loss scale"]


def _megatron_text(x: float, key: str) -> str:
    return f"{x:.3f}" if key == "grad norm" else f"{x:.6E}"


def _megatron(records) -> str:
    return "\n".join(f" iteration {s:8d}/{10**6:8d} | consumed samples: {s * 64:12d} | "
                     + " ".join(f"{k}: {t} |" for k, (t, _) in vals.items()) for s, vals in records) + "\n"


def _skyrl(records) -> str:
    out = []
    for s, vals in records:
        body = "{" + ",\n ".join(f"{k!r}: {t}" for k, (t, _) in sorted(vals.items())) + "}"  # pprint: sorted, one a line
        if len(body) <= 80:
            body = body.replace(",\n ", ", ")
        out.append(f"2026-01-01 10:00:00.000 | INFO     | skyrl_train.utils.tracking:log:86 - Step {s}: \n" + body)
    return "\n".join(out) + "\n"


def _jsonl(records) -> str:
    return "\n".join(json.dumps({"step": s, "data": {k: x for k, (_, x) in vals.items()}}) for s, vals in records) + "\n"


def _trainer_state(records) -> str:
    hist = [{"step": s, **{k: x for k, (_, x) in vals.items()}} for s, vals in records]
    return json.dumps({"global_step": records[-1][0], "log_history": hist, "max_steps": 100}, indent=2,
                      sort_keys=True) + "\n"


@st.composite
def _skyrl_records(draw):
    """SkyRL's values: a Python float (np.float64 too, a float subclass) as its f"{x:.4f}" string (nan, inf, -inf
    too), an int as is, a numpy float32 or a torch scalar (not float subclasses, so not stringified) as its repr."""
    steps = sorted(draw(st.sets(st.integers(0, 100_000), min_size=1, max_size=4)))
    keys = ["policy/pg_loss", "policy/grad_norm", "reward/avg_raw_reward", "trainer/epoch", "generate/avg_num_tokens"]
    out = []
    for s in steps:
        vals = {}
        for k in draw(st.lists(st.sampled_from(keys), min_size=1, max_size=len(keys), unique=True)):
            kind = draw(st.sampled_from(["float", "float", "int", "np32", "tensor"]))
            if kind == "int":
                n = draw(_INT)
                vals[k] = (str(n), float(n))
            elif kind == "tensor":  # a torch scalar is no float: pprint writes its repr
                x = draw(st.one_of(_FINITE, _SPECIAL))
                vals[k] = (f"tensor({x:.4f}, device='cuda:0')", float(f"{x:.4f}"))
            else:
                x = draw(st.one_of(_FINITE, _SPECIAL))
                vals[k] = ((repr(f"{x:.4f}"), float(f"{x:.4f}")) if kind == "float" else (f"np.float32({x!r})", x))
        out.append((s, vals))
    return out


@st.composite
def _megatron_records(draw):
    recs = draw(_records(keys=_MEG_KEYS))
    return [(s, {k: (_megatron_text(x, k), float(_megatron_text(x, k))) for k, (_, x) in vals.items()})
            for s, vals in recs]


def _with_step_series(key):
    """A format whose step field is itself one of the dict's numbers (HF's ``global_step``): a series too."""
    return lambda records: {key: [(float(st_), float(st_)) for st_, _ in records]}


# format -> (records strategy, printer, series the step field adds, the file name a store reader takes it as)
FORMATS = {
    "verl": (lambda: _records(wrappers=("np", "tensor")), lambda r: _verl(r, _PREFIXES[r[0][0] % 3]), None, None),
    "slime": (lambda: _records(keys=["train/loss", "train/kl", "train/grad_norm", "rollout/raw_reward"],
                               wrappers=("np", "np32", "tensor")), _slime, None, None),
    "hf_trainer": (lambda: _records(keys=["loss", "grad_norm", "learning_rate", "epoch", "reward"], wrappers=("np",)),
                   _hf, _with_step_series("global_step"), None),
    # the ``Global step N: {...}`` label dict engine/metrics.py files as OpenRLHF (that printer is not checked here)
    # and the generic ``[step N] k=v, k=v`` shape
    "openrlhf": (lambda: _records(keys=["policy_loss", "kl", "reward", "response_length"], wrappers=("np", "tensor")),
                 _openrlhf, None, None),
    "generic": (lambda: _records(keys=["loss", "kl_div", "reward_mean", "lr"], min_keys=2), _generic, None, None),
    "megatron": (_megatron_records, _megatron,
                 lambda records: {"consumed samples": [(float(s_), float(s_ * 64)) for s_, _ in records]}, None),
    "skyrl": (_skyrl_records, _skyrl, None, None),
    "verl_jsonl": (lambda: _records(), _jsonl, None, "metrics.jsonl"),
    "trainer_state": (lambda: _records(keys=["loss", "grad_norm", "learning_rate", "reward"]), _trainer_state, None,
                      "trainer_state.json"),
}


def _want(fmt: str, records) -> dict:
    want = _expected(records)
    extra = FORMATS[fmt][2]
    return {**want, **extra(records)} if extra else want


# ---- the ways an input arrives -----------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _rules():
    from grpo_debug.skills.loader import default_rules

    return default_rules()


def _series(table) -> dict[str, list[tuple[float, float]]]:
    return {k: [(p.step, p.value) for p in pts] for k, pts in table.series.items()}


def _run_series(ctx) -> dict[str, list[tuple[float, float]]]:
    """The run model's points per raw key (tools/run/build.py), in step order."""
    out: dict[str, list[tuple[float, float]]] = {}
    for s in ctx.run.series.values():
        for p in s.points:
            out.setdefault(p.raw_key, []).append((p.step, p.value))
    return {k: sorted(v, key=lambda sv: sv[0]) for k, v in out.items()}


def via_text(text: str):
    from grpo_debug.tools.triage import build_context

    return build_context(text)[0]


def via_file(path: str):
    from grpo_debug.tools.inputs import read_input
    from grpo_debug.tools.triage import build_context

    s, _label, _skipped, hint = read_input(None, path)
    return build_context(s, hint)[0]


def via_gz(path: str):
    from grpo_debug.tools.streaming import read_streamed

    return read_streamed(path, _rules()).ctx


def via_folder(folder: str):
    from grpo_debug.tools.rundir.analyze import merge_path

    return merge_path(folder, _rules())[0].ctx


def _same(got: dict, want: dict) -> bool:
    if set(got) != set(want):
        return False
    for k, pts in want.items():
        g = got[k]
        if len(g) != len(pts):
            return False
        for (gs, gv), (ws, wv) in zip(g, pts):
            if gs != ws or not (gv == wv and math.copysign(1, gv) == math.copysign(1, wv) if not math.isnan(wv)
                                else math.isnan(gv)):
                return False
    return True


def _check(name: str, got: dict, want: dict, text: str) -> None:
    assert _same(got, want), f"{name}: read {got}\nwanted {want}\nfrom:\n{text[:1500]}"


def _all_paths(fmt: str, text: str, want: dict, file_name: str = "train.log") -> None:
    """``text`` as a paste, a file, a .gz (streamed), inside a run folder (and, for a store format, as the store file
    the folder's store reader takes), the metric table and the Run of each equal to ``want``."""
    ctx = via_text(text)
    _check(f"{fmt} as text", _series(ctx.metrics), want, text)
    _check(f"{fmt} as text, the Run", _run_series(ctx), want, text)
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, file_name)
        with open(p, "w", encoding="utf-8") as fh:
            fh.write(text)
        _check(f"{fmt} as a file", _series(via_file(p).metrics), want, text)
        gz = p + ".gz"
        with gzip.open(gz, "wt", encoding="utf-8") as fh:
            fh.write(text)
        _check(f"{fmt} as .gz (streamed)", _series(via_gz(gz).metrics), want, text)
        run = os.path.join(d, "run")
        os.mkdir(run)
        shutil.copy(p, os.path.join(run, file_name))
        ctx = via_folder(run)
        _check(f"{fmt} in a run folder", _series(ctx.metrics), want, text)
        _check(f"{fmt} in a run folder, the Run", _run_series(ctx), want, text)
        store = FORMATS[fmt][3] if fmt in FORMATS else None
        if store:
            sdir = os.path.join(d, "store")
            os.mkdir(sdir)
            shutil.copy(p, os.path.join(sdir, store))
            ctx = via_folder(sdir)
            _check(f"{fmt} as the store file {store}", _series(ctx.metrics), want, text)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_value_read_back_exactly_as_text(fmt):
    strategy, printer = FORMATS[fmt][:2]

    @settings(max_examples=TEXT_EXAMPLES, **_SETTINGS)
    @given(strategy())
    def prop(records):
        text = printer(records)
        _check(f"{fmt} as text", _series(via_text(text).metrics), _want(fmt, records), text)

    prop()


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_value_read_back_exactly_every_way(fmt):
    strategy, printer = FORMATS[fmt][:2]

    @settings(max_examples=PATH_EXAMPLES, **_SETTINGS)
    @given(strategy())
    def prop(records):
        _all_paths(fmt, printer(records), _want(fmt, records))

    prop()


@pytest.mark.slow
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_value_read_back_exactly_every_way_many(fmt):
    strategy, printer = FORMATS[fmt][:2]

    @settings(max_examples=SLOW_EXAMPLES, **_SETTINGS)
    @given(strategy())
    def prop(records):
        _all_paths(fmt, printer(records), _want(fmt, records))

    prop()


def test_a_record_no_reader_understands_is_not_read_as_prose():
    """A dict holding a value that is no scalar (a tensor of two numbers) is not parsed; its numbers are not taken
    as values stated in prose (that reader read ``-0.9131`` as ``0.9131`` and numbered the values 1, 2, ...)."""
    for text in ["step 4: {'train/loss': tensor([-0.9131, 0.5]), 'train/kl': -0.9131}",
                 "{'loss': tensor([-0.9131, 0.5]), 'grad_norm': 0.5, 'epoch': 0.1}",
                 "(TaskRunner pid=1) step:3 - actor/pg_loss:[-0.9131, 0.5] - actor/kl:[1.2e-05]"]:
        ctx = via_text(text)
        assert _series(ctx.metrics) == {} and not ctx.metrics.lines, (text, _series(ctx.metrics))


# ---- a printed config is config, never a metric series -----------------------------------------------------

# verl's TaskRunner prints its config with ``pprint(OmegaConf.to_container(config, resolve=True))`` (verl/trainer/
# main_ppo.py); a part of verl/trainer/config/ppo_trainer.yaml (volcengine/verl 008db45) with its numbers drawn
_VERL_CONFIG = {
    "data": {"max_prompt_length": 512, "max_response_length": 512, "train_batch_size": 1024, "shuffle": True,
             "filter_overlong_prompts_workers": 1, "truncation": "error"},
    "actor_rollout_ref": {
        "actor": {"ppo_mini_batch_size": 256, "ppo_max_token_len_per_gpu": 16384, "grad_clip": 1.0,
                  "clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.2, "clip_ratio_c": 3.0,
                  "entropy_coeff": 0, "kl_loss_coef": 0.001, "kl_loss_type": "low_var_kl", "ppo_epochs": 1,
                  "checkpoint": {"contents": ["model", "optimizer", "extra"]},
                  "optim": {"lr": 1e-06, "lr_warmup_steps": -1, "lr_warmup_steps_ratio": 0.0,
                            "total_training_steps": -1, "weight_decay": 0.01, "warmup_style": "constant"}},
        "rollout": {"name": "vllm", "temperature": 1.0, "top_k": -1, "top_p": 1, "gpu_memory_utilization": 0.5,
                    "tensor_model_parallel_size": 2, "max_num_batched_tokens": 8192, "n": 1,
                    "val_kwargs": {"top_k": -1, "top_p": 1.0, "temperature": 0, "n": 1}}},
    "algorithm": {"gamma": 1.0, "lam": 1.0, "adv_estimator": "gae",
                  "kl_ctrl": {"type": "fixed", "kl_coef": 0.001, "horizon": 10000, "target_kl": 0.1}},
    "trainer": {"total_epochs": 30, "nnodes": 1, "n_gpus_per_node": 8, "save_freq": -1, "test_freq": -1,
                "critic_warmup": 0, "logger": ["console", "wandb"], "ray_wait_register_center_timeout": 300},
}


def _draw_numbers(draw, d):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out[k] = _draw_numbers(draw, v)
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            out[k] = v
        else:
            x = draw(_value())[1]
            out[k] = int(x) if isinstance(v, int) and math.isfinite(x) else x
    return out


@st.composite
def _verl_config(draw):
    cfg = _draw_numbers(draw, _VERL_CONFIG)
    prefix = draw(st.sampled_from(["", "(TaskRunner pid=1234) "]))
    text = "\n".join(prefix + ln for ln in pprint.pformat(cfg).splitlines())
    steps = draw(_records(max_records=2))  # the run's first metric lines after it
    return text + "\n" + _verl(steps, prefix), steps


@settings(max_examples=PATH_EXAMPLES // 2, **_SETTINGS)
@given(_verl_config())
def test_a_printed_config_gives_no_metric_series(case):
    text, steps = case
    _all_paths("verl config + step lines", text, _expected(steps))


# ---- the W&B chart export CSV (a store file: read as a file and inside a run folder) ------------------------

_JS_SPECIAL = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}  # JavaScript's spelling in the app's export


@st.composite
def _wandb_chart(draw):
    """(csv text, {run label: {metric: [(step, value)]}}): 1-3 runs, each with its metrics, their bands, gaps."""
    labels = draw(st.lists(st.sampled_from(["ruby-sweep-7", "calm-sweep-8", "Group: grpo-lr1e-6", "solo"]),
                           min_size=1, max_size=3, unique=True))
    metrics = draw(st.lists(st.sampled_from(["actor/pg_loss", "actor/grad_norm", "train/loss", "critic/score/mean"]),
                            min_size=1, max_size=3, unique=True))
    steps = sorted(draw(st.sets(st.integers(0, 100_000), min_size=1, max_size=6)))
    header, cols = ["Step"], []
    for r in labels:
        for m in metrics:
            header += [f"{r} - {m}", f"{r} - {m}__MIN", f"{r} - {m}__MAX"]
            cols.append((r, m))
    want: dict[str, dict[str, list]] = {}
    rows = []
    for s in steps:
        row = [str(s)]
        for r, m in cols:
            if draw(st.booleans()) and draw(st.booleans()):  # a gap: this run has no value here
                row += ["", "", ""]
                continue
            t, x = draw(_value())
            t = _JS_SPECIAL.get(t, t)
            row += [t, t, t]
            want.setdefault(r, {}).setdefault(m, []).append((float(s), x))
        rows.append(row)
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([header] + rows)
    return buf.getvalue(), want


@settings(max_examples=PATH_EXAMPLES * 3, **_SETTINGS)
@given(_wandb_chart())
def test_wandb_chart_export_values_exact_per_run(case):
    from grpo_debug.tools.readers import read_store

    text, want = case
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "wandb_export_2026-12-01T10_00_00.000+00_00.csv")
        with open(p, "w", encoding="utf-8") as fh:
            fh.write(text)
        got = {r.run_id: {k: [(x, v) for x, v, _ in s.points] for k, s in r.series.items()} for r in read_store(p)}
        got = {k: v for k, v in got.items() if v}
        assert set(got) == set(want), (got, want)
        for label, series in want.items():
            _check(f"W&B CSV run {label}", got[label], series, text)
        if len(want) == 1:  # one run: the folder (and the Run) hold exactly its series
            run = os.path.join(d, "run")
            os.mkdir(run)
            shutil.copy(p, run)
            ctx = via_folder(run)
            (series,) = want.values()
            _check("W&B CSV in a run folder", _series(ctx.metrics), series, text)
            _check("W&B CSV in a run folder, the Run", _run_series(ctx), series, text)
