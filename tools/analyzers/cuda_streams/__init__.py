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

import ast
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Literal

from pydantic import BaseModel, Field

# --------------------------------------------------------------------------------------------------
# Sources (from /work/shared/reference/citations.md, or the PyTorch semantics pages)
# --------------------------------------------------------------------------------------------------
SRC_RECORD_STREAM = "https://pytorch.org/docs/stable/generated/torch.Tensor.record_stream.html"
SRC_CUDA_STREAMS = "https://pytorch.org/docs/stable/notes/cuda.html#cuda-streams"
SRC_DS_8061 = "https://github.com/deepspeedai/DeepSpeed/issues/8061"
SRC_TORCHTITAN_735 = "https://github.com/pytorch/torchtitan/issues/735"
SRC_PT_188655 = "https://github.com/pytorch/pytorch/issues/188655"
SRC_VERL_6976 = "https://github.com/verl-project/verl/pull/6976"

Severity = Literal["high", "medium", "low", "info"]
_SEV_ORDER = {"high": 0, "medium": 1, "low": 2, "info": 3}


class StreamFinding(BaseModel):
    """One stream-safety risk (or note) found by a heuristic check.

    Checks (``check``) and what each means:

    - ``side_stream_use_without_record_stream`` (high): a tensor made before a
      ``with torch.cuda.stream(s):`` block is read inside it. The function never calls
      ``<tensor>.record_stream(...)``, and no ``s.wait_stream(...)`` / event wait / synchronize comes
      before the first use. The side stream may then read it before its producer has finished, and
      the allocator may recycle it while ``s`` still uses it. Source: the ``record_stream`` docs.
    - ``missing_wait_stream`` (high): a value written inside the side-stream block is read after the
      block (on the default stream) before any ``current_stream().wait_stream(s)``,
      ``s.synchronize()``, ``torch.cuda.synchronize()`` or event wait. Source: PyTorch CUDA stream
      semantics notes.
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
      or reuse of the buffers need a sync.
    - ``record_stream_on_current_stream`` (low): ``x.record_stream(torch.cuda.current_stream())``
      outside any side-stream block, for a tensor that was made locally on that same stream. It does
      nothing. The stream that needs recording is the *other* one.
    - ``async_collective_not_waited`` (high): a ``torch.distributed`` collective with
      ``async_op=True`` whose work handle is dropped, or never ``.wait()``-ed before its tensor is
      read again. The current stream does not wait for the communication stream until
      ``work.wait()``.
    - Config checks: see :func:`analyze_config`.
    """

    check: str = Field(description="Check id, e.g. side_stream_use_without_record_stream.")
    severity: Severity = Field(description="high / medium / low risk, or info (not a risk by itself).")
    line: int | None = Field(None, description="1-based line where the finding starts (None for config facts).")
    end_line: int | None = Field(None, description="1-based last line of the finding's span.")
    message: str = Field(description="What was seen and why it is a risk.")
    fix: str = Field(description="The concrete change.")
    source: str = Field(description="URL backing the mechanism (citations.md or PyTorch docs).")


class StreamReport(BaseModel):
    """Result of :func:`analyze_code` or :func:`analyze_config`. Heuristic; see the module docstring."""

    findings: list[StreamFinding] = Field(default_factory=list, description="Most severe first, then by line.")
    streams: list[str] = Field(
        default_factory=list,
        description="Side streams seen: targets of torch.cuda.Stream(...) and arguments of stream blocks.",
    )
    blocks: int = Field(0, description="Number of side-stream blocks (`with torch.cuda.stream(s):`).")
    error: str | None = Field(None, description="Why the input could not be analysed (e.g. a syntax error), else None.")
    summary: str = Field("", description="One sentence.")


# --------------------------------------------------------------------------------------------------
# AST helpers
# --------------------------------------------------------------------------------------------------
_DEFAULT_ALIASES = {"torch": "torch", "dist": "torch.distributed"}
_STREAM_CTX = {"torch.cuda.stream", "torch.cuda.StreamContext", "torch.cuda.streams.StreamContext"}
_STREAM_CTORS = {"torch.cuda.Stream", "torch.cuda.streams.Stream", "torch.Stream"}
_EVENT_CTORS = {"torch.cuda.Event", "torch.cuda.streams.Event", "torch.Event"}
_CURRENT_STREAM = {"torch.cuda.current_stream", "torch.cuda.default_stream"}
_COLLECTIVES = {
    "all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_gather_into_tensor",
    "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "reduce", "gather", "scatter",
    "_all_gather_base", "_reduce_scatter_base",
}
_P2P = {"isend", "irecv"}
_METADATA = {
    "shape", "dtype", "device", "size", "dim", "ndim", "numel", "is_cuda", "requires_grad", "stride",
    "is_contiguous", "element_size", "nelement", "data_ptr", "get_device", "is_pinned", "layout",
    "record_stream", "names", "grad_fn", "is_leaf",
}
_STREAM_METHODS = {"wait_stream", "wait_event", "synchronize", "record_event", "query", "record", "wait"}
_HOST_READS = {"item", "tolist", "numpy"}
_HOST_READ_FUNCS = {"print", "float", "int", "bool", "list"}
# methods whose result is a host value, not a tensor
_HOST_VALUE_METHODS = {"item", "tolist", "numpy", "size", "dim", "numel", "stride", "data_ptr", "get_device"}
# common methods of non-tensor objects (loggers, containers, modules, optimizers): calling them on a
# name is not taken as a tensor use
_NON_TENSOR_METHODS = {
    "info", "debug", "warning", "warn", "error", "exception", "log", "append", "extend", "get", "items",
    "keys", "values", "update", "format", "join", "split", "strip", "parameters", "named_parameters",
    "buffers", "modules", "state_dict", "eval", "train", "step", "zero_grad", "put", "put_nowait",
    "get_nowait", "pop", "insert", "setdefault", "generate",
}
_FACTORIES = {
    "empty", "zeros", "ones", "full", "randn", "rand", "randint", "arange", "empty_strided", "eye", "linspace",
}
_META_KWARGS = {"device", "dtype", "size", "shape", "layout", "src", "dst", "group", "rank", "non_blocking", "pin_memory"}
_NON_TENSOR_FUNCS = {"range", "len", "int", "float", "str", "bool", "enumerate", "zip", "object"}


