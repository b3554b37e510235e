"""Hostile requests: every RPC of a live broker and name server gets generated messages (any field
values, including huge, negative and non-UTF-8-looking ones) and must answer with a clean status -
never INTERNAL or UNKNOWN - and stay up."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor as d
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from staticmq_spark.client import Admin
from staticmq_spark.local_clusters import LocalCluster
from staticmq_spark.protocol.pb import consume_pb2, consume_pb2_grpc
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.pb import staticmq_pb2_grpc as pb_grpc

pytestmark = pytest.mark.slow
BAD = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}
# Calls that change the cluster for the other examples: fuzzed, but only on their own topics' names.
TOPICS = st.sampled_from(["fuzz", "fuzz-static", "", "x" * 300, "%RETRY%g", "a\nb", "none"])
NAMES = st.text(min_size=0, max_size=40) | TOPICS


def scalar(field: d.FieldDescriptor) -> st.SearchStrategy[Any]:
    t = field.type
    if t in (d.FieldDescriptor.TYPE_INT32, d.FieldDescriptor.TYPE_SINT32, d.FieldDescriptor.TYPE_SFIXED32):
        return st.sampled_from([0, 1, -1, 7, 2**31 - 1, -(2**31)]) | st.integers(-(2**31), 2**31 - 1)
    if t in (d.FieldDescriptor.TYPE_INT64, d.FieldDescriptor.TYPE_SINT64, d.FieldDescriptor.TYPE_SFIXED64):
        return st.sampled_from([0, 1, -1, -2, 10_000, 2**63 - 1, -(2**63)]) | st.integers(-(2**63), 2**63 - 1)
    if t in (d.FieldDescriptor.TYPE_UINT32, d.FieldDescriptor.TYPE_FIXED32):
        return st.integers(0, 2**32 - 1)
    if t in (d.FieldDescriptor.TYPE_UINT64, d.FieldDescriptor.TYPE_FIXED64):
        return st.integers(0, 2**64 - 1)
    if t == d.FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t == d.FieldDescriptor.TYPE_STRING:
        return TOPICS if field.name in ("topic", "name") else NAMES
    if t == d.FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=256)
    if t == d.FieldDescriptor.TYPE_ENUM:
        return st.sampled_from([v.number for v in field.enum_type.values] + [99])
    if t in (d.FieldDescriptor.TYPE_DOUBLE, d.FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=False, width=32)
    raise AssertionError(f"unhandled field type {t}")


def message(desc: d.Descriptor, depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for field in desc.fields:
        if field.message_type is not None:
            if depth >= 2 or field.message_type.GetOptions().map_entry:
                continue
            inner = message(field.message_type, depth + 1)
            fields[field.name] = st.lists(inner, max_size=2) if _repeated(field) else inner
        else:
            fields[field.name] = st.lists(scalar(field), max_size=3) if _repeated(field) else scalar(field)
    return st.fixed_dictionaries({}, optional=fields)


def _repeated(field: d.FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def build(cls: type[Message], values: dict[str, Any]) -> Message:
    msg = cls()
    for name, value in values.items():
        field = cls.DESCRIPTOR.fields_by_name[name]
        if field.message_type is not None:
            sub_cls = type(getattr(msg, name).add()) if _repeated(field) else type(getattr(msg, name))
            if _repeated(field):
                del getattr(msg, name)[:]
                for item in value:
                    getattr(msg, name).add().CopyFrom(build(sub_cls, item))
            else:
                getattr(msg, name).CopyFrom(build(sub_cls, value))
        elif _repeated(field):
            getattr(msg, name).extend(value)
        else:
            setattr(msg, name, value)
    return msg


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(brokers=1, data_dir=tmp_path_factory.mktemp("fuzz") / "c") as c:
        with Admin(c.namesrv) as admin:
            admin.update_topic("fuzz", cluster=c.cluster_name, read_queues=2, write_queues=2)
            admin.update_static_topic("fuzz-static", 2, cluster=c.cluster_name)
        yield c


def _methods(service: d.ServiceDescriptor) -> list[Any]:
    return [pytest.param(service.name, m.name, id=f"{service.name}.{m.name}") for m in service.methods]


SKIP = {"DeleteTopic", "DeleteStaticTopic", "UnregisterBroker"}  # fuzzed names only: see the check below


SERVICES = {
    "Broker": (pb, pb_grpc),
    "NameServer": (pb, pb_grpc),
    "ConsumeService": (consume_pb2, consume_pb2_grpc),
}


@pytest.mark.parametrize(
    ("service", "method"),
    [p for name, (module, _) in SERVICES.items() for p in _methods(module.DESCRIPTOR.services_by_name[name])],
)
def test_generated_requests_never_fail_inside_the_server(cluster: LocalCluster, service: str, method: str) -> None:
    module, grpc_module = SERVICES[service]
    desc = module.DESCRIPTOR.services_by_name[service].methods_by_name[method]
    addr = cluster.namesrv if service == "NameServer" else cluster.broker_addr(cluster.broker_names[0])
    channel = grpc.insecure_channel(addr)
    stub = getattr(grpc_module, f"{service}Stub")(channel)
    request_cls = getattr(module, desc.input_type.name, None) or getattr(pb, desc.input_type.name)
    bad: list[str] = []

    @settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(message(desc.input_type))
    def call(values: dict[str, Any]) -> None:
        request = build(request_cls, values)
        if method in SKIP and getattr(request, "topic", getattr(request, "name", "")) in ("fuzz", "fuzz-static"):
            return
        if method == "RegisterBroker":
            request.name = f"fuzz-{request.name}"[:60]
        try:
            rpc = getattr(stub, method)
            answer = rpc(request, timeout=10)
            if desc.server_streaming:
                for _ in answer:
                    pass
        except grpc.RpcError as exc:
            if exc.code() in BAD:
                bad.append(f"{exc.code().name}: {exc.details()} <- {request!r}"[:500])

    try:
        call()
    finally:
        channel.close()
    assert not bad, f"{service}.{method} failed inside the server:\n" + "\n".join(bad[:5])
    with Admin(cluster.namesrv) as admin:  # the cluster is still up and answering (registrations
        # are not authenticated yet, so fuzzed fake brokers may be listed too: issue 17, ACL)
        assert set(cluster.broker_names) <= {b.name for b in admin.cluster_info()}
