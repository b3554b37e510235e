"""The committed gRPC/protobuf modules are what the .proto files generate, with the old toolchain
scripts/gen_proto.py pins, so they run on the oldest grpcio/protobuf setup.cfg's install_requires
allows."""

from __future__ import annotations

import ast
import configparser
import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from google.protobuf import message_factory
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from staticmq_spark.cli.doctor_cmd import REQUIREMENTS
from staticmq_spark.protocol.pb import consume_pb2, consume_pb2_grpc, staticmq_pb2, staticmq_pb2_grpc

ROOT = Path(__file__).resolve().parents[4]
COMMITTED = ROOT / "staticmq_spark" / "protocol" / "pb"
MODULES = {"staticmq": (staticmq_pb2, staticmq_pb2_grpc), "consume": (consume_pb2, consume_pb2_grpc)}


def _gen_proto() -> ModuleType:
    pytest.importorskip("grpc_tools", reason="grpcio-tools (the dev extra) regenerates the code")
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "scripts" / "gen_proto.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


def _fresh(gen: ModuleType, tmp_path: Path, *, modules: bool, stubs: bool) -> list[Path]:
    # Whatever grpcio-tools is installed: the callers compare what the protos define, or check first
    # that the pinned toolchain runs.
    gen.generate(tmp_path, modules=modules, stubs=stubs, any_toolchain=True)
    fresh = sorted((tmp_path / "staticmq_spark" / "protocol" / "pb").iterdir())
    assert fresh, "protoc produced nothing"
    return fresh


