"""The producer's queue choice against real brokers: failover for keyless sends, waiting for
strict keyed sends, giving up clearly, stale routes after a remap, and per-message outcomes of a
batch whose queues are partly on a dead broker."""

from __future__ import annotations

import threading
import time

import pytest

from staticmq_spark.client import Admin, Producer, PullConsumer
from staticmq_spark.errors import BrokerUnavailableError, PartialSendError
from staticmq_spark.hashing import queue_for_key
from tests.support.static_helpers import read_queue


def leaders(namesrv: str, topic: str) -> dict[int, str]:
    """Logic queue -> the broker that leads it."""
    with PullConsumer(namesrv) as consumer:
        return {q.queue_id: q.broker for q in consumer.queues(topic, refresh=True)}


def key_on(broker: str, namesrv: str, topic: str) -> str:
    leader = leaders(namesrv, topic)
    return next(k for k in (f"key{i}" for i in range(1000)) if leader[queue_for_key(k, len(leader))] == broker)


def test_keyless_sends_flow_to_the_other_brokers_when_one_is_killed(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2, heartbeat_ms=200, broker_timeout_ms=60_000)
    topic = unique_topic("failover")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 4, cluster="DefaultCluster")
    with Producer(c.namesrv, send_timeout_s=10, active_detection=True, detection_interval_s=0.2) as producer:
        producer.send(topic, b"warm-up")
        c.kill_broker("broker-1")
        brokers = [producer.send(topic, f"m{i}".encode()).broker for i in range(40)]
    assert set(brokers) == {"broker-0"}


def test_strict_keyed_send_waits_for_its_broker_and_succeeds_after_it_returns(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2)
    topic = unique_topic("strict")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 2, cluster="DefaultCluster")
    key = key_on("broker-1", c.namesrv, topic)
    with Producer(c.namesrv, order="strict", send_timeout_s=60, active_detection=False) as producer:
        first = producer.send(topic, b"before", key=key)
        c.kill_broker("broker-1")
        threading.Timer(1.5, lambda: c.start_broker("broker-1")).start()
        started = time.monotonic()
        second = producer.send(topic, b"after", key=key)
    assert second.queue_id == first.queue_id and second.broker == "broker-1"
    assert second.queue_offset == first.queue_offset + 1
    assert time.monotonic() - started >= 1.0


def test_strict_keyed_send_fails_clearly_after_its_timeout_and_never_moves(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2)
    topic = unique_topic("strict")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 2, cluster="DefaultCluster")
    key = key_on("broker-1", c.namesrv, topic)
    with Producer(c.namesrv, order="strict", send_timeout_s=2, active_detection=False) as producer:
        c.kill_broker("broker-1")
        with pytest.raises(BrokerUnavailableError, match="strict order: not moved to another queue"):
            producer.send(topic, b"x", key=key)


def test_send_each_reports_per_message_outcomes_when_a_broker_dies_mid_batch(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2)
    topic = unique_topic("outcomes")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 4, cluster="DefaultCluster")
    leader = leaders(c.namesrv, topic)
    assert set(leader.values()) == {"broker-0", "broker-1"}
    keys = [f"key{i}" for i in range(40)]
    target = [queue_for_key(k, 4) for k in keys]
    assert set(target) == {0, 1, 2, 3}
    bodies = [f"m{i}".encode() for i in range(len(keys))]
    with Producer(c.namesrv, order="best-tried", send_timeout_s=2, retries=1, active_detection=False) as producer:
        warm = producer.send_each(topic, [b"warm-up"] * 4, queues=[0, 1, 2, 3])
        assert [(o.queue_id, o.queue_offset, o.error) for o in warm] == [(q, 0, None) for q in range(4)]
        c.kill_broker("broker-1")  # SIGKILL
        outcomes = producer.send_each(topic, bodies, keys=keys)
        with pytest.raises(PartialSendError) as raised:  # the same batch again, through send_batch
            producer.send_batch(topic, bodies, keys=keys)

    assert [o.index for o in outcomes] == list(range(len(keys)))
    for o, q in zip(outcomes, target, strict=True):
        if leader[q] == "broker-0":
            assert o.error is None and (o.queue_id, o.broker) == (q, "broker-0") and o.queue_offset >= 1, o
        else:
            assert isinstance(o.error, BrokerUnavailableError) and o.queue_offset == -1, o
    reported = {(o.queue_id, o.queue_offset, bodies[o.index]) for o in outcomes if o.error is None}
    assert 0 < len(reported) < len(keys)

    partial = raised.value
    assert not partial.retriable
    assert sorted(partial.failed) == [o.index for o in outcomes if o.error is not None]
    assert all(r.rows for r in partial.stored)
    assert sorted(row for r in partial.stored for row in r.rows or ()) == [o.index for o in outcomes if o.error is None]
    reported_again = {
        (r.queue_id, r.queue_offset + i, bodies[row]) for r in partial.stored for i, row in enumerate(r.rows or ())
    }
    assert not reported & reported_again

    c.start_broker("broker-1")  # its queues must hold none of the failed rows either
    with PullConsumer(c.namesrv) as consumer:
        read = [(q, offset, body) for q in range(4) for offset, body in read_queue(consumer, topic, q)]
    messages = [m for m in read if m[2] != b"warm-up"]
    assert len(messages) == len(set(messages)), "a message stored twice"
    assert set(messages) == reported | reported_again
