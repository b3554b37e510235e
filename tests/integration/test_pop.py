"""Pop (shared consumption) against real brokers: invisible time, batch ack, retry and DLQ,
change_invisible_time, handles, long polling, several brokers, and the 100k-message run."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter

import pytest

from staticmq_spark.client import PopConsumer, PopMessage, Producer, PullConsumer, PullResult, PullStatus
from staticmq_spark.errors import InvalidArgumentError, ReceiptHandleError
from staticmq_spark.protocol.consume import pop_properties
from staticmq_spark.protocol.consume.ack_outcomes import AckOutcome
from staticmq_spark.protocol.topics.names import dlq_topic
from tests.support.pop_helpers import broker_config, drain, wait_topic
from tests.support.topics import create_topic
from tests.support.waiting import wait_until


def test_four_consumers_pop_100k_messages_and_each_is_acked_exactly_once(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2, flush="async")
    topic = unique_topic("pop100k")
    create_topic(c.namesrv, topic, queues=4)
    total = 100_000
    with Producer(c.namesrv) as producer:
        for start in range(0, total, 10_000):
            producer.send_batch(topic, [b"%06d" % i for i in range(start, start + 10_000)])
    acked: Counter[bytes] = Counter()
    failed: set[bytes] = set()
    redelivered: Counter[bytes] = Counter()
    expired_refusals = 0
    lock = threading.Lock()
    done = threading.Event()

    def consume(seed: int) -> None:
        nonlocal expired_refusals
        rng = random.Random(seed)
        with PopConsumer(c.namesrv, "g100k", topic, wait_s=0.5) as consumer:
            while not done.is_set():
                messages = consumer.receive(256, invisible_time=3.0)
                keep: list[PopMessage] = []
                with lock:
                    for m in messages:
                        if m.reconsume_times:
                            redelivered[m.body] += 1
                        elif m.body not in failed and rng.random() < 0.1:
                            failed.add(m.body)  # fail it once: no ack, it must come back
                            continue
                        keep.append(m)
                result = consumer.ack_batch(keep)
                with lock:
                    refused = {id(r.message) for r in result.refused}
                    for r in result.refused:
                        assert r.outcome is AckOutcome.EXPIRED, r.reason
                        expired_refusals += 1
                    acked.update(m.body for m in keep if id(m) not in refused)
                    if len(acked) == total:
                        done.set()

    workers = [threading.Thread(target=consume, args=(seed,)) for seed in range(4)]
    started = time.monotonic()
    for w in workers:
        w.start()
    done.wait(120)
    done.set()
    for w in workers:
        w.join(30)
    assert len(acked) == total, f"only {len(acked)} of {total} acked in {time.monotonic() - started:.0f}s"
    assert set(acked.values()) == {1}, "a message was acked twice as a success"
    assert 8_000 < len(failed) < 12_000
    assert failed <= set(redelivered), "every failed message came back"
    assert sum(redelivered.values()) == len(failed) + expired_refusals


def test_never_acked_messages_come_back_then_go_to_the_dlq(local_cluster, unique_topic, tmp_path) -> None:
    config = broker_config(tmp_path, pop_max_reconsume_times=2)
    c = local_cluster(brokers=1, config_file=config)
    topic = unique_topic("popdlq")
    create_topic(c.namesrv, topic, queues=2)
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, [b"a", b"b", b"c"], keys=["ka", "kb", "kc"], properties=[{"n": "1"}] * 3)
    deliveries: list[tuple[bytes, int, float]] = []
    with PopConsumer(c.namesrv, "gdlq", topic) as consumer:
        started = time.monotonic()
        first = consumer.receive(10, invisible_time=1.0, wait_s=2)
        deliveries += [(m.body, m.reconsume_times, time.monotonic() - started) for m in first]
        assert sorted(m.body for m in first) == [b"a", b"b", b"c"]
        assert consumer.receive(10, invisible_time=1.0, wait_s=0.3) == []  # invisible meanwhile

        def redelivered() -> bool:
            for m in consumer.receive(10, invisible_time=1.0, wait_s=1):
                deliveries.append((m.body, m.reconsume_times, time.monotonic() - started))
                assert m.key == f"k{m.body.decode()}" and dict(m.properties) == {"n": "1"}
                assert m.retried and m.queue_offset in (0, 1, 2)
            return len(deliveries) >= 9

        wait_until(redelivered, 10, message=lambda: f"each message delivered 3 times; deliveries {deliveries}")
    for body in (b"a", b"b", b"c"):
        times = [(r, t) for b, r, t in deliveries if b == body]
        assert [r for r, _ in times] == [0, 1, 2], f"{body!r} delivered {times}"
        assert all(later - earlier >= 0.9 for (_, earlier), (_, later) in itertools.pairwise(times))
    wait_topic(c.namesrv, dlq_topic("gdlq"))
    with PullConsumer(c.namesrv) as puller:

        def dead_letters() -> PullResult | None:
            res = puller.pull(dlq_topic("gdlq"), 0, 0, max_messages=10)
            return res if res.status is PullStatus.FOUND and res.count == 3 else None

        res = wait_until(dead_letters, 10, interval_s=0.2, message=f"the 3 messages in {dlq_topic('gdlq')}")
        rows = res.batch.to_pylist()
    assert sorted(r["body"] for r in rows) == [b"a", b"b", b"c"]
    props = {k: v for k, v in rows[0]["properties"]}
    assert props[pop_properties.RECONSUME_TIMES] == "3" and props[pop_properties.ORIGIN_TOPIC] == topic
    assert props["n"] == "1"


def test_revive_from_the_revive_log_when_buffer_merge_is_off(local_cluster, unique_topic, tmp_path) -> None:
    config = broker_config(tmp_path, pop_buffer_merge=False, pop_max_reconsume_times=1)
    c = local_cluster(brokers=1, config_file=config)
    topic = unique_topic("popnomerge")
    create_topic(c.namesrv, topic, queues=1)
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, [b"x", b"y", b"z"])
    with PopConsumer(c.namesrv, "gnm", topic) as consumer:
        first = consumer.receive(10, invisible_time=0.5, wait_s=2)
        consumer.ack(next(m for m in first if m.body == b"x"))
        again = drain(consumer, 4, ack=False, batch=10)
    assert Counter((m.body, m.reconsume_times) for m in again) == {(b"y", 1): 1, (b"z", 1): 1}


def test_change_invisible_time_issues_a_new_handle_and_the_old_one_no_longer_acks(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("popcit")
    create_topic(c.namesrv, topic, queues=1)
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, [b"m0", b"m1"])
    with PopConsumer(c.namesrv, "gcit", topic) as consumer:
        first = consumer.receive(2, invisible_time=1.0, wait_s=2)
        extended = consumer.change_invisible_time(first[0], 8.0)
        assert extended.handle != first[0].handle and extended.invisible_until > first[0].invisible_until
        with pytest.raises(ReceiptHandleError, match="superseded by change_invisible_time"):
            consumer.ack(first[0])
        time.sleep(1.5)  # not a wait: m1's invisible time (1 s) runs out, m0's new one (8 s) does not
        back = drain(consumer, 1.5, ack=False, batch=10)
        assert [(m.body, m.reconsume_times) for m in back] == [(b"m1", 1)]
        consumer.ack(extended)
        with pytest.raises(ReceiptHandleError, match="already acked"):
            consumer.ack(extended)
        nack = consumer.change_invisible_time(back[0], 0)  # 0: let it come back at once
        again = drain(consumer, 1.5, ack=True, batch=10)
        assert [(m.body, m.reconsume_times) for m in again] == [(b"m1", 2)]
        with pytest.raises(ReceiptHandleError, match=r"retry topic|checkpoint"):
            consumer.ack(nack)


def test_forged_and_expired_handles_are_refused_with_a_clear_reason(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("popforge")
    create_topic(c.namesrv, topic, queues=1)
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, [b"m0", b"m1", b"m2"])
    with PopConsumer(c.namesrv, "gforge", topic) as consumer, PopConsumer(c.namesrv, "other", topic) as other:
        m0, m1, m2 = consumer.receive(3, invisible_time=3.0, wait_s=2)
        forged = bytearray(m0.handle)
        forged[5] ^= 1
        with pytest.raises(ReceiptHandleError, match="not issued by this broker or was altered"):
            consumer.ack(m0._replace(handle=bytes(forged)))
        with pytest.raises(ReceiptHandleError, match="another consumer group"):
            other.ack(m1)
        result = consumer.ack_batch([m0, m0._replace(handle=bytes(forged))])
        assert result.acked == 1 and [r.outcome for r in result.refused] == [AckOutcome.FORGED]
        # not a wait: m2's invisible time runs out (the client reads the broker's clock, on this host)
        time.sleep(max(0.0, m2.invisible_until / 1000 - time.time()) + 0.05)
        with pytest.raises(ReceiptHandleError, match=r"expired|sent back through the retry topic"):
            consumer.ack(m2)
        with pytest.raises(ReceiptHandleError):
            consumer.change_invisible_time(m2, 5)


def test_receive_long_polls_until_a_message_arrives(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("poplp")
    create_topic(c.namesrv, topic, queues=4)
    with PopConsumer(c.namesrv, "glp", topic) as consumer, Producer(c.namesrv) as producer:
        assert consumer.receive(5, 5.0, wait_s=0.3) == []
        threading.Timer(0.6, lambda: producer.send(topic, b"late", queue=3)).start()
        started = time.monotonic()
        got = consumer.receive(5, 5.0, wait_s=8)
        waited = time.monotonic() - started
    assert [m.body for m in got] == [b"late"] and got[0].queue_id == 3
    assert 0.4 < waited < 4


def test_consumers_share_a_group_across_every_broker_of_the_topic(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2)
    topic = unique_topic("popshare")
    create_topic(c.namesrv, topic, queues=2)
    with Producer(c.namesrv) as producer:
        results = producer.send_batch(topic, [f"m{i}".encode() for i in range(200)], keys=[f"k{i}" for i in range(200)])
    assert {r.broker for r in results} == {"broker-0", "broker-1"}
    with PopConsumer(c.namesrv, "gshare", topic) as a, PopConsumer(c.namesrv, "gshare", topic) as b:
        got = drain(a, 1.0, batch=30) + drain(b, 1.0, batch=30)
        got += drain(a, 0.5) + drain(b, 0.5)
    assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(200))
    assert {m.broker for m in got} == {"broker-0", "broker-1"}


def test_bad_pop_arguments_are_refused(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=1)
    topic = unique_topic("popargs")
    create_topic(c.namesrv, topic, queues=1)
    with PopConsumer(c.namesrv, "gargs", topic) as consumer:
        with pytest.raises(InvalidArgumentError, match="max_messages must be positive"):
            consumer.receive(0, 1.0, wait_s=0)
        with pytest.raises(InvalidArgumentError, match="invisible time"):
            consumer.receive(1, 0.01, wait_s=0)
    with (
        PopConsumer(c.namesrv, "g" * 200, topic) as consumer,
        pytest.raises(InvalidArgumentError, match="use a shorter group name"),
    ):
        consumer.receive(1, 1.0, wait_s=0)


def test_one_receive_asks_a_broker_for_at_most_what_one_pop_hands_out(local_cluster, unique_topic) -> None:
    """More than a broker_stub pop hands out (4096): one receive asks each broker for that much at
    the most (not refused as the broker refuses a larger pop) and returns after its pass over the
    brokers, as PopConsumer's docstring says; the next receive gets the rest."""
    c = local_cluster(brokers=1)
    topic = unique_topic("popcap")
    create_topic(c.namesrv, topic, queues=1)
    sent = [b"%05d" % i for i in range(5000)]
    with Producer(c.namesrv) as producer, PopConsumer(c.namesrv, "gcap", topic) as consumer:
        producer.send_batch(topic, sent)
        first, rest = consumer.receive(5000, 30.0, wait_s=2), consumer.receive(5000, 30.0, wait_s=2)
        assert consumer.ack_batch([*first, *rest]).acked == len(sent)
    assert (len(first), len(rest)) == (4096, 904)
    assert sorted(m.body for m in [*first, *rest]) == sent
