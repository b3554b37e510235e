"""The broker's StageRows on a real cluster: requests serialized by plain protobuf stage and commit
like the sink's hand-made ones, large chunks (written past the page cache) read back whole, and a
malformed request is refused with a clear error."""

from __future__ import annotations

import grpc
import pytest

from staticmq_spark.client import Admin, PullConsumer
from staticmq_spark.client.rpc import invoke
from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.row_encode import encode_messages
from tests.static_helpers import read_queue

STAGE_ROWS = f"/{pb.DESCRIPTOR.services_by_name['Broker'].full_name}/StageRows"


def _leader(admin: Admin, topic: str, queue: int) -> tuple[str, str]:
    _, view = admin.topic_route(topic)
    name = view.write_queues[queue].broker
    return name, {b.name: b.addr for b in admin.cluster_info()}[name]


def test_rows_staged_by_plain_protobuf_requests_commit_whole(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("stage")
    bodies = [b"small", *(bytes([i % 251]) * 2000 for i in range(400))]  # ~800 KB: past the page cache
    with Admin(c.namesrv) as admin:
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
    with Admin(c.namesrv) as admin:
        channels = admin.channels
        name = admin.cluster_info()[0].name
        addr = admin.cluster_info()[0].addr
        call: grpc.UnaryUnaryMultiCallable[bytes, pb.StageResponse] = channels.channel(addr).unary_unary(
            STAGE_ROWS, request_serializer=None, response_deserializer=pb.StageResponse.FromString
        )
        with pytest.raises(InvalidArgumentError, match="malformed StageRequest"):
            invoke(name, call, raw, 10)
