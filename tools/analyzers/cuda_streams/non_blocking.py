"""Checks ``non_blocking_copy_source_reused``, ``non_blocking_d2h_read_before_sync``, ``non_blocking_copy_without_sync``.

- ``non_blocking_copy_source_reused`` (medium): a ``non_blocking=True`` copy reads a host
  buffer that is pinned (or of unknown origin). That buffer is then modified in place later in the
  function, or in the next turn of the same loop, with no host sync in between. The in-flight DMA
  may read the new contents. A ``synchronize()``, ``.item()`` or ``.tolist()`` in between counts as
  a sync, which is lenient for tensors that are not on the copy's stream. GPU sources and
  pageable CPU tensors made here are skipped: a pageable source is staged before the call
  returns.
- ``non_blocking_d2h_read_before_sync`` (medium): a ``non_blocking=True`` device-to-host copy
  result is read on the host (``.item()``, ``.tolist()``, ``.numpy()``, ``print``) before a sync.
- ``non_blocking_copy_without_sync`` (info): a function issues ``non_blocking=True`` copies and
  has no sync of any kind. This is fine for GPU-side consumers (same-stream order). Host reads
  or reuse of the buffers need a sync."""
from __future__ import annotations

import ast

from grpo_debug.tools.analyzers.cuda_streams.base import AnalyzerBase
from grpo_debug.tools.analyzers.cuda_streams.report import SRC_CUDA_STREAMS, StreamFinding
from grpo_debug.tools.analyzers.cuda_streams.scopes import (FACTORIES, HOST_READ_FUNCS, HOST_READS, Scope,
                                                            assign_targets, is_inside, is_true_const, keyword_arg,
                                                            position, ref_name, source_of, statement_of)


