"""Check ``side_stream_use_without_record_stream``.

- ``side_stream_use_without_record_stream`` (high): a tensor made before a
  ``with torch.cuda.stream(s):`` block is read inside it. The function never calls
  ``<tensor>.record_stream(...)``, and no ``s.wait_stream(...)`` / event wait / synchronize comes
  before the first use. The side stream may then read it before its producer has finished, and
  the allocator may recycle it while ``s`` still uses it. Source: the ``record_stream`` docs."""
from __future__ import annotations

import ast

from grpo_debug.tools.analyzers.cuda_streams.base import AnalyzerBase
from grpo_debug.tools.analyzers.cuda_streams.report import SRC_RECORD_STREAM, StreamFinding
from grpo_debug.tools.analyzers.cuda_streams.scopes import (Block, Scope, is_inside, position, source_of,
                                                            statement_of)


class SideUseCheck(AnalyzerBase):
    """Mixin of the analyzer: see the module docstring."""

    # 1+2: tensors from outside used on the side stream
    def _check_side_use(self, sc: Scope, blk: Block) -> None:
        candidates: dict[str, int] = {}  # ref -> line of its last producer before the block (0 = param)
        for p in sc.params:
            candidates[p] = 0
        for ref, items in sc.assigns.items():
            before = [(s, v) for s, v in items if position(s) < position(blk.node) and not is_inside(s, blk.node) and s is not blk.node]
            if not before:
                continue
            if ref.startswith(("self.", "cls.")):
                continue
            last_stmt, last_val = max(before, key=lambda sv: position(sv[0]))
            if self._non_tensor_value(last_val):
                candidates.pop(ref, None)
                continue
            candidates[ref] = last_stmt.lineno
        stream_refs = {blk.stream}
        flagged: list[tuple[str, int]] = []
        for ref, produced_line in candidates.items():
            if ref in stream_refs or ref in self.streams:
                continue
            in_block_assign = [s for s, _ in sc.assigns.get(ref, []) if is_inside(s, blk.node)]
            uses = []
            for n, kind in self._reads(sc, ref):
                if kind != "use" or not is_inside(n, blk.node):
                    continue
                st = statement_of(n)
                if any(position(a) < position(st) for a in in_block_assign):
                    continue  # rebound inside the block before this read
                uses.append(n)
            if not uses:
                continue
            first = min(uses, key=position)
            if self._has_record_stream(sc, ref):
                continue
            if self._prologue_wait(sc, blk, produced_line, first):
                continue
            flagged.append((ref, first.lineno))
        if not flagged:
            return
        names = ", ".join(f"`{r}` (read at line {ln})" for r, ln in flagged)
        fix_lines = "; ".join(f"{r}.record_stream({blk.stream})" for r, _ in flagged)
        self.findings.append(StreamFinding(
            check="side_stream_use_without_record_stream", severity="high",
            line=blk.start, end_line=blk.end,
            message=(
                f"Side-stream block `{blk.stream}` (lines {blk.start}-{blk.end}) reads {names}, made on "
                "another stream before the block. There is no record_stream for it and no wait before "
                "its use. The side stream may read it before its producer finishes, and the caching "
                "allocator may recycle its memory while the side stream still uses it."
            ),
            fix=(
                f"Before the block call `{blk.stream}.wait_stream(torch.cuda.current_stream())`. Inside "
                f"it call `{fix_lines}`. Or keep a reference until the default stream has run "
                f"`torch.cuda.current_stream().wait_stream({blk.stream})`."
            ),
            source=SRC_RECORD_STREAM,
        ))

    def _prologue_wait(self, sc: Scope, blk: Block, produced_line: int, first_use: ast.AST) -> bool:
        for c in sc.calls:
            if not (produced_line < c.lineno and position(c) < position(first_use)):
                continue
            if self._is_device_sync(c):
                return True
            f = c.func
            if not isinstance(f, ast.Attribute):
                continue
            recv = source_of(f.value)
            inside = is_inside(c, blk.node)
            if f.attr in {"wait_stream", "wait_event"}:
                if recv == blk.stream or (inside and self._is_current_stream_expr(f.value, sc)):
                    return True
            if f.attr == "wait" and self._is_event_ref(f.value, sc):
                if (inside and not c.args) or (c.args and source_of(c.args[0]) == blk.stream):
                    return True
            if f.attr == "synchronize" and (recv == blk.stream or self._is_event_ref(f.value, sc)):
                return True
        return False
