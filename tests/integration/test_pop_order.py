"""Order pop: a queue with messages in flight hands out nothing more; redelivery keeps the order."""

from __future__ import annotations

import threading
import time

import pytest

from staticmq_spark.client import PopConsumer, PopMessage, Producer, PullConsumer, PullStatus
from staticmq_spark.errors import ReceiptHandleError
from staticmq_spark.protocol.topics.names import dlq_topic
from tests.support.pop_helpers import broker_config, wait_topic
from tests.support.topics import create_topic
from tests.support.waiting import wait_until


def bodies(messages: list[PopMessage]) -> list[str]:
    return [m.body.decode() for m in messages]


def test_order_pop_delivers_in_order_with_redelivery(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("order")
    create_topic(c.namesrv, topic, queues=1)
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, [f"m{i:02d}" for i in range(20)], queue=0)
    consumed: list[str] = []
    with PopConsumer(c.namesrv, "gorder", topic, order=True) as consumer:
        first = consumer.receive(5, invisible_time=1.0, wait_s=2)
        assert bodies(first) == ["m00", "m01", "m02", "m03", "m04"]
        assert [m.reconsume_times for m in first] == [0] * 5
        assert consumer.ack_batch(first[:3]).acked == 3
        consumed += bodies(first[:3])
        assert consumer.receive(5, invisible_time=1.0, wait_s=0.3) == [], "the queue is blocked while m03 is out"
        time.sleep(0.8)  # not a wait: m03 and m04's invisible time (1 s) runs out, they come back
        again = consumer.receive(5, invisible_time=5.0, wait_s=3)
        assert bodies(again) == ["m03", "m04", "m05", "m06", "m07"]
        assert [m.reconsume_times for m in again] == [1, 1, 0, 0, 0]
        # ack out of order: m05 first; the queue stays blocked until all of them are acked
        consumer.ack(again[2])
        consumer.ack_batch([again[0], again[1], again[3]])
        assert consumer.receive(5, invisible_time=1.0, wait_s=0.2) == []
        consumer.ack(again[4])
        consumed += bodies(again)

        def consume_rest() -> bool:
            batch = consumer.receive(4, invisible_time=5.0, wait_s=1)
            assert consumer.ack_batch(batch).acked == len(batch)
            consumed.extend(bodies(batch))
            return len(consumed) >= 20

        wait_until(consume_rest, 10, message=lambda: f"all 20 messages consumed; got {consumed}")
    assert consumed == [f"m{i:02d}" for i in range(20)]
    with PullConsumer(c.namesrv, group="gorder") as puller:
        assert puller.committed(topic, 0, broker="broker-0") == 20


def test_an_ack_opens_a_blocked_queue_for_a_waiting_receive(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("orderwake")
    create_topic(c.namesrv, topic, queues=1)
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, ["a", "b", "c"], queue=0)
    with PopConsumer(c.namesrv, "gwake", topic, order=True) as consumer:
        first = consumer.receive(2, invisible_time=30.0, wait_s=2)
        threading.Timer(0.5, lambda: consumer.ack_batch(first)).start()
        started = time.monotonic()
        rest = consumer.receive(2, invisible_time=30.0, wait_s=8)
        assert bodies(rest) == ["c"] and time.monotonic() - started < 4


def test_change_invisible_time_in_order_pop_keeps_the_queue_blocked_and_refuses_the_old_handle(
    local_cluster, unique_topic
) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("ordercit")
    create_topic(c.namesrv, topic, queues=1)
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, ["a", "b", "c"], queue=0)
    with PopConsumer(c.namesrv, "gocit", topic, order=True) as consumer:
        a, b = consumer.receive(2, invisible_time=0.5, wait_s=2)
        consumer.ack(a)
        later = consumer.change_invisible_time(b, 2.5)
        with pytest.raises(ReceiptHandleError, match="superseded"):
            consumer.ack(b)
        time.sleep(0.7)  # not a wait: b's first invisible time (0.5 s) runs out, its new one (2.5 s) does not
        assert consumer.receive(2, invisible_time=1.0, wait_s=0.3) == [], "b's new invisible time blocks the queue"
        consumer.ack(later)
        assert bodies(consumer.receive(2, invisible_time=1.0, wait_s=2)) == ["c"]


def test_order_pop_sends_a_message_past_the_max_reconsume_count_to_the_dlq(
    local_cluster, unique_topic, tmp_path
) -> None:
    c = local_cluster(brokers=1, config_file=broker_config(tmp_path, pop_max_reconsume_times=1))
    topic = unique_topic("orderdlq")
    create_topic(c.namesrv, topic, queues=1)
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, ["poison", "next"], queue=0)
    seen: list[tuple[str, int]] = []
    with PopConsumer(c.namesrv, "godlq", topic, order=True) as consumer:

        def next_delivered() -> bool:
            batch = consumer.receive(1, invisible_time=0.3, wait_s=0.5)
            seen.extend((m.body.decode(), m.reconsume_times) for m in batch)
            if batch and batch[0].body == b"next":
                consumer.ack(batch[0])
                return True
            return False

        wait_until(next_delivered, 10, message=lambda: f"'next' delivered after the poison message; seen {seen}")
    assert seen == [("poison", 0), ("poison", 1), ("next", 0)]
    wait_topic(c.namesrv, dlq_topic("godlq"))
    with PullConsumer(c.namesrv) as puller:
        res = puller.pull(dlq_topic("godlq"), 0, 0)
    assert res.status is PullStatus.FOUND and res.batch.column("body").to_pylist() == [b"poison"]
