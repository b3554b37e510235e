"""The package graph reads top-down, and the rule is a test that can fail:

- broker_stub imports only the pure layers of staticmq_spark, and staticmq_spark reaches
  broker_stub through one entry point (the server commands);
- no module imports another that imports it back, counting imports inside functions and under
  `if TYPE_CHECKING:` (an import is an import wherever it is written);
- above the seam (client, source, sink, cli, demo and the Spark glue) nothing speaks a wire: no
  grpc, protobuf, generated stubs, protocol module that touches them, or backend implementation.
  The backends are reached through `backends/` (interfaces, types, registry) alone;
- within protocol/, only wire/ (protobuf messages by hand) and transport/ (gRPC channels and
  errors) speak a wire, beside the generated pb/: rows/, security/, topics/ and consume/ hold
  codecs and values any layer may use.

Lazy imports kept for start-up time: the registry's backend entry points (importlib, see
backends/registry.py: a process that reads broker_stub never loads the RocketMQ code).

Lazy imports of optional packages (not in install_requires, see setup.cfg's extras), each the one
place that needs the package, so the connector loads on a driver or executor without it; a missing
one raises MissingExtraError naming the extra (`LAZY_OPTIONAL`, checked below):
- `yaml` in protocol/security/acl.py `load_acl` ([broker]): only servers read ACL files, and the
  protocol layer is also the client's;
- `delta` in lakehouse.py `_delta_table` ([delta]): MERGEs and table lookups; bronze, a plain
  `writeStream.format("delta")`, needs only Delta's jars, and managed runtimes bring delta;
- `pyspark` in cli/doctor_cmd.py `check_default_source` ([spark]): the doctor reports a missing
  pyspark instead of failing to start (every command module loads with the CLI);
- `pyspark` in session/configure.py `running_spark_binary`: the Spark version Delta's jars must match,
  asked only by `delta=True` (the package's __init__ imports session.configure);
- `staticmq_spark.data_source` in session/configure.py `_register`: `import staticmq_spark` (the client,
  the CLI) must not need pyspark, and the package's __init__ imports session.configure;
- `lz4` and `zstandard` in backends/rocketmq/wire/stored_messages.py: codecs of compressed RocketMQ
  messages, in no requirement list: needed only for a topic whose producers compress.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PURE = ("staticmq_spark.errors", "staticmq_spark.mapping", "staticmq_spark.protocol", "staticmq_spark.hashing")
ABOVE_SEAM = (
    "staticmq_spark.client",
    "staticmq_spark.source",
    "staticmq_spark.sink",
    "staticmq_spark.cli",
    "staticmq_spark.demo",
    "staticmq_spark.data_source",
    "staticmq_spark.option_table",
    "staticmq_spark.session",
    "staticmq_spark.lakehouse",
)
WIRES = ("grpc", "google.protobuf", "staticmq_spark.protocol.pb")
WIRE_PROTOCOL = ("staticmq_spark.protocol.wire", "staticmq_spark.protocol.transport", "staticmq_spark.protocol.pb")
BACKEND_IMPLEMENTATIONS = (
    "staticmq_spark.backends.staticmq",
    "staticmq_spark.backends.rocketmq",
    "staticmq_spark.backends.memory",
)


LAZY_OPTIONAL = {
    ("staticmq_spark.protocol.security.acl", "yaml"),
    ("staticmq_spark.lakehouse", "delta"),
    ("staticmq_spark.cli.doctor_cmd", "pyspark"),
    ("staticmq_spark.session.configure", "pyspark"),
    ("staticmq_spark.backends.rocketmq.wire.stored_messages", "lz4"),
    ("staticmq_spark.backends.rocketmq.wire.stored_messages", "zstandard"),
}


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _imports(source: str, *, load_time_only: bool = False) -> set[str]:
    """Modules `source` imports (`from a import b` counts as a and, where b is a module, a.b);
    `load_time_only`: those imported when the module loads (not in functions or TYPE_CHECKING)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                if not load_time_only:
                    visit(child)
                continue
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) and load_time_only:
                continue
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.add(child.module)
                found.update(f"{child.module}.{alias.name}" for alias in child.names)
            elif isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            visit(child)

    visit(ast.parse(source))
    return found


def _modules(package: str) -> dict[str, str]:
    out = {}
    for path in (ROOT / package).rglob("*.py"):
        if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path.read_text()
    return out


def _graph(sources: Mapping[str, str], *, load_time_only: bool = False) -> dict[str, set[str]]:
    return {
        name: {m for m in _imports(src, load_time_only=load_time_only) if m in sources and m != name}
        for name, src in sources.items()
    }


def find_cycles(sources: Mapping[str, str]) -> list[str]:
    """Each import circle once (as its members, sorted), counting every import statement."""
    graph = _graph(sources)
    cycles: set[str] = set()
    for start in graph:
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    cycles.add(" -> ".join([*trail, start]) if len(trail) < 2 else " <-> ".join(sorted(trail)))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    return sorted(cycles)


def protocol_modules_speaking_a_wire(sources: Mapping[str, str]) -> set[str]:
    """The protocol modules that import grpc, protobuf or the generated stubs."""
    return {
        name
        for name, src in sources.items()
        if _under(name, ("staticmq_spark.protocol",)) and any(_under(m, WIRES) for m in _imports(src))
    }


def wire_imports_above_the_seam(sources: Mapping[str, str]) -> list[tuple[str, str]]:
    """(module above the seam, what it imports that speaks a wire or is a backend's own code)."""
    wire_protocol = protocol_modules_speaking_a_wire(sources)
    bad = []
    for name, src in sorted(sources.items()):
        if not _under(name, ABOVE_SEAM):
            continue
        for imported in sorted(_imports(src)):
            if _under(imported, WIRES + BACKEND_IMPLEMENTATIONS) or imported in wire_protocol:
                bad.append((name, imported))
    return bad