def _ref(node: ast.AST) -> str | None:
    """`x` -> 'x', `self.a.b` -> 'self.a.b'; anything else -> None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _ref(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _src(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every parsed node
        return "<expr>"


def _is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _kw(call: ast.Call, name: str) -> ast.AST | None:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def _targets(node: ast.AST) -> Iterator[ast.AST]:
    """Flatten assignment targets (tuples, lists, starred)."""
    if isinstance(node, (ast.Tuple, ast.List)):
        for elt in node.elts:
            yield from _targets(elt)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)
    else:
        yield node


def _walk_scope(nodes: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """Every node under ``nodes`` without entering nested functions or classes."""
    skip = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    stack = [n for n in nodes if not isinstance(n, skip)][::-1]
    while stack:
        n = stack.pop()
        yield n
        children = [
            c for c in ast.iter_child_nodes(n)
            if not isinstance(c, skip)
        ]
        stack.extend(reversed(children))


class _Aliases:
    """Import aliases so that `th.cuda.stream`, `from torch.cuda import stream` etc. resolve."""

    def __init__(self, tree: ast.AST) -> None:
        self.map: dict[str, str] = {}
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                for a in n.names:
                    if a.asname:
                        self.map[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.map[top] = top
            elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
                for a in n.names:
                    self.map[a.asname or a.name] = f"{n.module}.{a.name}"

    def resolve(self, node: ast.AST) -> str | None:
        """Dotted name of a Name/Attribute chain with import aliases expanded."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        base = self.map.get(node.id) or _DEFAULT_ALIASES.get(node.id) or node.id
        return ".".join([base, *reversed(parts)])


# --------------------------------------------------------------------------------------------------
# Per-function scope model
# --------------------------------------------------------------------------------------------------
@dataclass
class _Block:
    node: ast.With | ast.AsyncWith
    stream: str
    start: int
    end: int


def _inside(n: ast.AST, container: ast.AST) -> bool:
    p = getattr(n, "_ss_parent", None)
    while p is not None:
        if p is container:
            return True
        p = getattr(p, "_ss_parent", None)
    return False


@dataclass
class _Scope:
    node: ast.AST
    body: list[ast.stmt]
    params: list[str]
    nodes: list[ast.AST] = field(default_factory=list)
    calls: list[ast.Call] = field(default_factory=list)
    blocks: list[_Block] = field(default_factory=list)
    # ref -> list of (assign statement/node, value or None)
    assigns: dict[str, list[tuple[ast.AST, ast.AST | None]]] = field(default_factory=dict)

    @property
    def start(self) -> int:
        return getattr(self.node, "lineno", 1)


def _stmt_of(n: ast.AST) -> ast.AST:
    while n is not None and not isinstance(n, ast.stmt):
        n = getattr(n, "_ss_parent", None)
    return n


def _pos(n: ast.AST) -> tuple[int, int]:
    return (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))


