"""CUDA stream-safety static analyzer for PyTorch code (pattern class ``cuda_stream_safety``).

A tensor allocated on one CUDA stream and used on another must be protected. Otherwise the caching
allocator may hand its memory to a new tensor while the side stream still reads or writes it. The
result is silent corruption, NaN, or an illegal memory access. The usual protections are:

- ``t.record_stream(side)`` for a tensor used on ``side``
  (https://pytorch.org/docs/stable/generated/torch.Tensor.record_stream.html);
- ``side.wait_stream(torch.cuda.current_stream())`` before ``side`` reads tensors produced on the
  default stream, and ``torch.cuda.current_stream().wait_stream(side)`` before the default stream
  reads results made on ``side`` (https://pytorch.org/docs/stable/notes/cuda.html#cuda-streams);
- events (``torch.cuda.Event.record`` / ``.wait``), or a host ``synchronize()``.

Two entry points:

- :func:`analyze_code` reads Python source with the stdlib :mod:`ast` module. It never imports or
  runs the code and never imports torch.
- :func:`analyze_config` reads flattened config facts (DeepSpeed JSON, env variables).

**These are heuristics, not a proof of safety.** The analysis is intra-procedural. It orders events
by line number inside one function and does not follow branches, calls, aliasing (``y = x``),
containers, or streams passed through attributes of other objects. Two names that spell the same
stream differently (``s`` vs ``self.s``) count as different streams. A ``with`` block counts as a
side stream only when its argument is not ``None`` or ``current_stream()`` / ``default_stream()``
(or a local name bound to one of them). A stream passed in by the caller may still be the current
stream. An empty report means only that
none of the patterns below matched. A finding is a place worth reading, not a confirmed race.
Tensors held on ``self`` (long-lived buffers) are left out of the side-stream lifetime check
because they are not freed when the function returns.
"""
from __future__ import annotations

from grpo_debug.tools.analyzers.cuda_streams.analyzer import analyze_code
from grpo_debug.tools.analyzers.cuda_streams.config import analyze_config
from grpo_debug.tools.analyzers.cuda_streams.report import StreamFinding, StreamReport

__all__ = ["StreamFinding", "StreamReport", "analyze_code", "analyze_config"]