def _all_sources() -> dict[str, str]:
    return {**_modules("staticmq_spark"), **_modules("broker_stub")}


def test_broker_stub_imports_only_the_pure_layers_of_staticmq_spark() -> None:
    bad = {
        (name, imported)
        for name, src in _modules("broker_stub").items()
        for imported in _imports(src)
        if imported.startswith("staticmq_spark") and not imported.startswith(PURE)
    }
    assert not bad


# The pure layers, each with what it may import of staticmq_spark: nothing climbs back up from them.
PURE_BELOW = {
    "staticmq_spark.errors": ("staticmq_spark.errors",),
    "staticmq_spark.protocol": ("staticmq_spark.protocol", "staticmq_spark.errors"),
    "staticmq_spark.mapping": ("staticmq_spark.mapping", "staticmq_spark.protocol", "staticmq_spark.errors"),
}


def imports_climbing_up(sources: Mapping[str, str]) -> set[tuple[str, str]]:
    """(module, import) where a pure layer imports a module of staticmq_spark above it."""
    return {
        (name, imported)
        for name, src in sources.items()
        for layer, allowed in PURE_BELOW.items()
        if _under(name, (layer,))
        for imported in _imports(src)
        if imported.startswith("staticmq_spark") and not _under(imported, allowed)
    }


def test_no_import_climbs_back_up_from_the_pure_layers() -> None:
    assert not imports_climbing_up(_all_sources())


def test_staticmq_spark_reaches_broker_stub_only_through_its_launch_module() -> None:
    users = {
        (name, imported)
        for name, src in _modules("staticmq_spark").items()
        for imported in _imports(src)
        if imported.startswith("broker_stub") and imported.count(".") == 1
    }
    assert users and all(imported == "broker_stub.launch" for _, imported in users)
    assert {name for name, _ in users} == {"staticmq_spark.cli.server_cmds"}


def test_no_module_imports_itself_back_even_from_inside_a_function() -> None:
    assert not find_cycles(_all_sources())


def test_nothing_above_the_seam_imports_a_wire_or_a_backend_implementation() -> None:
    assert not wire_imports_above_the_seam(_all_sources())


def test_only_protocols_wire_and_transport_packages_speak_a_wire() -> None:
    speaking = protocol_modules_speaking_a_wire(_all_sources())
    assert speaking and all(_under(name, WIRE_PROTOCOL) for name in speaking), sorted(speaking)


def backend_imports_above_the_seam(sources: Mapping[str, str]) -> list[tuple[str, str]]:
    """(backend module, what it imports from above the seam): the seam's users sit on top of it."""
    return sorted(
        (name, imported)
        for name, src in sources.items()
        if _under(name, ("staticmq_spark.backends",))
        for imported in _imports(src)
        if _under(imported, ABOVE_SEAM)
    )


def test_no_backend_imports_the_client_source_sink_or_anything_else_above_the_seam() -> None:
    assert not backend_imports_above_the_seam(_all_sources())


def lazy_third_party(sources: Mapping[str, str]) -> set[tuple[str, str]]:
    """(module, top-level package) of each third-party import written inside a function."""
    ours = ("staticmq_spark", "broker_stub")
    return {
        (name, imported.partition(".")[0])
        for name, src in sources.items()
        for imported in _imports(src) - _imports(src, load_time_only=True)
        if imported.partition(".")[0] not in sys.stdlib_module_names and not _under(imported, ours)
    }


def test_every_lazy_import_of_a_third_party_package_is_listed_in_the_docstring() -> None:
    assert lazy_third_party(_all_sources()) == LAZY_OPTIONAL
    for _, package in LAZY_OPTIONAL:
        assert f"`{package}`" in (__doc__ or "")


def test_the_layer_checks_fail_on_a_planted_import() -> None:
    sources = _all_sources()
    planted_circle = dict(sources)
    planted_circle["staticmq_spark.backends.types"] += "\n\ndef _late() -> None:\n    import staticmq_spark.client\n"
    assert any("staticmq_spark.client" in c for c in find_cycles(planted_circle))
    hidden = "\nif TYPE_CHECKING:\n    from staticmq_spark.backends.staticmq import rpc\n"
    planted_wire = dict(sources)
    planted_wire["staticmq_spark.sink.writer"] += hidden
    planted_wire["staticmq_spark.source.executor"] += "\n\ndef _raw() -> None:\n    import grpc\n"
    found = wire_imports_above_the_seam(planted_wire)
    assert ("staticmq_spark.sink.writer", "staticmq_spark.backends.staticmq") in found
    assert ("staticmq_spark.source.executor", "grpc") in found
    planted_codec = dict(sources)
    planted_codec["staticmq_spark.protocol.rows.codec"] += "\nfrom staticmq_spark.protocol.pb import staticmq_pb2\n"
    assert "staticmq_spark.protocol.rows.codec" in protocol_modules_speaking_a_wire(planted_codec)
    planted_upward = dict(sources)
    planted_upward["staticmq_spark.backends.rocketmq.reader"] += "\nfrom staticmq_spark.client import Admin\n"
    upward = backend_imports_above_the_seam(planted_upward)
    assert ("staticmq_spark.backends.rocketmq.reader", "staticmq_spark.client") in upward
    climbing = {"staticmq_spark.protocol.consume.tag_filter": "from staticmq_spark.hashing import queue_for_key\n"}
    assert ("staticmq_spark.protocol.consume.tag_filter", "staticmq_spark.hashing") in imports_climbing_up(climbing)
