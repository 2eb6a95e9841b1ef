"""Mixed pastes (tools/engine/blocks.py, errors_classify.streams): a config in a code fence or before log lines
is read with its own line numbers; interleaved ranks and run tags are read as separate tracebacks."""
from __future__ import annotations

from grpo_debug.tools.engine.errors_classify import classify_all
from grpo_debug.tools.engine.normalize import normalize
from grpo_debug.tools.triage import build_context, triage_text

ISSUE = """I run GRPO with this config:
```yaml
num_generations: 1
per_device_train_batch_size: 8
```
and it fails at start:
```
ValueError: GRPO requires at least 2 generations per prompt to calculate the advantages. You provided 1, which is less than the minimum required.
```
"""


def test_fenced_yaml_inside_issue_prose_is_read_at_its_lines():
    ctx, _ = build_context(ISSUE)
    assert ("num_generations", 1, 3) in [(f.key, f.value, f.line) for f in ctx.facts.facts]
    f = triage_text(ISSUE).findings[0]
    assert f.symptom == "config_error" and {3, 8} & {e.line for e in f.evidence}


def test_config_followed_by_log_lines():
    text = "data:\n  train_batch_size: 8\n  max_prompt_length: 512\n{'loss': 0.1, 'grad_norm': 0.5, 'epoch': 0.1}\n"
    ctx, _ = build_context(text)
    assert ctx.facts.value("data.train_batch_size") == 8 and ctx.metrics.series


def test_log_shaped_lines_are_not_a_config():
    ctx, _ = build_context("INFO: starting\nValueError: x\nStep 1: loss 0.3\n")
    assert not ctx.facts.facts


def test_unparseable_block_is_skipped_not_raised():
    text = "```yaml\nkey: [unclosed\nother: 1\n```\nTraceback (most recent call last):\n  File \"a.py\", line 1, in f\nKeyError: 'x'\n"
    assert triage_text(text).findings  # the error still gets a finding
    for hint in ("yaml", "json", "sh", None):
        triage_text(text, hint=hint)


def test_interleaved_ranks_are_separate_tracebacks():
    text = """[rank3]: Traceback (most recent call last):
[rank0]: Traceback (most recent call last):
[rank3]:   File "/x/site-packages/verl/a.py", line 1, in f
[rank0]:   File "/x/site-packages/verl/b.py", line 2, in g
[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB
[rank0]: ValueError: train_batch_size must be divisible by 8
"""
    recs = classify_all(normalize(text))
    assert [(r.cls.name, r.lines) for r in recs] == [("cuda_oom", [1, 3, 5]), ("batch_not_divisible", [2, 4, 6])]


def test_run_tags_are_separate_streams():
    text = "[A] Traceback (most recent call last):\n[B] step 1 loss 0.2\n[A]   File \"/x/a.py\", line 1, in f\n[A] KeyError: 'x'\n"
    (r,) = classify_all(normalize(text))
    assert r.exc_type == "KeyError" and r.lines == [1, 3, 4]


def test_one_object_per_line_is_sniffed_as_a_log_not_a_json_document():
    from grpo_debug.tools.inputs import sniff_format

    assert sniff_format("{'loss': 0.1, 'grad_norm': 0.5}\n{'loss': 0.2, 'grad_norm': 0.4}\n", None) == "log"
    assert sniff_format('{"message": "a"}\n{"message": "b"}\n', None) == "log"
    assert sniff_format('{\n  "train_batch_size": 8\n}\n', None) == "json"
    assert sniff_format('{"train_batch_size": 8}', None) == "json"