class NonBlockingCheck(AnalyzerBase):
    """Mixin of the analyzer: see the module docstring."""

    # 4: non_blocking copies
    def _non_blocking_copies(self, sc: Scope) -> list[tuple[ast.Call, str, ast.AST]]:
        """(call, kind, source expr) with kind in 'to', 'cuda', 'copy_'."""
        out = []
        for c in sc.calls:
            if not is_true_const(keyword_arg(c, "non_blocking")) or not isinstance(c.func, ast.Attribute):
                continue
            attr = c.func.attr
            if attr in {"to", "cuda"}:
                out.append((c, attr, c.func.value))
            elif attr == "copy_" and c.args:
                out.append((c, "copy_", c.args[0]))
        return out

    def _origin(self, sc: Scope, ref: str, before: ast.AST) -> str:
        """'pinned' | 'gpu' | 'pageable' | 'unknown' for the buffer bound to ``ref`` before a node."""
        items = [(s, v) for s, v in sc.assigns.get(ref, []) if position(s) < position(before)]
        if not items:
            return "pinned" if "pin" in ref.lower() else "unknown"
        _, v = max(items, key=lambda sv: position(sv[0]))
        if v is None:
            return "unknown"
        for n in ast.walk(v):
            if isinstance(n, ast.Call):
                if isinstance(n.func, ast.Attribute) and n.func.attr == "pin_memory":
                    return "pinned"
                if is_true_const(keyword_arg(n, "pin_memory")):
                    return "pinned"
        for n in ast.walk(v):
            if isinstance(n, ast.Call):
                if isinstance(n.func, ast.Attribute) and n.func.attr == "cuda":
                    return "gpu"
                if isinstance(n.func, ast.Attribute) and n.func.attr == "to" and self._to_device(n, "to") and not self._to_cpu(n):
                    return "gpu"
                dev = keyword_arg(n, "device")
                if dev is not None and "cuda" in source_of(dev).lower():
                    return "gpu"
        if isinstance(v, ast.Call):
            name = self._call_name(v) or ""
            if name.startswith("torch.") and name.split(".")[-1] in FACTORIES | {"tensor", "empty_like", "zeros_like"}:
                return "pageable"
        return "pinned" if "pin" in ref.lower() else "unknown"

    def _mutations(self, sc: Scope, ref: str) -> list[ast.AST]:
        out: list[ast.AST] = []
        for n in sc.nodes:
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                a = n.func.attr
                if a.endswith("_") and not a.startswith("_") and ref_name(n.func.value) == ref:
                    out.append(n)
                out_kw = keyword_arg(n, "out")
                if out_kw is not None and ref_name(out_kw) == ref:
                    out.append(n)
                if self._call_name(n) in {"numpy.copyto", "np.copyto"} and n.args and ref_name(n.args[0]) == ref:
                    out.append(n)
            elif isinstance(n, (ast.Assign, ast.AugAssign)):
                tgts = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in tgts:
                    for tt in assign_targets(t):
                        if isinstance(tt, ast.Subscript):
                            base = tt.value
                            if isinstance(base, ast.Call) and isinstance(base.func, ast.Attribute) and base.func.attr == "numpy":
                                base = base.func.value
                            if ref_name(base) == ref:
                                out.append(n)
                        elif isinstance(n, ast.AugAssign) and ref_name(tt) == ref:
                            out.append(n)
        return out

    def _enclosing_loop(self, n: ast.AST, sc: Scope) -> ast.AST | None:
        p = getattr(n, "_ss_parent", None)
        while p is not None and p is not sc.node:
            if isinstance(p, (ast.For, ast.AsyncFor, ast.While)):
                return p
            p = getattr(p, "_ss_parent", None)
        return None

    def _check_non_blocking(self, sc: Scope) -> None:
        copies = self._non_blocking_copies(sc)
        if not copies:
            return
        medium = False
        for call, kind, src in copies:
            if kind == "to" and self._to_cpu(call):
                medium |= self._check_d2h(sc, call, None)
                continue
            ref = ref_name(src)
            if ref is None:
                continue
            if kind == "copy_" and self._origin(sc, ref, call) == "gpu":
                continue
            if kind == "copy_":
                dst = ref_name(call.func.value)  # type: ignore[union-attr]
                if dst and self._origin(sc, dst, call) == "pinned" and self._origin(sc, ref, call) != "pinned":
                    medium |= self._check_d2h(sc, call, dst)  # device -> pinned host
                    continue
            origin = self._origin(sc, ref, call)
            if origin in {"gpu", "pageable"}:
                continue
            on_side = self._in_any_block(sc, call) is not None
            mut = self._first_unsynced_mutation(sc, ref, call, on_side)
            if mut is None:
                continue
            medium = True
            qual = "" if origin == "pinned" else f" (if `{ref}` is pinned host memory; its origin is not visible here)"
            when = (
                f"Line {mut.lineno} modifies `{ref}` in place"
                if position(mut) > position(call)
                else f"In the next turn of the loop, line {mut.lineno} modifies `{ref}` in place"
            )
            self.findings.append(StreamFinding(
                check="non_blocking_copy_source_reused", severity="medium",
                line=min(call.lineno, mut.lineno), end_line=max(call.lineno, getattr(mut, "end_lineno", None) or mut.lineno),
                message=(
                    f"`{source_of(call)}` at line {call.lineno} copies asynchronously from `{ref}`{qual}. "
                    f"{when} with no host sync in between, so the in-flight copy may read the new contents."
                ),
                fix=(
                    f"Record a `torch.cuda.Event` after the copy and call `event.synchronize()` before "
                    f"line {mut.lineno} modifies `{ref}`. Or double-buffer the pinned staging tensor, or "
                    "drop non_blocking=True for this copy."
                ),
                source=SRC_CUDA_STREAMS,
            ))
        if medium:
            return
        has_sync = any(
            self._host_sync(c)
            or (isinstance(c.func, ast.Attribute) and c.func.attr in {"wait_stream", "wait_event", "wait", "record_stream"})
            for c in sc.calls
        )
        if not has_sync:
            first = min((c for c, _, _ in copies), key=position)
            self.findings.append(StreamFinding(
                check="non_blocking_copy_without_sync", severity="info",
                line=first.lineno, end_line=first.end_lineno,
                message=(
                    f"{len(copies)} non_blocking=True cop{'y' if len(copies) == 1 else 'ies'} and no synchronize, "
                    "wait_stream or event wait in this function. GPU consumers on the same stream "
                    "are ordered, but reading the destination on the host, or reusing a pinned "
                    "source, needs a sync first."
                ),
                fix="Nothing is needed if only same-stream GPU code uses the results. Otherwise sync (event.synchronize() / torch.cuda.synchronize()) before any host read or reuse.",
                source=SRC_CUDA_STREAMS,
            ))

    def _first_unsynced_mutation(self, sc: Scope, ref: str, call: ast.Call, on_side: bool) -> ast.AST | None:
        syncs = [c for c in sc.calls if self._host_sync(c) and (not on_side or not (
            isinstance(c.func, ast.Attribute) and c.func.attr in {"item", "tolist"}))]
        rebinds = [s for s, _ in sc.assigns.get(ref, [])]
        cpos = position(statement_of(call))
        muts = self._mutations(sc, ref)
        # straight-line: later mutation, no sync or rebinding between
        for m in sorted(muts, key=position):
            mp = position(m)
            if mp <= cpos or is_inside(m, statement_of(call)):
                continue
            between = lambda n: cpos < position(n) < mp  # noqa: E731
            if any(between(s) for s in syncs) or any(between(r) and not isinstance(r, ast.AugAssign) for r in rebinds):
                break
            return m
        # loop-carried: mutation earlier in the same loop body reaches the next iteration's copy
        loop = self._enclosing_loop(call, sc)
        if loop is not None:
            in_loop = lambda n: is_inside(n, loop)  # noqa: E731
            for m in sorted(muts, key=position):
                if not in_loop(m) or position(m) >= cpos:
                    continue
                if any(in_loop(s) for s in syncs):
                    return None
                if any((in_loop(r) and not isinstance(r, ast.AugAssign)) or r is loop for r in rebinds):
                    return None  # a fresh buffer each iteration
                return m
        return None

    def _check_d2h(self, sc: Scope, call: ast.Call, ref: str | None) -> bool:
        st = statement_of(call)
        if ref is None:
            if not isinstance(st, ast.Assign) or st.value is not call:
                return False
            tgts = [ref_name(t) for t in st.targets if ref_name(t)]
            if not tgts:
                return False
            ref = tgts[0]
        syncs = [c for c in sc.calls if self._is_device_sync(c) or (
            isinstance(c.func, ast.Attribute) and c.func.attr == "synchronize")]
        for n in sorted(sc.nodes, key=position):
            if position(n) <= position(st) or not isinstance(n, ast.Call):
                continue
            hit = False
            if isinstance(n.func, ast.Attribute) and n.func.attr in HOST_READS and ref_name(n.func.value) == ref:
                hit = True
            elif isinstance(n.func, ast.Name) and n.func.id in HOST_READ_FUNCS and any(ref_name(a) == ref for a in n.args):
                hit = True
            if not hit:
                continue
            if any(position(st) < position(s) < position(n) for s in syncs):
                return False
            self.findings.append(StreamFinding(
                check="non_blocking_d2h_read_before_sync", severity="medium",
                line=call.lineno, end_line=n.lineno,
                message=(
                    f"`{ref}` comes from a non_blocking=True device-to-host copy at line {call.lineno}. Line "
                    f"{n.lineno} reads it on the host with no sync in between, so the host may see stale "
                    "or partial values."
                ),
                fix=f"Call `torch.cuda.current_stream().synchronize()` (or an event's synchronize()) before line {n.lineno}, or drop non_blocking=True.",
                source=SRC_CUDA_STREAMS,
            ))
            return True
        return False