class _Analyzer:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.al = _Aliases(tree)
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                child._ss_parent = parent  # type: ignore[attr-defined]
        self.findings: list[StreamFinding] = []
        self.streams: list[str] = []
        self.n_blocks = 0
        for n in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Assign)), key=_pos):
            if isinstance(n.value, ast.Call) and self._call_name(n.value) in _STREAM_CTORS:
                for t in n.targets:
                    self._add_stream(_src(t))

    # ---------------------------------------------------------------- classification helpers
    def _call_name(self, call: ast.Call) -> str | None:
        return self.al.resolve(call.func)

    def _is_current_stream_expr(self, node: ast.AST, scope: _Scope) -> bool:
        if isinstance(node, ast.Call) and self._call_name(node) in _CURRENT_STREAM:
            return True
        r = _ref(node)
        if r and r in scope.assigns:
            vals = [v for _, v in scope.assigns[r]]
            return bool(vals) and all(
                isinstance(v, ast.Call) and self._call_name(v) in _CURRENT_STREAM for v in vals
            )
        return False

    def _non_tensor_value(self, value: ast.AST | None) -> bool:
        if value is None:
            return False
        if isinstance(value, ast.Constant):
            return True
        if isinstance(value, ast.Call):
            name = self._call_name(value) or ""
            if name in _STREAM_CTORS | _EVENT_CTORS | _CURRENT_STREAM or name in _NON_TENSOR_FUNCS:
                return True
            if name in {"torch.device", "torch.cuda.current_device"}:
                return True
            if isinstance(value.func, ast.Attribute) and value.func.attr in _HOST_VALUE_METHODS:
                return True
        return False

    def _is_event_ref(self, recv: ast.AST, scope: _Scope) -> bool:
        r = _ref(recv)
        if r is None:
            return isinstance(recv, ast.Call) and self._call_name(recv) in _EVENT_CTORS
        vals = [v for _, v in scope.assigns.get(r, [])]
        if any(isinstance(v, ast.Call) and self._call_name(v) in _EVENT_CTORS for v in vals):
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
    def scopes(self) -> list[_Scope]:
        out = [_Scope(self.tree, [s for s in self.tree.body], [])]
        for n in ast.walk(self.tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = n.args
                params = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
                if a.vararg:
                    params.append(a.vararg.arg)
                if a.kwarg:
                    params.append(a.kwarg.arg)
                out.append(_Scope(n, n.body, [p for p in params if p not in {"self", "cls"}]))
        for sc in out:
            self._fill(sc)
        return out

    def _fill(self, sc: _Scope) -> None:
        sc.nodes = list(_walk_scope(sc.body))
        for n in sc.nodes:
            if isinstance(n, ast.Call):
                sc.calls.append(n)
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    for tt in _targets(t):
                        self._add_assign(sc, tt, n, n.value)
            elif isinstance(n, (ast.AnnAssign, ast.AugAssign)):
                self._add_assign(sc, n.target, n, n.value if isinstance(n, ast.AnnAssign) else None)
            elif isinstance(n, (ast.For, ast.AsyncFor)):
                for tt in _targets(n.target):
                    self._add_assign(sc, tt, n, None)
            elif isinstance(n, ast.NamedExpr):
                self._add_assign(sc, n.target, n, n.value)
            elif isinstance(n, (ast.With, ast.AsyncWith)):
                for item in n.items:
                    if item.optional_vars is not None:
                        for tt in _targets(item.optional_vars):
                            self._add_assign(sc, tt, n, item.context_expr)
                    blk = self._as_block(item.context_expr, n, sc)
                    if blk is not None:
                        sc.blocks.append(blk)

    def _add_assign(self, sc: _Scope, target: ast.AST, stmt: ast.AST, value: ast.AST | None) -> None:
        r = _ref(target)
        if r:
            sc.assigns.setdefault(r, []).append((stmt, value))

    def _add_stream(self, s: str) -> None:
        if s not in self.streams:
            self.streams.append(s)

    def _as_block(self, ctx: ast.AST, w: ast.With | ast.AsyncWith, sc: _Scope) -> _Block | None:
        if not isinstance(ctx, ast.Call) or self._call_name(ctx) not in _STREAM_CTX:
            return None
        arg = ctx.args[0] if ctx.args else _kw(ctx, "stream")
        if arg is None or (isinstance(arg, ast.Constant) and arg.value is None):
            return None
        if self._is_current_stream_expr(arg, sc):
            return None
        s = _src(arg)
        self._add_stream(s)
        return _Block(w, s, w.lineno, w.end_lineno or w.lineno)

    # ---------------------------------------------------------------- reads of a ref
    def _reads(self, sc: _Scope, ref: str) -> Iterator[tuple[ast.AST, str]]:
        """(node, kind) for every load of ``ref`` in the scope.

        kind: 'meta' (shape/dtype/..., record_stream), 'callee' (ref(...) call), 'stream' (stream or
        event method), 'h2d' (receiver of .cuda()/.to(device)), 'use' (anything else).
        """
        for n in sc.nodes:
            if not isinstance(n, (ast.Name, ast.Attribute)) or not isinstance(n.ctx, ast.Load):
                continue
            if _ref(n) != ref:
                continue
            parent = getattr(n, "_ss_parent", None)
            if isinstance(parent, ast.Attribute) and parent.value is n:
                attr = parent.attr
                gp = getattr(parent, "_ss_parent", None)
                is_called = isinstance(gp, ast.Call) and gp.func is parent
                if attr in _METADATA:
                    yield n, "meta"
                elif is_called and attr in _STREAM_METHODS:
                    yield n, "stream"
                elif is_called and attr in {"cuda", "to"} and self._to_device(gp, attr):
                    yield n, "h2d"
                elif is_called and attr in _NON_TENSOR_METHODS:
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
            return p.arg in _META_KWARGS
        if isinstance(p, ast.Call) and n in p.args:
            name = self._call_name(p) or ""
            return name in _NON_TENSOR_FUNCS or (
                name.startswith("torch.") and name.rsplit(".", 1)[-1] in _FACTORIES
            )
        return False

    def _to_device(self, call: ast.Call, attr: str) -> bool:
        """True for `.cuda(...)` or `.to(<device>, ...)`; False for `.to(torch.float16)`."""
        if attr == "cuda":
            return True
        if _kw(call, "device") is not None:
            return True
        for a in call.args[:1]:
            if isinstance(a, ast.Constant) and isinstance(a.value, (str, int)) and not isinstance(a.value, bool):
                return True
            s = _src(a).lower()
            if "device" in s or "cuda" in s or s in {"dev", "gpu", "rank", "local_rank"}:
                return True
        return False

    def _to_cpu(self, call: ast.Call) -> bool:
        f = call.func
        if not (isinstance(f, ast.Attribute) and f.attr == "to"):
            return False
        dev = call.args[0] if call.args else _kw(call, "device")
        if dev is None:
            return False
        if isinstance(dev, ast.Constant) and isinstance(dev.value, str):
            return dev.value.startswith("cpu")
        if isinstance(dev, ast.Call) and self._call_name(dev) == "torch.device" and dev.args:
            a = dev.args[0]
            return isinstance(a, ast.Constant) and str(a.value).startswith("cpu")
        return False

    # ---------------------------------------------------------------- checks
    def run(self) -> None:
        for sc in self.scopes():
            self.n_blocks += len(sc.blocks)
            for blk in sc.blocks:
                self._check_side_use(sc, blk)
                self._check_missing_wait(sc, blk)
            self._check_non_blocking(sc)
            self._check_record_current(sc)
            self._check_async_collectives(sc)

    def _in_any_block(self, sc: _Scope, n: ast.AST, stream: str | None = None) -> _Block | None:
        for b in sc.blocks:
            if (stream is None or b.stream == stream) and _inside(n, b.node):
                return b
        return None

    def _has_record_stream(self, sc: _Scope, ref: str) -> bool:
        return any(
            isinstance(c.func, ast.Attribute) and c.func.attr == "record_stream" and _ref(c.func.value) == ref
            for c in sc.calls
        )

    # 1+2: tensors from outside used on the side stream
    def _check_side_use(self, sc: _Scope, blk: _Block) -> None:
        candidates: dict[str, int] = {}  # ref -> line of its last producer before the block (0 = param)
        for p in sc.params:
            candidates[p] = 0
        for ref, items in sc.assigns.items():
            before = [(s, v) for s, v in items if _pos(s) < _pos(blk.node) and not _inside(s, blk.node) and s is not blk.node]
            if not before:
                continue
            if ref.startswith(("self.", "cls.")):
                continue
            last_stmt, last_val = max(before, key=lambda sv: _pos(sv[0]))
            if self._non_tensor_value(last_val):
                candidates.pop(ref, None)
                continue
            candidates[ref] = last_stmt.lineno
        stream_refs = {blk.stream}
        flagged: list[tuple[str, int]] = []
        for ref, produced_line in candidates.items():
            if ref in stream_refs or ref in self.streams:
                continue
            in_block_assign = [s for s, _ in sc.assigns.get(ref, []) if _inside(s, blk.node)]
            uses = []
            for n, kind in self._reads(sc, ref):
                if kind != "use" or not _inside(n, blk.node):
                    continue
                st = _stmt_of(n)
                if any(_pos(a) < _pos(st) for a in in_block_assign):
                    continue  # rebound inside the block before this read
                uses.append(n)
            if not uses:
                continue
            first = min(uses, key=_pos)
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

    def _prologue_wait(self, sc: _Scope, blk: _Block, produced_line: int, first_use: ast.AST) -> bool:
        for c in sc.calls:
            if not (produced_line < c.lineno and _pos(c) < _pos(first_use)):
                continue
            if self._is_device_sync(c):
                return True
            f = c.func
            if not isinstance(f, ast.Attribute):
                continue
            recv = _src(f.value)
            inside = _inside(c, blk.node)
            if f.attr in {"wait_stream", "wait_event"}:
                if recv == blk.stream or (inside and self._is_current_stream_expr(f.value, sc)):
                    return True
            if f.attr == "wait" and self._is_event_ref(f.value, sc):
                if (inside and not c.args) or (c.args and _src(c.args[0]) == blk.stream):
                    return True
            if f.attr == "synchronize" and (recv == blk.stream or self._is_event_ref(f.value, sc)):
                return True
        return False

    # 3: results of the side stream used after the block without a join
    def _check_missing_wait(self, sc: _Scope, blk: _Block) -> None:
        produced: set[str] = set()
        for ref, items in sc.assigns.items():
            if any(_inside(s, blk.node) for s, v in items if not self._non_tensor_value(v)):
                produced.add(ref)
        for n in _walk_scope(blk.node.body):  # in-place writes inside the block
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                if n.func.attr.endswith("_") and not n.func.attr.startswith("_"):
                    r = _ref(n.func.value)
                    if r:
                        produced.add(r)
                out = _kw(n, "out")
                if out is not None and _ref(out):
                    produced.add(_ref(out))  # type: ignore[arg-type]
            if isinstance(n, (ast.Assign, ast.AugAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    for tt in _targets(t):
                        if isinstance(tt, ast.Subscript) and _ref(tt.value):
                            produced.add(_ref(tt.value))  # type: ignore[arg-type]
        hits: list[tuple[str, ast.AST]] = []
        for ref in produced:
            after = [
                n for n, kind in self._reads(sc, ref)
                if kind in {"use", "h2d"} and _pos(n)[0] > blk.end and self._in_any_block(sc, n, blk.stream) is None
            ]
            # a rebinding after the block (outside the side stream) ends the side-stream value
            rebinds = [s for s, _ in sc.assigns.get(ref, []) if s.lineno > blk.end and not self._in_any_block(sc, s, blk.stream)]
            if rebinds:
                first_rebind = min(rebinds, key=_pos)
                after = [n for n in after if _pos(_stmt_of(n)) <= _pos(first_rebind)]
            unjoined = [n for n in sorted(after, key=_pos) if not self._joined(sc, blk, n)]
            if unjoined:
                hits.append((ref, unjoined[0]))
        if not hits:
            return
        hits.sort(key=lambda h: _pos(h[1]))
        first = hits[0][1]
        names = ", ".join(f"`{r}` (line {n.lineno})" for r, n in hits)
        self.findings.append(StreamFinding(
            check="missing_wait_stream", severity="high",
            line=first.lineno, end_line=getattr(_stmt_of(first), "end_lineno", first.lineno),
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

    def _joined(self, sc: _Scope, blk: _Block, read: ast.AST) -> bool:
        for c in sc.calls:
            if not (c.lineno > blk.end and _pos(c) < _pos(read)):
                continue
            if self._in_any_block(sc, c) is not None:
                continue
            if self._is_device_sync(c):
                return True
            f = c.func
            if not isinstance(f, ast.Attribute):
                continue
            recv = _src(f.value)
            if f.attr == "wait_stream" and c.args and _src(c.args[0]) == blk.stream:
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

    # 4: non_blocking copies
    def _non_blocking_copies(self, sc: _Scope) -> list[tuple[ast.Call, str, ast.AST]]:
        """(call, kind, source expr) with kind in 'to', 'cuda', 'copy_'."""
        out = []
        for c in sc.calls:
            if not _is_true(_kw(c, "non_blocking")) or not isinstance(c.func, ast.Attribute):
                continue
            attr = c.func.attr
            if attr in {"to", "cuda"}:
                out.append((c, attr, c.func.value))
            elif attr == "copy_" and c.args:
                out.append((c, "copy_", c.args[0]))
        return out

    def _origin(self, sc: _Scope, ref: str, before: ast.AST) -> str:
        """'pinned' | 'gpu' | 'pageable' | 'unknown' for the buffer bound to ``ref`` before a node."""
        items = [(s, v) for s, v in sc.assigns.get(ref, []) if _pos(s) < _pos(before)]
        if not items:
            return "pinned" if "pin" in ref.lower() else "unknown"
        _, v = max(items, key=lambda sv: _pos(sv[0]))
        if v is None:
            return "unknown"
        for n in ast.walk(v):
            if isinstance(n, ast.Call):
                if isinstance(n.func, ast.Attribute) and n.func.attr == "pin_memory":
                    return "pinned"
                if _is_true(_kw(n, "pin_memory")):
                    return "pinned"
        for n in ast.walk(v):
            if isinstance(n, ast.Call):
                if isinstance(n.func, ast.Attribute) and n.func.attr == "cuda":
                    return "gpu"
                if isinstance(n.func, ast.Attribute) and n.func.attr == "to" and self._to_device(n, "to") and not self._to_cpu(n):
                    return "gpu"
                dev = _kw(n, "device")
                if dev is not None and "cuda" in _src(dev).lower():
                    return "gpu"
        if isinstance(v, ast.Call):
            name = self._call_name(v) or ""
            if name.startswith("torch.") and name.split(".")[-1] in _FACTORIES | {"tensor", "empty_like", "zeros_like"}:
                return "pageable"
        return "pinned" if "pin" in ref.lower() else "unknown"

    def _mutations(self, sc: _Scope, ref: str) -> list[ast.AST]:
        out: list[ast.AST] = []
        for n in sc.nodes:
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                a = n.func.attr
                if a.endswith("_") and not a.startswith("_") and _ref(n.func.value) == ref:
                    out.append(n)
                out_kw = _kw(n, "out")
                if out_kw is not None and _ref(out_kw) == ref:
                    out.append(n)
                if self._call_name(n) in {"numpy.copyto", "np.copyto"} and n.args and _ref(n.args[0]) == ref:
                    out.append(n)
            elif isinstance(n, (ast.Assign, ast.AugAssign)):
                tgts = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in tgts:
                    for tt in _targets(t):
                        if isinstance(tt, ast.Subscript):
                            base = tt.value
                            if isinstance(base, ast.Call) and isinstance(base.func, ast.Attribute) and base.func.attr == "numpy":
                                base = base.func.value
                            if _ref(base) == ref:
                                out.append(n)
                        elif isinstance(n, ast.AugAssign) and _ref(tt) == ref:
                            out.append(n)
        return out

    def _enclosing_loop(self, n: ast.AST, sc: _Scope) -> ast.AST | None:
        p = getattr(n, "_ss_parent", None)
        while p is not None and p is not sc.node:
            if isinstance(p, (ast.For, ast.AsyncFor, ast.While)):
                return p
            p = getattr(p, "_ss_parent", None)
        return None

    def _check_non_blocking(self, sc: _Scope) -> None:
        copies = self._non_blocking_copies(sc)
        if not copies:
            return
        medium = False
        for call, kind, src in copies:
            if kind == "to" and self._to_cpu(call):
                medium |= self._check_d2h(sc, call, None)
                continue
            ref = _ref(src)
            if ref is None:
                continue
            if kind == "copy_" and self._origin(sc, ref, call) == "gpu":
                continue
            if kind == "copy_":
                dst = _ref(call.func.value)  # type: ignore[union-attr]
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
                if _pos(mut) > _pos(call)
                else f"In the next turn of the loop, line {mut.lineno} modifies `{ref}` in place"
            )
            self.findings.append(StreamFinding(
                check="non_blocking_copy_source_reused", severity="medium",
                line=min(call.lineno, mut.lineno), end_line=max(call.lineno, getattr(mut, "end_lineno", None) or mut.lineno),
                message=(
                    f"`{_src(call)}` at line {call.lineno} copies asynchronously from `{ref}`{qual}. "
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
            first = min((c for c, _, _ in copies), key=_pos)
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

    def _first_unsynced_mutation(self, sc: _Scope, ref: str, call: ast.Call, on_side: bool) -> ast.AST | None:
        syncs = [c for c in sc.calls if self._host_sync(c) and (not on_side or not (
            isinstance(c.func, ast.Attribute) and c.func.attr in {"item", "tolist"}))]
        rebinds = [s for s, _ in sc.assigns.get(ref, [])]
        cpos = _pos(_stmt_of(call))
        muts = self._mutations(sc, ref)
        # straight-line: later mutation, no sync or rebinding between
        for m in sorted(muts, key=_pos):
            mp = _pos(m)
            if mp <= cpos or _inside(m, _stmt_of(call)):
                continue
            between = lambda n: cpos < _pos(n) < mp  # noqa: E731
            if any(between(s) for s in syncs) or any(between(r) and not isinstance(r, ast.AugAssign) for r in rebinds):
                break
            return m
        # loop-carried: mutation earlier in the same loop body reaches the next iteration's copy
        loop = self._enclosing_loop(call, sc)
        if loop is not None:
            in_loop = lambda n: _inside(n, loop)  # noqa: E731
            for m in sorted(muts, key=_pos):
                if not in_loop(m) or _pos(m) >= cpos:
                    continue
                if any(in_loop(s) for s in syncs):
                    return None
                if any((in_loop(r) and not isinstance(r, ast.AugAssign)) or r is loop for r in rebinds):
                    return None  # a fresh buffer each iteration
                return m
        return None

    def _check_d2h(self, sc: _Scope, call: ast.Call, ref: str | None) -> bool:
        st = _stmt_of(call)
        if ref is None:
            if not isinstance(st, ast.Assign) or st.value is not call:
                return False
            tgts = [_ref(t) for t in st.targets if _ref(t)]
            if not tgts:
                return False
            ref = tgts[0]
        syncs = [c for c in sc.calls if self._is_device_sync(c) or (
            isinstance(c.func, ast.Attribute) and c.func.attr == "synchronize")]
        for n in sorted(sc.nodes, key=_pos):
            if _pos(n) <= _pos(st) or not isinstance(n, ast.Call):
                continue
            hit = False
            if isinstance(n.func, ast.Attribute) and n.func.attr in _HOST_READS and _ref(n.func.value) == ref:
                hit = True
            elif isinstance(n.func, ast.Name) and n.func.id in _HOST_READ_FUNCS and any(_ref(a) == ref for a in n.args):
                hit = True
            if not hit:
                continue
            if any(_pos(st) < _pos(s) < _pos(n) for s in syncs):
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

    # 5: record_stream with the current stream (pointless for locally made tensors)
    def _check_record_current(self, sc: _Scope) -> None:
        for c in sc.calls:
            f = c.func
            if not (isinstance(f, ast.Attribute) and f.attr == "record_stream" and c.args):
                continue
            if not self._is_current_stream_expr(c.args[0], sc):
                continue
            if self._in_any_block(sc, c) is not None:
                continue  # inside a side block, current_stream() *is* the side stream
            ref = _ref(f.value)
            if ref is None or ref in sc.params or ref.startswith(("self.", "cls.")):
                continue
            items = [(s, v) for s, v in sc.assigns.get(ref, []) if _pos(s) < _pos(c)]
            if not items or any(self._in_any_block(sc, s) is not None for s, _ in sc.assigns.get(ref, [])):
                continue
            _, v = max(items, key=lambda sv: _pos(sv[0]))
            if not self._local_alloc(v):
                continue
            self.findings.append(StreamFinding(
                check="record_stream_on_current_stream", severity="low",
                line=c.lineno, end_line=c.end_lineno,
                message=(
                    f"`{_src(c)}` records the stream `{ref}` was allocated on, so it does nothing. "
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

    # 6: async collectives never waited
    def _check_async_collectives(self, sc: _Scope) -> None:
        for c in sc.calls:
            name = self._call_name(c) or ""
            short = name.rsplit(".", 1)[-1]
            is_dist = name.startswith("torch.distributed.")
            if not is_dist or short not in _COLLECTIVES | _P2P:
                continue
            if short in _COLLECTIVES and not _is_true(_kw(c, "async_op")):
                continue
            tensor = c.args[0] if c.args else next(
                (k.value for k in c.keywords if k.arg in {"tensor", "output", "output_tensor", "tensor_list", "output_tensor_list"}),
                None,
            )
            tref = _ref(tensor) if tensor is not None else None
            st = _stmt_of(c)
            parent = getattr(c, "_ss_parent", None)
            handle: str | None = None
            discarded_name = False
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and _ref(st.targets[0]) == "_" and st.value is c:
                discarded_name = True  # `_ = dist.all_reduce(..., async_op=True)`
            elif isinstance(st, ast.Assign) and len(st.targets) == 1 and (
                st.value is c or isinstance(st.value, (ast.ListComp, ast.List, ast.GeneratorExp))
            ):
                handle = _ref(st.targets[0])  # work = ... / works = [... for t in ts]
                if st.value is not c:
                    tref = None  # the tensor is a comprehension variable
                if handle is None:
                    continue
            elif isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) and parent.func.attr == "append":
                handle = _ref(parent.func.value)  # works.append(dist.all_reduce(..., async_op=True))
            elif not (isinstance(st, ast.Expr) and st.value is c) and not discarded_name:
                continue  # returned / passed on / stored elsewhere: the caller owns the handle
            handles = [handle] if handle else []
            for n in sc.calls:  # works.append(work) moves the handle into a container
                if handle and isinstance(n.func, ast.Attribute) and n.func.attr == "append" and any(_ref(a) == handle for a in n.args):
                    r = _ref(n.func.value)
                    if r:
                        handles.append(r)
            if any(self._handle_escapes(sc, h, c) for h in handles):
                continue
            waits = [w for w in sc.calls if _pos(w) > _pos(c) and any(self._is_wait_on(w, h) for h in handles)]
            first_wait = min(waits, key=_pos) if waits else None
            read = None
            if tref:
                for n, kind in sorted(self._reads(sc, tref), key=lambda nk: _pos(nk[0])):
                    if kind in {"use", "h2d"} and _pos(_stmt_of(n)) > _pos(st):
                        read = n
                        break
            if first_wait is not None and (read is None or _pos(first_wait) < _pos(read)):
                continue
            severity: Severity = "high" if read is not None else "medium"  # a read seen here, or not
            if handle is None:
                what = "its work handle is discarded, so nothing can wait on it"
            elif first_wait is None:
                what = f"its handle `{handle}` is never waited on in this function"
            else:
                what = f"`{handle}` is only waited on at line {first_wait.lineno}"
            read_txt = (
                f"; `{tref}` is read at line {read.lineno}" if read is not None
                else "; the tensor is not read again in this function"
            )
            self.findings.append(StreamFinding(
                check="async_collective_not_waited", severity=severity,
                line=c.lineno, end_line=read.lineno if read is not None else c.end_lineno,
                message=(
                    f"`{short}(..., async_op=True)` at line {c.lineno}: {what}{read_txt}. Until "
                    "`work.wait()` the current stream does not wait for the communication stream, so "
                    "reads can see a partial result. The tensor's lifetime is also only managed up to "
                    "the wait."
                ),
                fix=(
                    f"Keep the handle (`work = dist.{short}(..., async_op=True)`) and call `work.wait()` "
                    f"before `{tref or 'the tensor'}` is read, freed or reused. Or drop async_op=True."
                ),
                source=SRC_PT_188655,
            ))

    def _is_wait_on(self, w: ast.Call, handle: str) -> bool:
        f = w.func
        if isinstance(f, ast.Attribute) and f.attr == "wait":
            recv = _src(f.value)
            if recv == handle or recv.startswith(handle + ".") or recv.startswith(handle + "["):
                return True
            if isinstance(f.value, ast.Name):  # `for w in works: w.wait()` / `[w.wait() for w in works]`
                p = getattr(f.value, "_ss_parent", None)
                while p is not None:
                    gens = p.generators if isinstance(p, (ast.ListComp, ast.GeneratorExp, ast.SetComp)) else [p] if isinstance(p, (ast.For, ast.AsyncFor)) else []
                    if any(_ref(g.target) == f.value.id and _src(g.iter) == handle for g in gens):
                        return True
                    p = getattr(p, "_ss_parent", None)
        name = self.al.resolve(f) or ""
        if name.endswith("wait_all") or name.endswith("futures.wait"):
            return any(_src(a) == handle for a in w.args)
        return False

    def _handle_escapes(self, sc: _Scope, handle: str, call: ast.Call) -> bool:
        """The handle leaves the function (returned, stored on an object, passed to a call)."""
        if "." in handle or handle in sc.params:
            return True  # `self.works`, `state.handles`, or a list the caller passed in
        for n in sc.nodes:
            if _pos(n) <= _pos(call):
                continue
            if isinstance(n, (ast.Return, ast.Yield)) and n.value is not None:
                if any(_ref(x) == handle for x in ast.walk(n.value)):
                    return True
            if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Attribute) and n.func.attr in {"wait", "append"}):
                if any(_ref(a) == handle for a in n.args):
                    name = self.al.resolve(n.func) or ""
                    if not (name.endswith("wait_all") or name.endswith("futures.wait")):
                        return True
            if isinstance(n, ast.Assign) and _ref(n.value) == handle:
                if any(_ref(t) and _ref(t).startswith(("self.", "cls.")) for t in n.targets):  # type: ignore[union-attr]
                    return True
        return False


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------
def _summary(findings: list[StreamFinding], where: str, risk_where: str = "") -> str:
    """'2 risks: 1 high, 1 medium[ in ...][ (1 note)]' or 'no stream-safety risk found in ...'."""
    risks = [f for f in findings if f.severity != "info"]
    notes = len(findings) - len(risks)
    note_txt = f" ({notes} note{'s' if notes != 1 else ''})" if notes else ""
    if not risks:
        return f"no stream-safety risk found in {where}{note_txt}"
    counts = [f"{sum(f.severity == s for f in risks)} {s}" for s in ("high", "medium", "low")]
    counts = [c for c in counts if not c.startswith("0 ")]
    return f"{len(risks)} risk{'s' if len(risks) != 1 else ''}: {', '.join(counts)}{risk_where}{note_txt}"


def _sorted(findings: list[StreamFinding]) -> list[StreamFinding]:
    return sorted(findings, key=lambda f: (_SEV_ORDER[f.severity], f.line or 0, f.check))


def analyze_code(source: str, filename: str = "<snippet>") -> StreamReport:
    """Statically check PyTorch source for CUDA stream-safety risks (heuristic; see module docstring).

    Recognises side-stream blocks (``with torch.cuda.stream(s):``, ``torch.cuda.StreamContext(s)``,
    ``stream(s)`` imported from ``torch.cuda``, aliases such as ``import torch as th``) and streams
    made with ``torch.cuda.Stream(...)``. Blocks on ``None`` or on the current/default stream are
    ignored. Findings are described on :class:`StreamFinding`. A syntax error gives a report with
    ``error`` set (naming the line). It never raises.
    """
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as e:
        err = f"{filename}: syntax error at line {e.lineno}: {e.msg}"
        return StreamReport(error=err, summary=f"could not analyse {filename}: syntax error at line {e.lineno}")
    except (ValueError, RecursionError) as e:  # e.g. null bytes, absurd nesting
        return StreamReport(error=f"{filename}: {e}", summary=f"could not analyse {filename}: {e}")
    an = _Analyzer(tree)
    an.run()
    findings = _sorted(an.findings)
    blocks_txt = f"{an.n_blocks} side-stream block{'s' if an.n_blocks != 1 else ''}"
    where = blocks_txt if an.n_blocks else "code with no side-stream block"
    summary = _summary(findings, where, f" ({blocks_txt})" if an.n_blocks else "")
    return StreamReport(findings=findings, streams=an.streams, blocks=an.n_blocks, summary=summary)


# ---------------------------------------------------------------------------- config facts
_TRUE = {"true", "1", "yes", "on", "y", "t", "enabled", "enable"}
_FALSE = {"false", "0", "no", "off", "n", "f", "disabled", "disable", "none", "null", ""}


def _lookup(facts: dict[str, object], *keys: str) -> tuple[str, object] | None:
    """First fact whose key equals one of ``keys`` or ends with ``.<key>`` (case-insensitive).

    Keys are tried in order, so put the most specific first.
    """
    low = {str(k).lower(): (str(k), v) for k, v in facts.items()}
    for key in keys:
        key = key.lower()
        if key in low:
            return low[key]
        for lk, kv in low.items():
            if lk.endswith("." + key):
                return kv
    return None


def _truthy(v: object) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return v != 0
    if isinstance(v, dict):
        return _truthy(v.get("enabled")) if "enabled" in v else bool(v)
    s = str(v).strip().strip("'\"").lower()
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    return None


def _as_int(v: object) -> int | None:
    try:
        return int(str(v).strip().strip("'\""))
    except (TypeError, ValueError):
        return None


def analyze_config(facts: dict[str, object]) -> StreamReport:
    """Check flattened config facts (key -> value) for stream-safety signals (heuristic).

    Keys match case-insensitively, either exactly or by suffix (``overlap_comm`` matches
    ``zero_optimization.overlap_comm``). Checks:

    - ``deepspeed_overlap_comm_compile`` (high): ZeRO stage 1/2 with ``overlap_comm`` true and
      torch.compile on (``compile.enabled``, ``compile``, ``torch_compile``, ``use_torch_compile``,
      ``torch_compile_backend``). In DeepSpeed #8061 the reduction waits only on the current stream,
      while the IPG bucket copies come from several streams. The loss is NaN from step 1. Fixed by
      PR #8080, in which the reduction stream waits on every stream that wrote the bucket.
    - ``deepspeed_overlap_comm`` (info): the same ZeRO-1/2 + ``overlap_comm`` when torch.compile is
      not stated. It names the fact that would decide the case.
    - ``torch_nccl_avoid_record_streams`` (info): ``TORCH_NCCL_AVOID_RECORD_STREAMS`` is set. It says
      what that changes (pytorch/torchtitan #735).
    - ``cuda_device_max_connections_1`` (info, or low with an FSDP strategy):
      ``CUDA_DEVICE_MAX_CONNECTIONS=1`` puts the work of all streams on one hardware queue. Megatron
      needs that, but with FSDP2 it serialises prefetch and overlap (verl PR #6976).
    """
    findings: list[StreamFinding] = []
    facts = dict(facts or {})
    overlap = _lookup(facts, "zero_optimization.overlap_comm", "overlap_comm")
    stage = _lookup(facts, "zero_optimization.stage", "zero_stage", "zero_optimization_stage")
    compile_ = _lookup(
        facts, "compile.enabled", "torch_compile", "use_torch_compile", "compile", "torch_compile_backend",
    )
    overlap_on = overlap is not None and _truthy(overlap[1]) is True
    stage_v = _as_int(stage[1]) if stage else None
    if overlap_on and stage_v in (1, 2):
        comp_on: bool | None = None
        if compile_ is not None:
            k, v = compile_
            if k.lower().endswith("torch_compile_backend"):  # HF: a backend implies torch_compile=True
                comp_on = _truthy(v) is not False
            else:
                comp_on = _truthy(v)
        extras = []
        for key in ("contiguous_gradients", "reduce_scatter", "bf16.enabled"):
            hit = _lookup(facts, key)
            if hit is not None and _truthy(hit[1]) is True:
                extras.append(hit[0])
        extra_txt = f" Also on, from the issue's trigger set: {', '.join(extras)}." if extras else ""
        if comp_on:
            findings.append(StreamFinding(
                check="deepspeed_overlap_comm_compile", severity="high",
                message=(
                    f"ZeRO stage {stage_v} with `{overlap[0]}`=true and torch.compile on (`{compile_[0]}`). "  # type: ignore[index]
                    "In DeepSpeed #8061 the gradient reduction waits only on the current stream, while "
                    "the bucket copies are issued on several streams. The reduction can then read "
                    f"half-written buckets, and the loss goes NaN from step 1.{extra_txt}"
                ),
                fix=(
                    "Upgrade DeepSpeed to a release that contains PR #8080 "
                    "(https://github.com/deepspeedai/DeepSpeed/pull/8080), where the reduction stream waits "
                    "on every stream that wrote the bucket. Until then, set "
                    "`zero_optimization.overlap_comm: false` or turn torch.compile off. PR #7965 "
                    "(record_stream for overlap-comm buffer lifetimes) fixed a related ZeRO-2 NaN."
                ),
                source=SRC_DS_8061,
            ))
        elif comp_on is None:
            findings.append(StreamFinding(
                check="deepspeed_overlap_comm", severity="info",
                message=(
                    f"ZeRO stage {stage_v} with `{overlap[0]}`=true. DeepSpeed #8061 (NaN from step 1) "
                    "also needs torch.compile, and no torch.compile setting was found in these facts."
                    f"{extra_txt}"
                ),
                fix=(
                    "If torch.compile is on, upgrade DeepSpeed to a release with PR #8080, or set "
                    "overlap_comm false. Check that the release also has PR #7965 (record_stream for "
                    "overlap-comm buffers)."
                ),
                source=SRC_DS_8061,
            ))
    avoid = _lookup(facts, "TORCH_NCCL_AVOID_RECORD_STREAMS", "env.TORCH_NCCL_AVOID_RECORD_STREAMS")
    if avoid is not None:
        on = _truthy(avoid[1])
        state = "on" if on else ("off" if on is False else f"set to {avoid[1]!r}")
        findings.append(StreamFinding(
            check="torch_nccl_avoid_record_streams", severity="info",
            message=(
                f"`{avoid[0]}` is {state}. By default, ProcessGroupNCCL called record_stream on "
                "collective tensors, which can hold memory longer than needed (FSDP2/TP peak memory "
                "in torchtitan #735). With the variable on, c10d instead keeps a reference to the "
                "tensors until `work.wait()`, so code must wait on async_op=True work handles. "
                "Newer PyTorch releases stash references this way by default and may ignore the "
                "variable, so check your torch version before relying on it either way."
            ),
            fix=(
                "No change is needed for safety if every async_op=True collective is waited on. Set it to 1 on "
                "older PyTorch when TP/FSDP2 memory grows from record_stream."
            ),
            source=SRC_TORCHTITAN_735,
        ))
    conn = _lookup(facts, "CUDA_DEVICE_MAX_CONNECTIONS")
    if conn is not None and _as_int(conn[1]) == 1:
        strat = _lookup(facts, "actor.strategy", "strategy")
        fsdp = strat is not None and "fsdp" in str(strat[1]).lower()
        findings.append(StreamFinding(
            check="cuda_device_max_connections_1", severity="low" if fsdp else "info",
            message=(
                f"`{conn[0]}`=1 puts the work of all streams on one hardware queue. Megatron relies on this "
                "to order communication before compute. With FSDP2-style backends it serialises "
                "multi-stream prefetch and overlap, which verl PR #6976 limits to Megatron."
                + (f" The strategy here is `{strat[1]}`." if fsdp else "")  # type: ignore[index]
            ),
            fix="Set CUDA_DEVICE_MAX_CONNECTIONS=1 only for Megatron-based training. Unset it for FSDP/FSDP2 workers.",
            source=SRC_VERL_6976,
        ))
    findings = _sorted(findings)
    return StreamReport(findings=findings, summary=_summary(findings, f"{len(facts)} config fact{'s' if len(facts) != 1 else ''}"))


__all__ = ["StreamFinding", "StreamReport", "analyze_code", "analyze_config"]