def _serialized_descriptor(source: str) -> bytes:
    """The FileDescriptorProto a _pb2.py module registers (the argument of AddSerializedFile)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "AddSerializedFile":
            value = ast.literal_eval(node.args[0])
            assert isinstance(value, bytes)
            return value
    raise AssertionError("no AddSerializedFile call")


def _install_floor(name: str) -> Version:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    for line in cfg["options"]["install_requires"].strip().splitlines():
        req = Requirement(line.strip())
        if req.name == name:
            floors = [Version(s.version) for s in req.specifier if s.operator == ">="]
            assert len(floors) == 1, f"{line}: one >= bound expected"
            return floors[0]
    raise AssertionError(f"{name} is not in setup.cfg's install_requires")


def _protobuf_gencode_version(source: str, name: str) -> Version:
    """The protobuf runtime a _pb2.py module needs at least: the protoc it names in its header and,
    where its protoc emits one (27 and later), the version it validates the runtime against."""
    header = re.search(r"^# Protobuf Python Version: (\S+)$", source, re.MULTILINE)
    assert header, f"{name}: no '# Protobuf Python Version' header"
    versions = [Version(header.group(1))]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "ValidateProtobufRuntimeVersion":
            major, minor, patch = (ast.literal_eval(arg) for arg in node.args[1:4])
            versions.append(Version(f"{major}.{minor}.{patch}"))
    return max(versions)


def _grpc_generated_version(source: str, name: str) -> Version:
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [
            "GRPC_GENERATED_VERSION"
        ]:
            return Version(ast.literal_eval(node.value))
    raise AssertionError(f"{name}: no GRPC_GENERATED_VERSION")


def test_gencode_needs_no_newer_protobuf_or_grpcio_than_setup_cfg_requires() -> None:
    """A regeneration with a newer toolchain would silently raise the runtime floor above what
    managed Spark runtimes pin: setup.cfg must say what the gencode needs, and say it first."""
    protobuf_floor, grpcio_floor = _install_floor("protobuf"), _install_floor("grpcio")
    pb2 = sorted(COMMITTED.glob("*_pb2.py"))
    grpc = sorted(COMMITTED.glob("*_pb2_grpc.py"))
    assert len(pb2) == len(grpc) == len(MODULES)
    for path in pb2:
        needed = _protobuf_gencode_version(path.read_text(), path.name)
        assert needed <= protobuf_floor, (
            f"{path.name} needs protobuf>={needed} but setup.cfg allows protobuf>={protobuf_floor}: regenerate "
            "with the toolchain scripts/gen_proto.py pins, or raise the floor where a runtime-like env proves it"
        )
    for path in grpc:
        needed = _grpc_generated_version(path.read_text(), path.name)
        assert needed <= grpcio_floor, (
            f"{path.name} needs grpcio>={needed} but setup.cfg allows grpcio>={grpcio_floor}: regenerate "
            "with the toolchain scripts/gen_proto.py pins, or raise the floor where a runtime-like env proves it"
        )


def test_doctor_checks_the_same_grpcio_and_protobuf_bounds_as_setup_cfg() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    wanted = {
        req.name: req.specifier
        for req in map(Requirement, cfg["options"]["install_requires"].strip().splitlines())
        if req.name in {"grpcio", "protobuf"}
    }
    for name, specifier in wanted.items():
        _module, lowest, refused = REQUIREMENTS[name]
        assert SpecifierSet(f">={lowest}" + (f",<{refused}" if refused else "")) == specifier, name


def test_gencode_runs_on_the_installed_runtimes() -> None:
    """The modules imported (above) without a version error, and messages round-trip."""
    request = staticmq_pb2.PullRequest(topic="t", queue_id=3, offset=7, max_messages=2)
    assert staticmq_pb2.PullRequest.FromString(request.SerializeToString()) == request
    decision = staticmq_pb2.TxnDecision(writer="w", batch=1, topic="t")
    decision.parts["q"].refs.add(staging_id="s", chunks=1, rows=2, seqs=[0])
    assert staticmq_pb2.TxnDecision.FromString(decision.SerializeToString()) == decision


def test_stubs_are_up_to_date_with_the_proto_files(tmp_path: Path) -> None:
    for path in _fresh(_gen_proto(), tmp_path, modules=False, stubs=True):
        assert (COMMITTED / path.name).read_text() == path.read_text(), (
            f"{path.name} is stale: run `python scripts/gen_proto.py --stubs`"
        )


def test_messages_are_up_to_date_with_the_proto_files(tmp_path: Path) -> None:
    """Whichever protoc is installed serializes the same descriptor: compare that, not the text."""
    fresh = [p for p in _fresh(_gen_proto(), tmp_path, modules=True, stubs=False) if p.name.endswith("_pb2.py")]
    assert len(fresh) == len(MODULES)
    for path in fresh:
        assert _serialized_descriptor((COMMITTED / path.name).read_text()) == _serialized_descriptor(
            path.read_text()
        ), f"{path.name} is stale: regenerate as scripts/gen_proto.py says"


class _RecordingChannel:
    def __init__(self) -> None:
        self.calls: dict[str, tuple[str, Any]] = {}

    def __getattr__(self, kind: str) -> Any:
        def multicallable(path: str, request_serializer: Any, response_deserializer: Any, **_: Any) -> None:
            self.calls[path] = (kind, response_deserializer)

        return multicallable


@pytest.mark.parametrize("name", sorted(MODULES))
def test_services_are_up_to_date_with_the_proto_files(name: str) -> None:
    """Each client stub calls every method the descriptor names, of its kind and with its response type
    (the request types are in the descriptor, which the test above compares)."""
    pb2, pb2_grpc = MODULES[name]
    for service in pb2.DESCRIPTOR.services_by_name.values():
        channel = _RecordingChannel()
        getattr(pb2_grpc, f"{service.name}Stub")(channel)
        expected = {}
        for method in service.methods:
            kind = ("stream" if method.client_streaming else "unary") + "_"
            kind += "stream" if method.server_streaming else "unary"
            response = message_factory.GetMessageClass(method.output_type)
            expected[f"/{service.full_name}/{method.name}"] = (kind, response.FromString)
        assert channel.calls == expected, f"{name}_pb2_grpc.py is stale: regenerate as scripts/gen_proto.py says"
        servicer = getattr(pb2_grpc, f"{service.name}Servicer")
        assert {m.name for m in service.methods} <= set(vars(servicer))


def test_committed_modules_are_what_the_pinned_toolchain_generates(tmp_path: Path) -> None:
    gen = _gen_proto()
    if gen.grpcio_tools_version() != gen.PINNED_GRPCIO_TOOLS:
        pytest.skip(f"grpcio-tools {gen.grpcio_tools_version()} is not the pinned {gen.PINNED_GRPCIO_TOOLS}")
    for path in _fresh(gen, tmp_path, modules=True, stubs=False):
        assert (COMMITTED / path.name).read_text() == path.read_text(), (
            f"{path.name} is stale: regenerate as scripts/gen_proto.py says"
        )
