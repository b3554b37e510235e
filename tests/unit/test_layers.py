"""The package graph reads top-down: broker_stub imports only the pure layers of staticmq_spark,
staticmq_spark reaches broker_stub through one entry point (the server commands), and no module
imports another that imports it back at load time."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PURE = ("staticmq_spark.errors", "staticmq_spark.mapping", "staticmq_spark.protocol", "staticmq_spark.hashing")


def _imports(path: Path, *, load_time_only: bool = False) -> set[str]:
    """Modules `path` imports; `load_time_only`: those imported when the module loads (not inside
    functions or `if TYPE_CHECKING:` blocks)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                if not load_time_only:
                    visit(child, top)
                continue
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                if not load_time_only:
                    visit(child, False)
                continue
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.add(child.module)
            elif isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            visit(child, top)

    visit(tree, True)
    return found


def _modules(package: str) -> dict[str, Path]:
    out = {}
    for path in (ROOT / package).rglob("*.py"):
        if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def test_broker_stub_imports_only_the_pure_layers_of_staticmq_spark() -> None:
    bad = {
        (name, imported)
        for name, path in _modules("broker_stub").items()
        for imported in _imports(path)
        if imported.startswith("staticmq_spark") and not imported.startswith(PURE)
    }
    assert not bad


def test_staticmq_spark_reaches_broker_stub_only_through_its_launch_module() -> None:
    users = {
        (name, imported)
        for name, path in _modules("staticmq_spark").items()
        for imported in _imports(path)
        if imported.startswith("broker_stub")
    }
    assert users and all(imported == "broker_stub.launch" for _, imported in users)
    assert {name for name, _ in users} == {"staticmq_spark.cli.server_cmds"}


def test_no_module_imports_itself_back_at_load_time() -> None:
    modules = {**_modules("staticmq_spark"), **_modules("broker_stub")}
    graph = {
        name: {m for m in _imports(path, load_time_only=True) if m in modules and m != name}
        for name, path in modules.items()
    }
    cycles = []
    for start in graph:
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    cycles.append(" -> ".join([*trail, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    assert not cycles, cycles[:5]
