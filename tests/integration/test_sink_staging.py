"""The broker's half of the sink on a real cluster, driven by plain protobuf requests: staged rows
commit whole (large chunks are written past the page cache), a malformed StageRows is refused with
a clear error, and chunks an interrupted commit forwarded are not linked again when their queue
comes back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import pytest

from staticmq_spark.backends.address import parse_address
from staticmq_spark.backends.staticmq.admin import StaticMQAdmin
from staticmq_spark.backends.staticmq.backend import StaticMQBackend
from staticmq_spark.backends.staticmq.rpc import invoke
from staticmq_spark.client import PullConsumer
from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.rows.encode import encode_messages
from tests.support.static_helpers import read_queue
from tests.support.waiting import wait_until

STAGE_ROWS = f"/{pb.DESCRIPTOR.services_by_name['Broker'].full_name}/StageRows"


@contextmanager
def _admin(namesrv: str) -> Iterator[StaticMQAdmin]:
    """The staticmq backend's own admin port (it exposes the channels these tests call raw)."""
    backend = StaticMQBackend(parse_address(namesrv))
    try:
        yield backend.admin()
    finally:
        backend.close()


def _leader(admin: StaticMQAdmin, topic: str, queue: int) -> tuple[str, str]:
    view = admin.route_view(topic)
    name = view.write_queues[queue].broker
    return name, {b.name: b.addr for b in admin.cluster_info()}[name]


def test_rows_staged_by_plain_protobuf_requests_commit_whole(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("stage")
    bodies = [b"small", *(bytes([i % 251]) * 2000 for i in range(400))]  # ~800 KB: past the page cache
    with _admin(c.namesrv) as admin:
        channels = admin.channels
        admin.update_static_topic(topic, 2, cluster="DefaultCluster")
        name, addr = _leader(admin, topic, 1)
        stub = channels.broker(addr)
        for seq, rows in enumerate([bodies[:1], bodies[1:]]):
            batch = encode_messages(rows)
            request = pb.StageRequest(
                writer="w1", batch=0, staging_id="s1", topic=topic, queue_id=1, seq=seq,
                rows=pb.MessageBatch(data=batch.data_bytes(), sizes=batch.sizes_bytes()),
            )  # fmt: skip
            invoke(name, stub.StageRows, request, 10)
        ref = pb.StagingRef(staging_id="s1", chunks=2, rows=len(bodies), seqs=[0, 1])
        decision = pb.TxnDecision(writer="w1", batch=0, topic=topic, parts={name: pb.StagingList(refs=[ref])})
        invoke(name, stub.PrepareTxn, decision, 10)
        state = invoke(name, stub.CommitTxn, pb.TxnRef(writer="w1", batch=0), 10)
    assert state.committed and state.rows == len(bodies)
    with PullConsumer(c.namesrv) as consumer:
        assert [body for _, body in read_queue(consumer, topic, 1)] == bodies


@pytest.mark.parametrize("raw", [b"\x3a\x10abc", b"\x0b\x00"], ids=["truncated-rows", "group-wire-type"])
def test_stage_rows_refuses_a_malformed_request_with_a_clear_error(local_cluster, unique_topic, raw: bytes) -> None:
    c = local_cluster(brokers=1)
    with _admin(c.namesrv) as admin:
        channels = admin.channels
        name = admin.cluster_info()[0].name
        addr = admin.cluster_info()[0].addr
        call: grpc.UnaryUnaryMultiCallable[bytes, pb.StageResponse] = channels.channel(addr).unary_unary(
            STAGE_ROWS, request_serializer=None, response_deserializer=pb.StageResponse.FromString
        )
        with pytest.raises(InvalidArgumentError, match="malformed StageRequest"):
            invoke(name, call, raw, 10)


def _wait_leader(admin: StaticMQAdmin, topic: str, queue: int, broker: str) -> None:
    wait_until(
        lambda: _leader(admin, topic, queue)[0] == broker,
        15,
        message=f"logic queue {queue} of {topic} to move to {broker}",
    )


def test_rows_forwarded_by_an_interrupted_commit_are_not_linked_again_after_the_queue_moves_back(
    local_cluster, unique_topic
) -> None:
    c = local_cluster(brokers=2, store={"sink_link_min_bytes": 0})  # every commit links
    topic = unique_topic("stage")
    bodies = [f"row-{i}".encode() for i in range(50)]
    batch = encode_messages(bodies)
    with _admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 1, cluster="DefaultCluster")
        home, home_addr = _leader(admin, topic, 0)
        away = next(b for b in admin.cluster_info() if b.name != home)
        stub = admin.channels.broker(home_addr)
        request = pb.StageRequest(
            writer="w1", batch=0, staging_id="s1", topic=topic, queue_id=0, seq=0,
            rows=pb.MessageBatch(data=batch.data_bytes(), sizes=batch.sizes_bytes()),
        )  # fmt: skip
        invoke(home, stub.StageRows, request, 10)
        ref = pb.StagingRef(staging_id="s1", chunks=1, rows=len(bodies), seqs=[0])
        decision = pb.TxnDecision(writer="w1", batch=0, topic=topic, parts={home: pb.StagingList(refs=[ref])})
        invoke(home, stub.PrepareTxn, decision, 10)
        # What a commit interrupted after its forwarding step left: the queue had moved away, and
        # its chunks were copied to the new leader under the append's key.
        admin.remapping_static_topic(topic, brokers=[away.name])
        _wait_leader(admin, topic, 0, away.name)
        forward = pb.SendRequest(
            topic=topic, queue_id=0, batch=pb.MessageBatch(data=batch.data_bytes(), sizes=batch.sizes_bytes()),
            idempotency_key=f"w1/0/{home}/s1/0", dedup_across_segments=True,
        )  # fmt: skip
        invoke(away.name, admin.channels.broker(away.addr).Send, forward, 10)
        admin.remapping_static_topic(topic, brokers=[home])  # ... and the queue came back
        _wait_leader(admin, topic, 0, home)

        state = invoke(home, stub.CommitTxn, pb.TxnRef(writer="w1", batch=0), 10)
    assert state.committed
    with PullConsumer(c.namesrv) as consumer:
        assert [body for _, body in read_queue(consumer, topic, 0)] == bodies
