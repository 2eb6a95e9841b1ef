"""Check ``record_stream_on_current_stream``.

- ``record_stream_on_current_stream`` (low): ``x.record_stream(torch.cuda.current_stream())``
  outside any side-stream block, for a tensor that was made locally on that same stream. It does
  nothing. The stream that needs recording is the *other* one."""
from __future__ import annotations

import ast

from grpo_debug.tools.analyzers.cuda_streams.base import AnalyzerBase
from grpo_debug.tools.analyzers.cuda_streams.report import SRC_RECORD_STREAM, StreamFinding
from grpo_debug.tools.analyzers.cuda_streams.scopes import Scope, position, ref_name, source_of


class RecordCurrentCheck(AnalyzerBase):
    """Mixin of the analyzer: see the module docstring."""

    # 5: record_stream with the current stream (pointless for locally made tensors)
    def _check_record_current(self, sc: Scope) -> None:
        for c in sc.calls:
            f = c.func
            if not (isinstance(f, ast.Attribute) and f.attr == "record_stream" and c.args):
                continue
            if not self._is_current_stream_expr(c.args[0], sc):
                continue
            if self._in_any_block(sc, c) is not None:
                continue  # inside a side block, current_stream() *is* the side stream
            ref = ref_name(f.value)
            if ref is None or ref in sc.params or ref.startswith(("self.", "cls.")):
                continue
            items = [(s, v) for s, v in sc.assigns.get(ref, []) if position(s) < position(c)]
            if not items or any(self._in_any_block(sc, s) is not None for s, _ in sc.assigns.get(ref, [])):
                continue
            _, v = max(items, key=lambda sv: position(sv[0]))
            if not self._local_alloc(v):
                continue
            self.findings.append(StreamFinding(
                check="record_stream_on_current_stream", severity="low",
                line=c.lineno, end_line=c.end_lineno,
                message=(
                    f"`{source_of(c)}` records the stream `{ref}` was allocated on, so it does nothing. "
                    "record_stream matters only for a stream *other* than the allocating one. If "
                    f"`{ref}` is used on a side stream, that stream is not protected."
                ),
                fix=f"Record the side stream that uses it: `{ref}.record_stream(side_stream)`. If no other stream uses it, delete the call.",
                source=SRC_RECORD_STREAM,
            ))

    def _local_alloc(self, v: ast.AST | None) -> bool:
        if isinstance(v, (ast.BinOp, ast.UnaryOp)):
            return True
        if isinstance(v, ast.Call):
            name = self._call_name(v) or ""
            if name.startswith("torch.") and not name.startswith(("torch.cuda.", "torch.distributed.")):
                return True
            if isinstance(v.func, ast.Attribute) and v.func.attr in {"cuda", "to", "clone", "contiguous", "new_empty", "new_zeros"}:
                return True
        return False
