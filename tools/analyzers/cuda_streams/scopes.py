"""The vocabulary (torch names for streams, events, collectives, host reads) and the AST helpers:
references, aliases, function scopes and side-stream blocks."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterable, Iterator


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
