"""Tests for the CUDA stream-safety analyzer (tools/analyzers/cuda_streams/).

Every check has a positive snippet and a near miss, usually the same code with the protection added.
"""
from __future__ import annotations

import textwrap

import pytest

from grpo_debug.tools.analyzers.cuda_streams import StreamReport, analyze_code, analyze_config


def run(src: str) -> StreamReport:
    return analyze_code(textwrap.dedent(src))


def checks(report: StreamReport) -> list[str]:
    return [f.check for f in report.findings]


# -------------------------------------------------------------------------- parsing / no streams
def test_syntax_error_is_reported_not_raised():
    r = analyze_code("def f(:\n    pass\n", filename="train.py")
    assert r.error is not None and "line 1" in r.error and "train.py" in r.error
    assert r.findings == [] and r.blocks == 0
    assert "syntax error" in r.summary


def test_code_without_streams_is_clean():
    r = run("""
        import torch
        def step(model, batch, opt):
            loss = model(batch).mean()
            loss.backward()
            opt.step()
            return loss.item()
    """)
    assert r.findings == [] and r.blocks == 0 and r.streams == [] and r.error is None
    assert r.summary.startswith("no stream-safety risk found")


def test_analyzer_imports_only_stdlib_and_pydantic():
    import ast

    from pathlib import Path

    import grpo_debug.tools.analyzers.cuda_streams as pkg

    own = "grpo_debug.tools.analyzers.cuda_streams"
    for f in Path(pkg.__file__).parent.glob("*.py"):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        outside = {m.split(".")[0] for m in imported if not m.startswith(own)}
        assert outside <= {"__future__", "ast", "dataclasses", "typing", "pydantic"}, (f.name, outside)


# -------------------------------------------------------------------------- check 2: record_stream
SIDE_USE = """
import torch
side = torch.cuda.Stream()
def overlap(x, weight):
    h = x @ weight
    with torch.cuda.stream(side):
        out = h.relu(){protect}
    torch.cuda.current_stream().wait_stream(side)
    return out
"""


def test_side_stream_use_without_record_stream():
    r = run(SIDE_USE.format(protect=""))
    assert r.blocks == 1 and r.streams == ["side"]
    f = next(f for f in r.findings if f.check == "side_stream_use_without_record_stream")
    assert f.severity == "high"
    assert (f.line, f.end_line) == (6, 7)
    assert "`h` (read at line 7)" in f.message
    assert "h.record_stream(side)" in f.fix
    assert f.source == "https://pytorch.org/docs/stable/generated/torch.Tensor.record_stream.html"
    assert "missing_wait_stream" not in checks(r)  # joined before `return out`
    assert r.summary == "1 risk: 1 high (1 side-stream block)"


def test_side_stream_use_with_record_stream_is_clean():
    r = run(SIDE_USE.format(protect="\n        h.record_stream(side)"))
    assert r.findings == []
    assert r.summary == "no stream-safety risk found in 1 side-stream block"


def test_wait_stream_prologue_counts_as_protection():
    r = run("""
        import torch
        def f(x, s):
            y = x * 2
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                z = y + 1
            torch.cuda.current_stream().wait_stream(s)
            return z
    """)
    assert "side_stream_use_without_record_stream" not in checks(r)


def test_wait_before_the_producer_does_not_count():
    r = run("""
        import torch
        def f(x, s):
            s.wait_stream(torch.cuda.current_stream())
            y = x * 2
            with torch.cuda.stream(s):
                z = y + 1
            torch.cuda.current_stream().wait_stream(s)
            return z
    """)
    assert checks(r) == ["side_stream_use_without_record_stream"]


def test_stream_context_and_import_aliases():
    r = run("""
        import torch as th
        from torch.cuda import stream as cuda_stream, StreamContext
        def f(a, b, s1, s2):
            with cuda_stream(s1):
                c = a.sum()
            with StreamContext(s2):
                d = b.sum()
            th.cuda.synchronize()
            return c, d
    """)
    assert r.blocks == 2 and r.streams == ["s1", "s2"]
    assert checks(r).count("side_stream_use_without_record_stream") == 2


def test_none_and_current_stream_blocks_are_not_side_streams():
    r = run("""
        import torch
        def f(x):
            with torch.cuda.stream(None):
                y = x + 1
            cur = torch.cuda.current_stream()
            with torch.cuda.stream(cur):
                z = x + 2
            return y, z
    """)
    assert r.blocks == 0 and r.findings == []


