"""Console metric formats of engine/metric_formats: each unit on lines as its framework prints them (the unit's
docstring cites the printing code) and on corpus inputs where the repository has one."""
from __future__ import annotations

import math
from pathlib import Path

from grpo_debug.tools.engine.metrics import extract_metrics
from grpo_debug.tools.engine.normalize import normalize
from grpo_debug.tools.run import build_run

CORPUS = Path(__file__).resolve().parent / "data" / "corpus" / "cases"


def _table(text: str):
    return extract_metrics(normalize(text))


def _pts(t, key):
    return [(p.step, p.value, p.line) for p in t.series[key]]


def test_skyrl_step_then_pprint_dict_floats_as_strings():
    text = ("2025-06-01 10:00:00.000 | INFO     | skyrl_train.utils.tracking:log:189 - Step 3: \n"
            "{'generate/avg_num_tokens': '412.5000',\n"
            " 'policy/grad_norm': '0.1234',\n"
            " 'policy/policy_entropy': 'nan',\n"
            " 'reward/avg_raw_reward': '0.2500'}\n"
            "2025-06-01 10:00:05.000 | INFO     | next line\n")
    t = _table(text)
    assert _pts(t, "policy/grad_norm") == [(3.0, 0.1234, 3)]
    assert math.isnan(t.series["policy/policy_entropy"][0].value) and t.series["policy/policy_entropy"][0].line == 4
    assert t.lines >= {1, 2, 3, 4, 5} and 6 not in t.lines


def test_areal_train_step_then_fancy_grid():
    text = ("20250601-10:00:00.000 StatsLogger INFO: Epoch 1/1 Step 3/100 Train step 3/100 done.\n"
            "20250601-10:00:00.001 StatsLogger INFO: Stats (1/1):\n"
            "20250601-10:00:00.002 StatsLogger INFO: \n"
            "╒════════════════════════╤════════════╤══════════════════╤════════════╕\n"
            "│ grpo_actor/grad_norm   │ 1.2340e-01 │ grpo_actor/loss  │ 5.0000e-02 │\n"
            "├────────────────────────┼────────────┼──────────────────┼────────────┤\n"
            "│ grpo_actor/task_reward │ 2.5000e-01 │                  │            │\n"
            "╘════════════════════════╧════════════╧══════════════════╧════════════╛\n")
    t = _table(text)
    assert _pts(t, "grpo_actor/grad_norm") == [(3.0, 0.1234, 5)]
    assert _pts(t, "grpo_actor/task_reward") == [(3.0, 0.25, 7)]


def test_nemo_rl_step_header_and_bullets_corpus():
    text = (CORPUS / "nemo-rl-oom-after-val-and-ckpt-misaligned-periods" / "input.log").read_text()
    assert 37 in _table(text).lines  # its "===== Step 10/10078 =====" header is read as the step of what follows
    text = ("========================= Step 7/100 =========================\n"
            "📊 Training Results:\n  • Loss: 0.0123\n  • Generation KL Error: 0.0009\n  • Avg Reward: 0.4100\n"
            "\n⏱️  Timing:\n  • Total step time: 41.20s\n  • generation: 20.10s (48.8%)\n")
    t = _table(text)
    assert _pts(t, "Loss") == [(7.0, 0.0123, 3)]
    assert _pts(t, "timing/Total step time") == [(7.0, 41.2, 8)]
    assert _pts(t, "timing/generation") == [(7.0, 20.1, 9)]


def test_wandb_run_summary_rows():
    text = ("step:5 - actor/grad_norm:0.3\nwandb: Run history:\nwandb:   train/loss ▁▂▅█\nwandb: \n"
            "wandb: Run summary:\nwandb:                  train/kl -0.0\nwandb:                train/loss 0.1516\n"
            "wandb: Synced 5 W&B file(s)\n")
    t = _table(text)
    assert _pts(t, "train/loss") == [(5.0, 0.1516, 7)]


def test_trainer_state_log_history_entries():
    text = ('{\n  "best_metric": null,\n  "log_history": [\n    {\n      "epoch": 0.1,\n      "grad_norm": 1.5,\n'
            '      "loss": 0.7,\n      "step": 10\n    },\n    {\n      "epoch": 0.2,\n      "grad_norm": NaN,\n'
            '      "loss": 0.6,\n      "step": 20\n    }\n  ],\n  "max_steps": 100\n}\n')
    t = _table(text)
    assert _pts(t, "loss") == [(10.0, 0.7, 7), (20.0, 0.6, 13)]
    assert t.series["grad_norm"][1].step == 20.0 and math.isnan(t.series["grad_norm"][1].value)


def test_markdown_step_column_table_corpus():
    t = _table((CORPUS / "deepspeed-0140-zero2-gradnorm-nan-allreduce-regression" / "input.log").read_text())
    s = t.series["Stage2_1node_ds0.14.0"]
    assert [(p.step, p.line) for p in s if math.isnan(p.value)] == [(39.0, 11), (41.0, 13), (42.0, 14)]


def test_markdown_metric_per_row_corpus():
    t = _table((CORPUS / "trl-grpo-all-completions-truncated-80-tokens-markdown-table" / "input.log").read_text())
    assert _pts(t, "completions/clipped_ratio") == [(1.0, 1.0, 6)]
    assert _pts(t, "completions/mean_length") == [(1.0, 80.0, 3)]


def test_markdown_row_per_variant_is_on_row_axis_corpus():
    text = (CORPUS / "slime-miles-blackwell-trtllm-bf16-moe-weight-update-corruption" / "input.log").read_text()
    run = build_run(normalize(text))
    s = run.series_of("train↔rollout logprob abs_diff")
    assert s.axis == "row" and [(p.step, p.value, p.line) for p in s.points][0] == (1.0, 0.21, 3)


