"""Wrong requests get the right status: a queue that does not exist is NOT_FOUND, for offset
commits (queue ids -1 and 2^31-1 included) and for sink staging, never stored, never UNAVAILABLE."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from staticmq_spark.client import Admin
from staticmq_spark.local_clusters import LocalCluster
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.pb import staticmq_pb2_grpc as pb_grpc


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, pb_grpc.BrokerStub]]:
    with LocalCluster(brokers=1, data_dir=tmp_path_factory.mktemp("refusals") / "c") as cluster:
        with Admin(cluster.namesrv) as admin:
            admin.update_topic("plain", cluster=cluster.cluster_name, read_queues=2, write_queues=2)
            admin.update_static_topic("static", 3, cluster=cluster.cluster_name)
        channel = grpc.insecure_channel(cluster.broker_addr(cluster.broker_names[0]))
        yield cluster, pb_grpc.BrokerStub(channel)
        channel.close()


@pytest.mark.parametrize(("topic", "queue"), [("plain", -1), ("plain", 2), ("plain", 2**31 - 1), ("static", 3)])
def test_offset_commits_to_a_queue_that_does_not_exist_are_not_found_and_not_stored(broker, topic, queue) -> None:  # type: ignore[no-untyped-def]
    _, stub = broker
    with pytest.raises(grpc.RpcError) as caught:
        stub.CommitOffset(pb.CommitOffsetRequest(group="g", topic=topic, queue_id=queue, offset=5), timeout=10)
    assert caught.value.code() is grpc.StatusCode.NOT_FOUND
    assert f"queue {queue} does not exist" in str(caught.value.details())
    listed = stub.ListConsumerOffsets(pb.ConsumerOffsetsRequest(group="g", topic=topic), timeout=10)
    assert [e.queue_id for e in listed.entries if e.queue_id == queue] == []


def test_staging_to_a_logic_queue_that_does_not_exist_is_not_found(broker) -> None:  # type: ignore[no-untyped-def]
    _, stub = broker
    request = pb.StageRequest(writer="w", batch=0, staging_id="s", topic="static", queue_id=7, seq=0)
    with pytest.raises(grpc.RpcError) as caught:
        stub.StageRows(request, timeout=10)
    assert caught.value.code() is grpc.StatusCode.NOT_FOUND, caught.value.details()
    assert "has 3 logic queues: no queue 7" in str(caught.value.details())
