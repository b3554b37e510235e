"""PopConsumer on Apache RocketMQ: what only RocketMQ's pop has (the shared conformance scenarios
are in test_backend_consumption_conformance.py): order refused across segments, the timer-wheel setting it
needs, and the offsets a group's pops and pulls share."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest

from staticmq_spark.client import PopConsumer, PopMessage, Producer, PullConsumer
from staticmq_spark.errors import UnsupportedOperationError
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from tests.support.java_pop_peer import JavaPopPeer
from tests.support.rocketmq_tools import compile_client, update_broker_config
from tests.support.waiting import wait_until

_n = itertools.count()


def _name(what: str) -> str:
    return f"rmqpop-{what}-{next(_n)}"


def test_order_pop_is_refused_on_a_queue_with_more_than_one_segment(rocketmq_cluster: LocalRocketMQ) -> None:
    topic = _name("order")
    first, second = rocketmq_cluster.broker_names[:2]
    rocketmq_cluster.update_static_topic(topic, 2, [first])
    with PopConsumer(rocketmq_cluster.address, _name("g"), topic, order=True) as consumer:
        assert consumer.receive(32, 5.0, wait_s=0.2) == []  # one segment per queue: order pop is fine
    rocketmq_cluster.remap_static_topic(topic, [second])
    with pytest.raises(UnsupportedOperationError, match=r"order=True .* more than one segment .* physical queue"):
        PopConsumer(rocketmq_cluster.address, _name("g"), topic, order=True)
    with PopConsumer(rocketmq_cluster.address, _name("g"), topic) as consumer:  # without order it pops
        assert consumer.receive(32, 5.0, wait_s=0.2) == []


def test_a_group_used_for_pop_and_pull_shares_one_committed_offset(rocketmq_cluster: LocalRocketMQ) -> None:
    """RocketMQ keeps one offset per group and physical queue for pops and pull commits alike: the
    pop of a group moves the offset its pull consumer reads back (docs/rocketmq.md says to use a
    group for one of the two)."""
    topic, group = _name("shared"), _name("g")
    rocketmq_cluster.update_static_topic(topic, 1, rocketmq_cluster.broker_names[:1])
    with Producer(rocketmq_cluster.address) as producer:
        producer.send_batch(topic, [f"s-{i}" for i in range(5)], queue=0)
    with PopConsumer(rocketmq_cluster.address, group, topic) as consumer:
        got: list[bytes] = []

        def popped_all() -> bool:
            messages = consumer.receive(32, 30.0, wait_s=0.5)
            got.extend(m.body for m in messages)
            if messages:
                consumer.ack_batch(messages)
            return len(got) >= 5

        wait_until(popped_all, 30, message="5 popped messages")
    with PullConsumer(rocketmq_cluster.address, group=group) as puller:
        wait_until(lambda: puller.committed(topic, 0) == 5, 30, message="the pop's offset seen by the pull consumer")


def test_a_broker_without_the_timer_wheel_is_refused_naming_the_setting(tmp_path: Path) -> None:
    """Refused when the consumer is made (the brokers' configuration) and, for a broker switched
    afterwards, when its pop is refused (PopMessageProcessor's answer)."""
    refused = r"broker-a .* timerWheelEnable=false.*set timerWheelEnable=true"
    with LocalRocketMQ(tmp_path / "off", brokers=1, timer_wheel=False) as cluster:
        topic = _name("notimer")
        cluster.update_static_topic(topic, 1, cluster.broker_names)
        with pytest.raises(UnsupportedOperationError, match=refused):
            PopConsumer(cluster.address, _name("g"), topic)
    with LocalRocketMQ(tmp_path / "on", brokers=1) as cluster:
        topic = _name("timeroff")
        cluster.update_static_topic(topic, 1, cluster.broker_names)
        with Producer(cluster.address) as producer:
            producer.send_batch(topic, ["t-0"], queue=0)
        with PopConsumer(cluster.address, _name("g"), topic) as consumer:
            first = wait_until(lambda: consumer.receive(32, 30.0, wait_s=0.5), 30, message="the message popped")
            assert [m.body for m in first] == [b"t-0"]
            update_broker_config(cluster, "timerWheelEnable", "false")
            with pytest.raises(UnsupportedOperationError, match=refused):
                consumer.receive(32, 30.0, wait_s=0.5)


JAVA_PEER = Path(__file__).parents[1] / "support" / "java" / "PopPeer.java"
REVIVE_MARGIN_S = 10  # a message whose invisible time ran out is back in the retry topic within this


def test_receipt_handles_are_shared_with_rocketmqs_java_client(rocketmq_cluster: LocalRocketMQ, tmp_path: Path) -> None:
    """A handle popped by the PopConsumer acks from RocketMQ's Java client (tests/support/java/
    PopPeer.java, its MQClientAPIImpl), and one the Java client popped acks from the PopConsumer:
    the handles are the POP_CK text RocketMQ's client builds. The Java client runs before the first
    pop and answers over its stdin, so each ack comes well within its message's invisible time."""
    topic, group = _name("java"), _name("g")
    broker = rocketmq_cluster.broker_names[0]
    rocketmq_cluster.update_static_topic(topic, 1, [broker])
    with Producer(rocketmq_cluster.address) as producer:
        producer.send_batch(topic, [f"j-{i}" for i in range(4)], queue=0)
    java = [
        "java",
        "-Xmx256m",
        "-cp",
        compile_client(JAVA_PEER, tmp_path),
        "PopPeer",
        rocketmq_cluster.namesrv,
        rocketmq_cluster.broker_addr(broker),
        broker,
        group,
        topic,
    ]
    invisible_s = 8
    with JavaPopPeer(java) as peer, PopConsumer(rocketmq_cluster.address, group, topic) as consumer:
        got: list[PopMessage] = []

        def popped_four() -> bool:
            got.extend(consumer.receive(32, invisible_s, wait_s=0.5))
            return len(got) >= 4

        wait_until(popped_four, 30, message="4 pops")
        by_body = {m.body.decode(): m for m in got}
        assert [peer.ack(by_body[b].handle.decode()) for b in ("j-0", "j-1")] == ["OK", "OK"]
        # j-2 and j-3 are not acked: revived into the retry topic after their invisible time, the
        # Java client pops them (had an ack of j-0 or j-1 not taken, it would be back with them)
        lines = peer.pop(2, 90, invisible_ms=invisible_s * 1000)
        popped = time.monotonic()
        assert sorted(body for body, _ in lines) == ["j-2", "j-3"]
        from_java = [
            by_body[body]._replace(handle=handle.encode(), retried=True, queue_id=-1, queue_offset=-1)
            for body, handle in lines
        ]
        assert consumer.ack_batch(from_java).acked == 2
        # had either ack not taken, its message would be back after its invisible time and a revive
        again: list[PopMessage] = []
        while time.monotonic() < popped + invisible_s + REVIVE_MARGIN_S:
            again.extend(consumer.receive(32, 30.0, wait_s=0.5))
    assert again == []
