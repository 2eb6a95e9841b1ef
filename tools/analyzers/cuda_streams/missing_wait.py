"""Check ``missing_wait_stream``.

- ``missing_wait_stream`` (high): a value written inside the side-stream block is read after the
  block (on the default stream) before any ``current_stream().wait_stream(s)``,
  ``s.synchronize()``, ``torch.cuda.synchronize()`` or event wait. Source: PyTorch CUDA stream
  semantics notes."""
from __future__ import annotations

import ast

from grpo_debug.tools.analyzers.cuda_streams.base import AnalyzerBase
from grpo_debug.tools.analyzers.cuda_streams.report import SRC_CUDA_STREAMS, StreamFinding
from grpo_debug.tools.analyzers.cuda_streams.scopes import (Block, Scope, assign_targets, is_inside, keyword_arg,
                                                            position, ref_name, source_of, statement_of, walk_scope)


class MissingWaitCheck(AnalyzerBase):
    """Mixin of the analyzer: see the module docstring."""

    # 3: results of the side stream used after the block without a join
    def _check_missing_wait(self, sc: Scope, blk: Block) -> None:
        produced: set[str] = set()
        for ref, items in sc.assigns.items():
            if any(is_inside(s, blk.node) for s, v in items if not self._non_tensor_value(v)):
                produced.add(ref)
        for n in walk_scope(blk.node.body):  # in-place writes inside the block
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                if n.func.attr.endswith("_") and not n.func.attr.startswith("_"):
                    r = ref_name(n.func.value)
                    if r:
                        produced.add(r)
                out = keyword_arg(n, "out")
                if out is not None and ref_name(out):
                    produced.add(ref_name(out))  # type: ignore[arg-type]
            if isinstance(n, (ast.Assign, ast.AugAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    for tt in assign_targets(t):
                        if isinstance(tt, ast.Subscript) and ref_name(tt.value):
                            produced.add(ref_name(tt.value))  # type: ignore[arg-type]
        hits: list[tuple[str, ast.AST]] = []
        for ref in produced:
            after = [
                n for n, kind in self._reads(sc, ref)
                if kind in {"use", "h2d"} and position(n)[0] > blk.end and self._in_any_block(sc, n, blk.stream) is None
            ]
            # a rebinding after the block (outside the side stream) ends the side-stream value
            rebinds = [s for s, _ in sc.assigns.get(ref, []) if s.lineno > blk.end and not self._in_any_block(sc, s, blk.stream)]
            if rebinds:
                first_rebind = min(rebinds, key=position)
                after = [n for n in after if position(statement_of(n)) <= position(first_rebind)]
            unjoined = [n for n in sorted(after, key=position) if not self._joined(sc, blk, n)]
            if unjoined:
                hits.append((ref, unjoined[0]))
        if not hits:
            return
        hits.sort(key=lambda h: position(h[1]))
        first = hits[0][1]
        names = ", ".join(f"`{r}` (line {n.lineno})" for r, n in hits)
        self.findings.append(StreamFinding(
            check="missing_wait_stream", severity="high",
            line=first.lineno, end_line=getattr(statement_of(first), "end_lineno", first.lineno),
            message=(
                f"Values written on side stream `{blk.stream}` (block lines {blk.start}-{blk.end}) are "
                f"read or returned after the block: {names}. Nothing makes the default stream wait "
                "for the side stream first, so the read can see unfinished results."
            ),
            fix=(
                f"After the block and before the first read, call "
                f"`torch.cuda.current_stream().wait_stream({blk.stream})`. You can also record an event "
                f"inside the block and call `event.wait()`. If these tensors are freed on the default stream "
                f"later, also call `t.record_stream(torch.cuda.current_stream())`."
            ),
            source=SRC_CUDA_STREAMS,
        ))

    def _joined(self, sc: Scope, blk: Block, read: ast.AST) -> bool:
        for c in sc.calls:
            if not (c.lineno > blk.end and position(c) < position(read)):
                continue
            if self._in_any_block(sc, c) is not None:
                continue
            if self._is_device_sync(c):
                return True
            if not isinstance(f := c.func, ast.Attribute):  # a plain call: no stream or event method
                continue
            recv = source_of(f.value)
            if f.attr == "wait_stream" and c.args and source_of(c.args[0]) == blk.stream:
                reader = self._in_any_block(sc, read)
                if reader is not None and recv == reader.stream:
                    return True  # the reading side stream waits for this one
                if reader is None and (self._is_current_stream_expr(f.value, sc) or recv not in self.streams):
                    return True  # the default/current stream waits (`other.wait_stream(s)` does not count)
            if f.attr == "wait_event":
                return True
            if f.attr == "synchronize" and (recv == blk.stream or self._is_event_ref(f.value, sc)):
                return True
            if f.attr == "wait" and self._is_event_ref(f.value, sc):
                return True
        return False
