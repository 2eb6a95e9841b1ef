"""The package's shape: the import graph has no cycles, engines never import a face, and no file or
function grows past what a reader can hold (600 lines a file, 80 a function, data tables aside)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOPS = ("server", "tools", "skills", "probes")
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
# Faces that live under tools/ because the seed's command lines name tools/<script>.py: the one entry
# module behind the five scripts may reach the CLI.
FACES_OUTSIDE_SERVER = {"grpo_debug.tools._seed_entry"}
# Long functions of the probes package, which has its own owner; to be split there, never to grow.
KNOWN_LONG: set[str] = set()  # every function is under the limit


def _modules() -> dict[str, Path]:
    out = {}
    for top in TOPS:
        for f in sorted((ROOT / top).rglob("*.py")):
            if "__pycache__" in f.parts or "examples" in f.relative_to(ROOT).parts:
                continue
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(["grpo_debug", *parts])] = f
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """grpo_debug modules that ``name`` imports anywhere in its body (lazy imports included)."""
    found = set()
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.Import):
            found |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            for a in n.names:
                sub = f"{n.module}.{a.name}"
                found.add(sub if sub in MODULES else n.module)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def test_import_graph_has_no_cycles():
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(GRAPH[m]):
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(d):] + [d]))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)


def test_engines_never_import_a_face():
    bad = [(m, d) for m, deps in GRAPH.items() for d in deps
           if not m.startswith("grpo_debug.server") and m not in FACES_OUTSIDE_SERVER
           and d.startswith("grpo_debug.server")]
    assert not bad, bad


@pytest.mark.parametrize("top,allowed", [("skills", ("skills",)), ("probes", ("probes", "skills"))])
def test_knowledge_and_probes_import_no_engine(top, allowed):
    bad = [(m, d) for m, deps in GRAPH.items() if m.startswith(f"grpo_debug.{top}") for d in deps
           if not d.startswith(tuple(f"grpo_debug.{a}" for a in allowed))]
    assert not bad, bad


def test_no_file_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in MODULES.values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES}
    assert not long, long


def _is_data_table(fn: ast.AST) -> bool:
    """A function that is one return of a literal (a table written as code) is data, not logic."""
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, (ast.Dict, ast.List, ast.Tuple))


def test_no_function_over_80_lines():
    long = {}
    for name, p in MODULES.items():
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_data_table(n):
                size = n.end_lineno - n.lineno + 1
                if size > MAX_FUNCTION_LINES and f"{name}.{n.name}" not in KNOWN_LONG:
                    long[f"{p.relative_to(ROOT)}:{n.lineno} {n.name}"] = size
    assert not long, long