def test_sizes_devices_and_self_buffers_are_not_tensor_uses():
    # `n` is a size, `self.buf` a long-lived buffer, the logger not a tensor: nothing to record.
    r = run("""
        import torch
        class Prefetch:
            def run(self, n, s, logger):
                with torch.cuda.stream(s):
                    buf = torch.empty(n, device="cuda")
                    buf.copy_(self.buf)
                    logger.info("prefetched")
                    buf.record_stream(torch.cuda.current_stream())
                torch.cuda.current_stream().wait_stream(s)
                return buf
    """)
    assert r.findings == []


def test_apex_style_prefetcher_is_not_flagged():
    # NVIDIA apex data_prefetcher: H2D copies on a side stream, joined in next(); the
    # record_stream(current_stream()) there is meaningful because the tensor came from the side stream.
    r = run("""
        import torch
        class data_prefetcher:
            def __init__(self, loader):
                self.loader = iter(loader)
                self.stream = torch.cuda.Stream()
                self.preload()
            def preload(self):
                try:
                    self.next_input, self.next_target = next(self.loader)
                except StopIteration:
                    self.next_input = None
                    return
                with torch.cuda.stream(self.stream):
                    self.next_input = self.next_input.cuda(non_blocking=True)
                    self.next_target = self.next_target.cuda(non_blocking=True)
            def next(self):
                torch.cuda.current_stream().wait_stream(self.stream)
                input = self.next_input
                if input is not None:
                    input.record_stream(torch.cuda.current_stream())
                self.preload()
                return input, self.next_target
    """)
    assert r.streams == ["self.stream"] and r.blocks == 1
    assert [f.severity for f in r.findings] == ["info"]  # only the non_blocking note
    assert r.summary == "no stream-safety risk found in 1 side-stream block (1 note)"


# -------------------------------------------------------------------------- check 3: wait_stream
JOIN = """
import torch
def reduce_side(grad, s):
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        grad.record_stream(s)
        total = grad.float().sum()
{join}    return total * 2
"""


def test_missing_wait_stream():
    r = run(JOIN.format(join=""))
    assert checks(r) == ["missing_wait_stream"]
    f = r.findings[0]
    assert f.severity == "high" and f.line == 8
    assert "`total` (line 8)" in f.message and "lines 5-7" in f.message
    assert "torch.cuda.current_stream().wait_stream(s)" in f.fix
    assert f.source == "https://pytorch.org/docs/stable/notes/cuda.html#cuda-streams"


@pytest.mark.parametrize("join", [
    "    torch.cuda.current_stream().wait_stream(s)\n",
    "    s.synchronize()\n",
    "    torch.cuda.synchronize()\n",
    "    torch.cuda.current_stream().wait_event(ev)\n",
])
def test_joined_side_stream_is_clean(join):
    assert run(JOIN.format(join=join)).findings == []


def test_event_wait_joins():
    r = run("""
        import torch
        def f(x, s):
            done = torch.cuda.Event()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                x.record_stream(s)
                y = x * 3
                done.record()
            done.wait()
            return y
    """)
    assert r.findings == []


def test_docs_pattern_and_wrong_stream_wait():
    # The record_stream docs' alternative: s1 waits for s0, s0 waits for s1 before `del x`.
    # The default-stream read of `x` at line 9 is not covered by `s1.wait_stream(s0)`.
    r = run("""
        import torch
        def f(N, s0, s1):
            with torch.cuda.stream(s0):
                x = torch.zeros(N)
            s1.wait_stream(s0)
            with torch.cuda.stream(s1):
                y = some_comm_op(x)
            z = x + 1
            s0.wait_stream(s1)
            del x
            return z
    """)
    assert checks(r) == ["missing_wait_stream"]
    assert r.findings[0].line == 9 and "`x` (line 9)" in r.findings[0].message


def test_in_place_write_on_side_stream_then_read():
    r = run("""
        import torch
        def f(buf, src, s):
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                src.record_stream(s)
                buf.copy_(src)
            return buf.sum()
    """)
    assert checks(r) == ["missing_wait_stream"]
    assert "`buf`" in r.findings[0].message


# -------------------------------------------------------------------------- check 4: non_blocking
PINNED_LOOP = """
import torch
def feed(loader, model):
    staging = torch.empty(4096, pin_memory=True)
    for batch in loader:
        staging.copy_(batch)
        gpu = staging.to("cuda", non_blocking=True)
{sync}        model(gpu)
"""


