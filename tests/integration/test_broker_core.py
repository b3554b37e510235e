"""The broker core against real processes started with `staticmq cluster --ready-file`."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import grpc
import pytest

from staticmq_spark.backends.staticmq.rpc import Channels, invoke
from staticmq_spark.client import Admin, Producer, PullConsumer, PullStatus
from staticmq_spark.errors import (
    InvalidBatchError,
    InvalidOffsetError,
    InvalidTopicNameError,
    MessageTooLargeError,
    QueueNotFoundError,
    TopicNotFoundError,
)
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from tests.support.topics import create_topic
from tests.support.waiting import wait_until


def test_cluster_ready_file_lists_namesrv_and_every_broker(cluster_process) -> None:
    c = cluster_process(brokers=3)
    assert set(c.info["brokers"]) == {"broker-0", "broker-1", "broker-2"}
    with Admin(c.namesrv) as admin:
        assert {b.name for b in admin.cluster_info()} == {"broker-0", "broker-1", "broker-2"}
        assert {b.cluster for b in admin.cluster_info()} == {"DefaultCluster"}


def test_send_and_pull_across_two_brokers(cluster_process, unique_topic) -> None:
    c = cluster_process(brokers=2)
    topic = unique_topic()
    create_topic(c.namesrv, topic, queues=4)
    with Producer(c.namesrv) as producer:
        results = producer.send_batch(topic, [f"m{i}" for i in range(400)], keys=[f"k{i}" for i in range(400)])
    assert {r.broker for r in results} == {"broker-0", "broker-1"}
    seen = []
    with PullConsumer(c.namesrv) as consumer:
        for q in consumer.queues(topic):
            offset = 0
            while True:
                res = consumer.pull(topic, q.queue_id, offset, max_messages=50, broker=q.broker)
                if res.status is not PullStatus.FOUND:
                    break
                assert res.batch.column("queue_offset").to_pylist() == list(range(offset, res.next_offset))
                seen.extend(res.batch.column("body").to_pylist())
                offset = res.next_offset
    assert sorted(seen) == sorted(f"m{i}".encode() for i in range(400))


def test_same_key_goes_to_the_same_queue(cluster_process, unique_topic) -> None:
    c = cluster_process(brokers=2)
    topic = unique_topic()
    create_topic(c.namesrv, topic, queues=4)
    with Producer(c.namesrv) as producer:
        places = {(r.broker, r.queue_id) for r in (producer.send(topic, b"x", key="user-7") for _ in range(10))}
    assert len(places) == 1


def test_long_poll_returns_as_soon_as_a_message_arrives(cluster_process, unique_topic) -> None:
    c = cluster_process(brokers=1)
    topic = unique_topic()
    create_topic(c.namesrv, topic, queues=1)
    with PullConsumer(c.namesrv) as consumer, Producer(c.namesrv) as producer:
        threading.Timer(0.5, lambda: producer.send(topic, b"late", queue=0)).start()
        started = time.monotonic()
        res = consumer.pull(topic, 0, 0, wait_ms=10_000)
        waited = time.monotonic() - started
    assert res.status is PullStatus.FOUND and res.batch.column("body").to_pylist() == [b"late"]
    assert 0.3 < waited < 5


def test_long_poll_gives_up_after_its_wait(cluster_process, unique_topic) -> None:
    c = cluster_process(brokers=1)
    topic = unique_topic()
    create_topic(c.namesrv, topic, queues=1)
    with PullConsumer(c.namesrv) as consumer:
        started = time.monotonic()
        res = consumer.pull(topic, 0, 0, wait_ms=700)
        assert res.status is PullStatus.NO_NEW_MESSAGE
        assert time.monotonic() - started >= 0.6


def test_retention_moves_min_offset_and_old_offsets_are_offset_moved(cluster_process, unique_topic) -> None:
    settings = {
        "segment_bytes": 256 * 1024,
        "max_batch_bytes": 128 * 1024,
        "retention_bytes": 512 * 1024,
        "retention_check_interval_ms": 100,
    }
    c = cluster_process(brokers=1, settings=settings)
    topic = unique_topic()
    create_topic(c.namesrv, topic, queues=1)
    with Producer(c.namesrv) as producer:
        for _ in range(30):
            producer.send_batch(topic, [b"x" * 1000] * 50, queue=0)
    with PullConsumer(c.namesrv) as consumer:

        def settled_min_offset() -> int:
            # A pass may run while the sends still go on and delete one segment; the pass after the
            # last send deletes the rest. Settled = unchanged over more than three passes.
            first = consumer.min_offset(topic, 0)
            time.sleep(0.35)  # not a wait: the window in which retention must leave min_offset alone
            return first if first and consumer.min_offset(topic, 0) == first else 0

        low = wait_until(settled_min_offset, 15, interval_s=0.1, message="retention to delete old segments and settle")
        assert 0 < low < 1500 and consumer.max_offset(topic, 0) == 1500
        res = consumer.pull(topic, 0, 0)
        assert (res.status, res.next_offset) == (PullStatus.OFFSET_MOVED, low)
        assert consumer.pull(topic, 0, low).status is PullStatus.FOUND


def test_offset_for_timestamp(cluster_process, unique_topic) -> None:
    c = cluster_process(brokers=1)
    topic = unique_topic()
    create_topic(c.namesrv, topic, queues=1)
    with Producer(c.namesrv) as producer, PullConsumer(c.namesrv) as consumer:
        producer.send_batch(topic, [b"a", b"b"], queue=0)
        time.sleep(0.05)  # not a wait: store times of a and b fall strictly before `cut`, c's after
        cut = int(time.time() * 1000)
        time.sleep(0.05)
        producer.send(topic, b"c", queue=0)
        assert consumer.offset_for_timestamp(topic, 0, cut) == 2
        assert consumer.offset_for_timestamp(topic, 0, 0) == 0


def test_restart_on_the_same_data_dir_recovers_messages_topics_and_offsets(
    cluster_process, unique_topic, tmp_path: Path
) -> None:
    data_dir = tmp_path / "persist"
    c = cluster_process(brokers=2, data_dir=data_dir)
    topic = unique_topic()
    create_topic(c.namesrv, topic, queues=2)
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, [f"m{i}" for i in range(100)], keys=[str(i) for i in range(100)])
    with PullConsumer(c.namesrv, group="g") as consumer:
        q = consumer.queues(topic)[0]
        consumer.commit(topic, q.queue_id, 7, broker=q.broker)
    offsets_file = data_dir / q.broker / "config" / "consumer_offsets.json"

    def offset_persisted() -> bool:
        entries = json.loads(offsets_file.read_text())["offsets"] if offsets_file.exists() else []
        wanted = ("g", topic, q.queue_id, 7)
        return any((e["group"], e["topic"], e["queue_id"], e["offset"]) == wanted for e in entries)

    wait_until(offset_persisted, 10, message=f"the committed offset in {offsets_file} (a checkpoint)")
    assert c.stop() == 0
    again = cluster_process(brokers=2, data_dir=data_dir)
    with PullConsumer(again.namesrv, group="g") as consumer:
        total = 0
        for q in consumer.queues(topic):
            total += consumer.pull(topic, q.queue_id, 0, max_messages=1000, broker=q.broker).count
        assert total == 100
        q = consumer.queues(topic)[0]
        assert consumer.committed(topic, q.queue_id, broker=q.broker) == 7


def test_broker_that_stops_heartbeating_leaves_the_route(local_cluster, unique_topic) -> None:
    import os
    import signal

    c = local_cluster(brokers=2, heartbeat_ms=200, broker_timeout_ms=1500)
    topic = unique_topic()
    create_topic(c.namesrv, topic, queues=2)
    os.kill(c.broker_pid("broker-1"), signal.SIGSTOP)
    try:
        with Admin(c.namesrv) as admin:
            wait_until(
                lambda: set(admin.route_view(topic).brokers) == {"broker-0"},
                10,
                interval_s=0.1,
                message=lambda: (
                    f"the route of {topic} to list broker-0 only; it lists {admin.route_view(topic).brokers}"
                ),
            )
    finally:
        os.kill(c.broker_pid("broker-1"), signal.SIGCONT)


# ---------------------------------------------------------------------- bad input


def test_bad_input_gets_clear_errors_and_the_broker_keeps_serving(cluster_process, unique_topic) -> None:
    c = cluster_process(brokers=1)
    topic = unique_topic()
    create_topic(c.namesrv, topic, queues=2)
    with Admin(c.namesrv) as admin, Producer(c.namesrv) as producer, PullConsumer(c.namesrv) as consumer:
        with pytest.raises(InvalidTopicNameError, match="characters"):
            admin.update_topic("../escape", cluster="DefaultCluster")
        with pytest.raises(InvalidTopicNameError, match="128 characters"):
            admin.update_topic("x" * 128, cluster="DefaultCluster")
        with pytest.raises(TopicNotFoundError):
            producer.send("no-such-topic", b"x")
        with pytest.raises(QueueNotFoundError):
            producer.send(topic, b"x", queue=5)
        with pytest.raises(MessageTooLargeError, match="limit"):
            producer.send(topic, b"x" * (5 << 20), queue=0)
        with pytest.raises(InvalidOffsetError):
            consumer.pull(topic, 0, -1)
        addr = c.info["brokers"]["broker-0"]["addr"]
        channels = Channels()
        bad = pb.SendRequest(topic=topic, queue_id=0, batch=pb.MessageBatch(data=b"garbage", sizes=b"\x07\x00\x00\x00"))
        with pytest.raises(InvalidBatchError):
            invoke("broker-0", channels.broker(addr).Send, bad, 5)
        bad = pb.SendRequest(topic=topic, queue_id=0, batch=pb.MessageBatch(data=b"x" * 40, sizes=b"\xff\xff\xff\x7f"))
        with pytest.raises(InvalidBatchError):
            invoke("broker-0", channels.broker(addr).Send, bad, 5)
        channels.close()
        assert producer.send(topic, b"still fine", queue=0).queue_offset == 0
        assert consumer.pull(topic, 0, 0).batch.column("body").to_pylist() == [b"still fine"]


def test_grpc_errors_carry_a_status_code_and_message(cluster_process) -> None:
    c = cluster_process(brokers=1)
    addr = c.info["brokers"]["broker-0"]["addr"]
    channel = grpc.insecure_channel(addr)
    from staticmq_spark.protocol.pb import staticmq_pb2_grpc as pb_grpc

    with pytest.raises(grpc.RpcError) as info:
        pb_grpc.BrokerStub(channel).Pull(pb.PullRequest(topic="nope", queue_id=0, offset=0, max_messages=1), timeout=5)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    assert "nope" in info.value.details()
    channel.close()


def test_data_dir_of_another_broker_is_refused(local_cluster, tmp_path: Path) -> None:
    import subprocess
    import sys

    c = local_cluster(brokers=1)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "staticmq_spark.cli",
            "broker",
            "--name",
            "impostor",
            "--namesrv",
            c.namesrv,
            "--data-dir",
            str(c.data_dir / "broker-0"),
            "--port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "belongs to broker 'broker-0'" in proc.stderr
