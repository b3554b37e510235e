"""The producer's queue choice against real brokers: failover for keyless sends, waiting for
strict keyed sends, giving up clearly, and stale routes after a remap."""

from __future__ import annotations

import threading
import time

import pytest

from staticmq_spark.client import Admin, Producer
from staticmq_spark.errors import BrokerUnavailableError
from staticmq_spark.hashing import queue_for_key


def key_on(broker: str, namesrv: str, topic: str) -> str:
    with Admin(namesrv) as admin:
        view = admin.route_view(topic)
    return next(
        k
        for k in (f"key{i}" for i in range(1000))
        if view.write_queues[queue_for_key(k, view.total_queues)].broker == broker
    )


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
