"""kill -9 of a broker with popped messages in flight: after the restart the acked ones never
come back, the in-flight ones do (once their invisible time ends), and handles still work."""

from __future__ import annotations

import time
from collections import Counter

from staticmq_spark.client import PopConsumer, PopMessage, Producer, PullConsumer
from staticmq_spark.protocol.topics.names import retry_topic
from tests.support.pop_helpers import drain, wait_topic
from tests.support.topics import create_topic
from tests.support.waiting import wait_until


def test_kill_9_keeps_acks_and_brings_back_messages_in_flight(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("popcrash")
    create_topic(c.namesrv, topic, queues=2)
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, [b"%03d" % i for i in range(100)])
    with PopConsumer(c.namesrv, "gcrash", topic) as consumer:
        popped: list[PopMessage] = []

        def pop_all() -> bool:
            popped.extend(consumer.receive(30, invisible_time=6.0, wait_s=1))
            return len(popped) >= 100

        wait_until(pop_all, 30, message=lambda: f"all 100 messages popped; got {len(popped)}")
        popped_at = time.monotonic()
        assert consumer.ack_batch(popped[:40]).acked == 40
        c.kill_broker("broker-0")
        c.start_broker("broker-0")
        assert time.monotonic() - popped_at < 5, "the restart took longer than the invisible time"
        assert consumer.ack_batch(popped[40:50]).acked == 10  # handles survive the restart
        assert consumer.receive(100, invisible_time=6.0, wait_s=0.5) == []  # still invisible
        back = drain(consumer, 9.0)
    expected = {m.body for m in popped[50:]}
    assert Counter(m.body for m in back) == Counter(expected), "exactly the un-acked messages come back, once"
    assert {m.reconsume_times for m in back} == {1}


def test_a_second_crash_after_the_revive_does_not_duplicate_retries(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("popcrash2")
    create_topic(c.namesrv, topic, queues=1)
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, [b"a", b"b"])
    with PopConsumer(c.namesrv, "gcrash2", topic) as consumer:
        assert len(consumer.receive(2, invisible_time=0.5, wait_s=2)) == 2
        retry = retry_topic("gcrash2", topic)
        wait_topic(c.namesrv, retry)
        with PullConsumer(c.namesrv) as puller:  # both revived into the retry topic
            wait_until(lambda: puller.max_offset(retry, 0) == 2, 10, message=f"a and b revived into {retry}")
        c.kill_broker("broker-0")
        c.start_broker("broker-0")
        back = drain(consumer, 3.0)
    assert sorted((m.body, m.reconsume_times) for m in back) == [(b"a", 1), (b"b", 1)]


def test_order_pop_after_kill_9_redelivers_in_order_without_the_acked_ones(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("popcrashorder")
    create_topic(c.namesrv, topic, queues=1)
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, [f"m{i}" for i in range(8)], queue=0)
    with PopConsumer(c.namesrv, "gco", topic, order=True) as consumer:
        # invisible long enough for the restart to end first, even on a busy machine
        first = consumer.receive(5, invisible_time=8.0, wait_s=2)
        assert consumer.ack_batch([first[0], first[1], first[3]]).acked == 3
        c.kill_broker("broker-0")
        c.start_broker("broker-0")
        assert consumer.receive(5, invisible_time=2.0, wait_s=0.3) == [], "still blocked after the restart"
        seen: list[tuple[str, int]] = []

        def redelivered() -> bool:
            batch = consumer.receive(5, invisible_time=5.0, wait_s=1)
            consumer.ack_batch(batch)
            seen.extend((m.body.decode(), m.reconsume_times) for m in batch)
            return len(seen) >= 5

        wait_until(redelivered, 25, message=lambda: f"5 messages redelivered after the restart; got {seen}")
    assert seen == [("m2", 1), ("m4", 1), ("m5", 0), ("m6", 0), ("m7", 0)]
