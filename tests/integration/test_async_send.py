"""Producer.send_batch_async against real brokers: each logic queue keeps the order of the calls
while queues are sent at once, results name input rows as send_batch's do, bad input is refused by
the call itself, and a request waiting behind a failed one to the same queue is not sent."""

from __future__ import annotations

import itertools
from concurrent.futures import Future

import pytest

from staticmq_spark.backends.types import SendResult, per_message_outcomes
from staticmq_spark.client import Admin, Producer, PullConsumer
from staticmq_spark.errors import (
    BrokerUnavailableError,
    InvalidBatchError,
    NotSentError,
    QueueNotFoundError,
    TopicNotFoundError,
)
from staticmq_spark.hashing import queue_for_key
from tests.integration.test_producer_failover import key_on
from tests.support.clusters_under_test import ClusterUnderTest, kinds_with
from tests.support.static_helpers import read_queue

SENDS_AND_PULLS = pytest.mark.parametrize("backend", kinds_with("producer", "pull_consumer"), indirect=True)
_n = itertools.count()


@SENDS_AND_PULLS
def test_send_batch_async_keeps_each_logic_queues_order(backend: ClusterUnderTest) -> None:
    topic = f"async-order-{backend.name}-{next(_n)}"
    backend.create(topic, 4, backend.brokers)
    calls = [[(f"user-{(c * 7 + i) % 37}", f"call-{c}-row-{i}") for i in range(50)] for c in range(40)]
    with Producer(backend.address) as producer:
        futures = [producer.send_batch_async(topic, [b for _, b in rows], keys=[k for k, _ in rows]) for rows in calls]
        assert producer.flush(60) == 0
        outcomes = [per_message_outcomes(len(rows), f.result(0), {}) for rows, f in zip(calls, futures, strict=True)]
    with PullConsumer(backend.address) as consumer:
        stored = {q: read_queue(consumer, topic, q) for q in range(4)}
    for q in range(4):
        sent = [body for rows in calls for key, body in rows if queue_for_key(key, 4) == q]
        assert [body.decode() for _, body in stored[q]] == sent
    where = {body.decode(): (q, offset) for q, messages in stored.items() for offset, body in messages}
    for rows, results in zip(calls, outcomes, strict=True):
        assert [(o.queue_id, o.queue_offset) for o in results] == [where[body] for _, body in rows]


@SENDS_AND_PULLS
def test_send_batch_async_to_one_queue_returns_what_send_batch_returns(backend: ClusterUnderTest) -> None:
    topic = f"async-one-{backend.name}-{next(_n)}"
    backend.create(topic, 2, backend.brokers)
    with Producer(backend.address) as producer:
        (now,) = producer.send_batch(topic, [b"a", b"b", b"c"], queue=1)
        later: Future[list[SendResult]] = producer.send_batch_async(topic, [b"d", b"e", b"f"], queue=1)
        (result,) = later.result(30)
    assert (result.queue_id, result.count, result.rows, result.broker) == (now.queue_id, 3, now.rows, now.broker)
    assert result.queue_offset == now.queue_offset + 3


def test_send_batch_async_refuses_bad_input_in_the_call(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("async-bad")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 2, cluster="DefaultCluster")
    with Producer(c.namesrv, active_detection=False) as producer:
        with pytest.raises(QueueNotFoundError, match="has 2 queues; queue 5 does not exist"):
            producer.send_batch_async(topic, [b"x"], queue=5)
        with pytest.raises(TopicNotFoundError):
            producer.send_batch_async(f"{topic}-missing", [b"x"])
        with pytest.raises(InvalidBatchError, match="at least one message"):
            producer.send_batch_async(topic, [])
        assert producer.flush(5) == 0


def test_async_sends_behind_a_failed_request_to_the_same_queue_are_not_sent(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2)
    topic = unique_topic("async-held")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 2, cluster="DefaultCluster")
    down, up = key_on("broker-1", c.namesrv, topic), key_on("broker-0", c.namesrv, topic)
    with Producer(c.namesrv, order="strict", send_timeout_s=2, active_detection=False) as producer:
        producer.send_batch(topic, [b"before"], keys=[down])
        c.kill_broker("broker-1")
        held = [producer.send_batch_async(topic, [f"held-{i}".encode()], keys=[down]) for i in range(5)]
        elsewhere = [producer.send_batch_async(topic, [f"up-{i}".encode()], keys=[up]) for i in range(5)]
        assert producer.flush(60) == 0
        with pytest.raises(BrokerUnavailableError, match="strict order"):
            held[0].result(0)
        for future in held[1:]:
            with pytest.raises(NotSentError, match="an earlier request to the same logic queue failed"):
                future.result(0)
        assert [f.result(0)[0].broker for f in elsewhere] == ["broker-0"] * 5
    c.start_broker("broker-1")
    with Producer(c.namesrv, order="strict", send_timeout_s=60, active_detection=False) as producer:
        retried = producer.send_batch_async(topic, [f"held-{i}".encode() for i in range(5)], keys=[down] * 5)
        assert retried.result(90)[0].count == 5
    with PullConsumer(c.namesrv) as consumer:
        q = queue_for_key(down, 2)
        assert [body for _, body in read_queue(consumer, topic, q)] == [b"before"] + [
            f"held-{i}".encode() for i in range(5)
        ]
