"""Reading a YAML or JSON document from an untrusted input: the one safe loader.

A config pasted into a tool, or a file next to a log, is data from someone else. This module composes YAML
(never constructs Python objects from tags), then checks the node graph before anything walks it:

- an alias bomb (billion laughs: a few hundred bytes whose aliases expand to millions of nodes) is refused
  once the expanded walk passes :data:`MAX_NODES`;
- a recursive alias (``a: &a {b: *a}``) is refused, naming the line;
- nesting deeper than :data:`MAX_DEPTH` is refused;
- a tag outside plain YAML (``!!python/object/apply:os.system``, ``!custom``) is refused, naming the tag;
- an integer longer than :data:`MAX_INT_DIGITS` digits is refused (Python refuses to convert it anyway).

JSON gets the same limits. Interpolations (``${a.b}``, ``${oc.select:a.b,default}``, ``${oc.decode:...}``)
are resolved only against keys of the same document, with a size and depth budget; ``${oc.env:VAR}`` and
every other resolver are never evaluated (they stay as written), so a document can never read the
environment or a file. Each refusal is a :class:`DocumentError` whose message says what and where.
"""
from __future__ import annotations

import json
import re
from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # node marks (line numbers) work with both

MAX_NODES = 100_000      # nodes visited with every alias expanded
MAX_DEPTH = 64           # nesting of mappings/sequences
MAX_INT_DIGITS = 4000    # Python's int() refuses more than 4300 digits by default
MAX_INTERP_CHARS = 4096  # an interpolated value longer than this stays unresolved
MAX_INTERP_STEPS = 20_000

_CORE = "tag:yaml.org,2002:"
SAFE_TAGS = frozenset(_CORE + t for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp",
                                          "binary", "merge", "set", "omap", "pairs", "value"))


class DocumentError(ValueError):
    """A YAML/JSON document refused by the safe loader (alias bomb, recursion, unknown tag, too deep, huge
    integer). The message says what and at which line; the caller adds the input's name."""


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _check_scalar(node: yaml.ScalarNode) -> None:
    if node.tag == _CORE + "int" and sum(c.isdigit() for c in node.value) > MAX_INT_DIGITS:
        raise DocumentError(f"an integer of {sum(c.isdigit() for c in node.value)} digits at line {_line(node)}; "
                            f"numbers longer than {MAX_INT_DIGITS} digits are not read (write it as a string)")


def check_graph(root: yaml.Node) -> None:
    """Walk the composed node graph once, aliases expanded, under the budgets; raise DocumentError."""
    visits = 0
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 0, False)]
    while stack:
        node, depth, leaving = stack.pop()
        if leaving:
            on_path.discard(id(node))
            continue
        visits += 1
        if visits > MAX_NODES:
            raise DocumentError(f"YAML aliases expand past {MAX_NODES} nodes (an alias bomb such as the 'billion "
                                f"laughs'); the alias at line {_line(node)} is one of them; write the values out "
                                "instead of nesting aliases")
        if node.tag not in SAFE_TAGS:
            raise DocumentError(f"unknown YAML tag {node.tag.replace(_CORE, '!!')[:120]!r} at line {_line(node)}; "
                                "only plain YAML is read (tags that build objects are refused): remove the tag")
        if isinstance(node, yaml.ScalarNode):
            _check_scalar(node)
            continue
        if depth >= MAX_DEPTH:
            raise DocumentError(f"nested deeper than {MAX_DEPTH} levels at line {_line(node)}; not a config")
        on_path.add(id(node))
        stack.append((node, depth, True))
        children = [x for kv in node.value for x in kv] if isinstance(node, yaml.MappingNode) else node.value
        for child in reversed(children):
            if id(child) in on_path:
                raise DocumentError(f"recursive YAML alias: the node at line {_line(child)} contains itself "
                                    f"(via the alias inside it, around line {_line(node)}); a config cannot be "
                                    "infinite: replace the alias by the values")
            stack.append((child, depth + 1, False))


def compose_yaml(text: str) -> yaml.Node | None:
    """The composed, checked node graph of one YAML document (None for an empty one). Raises yaml.YAMLError
    for a syntax error and DocumentError for a refused document."""
    try:
        node = yaml.compose(text, Loader=_LOADER)
    except RecursionError:
        raise DocumentError(f"nested deeper than {MAX_DEPTH} levels; not a config") from None
    if node is not None:
        check_graph(node)
    return node


# a plain scalar YAML 1.1 leaves a string but YAML 1.2 (and OmegaConf's loader, which Hydra configs go through:
# omegaconf/_utils.py get_yaml_loader adds this float resolver) reads as a float: 1e-6, -1E-2, 5e+3
_FLOAT_NO_DOT = re.compile(r"^[-+]?(?:\d[\d_]*)(?:\.\d*)?[eE][-+]?\d+$")


def scalar_value(node: yaml.ScalarNode) -> Any:
    """The value of a checked scalar node as safe YAML reads it (int, float, bool, None, str, ...); an unquoted
    exponent without a dot (``lr: 1e-6``) is the float OmegaConf and YAML 1.2 read, not the string of YAML 1.1."""
    if node.tag == _CORE + "str":
        if not node.style and _FLOAT_NO_DOT.match(node.value):  # plain: style None (Python) or "" (libyaml)
            return float(node.value.replace("_", ""))
        return node.value
    try:
        return yaml.constructor.SafeConstructor().construct_object(node)
    except (yaml.YAMLError, ValueError):
        return node.value