def test_pinned_source_reused_in_next_iteration():
    r = run(PINNED_LOOP.format(sync=""))
    assert checks(r) == ["non_blocking_copy_source_reused"]
    f = r.findings[0]
    assert f.severity == "medium" and (f.line, f.end_line) == (6, 7)
    assert "next turn of the loop" in f.message and "if `staging` is pinned" not in f.message


def test_pinned_source_with_sync_is_clean():
    r = run(PINNED_LOOP.format(sync="        torch.cuda.current_stream().synchronize()\n"))
    assert r.findings == []


def test_pinned_source_modified_after_copy():
    r = run("""
        import torch
        def upload(x_cpu):
            pinned = x_cpu.pin_memory()
            x_gpu = pinned.cuda(non_blocking=True)
            pinned[0] = 0
            return x_gpu
    """)
    assert checks(r) == ["non_blocking_copy_source_reused"]
    assert r.findings[0].line == 5 and r.findings[0].end_line == 6


def test_fresh_pinned_buffer_each_iteration_is_clean():
    r = run("""
        import torch
        def feed(loader, model):
            for batch in loader:
                staging = batch.pin_memory()
                gpu = staging.to("cuda", non_blocking=True)
                model(gpu)
    """)
    assert "non_blocking_copy_source_reused" not in checks(r)
    assert checks(r) == ["non_blocking_copy_without_sync"]
    assert r.findings[0].severity == "info"


def test_gpu_to_gpu_copy_is_not_a_host_reuse():
    r = run("""
        import torch
        def f(n):
            a = torch.zeros(n, device="cuda")
            b = torch.empty(n, device="cuda")
            b.copy_(a, non_blocking=True)
            a.zero_()
            return b
    """)
    assert "non_blocking_copy_source_reused" not in checks(r)


def test_unknown_origin_is_qualified():
    r = run("""
        def step(host_buf, dev_buf):
            dev_buf.copy_(host_buf, non_blocking=True)
            host_buf.zero_()
    """)
    assert checks(r) == ["non_blocking_copy_source_reused"]
    assert "if `host_buf` is pinned" in r.findings[0].message


def test_d2h_read_before_sync():
    r = run("""
        import torch
        def decode(logits):
            ids = logits.argmax(-1).to("cpu", non_blocking=True)
            return ids.tolist()
    """)
    assert checks(r) == ["non_blocking_d2h_read_before_sync"]
    assert r.findings[0].severity == "medium"


def test_d2h_read_after_sync_is_clean():
    r = run("""
        import torch
        def decode(logits):
            ids = logits.argmax(-1).to("cpu", non_blocking=True)
            torch.cuda.current_stream().synchronize()
            return ids.tolist()
    """)
    assert r.findings == []


# -------------------------------------------------------------------------- check 5: record current
def test_record_stream_on_current_stream():
    r = run("""
        import torch
        def make(n):
            buf = torch.empty(n, device="cuda")
            buf.record_stream(torch.cuda.current_stream())
            return buf
    """)
    assert checks(r) == ["record_stream_on_current_stream"]
    f = r.findings[0]
    assert f.severity == "low" and f.line == 5
    assert "buf.record_stream(side_stream)" in f.fix


def test_record_stream_with_side_stream_is_clean():
    r = run("""
        import torch
        def make(n, side):
            buf = torch.empty(n, device="cuda")
            buf.record_stream(side)
            return buf
    """)
    assert r.findings == []


def test_record_current_inside_side_block_is_meaningful():
    r = run("""
        import torch
        def make(n, s):
            with torch.cuda.stream(s):
                buf = torch.empty(n, device="cuda")
                buf.record_stream(torch.cuda.current_stream())
            torch.cuda.current_stream().wait_stream(s)
            return buf
    """)
    assert r.findings == []


# -------------------------------------------------------------------------- check 6: async collectives
ASYNC = """
import torch.distributed as dist
def sync_grads(grad, group):
    work = dist.all_reduce(grad, group=group, async_op=True)
{wait}    grad.div_(dist.get_world_size())
    return grad
"""


def test_async_collective_read_before_wait():
    r = run(ASYNC.format(wait=""))
    assert checks(r) == ["async_collective_not_waited"]
    f = r.findings[0]
    assert f.severity == "high" and (f.line, f.end_line) == (4, 5)
    assert "`grad` is read at line 5" in f.message and "never waited" in f.message
    assert f.source == "https://github.com/pytorch/pytorch/issues/188655"


def test_async_collective_waited_is_clean():
    assert run(ASYNC.format(wait="    work.wait()\n")).findings == []