def test_verl_file_logger_jsonl_line_null_is_nan():
    t = _table('{"step": 4, "data": {"actor/grad_norm": 0.25, "actor/entropy": null}}\n')
    assert _pts(t, "actor/grad_norm") == [(4.0, 0.25, 1)]
    assert math.isnan(t.series["actor/entropy"][0].value) and "step" not in t.series


def test_roll_metrics_tag_and_json_dict_after_prefix():
    text = ('[2025-06-01 10:00:00] [tracking.py (161)] [INFO] [DRIVER 0 / 1][PID 4242] metrics_tag: '
            '{"step": 2, "metrics": {"actor/grad_norm": 0.31, "critic/score/mean": 0.5}}\n'
            '[2025-06-01 10:00:01] [rlvr_pipeline.py (838)] [INFO] [DRIVER 0 / 1][PID 4242] '
            '{"system/step": 3, "actor/grad_norm": 0.33}\n')
    t = _table(text)
    assert _pts(t, "actor/grad_norm") == [(2.0, 0.31, 1), (3.0, 0.33, 2)]


def test_prime_rl_step_lines_current_and_older_corpus():
    t = _table("12:00:00 SUCCESS Step 12 |   1.23s | Loss 0.0123 | Entropy 0.4500 | Mismatch KL 0.0010 | "
               "Grad. Norm 0.1200 | LR 1.00e-06 | Throughput 1234 tokens/s | MFU 12.3% | Peak Mem. 30.1 GiB\n"
               "12:00:01 INFO Micro Step 1/4 | Loss 0.5 | Entropy 0.4\n")
    assert _pts(t, "Grad. Norm") == [(12.0, 0.12, 1)] and _pts(t, "Mismatch KL") == [(12.0, 0.001, 1)]
    assert abs(t.series["MFU"][0].value - 0.123) < 1e-12 and len(t.series["Loss"]) == 1
    old = _table((CORPUS / "prime-rl-update-weights-httpx-readtimeout" / "input.log").read_text())
    assert _pts(old, "Reward") == [(2.0, 0.0648, 1)]


def test_kv_summary_lines_corpus():
    t = _table((CORPUS / "trl-grpo-max-completion-256-all-clipped-zero-reward" / "input.log").read_text())
    assert _pts(t, "completions/clipped_ratio") == [(1.0, 1.0, 1)]
    assert _pts(t, "frac_reward_zero_std") == [(1.0, 1.0, 2)]  # the next line: same moment, same step
    assert "note" not in _table("note: see   this: here\n").series


def test_prose_mention_of_a_known_metric_with_a_range_corpus():
    t = _table((CORPUS / "slime-openclaw-train-epochs-2-offpolicy-logprob-diff" / "input.log").read_text())
    assert _pts(t, "train/train_rollout_logprob_abs_diff") == [(1.0, 0.2, 24), (2.0, 0.4, 24)]
    assert t.axes["train/train_rollout_logprob_abs_diff"] == "mention"


def test_prose_ignores_unknown_keys_and_short_lines():
    t = _table("We changed my_custom_thing to 5 and some/path to 3 for the run\ngrad_norm: 5\n")
    assert "my_custom_thing" not in t.series and "some/path" not in t.series and "grad_norm" not in t.series


def test_console_fields_get_canonical_names_in_the_run():
    text = ("12:00:00 SUCCESS Step 12 |   1.23s | Loss 0.0123 | Entropy 0.4500 | Mismatch KL 0.0010 | "
            "Grad. Norm 0.1200 | LR 1.00e-06\n")
    run = build_run(normalize(text))
    assert run.framework == "prime_rl"
    assert run.series_of("grad_norm").raw_keys == ["Grad. Norm"] and run.series_of("logprob_mismatch").points[0].line == 1


def test_plain_verl_shortcut_gives_the_same_table_on_every_test_log(monkeypatch):
    """extract_metrics sends a plain verl ``step:N - k:v`` line straight to the verl parser, skipping the BLOCKS
    and BEFORE units; on every log, case and example input in tests/data (and a realistic generated log) the
    table must equal the one built with the shortcut off."""
    import importlib.util
    import tempfile

    import grpo_debug.tools.engine.metrics as metrics

    root = Path(__file__).resolve().parent / "data"
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(root.rglob("*"))
             if p.is_file() and p.suffix in {".log", ".txt", ".out", ""} and p.stat().st_size < 2_000_000]
    spec = importlib.util.spec_from_file_location("g", Path(__file__).resolve().parents[1] / "bench" / "gen_real_log.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    with tempfile.TemporaryDirectory() as d:
        gen.generate(f"{d}/r.log", mb=1, ranks=2)
        texts.append(Path(f"{d}/r.log").read_text(encoding="utf-8", errors="replace"))
    assert len(texts) > 50
    verl_lines = 0
    for text in texts:
        lines = normalize(text)
        fast = extract_metrics(lines)
        verl_lines += sum(metrics._plain_verl(ln.text) for ln in lines)
        with monkeypatch.context() as m:
            m.setattr(metrics, "_plain_verl", lambda t: False)
            slow = extract_metrics(lines)
        assert repr((fast.series, fast.records, sorted(fast.lines), sorted(fast.formats))) == repr(
            (slow.series, slow.records, sorted(slow.lines), sorted(slow.formats)))  # repr: nan == nan
    assert verl_lines > 100  # the shortcut was taken
