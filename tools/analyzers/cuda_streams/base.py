"""The analyzer's core: scopes, streams, blocks and the reads of a name, shared by every check."""
from __future__ import annotations

import ast
from typing import Iterator

from grpo_debug.tools.analyzers.cuda_streams.report import StreamFinding
from grpo_debug.tools.analyzers.cuda_streams.scopes import (CURRENT_STREAM, EVENT_CTORS, FACTORIES,
                                                            HOST_VALUE_METHODS, META_KWARGS, METADATA,
                                                            NON_TENSOR_FUNCS, NON_TENSOR_METHODS, STREAM_CTORS,
                                                            STREAM_CTX, STREAM_METHODS, Aliases, Block, Scope,
                                                            assign_targets, is_inside, keyword_arg, position,
                                                            ref_name, source_of, walk_scope)


class AnalyzerBase:
    """The scopes, streams and side-stream blocks of one module, and the questions every check asks of
    them (is this a stream, an event, a sync; where is a name read). The checks are mixins, one module each."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.al = Aliases(tree)
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                child._ss_parent = parent  # type: ignore[attr-defined]
        self.findings: list[StreamFinding] = []
        self.streams: list[str] = []
        self.n_blocks = 0
        for n in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Assign)), key=position):
            if isinstance(n.value, ast.Call) and self._call_name(n.value) in STREAM_CTORS:
                for t in n.targets:
                    self._add_stream(source_of(t))

    # ---------------------------------------------------------------- classification helpers
    def _call_name(self, call: ast.Call) -> str | None:
        return self.al.resolve(call.func)

    def _is_current_stream_expr(self, node: ast.AST, scope: Scope) -> bool:
        if isinstance(node, ast.Call) and self._call_name(node) in CURRENT_STREAM:
            return True
        r = ref_name(node)
        if r and r in scope.assigns:
            vals = [v for _, v in scope.assigns[r]]
            return bool(vals) and all(
                isinstance(v, ast.Call) and self._call_name(v) in CURRENT_STREAM for v in vals
            )
        return False

    def _non_tensor_value(self, value: ast.AST | None) -> bool:
        if value is None:
            return False
        if isinstance(value, ast.Constant):
            return True
        if isinstance(value, ast.Call):
            name = self._call_name(value) or ""
            if name in STREAM_CTORS | EVENT_CTORS | CURRENT_STREAM or name in NON_TENSOR_FUNCS:
                return True
            if name in {"torch.device", "torch.cuda.current_device"}:
                return True
            if isinstance(value.func, ast.Attribute) and value.func.attr in HOST_VALUE_METHODS:
                return True
        return False

    def _is_event_ref(self, recv: ast.AST, scope: Scope) -> bool:
        r = ref_name(recv)
        if r is None:
            return isinstance(recv, ast.Call) and self._call_name(recv) in EVENT_CTORS
        vals = [v for _, v in scope.assigns.get(r, [])]
        if any(isinstance(v, ast.Call) and self._call_name(v) in EVENT_CTORS for v in vals):
            return True
        low = r.rsplit(".", 1)[-1].lower()
        return "event" in low or low.startswith("evt") or low.endswith("_ev")

    def _is_device_sync(self, call: ast.Call) -> bool:
        return self._call_name(call) == "torch.cuda.synchronize"

    def _host_sync(self, call: ast.Call) -> bool:
        """A call that blocks the host until (some) GPU work is done."""
        if self._is_device_sync(call):
            return True
        f = call.func
        return isinstance(f, ast.Attribute) and f.attr in {"synchronize", "item", "tolist"}

    # ---------------------------------------------------------------- scope building
    def scopes(self) -> list[Scope]:
        out = [Scope(self.tree, [s for s in self.tree.body], [])]
        for n in ast.walk(self.tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = n.args
                params = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
                if a.vararg:
                    params.append(a.vararg.arg)
                if a.kwarg:
                    params.append(a.kwarg.arg)
                out.append(Scope(n, n.body, [p for p in params if p not in {"self", "cls"}]))
        for sc in out:
            self._fill(sc)
        return out

    def _fill(self, sc: Scope) -> None:
        sc.nodes = list(walk_scope(sc.body))
        for n in sc.nodes:
            if isinstance(n, ast.Call):
                sc.calls.append(n)
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    for tt in assign_targets(t):
                        self._add_assign(sc, tt, n, n.value)
            elif isinstance(n, (ast.AnnAssign, ast.AugAssign)):
                self._add_assign(sc, n.target, n, n.value if isinstance(n, ast.AnnAssign) else None)
            elif isinstance(n, (ast.For, ast.AsyncFor)):
                for tt in assign_targets(n.target):
                    self._add_assign(sc, tt, n, None)
            elif isinstance(n, ast.NamedExpr):
                self._add_assign(sc, n.target, n, n.value)
            elif isinstance(n, (ast.With, ast.AsyncWith)):
                for item in n.items:
                    if item.optional_vars is not None:
                        for tt in assign_targets(item.optional_vars):
                            self._add_assign(sc, tt, n, item.context_expr)
                    blk = self._as_block(item.context_expr, n, sc)
                    if blk is not None:
                        sc.blocks.append(blk)

    def _add_assign(self, sc: Scope, target: ast.AST, stmt: ast.AST, value: ast.AST | None) -> None:
        r = ref_name(target)
        if r:
            sc.assigns.setdefault(r, []).append((stmt, value))

    def _add_stream(self, s: str) -> None:
        if s not in self.streams:
            self.streams.append(s)

    def _as_block(self, ctx: ast.AST, w: ast.With | ast.AsyncWith, sc: Scope) -> Block | None:
        if not isinstance(ctx, ast.Call) or self._call_name(ctx) not in STREAM_CTX:
            return None
        arg = ctx.args[0] if ctx.args else keyword_arg(ctx, "stream")
        if arg is None or (isinstance(arg, ast.Constant) and arg.value is None):
            return None
        if self._is_current_stream_expr(arg, sc):
            return None
        s = source_of(arg)
        self._add_stream(s)
        return Block(w, s, w.lineno, w.end_lineno or w.lineno)

    # ---------------------------------------------------------------- reads of a ref
    def _reads(self, sc: Scope, ref: str) -> Iterator[tuple[ast.AST, str]]:
        """(node, kind) for every load of ``ref`` in the scope.

        kind: 'meta' (shape/dtype/..., record_stream), 'callee' (ref(...) call), 'stream' (stream or
        event method), 'h2d' (receiver of .cuda()/.to(device)), 'use' (anything else).
        """
        for n in sc.nodes:
            if not isinstance(n, (ast.Name, ast.Attribute)) or not isinstance(n.ctx, ast.Load):
                continue
            if ref_name(n) != ref:
                continue
            parent = getattr(n, "_ss_parent", None)
            if isinstance(parent, ast.Attribute) and parent.value is n:
                attr = parent.attr
                gp = getattr(parent, "_ss_parent", None)
                is_called = isinstance(gp, ast.Call) and gp.func is parent
                if attr in METADATA:
                    yield n, "meta"
                elif is_called and attr in STREAM_METHODS:
                    yield n, "stream"
                elif is_called and attr in {"cuda", "to"} and self._to_device(gp, attr):
                    yield n, "h2d"
                elif is_called and attr in NON_TENSOR_METHODS:
                    yield n, "callee"
                else:
                    yield n, "use"
            elif isinstance(parent, ast.Call) and parent.func is n:
                yield n, "callee"
            elif self._shape_like_arg(n):
                yield n, "meta"
            else:
                yield n, "use"

    def _shape_like_arg(self, n: ast.AST) -> bool:
        """`n` is a size/device/dtype argument (`torch.empty(n, device=dev)`), not a tensor read."""
        p = getattr(n, "_ss_parent", None)
        while isinstance(p, (ast.Tuple, ast.List, ast.BinOp)):
            n, p = p, getattr(p, "_ss_parent", None)
        if isinstance(p, ast.keyword):
            return p.arg in META_KWARGS
        if isinstance(p, ast.Call) and n in p.args:
            name = self._call_name(p) or ""
            return name in NON_TENSOR_FUNCS or (
                name.startswith("torch.") and name.rsplit(".", 1)[-1] in FACTORIES
            )
        return False

    def _to_device(self, call: ast.Call, attr: str) -> bool:
        """True for `.cuda(...)` or `.to(<device>, ...)`; False for `.to(torch.float16)`."""
        if attr == "cuda":
            return True
        if keyword_arg(call, "device") is not None:
            return True
        for a in call.args[:1]:
            if isinstance(a, ast.Constant) and isinstance(a.value, (str, int)) and not isinstance(a.value, bool):
                return True
            s = source_of(a).lower()
            if "device" in s or "cuda" in s or s in {"dev", "gpu", "rank", "local_rank"}:
                return True
        return False

    def _to_cpu(self, call: ast.Call) -> bool:
        f = call.func
        if not (isinstance(f, ast.Attribute) and f.attr == "to"):
            return False
        dev = call.args[0] if call.args else keyword_arg(call, "device")
        if dev is None:
            return False
        if isinstance(dev, ast.Constant) and isinstance(dev.value, str):
            return dev.value.startswith("cpu")
        if isinstance(dev, ast.Call) and self._call_name(dev) == "torch.device" and dev.args:
            a = dev.args[0]
            return isinstance(a, ast.Constant) and str(a.value).startswith("cpu")
        return False


    def _in_any_block(self, sc: Scope, n: ast.AST, stream: str | None = None) -> Block | None:
        for b in sc.blocks:
            if (stream is None or b.stream == stream) and is_inside(n, b.node):
                return b
        return None

    def _has_record_stream(self, sc: Scope, ref: str) -> bool:
        return any(
            isinstance(c.func, ast.Attribute) and c.func.attr == "record_stream" and ref_name(c.func.value) == ref
            for c in sc.calls
        )