def test_async_collective_handle_discarded():
    r = run("""
        import torch
        def gather(out, shard):
            torch.distributed.all_gather_into_tensor(out, shard, async_op=True)
            return out
    """)
    assert checks(r) == ["async_collective_not_waited"]
    assert "discarded" in r.findings[0].message


def test_async_collective_unread_here_is_medium():
    # torch DDP's delayed all-reduce hook style: handle dropped, buffer not read in this function.
    r = run("""
        import torch.distributed as dist
        class M:
            def hook(self, grad):
                self.buf.div_(4)
                _ = dist.all_reduce(self.buf, group=self.pg, async_op=True)
                return grad
    """)
    assert [(f.check, f.severity) for f in r.findings] == [("async_collective_not_waited", "medium")]
    assert "not read again" in r.findings[0].message


def test_async_collective_list_of_handles_and_escapes():
    r = run("""
        import torch.distributed as dist
        def bucketed(grads):
            works = []
            for g in grads:
                works.append(dist.all_reduce(g, async_op=True))
            for w in works:
                w.wait()
        def comp(ts):
            ws = [dist.reduce_scatter_tensor(t, t, async_op=True) for t in ts]
            [w.wait() for w in ws]
        def launch(t):
            return dist.broadcast(t, src=0, async_op=True)
        def stored(self, t, pending):
            self.work = dist.all_reduce(t, async_op=True)
            pending.append(dist.all_reduce(t, async_op=True))
        def blocking(t):
            dist.all_reduce(t)
            return t
    """)
    assert r.findings == []


# -------------------------------------------------------------------------- config
def test_deepspeed_overlap_comm_with_compile_is_high():
    facts = {
        "zero_optimization.stage": 2,
        "zero_optimization.overlap_comm": True,
        "zero_optimization.contiguous_gradients": True,
        "zero_optimization.reduce_scatter": True,
        "bf16.enabled": True,
        "compile.enabled": True,
    }
    r = analyze_config(facts)
    assert [f.check for f in r.findings] == ["deepspeed_overlap_comm_compile"]
    f = r.findings[0]
    assert f.severity == "high" and f.line is None
    assert f.source == "https://github.com/deepspeedai/DeepSpeed/issues/8061"
    assert "8080" in f.fix and "overlap_comm" in f.fix and "torch.compile" in f.fix
    assert "contiguous_gradients" in f.message
    assert r.summary == "1 risk: 1 high"


def test_deepspeed_key_matching_is_tolerant():
    r = analyze_config({"Deepspeed.Zero_Optimization.Overlap_Comm": "true", "ZERO_OPTIMIZATION.STAGE": "1",
                        "trainer.torch_compile": "True"})
    assert [f.check for f in r.findings] == ["deepspeed_overlap_comm_compile"]


@pytest.mark.parametrize("facts", [
    {"zero_optimization.stage": 3, "zero_optimization.overlap_comm": True, "compile.enabled": True},
    {"zero_optimization.stage": 2, "zero_optimization.overlap_comm": False, "compile.enabled": True},
    {"zero_optimization.stage": 2, "zero_optimization.overlap_comm": True, "compile.enabled": False},
])
def test_deepspeed_near_misses(facts):
    assert analyze_config(facts).findings == []


def test_deepspeed_overlap_comm_compile_unknown_is_info():
    r = analyze_config({"zero_optimization.stage": 1, "zero_optimization.overlap_comm": True})
    assert [(f.check, f.severity) for f in r.findings] == [("deepspeed_overlap_comm", "info")]
    assert r.summary == "no stream-safety risk found in 2 config facts (1 note)"


def test_avoid_record_streams_env_is_info():
    r = analyze_config({"env.TORCH_NCCL_AVOID_RECORD_STREAMS": "1"})
    f = r.findings[0]
    assert (f.check, f.severity) == ("torch_nccl_avoid_record_streams", "info")
    assert "work.wait()" in f.message
    assert f.source == "https://github.com/pytorch/torchtitan/issues/735"


def test_cuda_device_max_connections_with_fsdp():
    r = analyze_config({"CUDA_DEVICE_MAX_CONNECTIONS": "1", "actor_rollout_ref.actor.strategy": "fsdp2"})
    assert [(f.check, f.severity) for f in r.findings] == [("cuda_device_max_connections_1", "low")]
    assert analyze_config({"CUDA_DEVICE_MAX_CONNECTIONS": "8"}).findings == []


def test_empty_config():
    r = analyze_config({})
    assert r.findings == [] and r.error is None
    assert r.summary == "no stream-safety risk found in 0 config facts"
