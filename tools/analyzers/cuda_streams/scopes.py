"""The vocabulary (torch names for streams, events, collectives, host reads) and the AST helpers:
references, aliases, function scopes and side-stream blocks."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterable, Iterator


# --------------------------------------------------------------------------------------------------
# AST helpers
# --------------------------------------------------------------------------------------------------
DEFAULT_ALIASES = {"torch": "torch", "dist": "torch.distributed"}
STREAM_CTX = {"torch.cuda.stream", "torch.cuda.StreamContext", "torch.cuda.streams.StreamContext"}
STREAM_CTORS = {"torch.cuda.Stream", "torch.cuda.streams.Stream", "torch.Stream"}
EVENT_CTORS = {"torch.cuda.Event", "torch.cuda.streams.Event", "torch.Event"}
CURRENT_STREAM = {"torch.cuda.current_stream", "torch.cuda.default_stream"}
COLLECTIVES = {
    "all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_gather_into_tensor",
    "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "reduce", "gather", "scatter",
    "_all_gather_base", "_reduce_scatter_base",
}
P2P = {"isend", "irecv"}
METADATA = {
    "shape", "dtype", "device", "size", "dim", "ndim", "numel", "is_cuda", "requires_grad", "stride",
    "is_contiguous", "element_size", "nelement", "data_ptr", "get_device", "is_pinned", "layout",
    "record_stream", "names", "grad_fn", "is_leaf",
}
STREAM_METHODS = {"wait_stream", "wait_event", "synchronize", "record_event", "query", "record", "wait"}
HOST_READS = {"item", "tolist", "numpy"}
HOST_READ_FUNCS = {"print", "float", "int", "bool", "list"}
# methods whose result is a host value, not a tensor
HOST_VALUE_METHODS = {"item", "tolist", "numpy", "size", "dim", "numel", "stride", "data_ptr", "get_device"}
# common methods of non-tensor objects (loggers, containers, modules, optimizers): calling them on a
# name is not taken as a tensor use
NON_TENSOR_METHODS = {
    "info", "debug", "warning", "warn", "error", "exception", "log", "append", "extend", "get", "items",
    "keys", "values", "update", "format", "join", "split", "strip", "parameters", "named_parameters",
    "buffers", "modules", "state_dict", "eval", "train", "step", "zero_grad", "put", "put_nowait",
    "get_nowait", "pop", "insert", "setdefault", "generate",
}
FACTORIES = {
    "empty", "zeros", "ones", "full", "randn", "rand", "randint", "arange", "empty_strided", "eye", "linspace",
}
META_KWARGS = {"device", "dtype", "size", "shape", "layout", "src", "dst", "group", "rank", "non_blocking", "pin_memory"}
NON_TENSOR_FUNCS = {"range", "len", "int", "float", "str", "bool", "enumerate", "zip", "object"}


def ref_name(node: ast.AST) -> str | None:
    """`x` -> 'x', `self.a.b` -> 'self.a.b'; anything else -> None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = ref_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def source_of(node: ast.AST) -> str:
    """The node as source text (``<expr>`` if it cannot be unparsed)."""
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every parsed node
        return "<expr>"


def is_true_const(node: ast.AST | None) -> bool:
    """True for the literal ``True``."""
    return isinstance(node, ast.Constant) and node.value is True


def keyword_arg(call: ast.Call, name: str) -> ast.AST | None:
    """The value of keyword argument ``name`` of ``call``, or None."""
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def assign_targets(node: ast.AST) -> Iterator[ast.AST]:
    """Flatten assignment targets (tuples, lists, starred)."""
    if isinstance(node, (ast.Tuple, ast.List)):
        for elt in node.elts:
            yield from assign_targets(elt)
    elif isinstance(node, ast.Starred):
        yield from assign_targets(node.value)
    else:
        yield node


def walk_scope(nodes: Iterable[ast.AST]) -> Iterator[ast.AST]:
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


class Aliases:
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
        base = self.map.get(node.id) or DEFAULT_ALIASES.get(node.id) or node.id
        return ".".join([base, *reversed(parts)])


# --------------------------------------------------------------------------------------------------
# Per-function scope model
# --------------------------------------------------------------------------------------------------
@dataclass
class Block:
    """One side-stream block: ``with torch.cuda.stream(stream):`` and its line span."""

    node: ast.With | ast.AsyncWith
    stream: str
    start: int
    end: int


def is_inside(n: ast.AST, container: ast.AST) -> bool:
    """True when ``n`` is nested anywhere inside ``container`` (parents set by the analyzer)."""
    p = getattr(n, "_ss_parent", None)
    while p is not None:
        if p is container:
            return True
        p = getattr(p, "_ss_parent", None)
    return False


@dataclass
class Scope:
    """One function (or the module body): its parameters, calls, side-stream blocks and assignments."""

    node: ast.AST
    body: list[ast.stmt]
    params: list[str]
    nodes: list[ast.AST] = field(default_factory=list)
    calls: list[ast.Call] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    # ref -> list of (assign statement/node, value or None)
    assigns: dict[str, list[tuple[ast.AST, ast.AST | None]]] = field(default_factory=dict)

    @property
    def start(self) -> int:
        return getattr(self.node, "lineno", 1)


def statement_of(n: ast.AST) -> ast.AST:
    """The statement that holds ``n``."""
    while n is not None and not isinstance(n, ast.stmt):
        n = getattr(n, "_ss_parent", None)
    return n


def position(n: ast.AST) -> tuple[int, int]:
    """(line, column) of ``n``: the order of events inside a scope."""
    return (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))