def load_yaml(text: str) -> Any:
    """Safe YAML into plain Python values, after the checks of :func:`compose_yaml`."""
    node = compose_yaml(text)
    if node is None:
        return None
    try:
        return yaml.constructor.SafeConstructor().construct_document(node)
    except RecursionError:
        raise DocumentError(f"nested deeper than {MAX_DEPTH} levels; not a config") from None


def _json_depth_ok(data: Any) -> bool:
    stack = [(data, 0)]
    while stack:
        x, d = stack.pop()
        if d > MAX_DEPTH:
            return False
        if isinstance(x, dict):
            stack.extend((v, d + 1) for v in x.values())
        elif isinstance(x, list):
            stack.extend((v, d + 1) for v in x)
    return True


def load_json(text: str) -> Any:
    """json.loads with the same limits: DocumentError for nesting past MAX_DEPTH or a huge integer;
    json.JSONDecodeError (a ValueError) for a syntax error."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise DocumentError(f"JSON nested deeper than {MAX_DEPTH} levels; not a config") from None
    except json.JSONDecodeError:
        raise
    except ValueError as e:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise DocumentError(f"a JSON integer longer than {MAX_INT_DIGITS} digits ({str(e)[:80]}); not read") from None
    if not _json_depth_ok(data):
        raise DocumentError(f"JSON nested deeper than {MAX_DEPTH} levels; not a config")
    return data


# ---- interpolation: ${...} resolved only inside the document ------------------------------------------------

_REF = re.compile(r"\.*[\w\-]+(?:\.[\w\-]+)*|\.+")
_UNRESOLVED = object()


def _split_top(s: str, sep: str = ",") -> list[str]:
    parts, depth, cur = [], 0, []
    for i, c in enumerate(s):
        if c == "{" and i and s[i - 1] == "$":
            depth += 1
        elif c == "}" and depth:
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return parts


class _Resolver:
    """Resolves ${...} in the values of one flattened document against its own keys, with budgets."""

    def __init__(self, flat: list[tuple[str, Any, int]]) -> None:
        self.values = {k: v for k, v, _ in flat}
        self.memo: dict[str, Any] = {}
        self.busy: set[str] = set()
        self.steps = 0

    def key(self, key: str) -> Any:
        if key in self.memo:
            return self.memo[key]
        if key not in self.values or key in self.busy or len(self.busy) > 16:
            return _UNRESOLVED  # unknown, a cycle, or too deep a chain
        self.busy.add(key)
        try:
            v = self.values[key]
            r = self.value(v, key) if isinstance(v, str) and "${" in v else v
        finally:
            self.busy.discard(key)
        self.memo[key] = r
        return r

    def _target(self, ref: str, here: str) -> str:
        dots = len(ref) - len(ref.lstrip("."))
        if not dots:
            return ref
        parent = here.split(".")[:-1]  # ${.x} is a sibling of `here`, ${..x} a sibling of its parent
        parent = parent[: max(0, len(parent) - (dots - 1))]
        return ".".join(parent + [ref[dots:]]) if ref[dots:] else ".".join(parent)

    def inner(self, body: str, here: str) -> Any:
        body = body.strip()
        if _REF.fullmatch(body):
            return self.key(self._target(body, here))
        name, _, arg = body.partition(":")
        if name == "oc.select":
            parts = _split_top(arg)
            got = self.key(self._target(parts[0].strip(), here))
            if got is not _UNRESOLVED or len(parts) < 2:
                return got
            return self.value(parts[1].strip(), here) if "${" in parts[1] else _scalar(parts[1].strip())
        if name == "oc.decode":
            got = self.value(arg.strip(), here)
            return _scalar(got) if isinstance(got, str) else got
        return _UNRESOLVED  # oc.env, oc.create, custom resolvers: never evaluated

    def value(self, s: str, here: str) -> Any:
        """s with every ${...} replaced; _UNRESOLVED when any part cannot be resolved within the budget."""
        out: list[Any] = []
        i = 0
        while i < len(s):
            self.steps += 1
            if self.steps > MAX_INTERP_STEPS:
                return _UNRESOLVED
            j = s.find("${", i)
            if j < 0:
                out.append(s[i:])
                break
            out.append(s[i:j])
            depth, k = 1, j + 2
            while k < len(s) and depth:
                if s.startswith("${", k):
                    depth, k = depth + 1, k + 2
                    continue
                if s[k] == "}":
                    depth -= 1
                k += 1
            if depth:
                return _UNRESOLVED
            got = self.inner(s[j + 2:k - 1], here)
            if got is _UNRESOLVED:
                return _UNRESOLVED
            out.append(got)
            i = k
        parts = [p for p in out if p != ""]
        if len(parts) == 1 and not isinstance(parts[0], str):
            return parts[0]  # a whole-value reference keeps its type (2048, not "2048")
        joined = "".join(str(p) for p in parts)
        return joined if len(joined) <= MAX_INTERP_CHARS else _UNRESOLVED


def _scalar(s: str) -> Any:
    try:
        return yaml.safe_load(s) if len(s) < 200 and "\n" not in s else s
    except yaml.YAMLError:
        return s


def resolve_interpolations(flat: list[tuple[str, Any, int]]) -> list[tuple[str, Any, int]]:
    """Replace ${...} in the flattened values by what they reference inside the same document (verl's Hydra
    configs: ``response_length: ${data.max_response_length}``); what cannot be resolved that way (the
    environment, files, custom resolvers, cycles, over budget) stays as written."""
    if not any(isinstance(v, str) and "${" in v for _, v, _ in flat):
        return flat
    r = _Resolver(flat)
    out = []
    for k, v, no in flat:
        if isinstance(v, str) and "${" in v:
            got = r.key(k)
            if got is not _UNRESOLVED:
                v = got
        out.append((k, v, no))
    return out
