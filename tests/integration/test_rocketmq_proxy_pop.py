"""staticmq's PopConsumer and RocketMQ's gRPC SimpleConsumer (rocketmq-client-java through
RocketMQ's own proxy, tests/support/java/SimplePeer.java) in one consumer group on a remapped
static topic: they share the group's pops, acks and retries."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from staticmq_spark.client import PopConsumer, PopMessage, Producer, PullConsumer
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from tests.support.java_pop_peer import JavaPopPeer
from tests.support.rocketmq_proxy import LocalRocketMQProxy, compile_simple_client
from tests.support.static_helpers import read_queue

SIMPLE_PEER = Path(__file__).parents[1] / "support" / "java" / "SimplePeer.java"
REVIVE_MARGIN_S = 10  # a message whose invisible time ran out is back in the retry topic within this
_n = itertools.count()


@pytest.fixture(scope="module")
def proxy(rocketmq_cluster: LocalRocketMQ, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRocketMQProxy]:
    """RocketMQ 5.5.0's proxy in cluster mode in front of the session's RocketMQ cluster; a failed
    fetch or start fails the tests."""
    started = LocalRocketMQProxy(rocketmq_cluster, tmp_path_factory.mktemp("proxy"))
    try:
        yield started.start()
    finally:
        started.close()


def _receive_until(consumer: PopConsumer, want: int, invisible_s: float, timeout_s: float) -> list[PopMessage]:
    got: list[PopMessage] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        got.extend(consumer.receive(32, invisible_s, wait_s=0.5))
    return got


def test_pop_consumer_and_rocketmqs_simple_consumer_through_its_proxy_share_one_group(
    rocketmq_cluster: LocalRocketMQ, proxy: LocalRocketMQProxy, tmp_path: Path
) -> None:
    """A static topic of 2 logic queues with a backlog on both segments (20 messages per queue
    before `remappingStaticTopic`, 20 after). The Java SimpleConsumer takes 10 deliveries and acks 7;
    the PopConsumer gets every other message once, each with the logic position a pull would give
    it, and, once their invisible time ran out, the Java client's 3 unacked ones as retries (never
    an acked one). The 2 the PopConsumer puts back come to the Java client; then nothing is left."""
    topic, group = f"rmqproxy-{next(_n)}", f"rmqproxy-g-{next(_n)}"
    first, second = rocketmq_cluster.broker_names[:2]
    rocketmq_cluster.update_static_topic(topic, 2, [first])
    with Producer(rocketmq_cluster.address) as producer:
        for segment in range(2):
            if segment == 1:
                rocketmq_cluster.remap_static_topic(topic, [second])
            for queue in range(2):
                producer.send_batch(topic, [f"m-{queue}-{20 * segment + i}" for i in range(20)], queue=queue)
    with PullConsumer(rocketmq_cluster.address) as puller:  # body -> (logic queue, logic offset) of a pull
        sent = {body.decode(): (q, offset) for q in range(2) for offset, body in read_queue(puller, topic, q)}
    assert len(sent) == 80
    java = ["java", "-Xmx256m", "-cp", compile_simple_client(SIMPLE_PEER, tmp_path), "SimplePeer"]
    invisible_s = 10
    with (
        JavaPopPeer([*java, proxy.endpoint, group, topic]) as peer,
        PopConsumer(rocketmq_cluster.address, group, topic) as consumer,
    ):
        from_java = peer.pop(10, 60, invisible_ms=invisible_s * 1000)[:10]
        java_bodies = [body for body, _ in from_java]
        assert len(set(java_bodies)) == 10 and set(java_bodies) <= set(sent)
        assert [peer.ack(handle) for _, handle in from_java[:7]] == ["OK"] * 7
        rest = set(sent) - set(java_bodies)
        got = _receive_until(consumer, len(rest) + 3, 60.0, invisible_s + REVIVE_MARGIN_S + 60)
        firsts = [m for m in got if not m.retried]
        assert sorted(m.body.decode() for m in firsts) == sorted(rest)
        assert all((m.queue_id, m.queue_offset) == sent[m.body.decode()] for m in firsts)
        retried = [m for m in got if m.retried]
        assert sorted(m.body.decode() for m in retried) == sorted(java_bodies[7:])
        assert all((m.queue_id, m.queue_offset) == (-1, -1) for m in retried)
        kept = firsts[:2]
        assert consumer.ack_batch([*firsts[2:], *retried]).acked == len(got) - 2
        for message in kept:  # put back: visible again after invisible_s
            consumer.change_invisible_time(message, invisible_s)
        back = peer.pop(2, invisible_s + REVIVE_MARGIN_S + 30, invisible_ms=60_000)
        assert sorted(body for body, _ in back) == sorted(m.body.decode() for m in kept)
        assert [peer.ack(handle) for _, handle in back] == ["OK", "OK"]
        # had any ack above not taken, its message would be back within this
        again = _receive_until(consumer, 1, 30.0, invisible_s + REVIVE_MARGIN_S)
        assert [m.body for m in again] == []
        assert peer.pop(1, 3, invisible_ms=30_000) == []
