"""Pop and exclusive consumption, the same scenarios on broker_stub and on a real Apache RocketMQ
cluster (the backends with a pop or exclusive consumer; see test_backend_conformance.py for the
rest): pop's logic positions across a remapped topic's segments, acks, retries and invisible
times; an exclusive consumer's order across a remap, its successor's resume point, and one
group's consumers never holding one queue at once."""

from __future__ import annotations

import time

from staticmq_spark.client import ExclusiveConsumer, PopConsumer, PopMessage, PullConsumer
from tests.support.clusters_under_test import ClusterUnderTest
from tests.support.conformance import EXCLUSIVE, POPS, remapped, send_numbered, topic_name, unique
from tests.support.static_helpers import read_queue
from tests.support.waiting import wait_until

# ---------------------------------------------------------------------------- pop consumption


def _pop_all(
    consumer: PopConsumer, want: int, timeout_s: float, *, ack: bool = True, invisible_s: float = 30.0
) -> list[PopMessage]:
    """Receive (and batch-ack) until `want` messages came, in delivery order."""
    got: list[PopMessage] = []

    def enough() -> bool:
        messages = consumer.receive(32, invisible_s, wait_s=0.5)
        got.extend(messages)
        if ack and messages:
            result = consumer.ack_batch(messages)
            assert not result.refused, result.refused[:3]
        return len(got) >= want

    wait_until(enough, timeout_s, interval_s=0.01, message=lambda: f"{want} popped messages; got {len(got)}")
    return got


def _retried_position(backend: ClusterUnderTest, origin: PopMessage) -> tuple[int, int]:
    """Where a message revived through the retry topic says it was: its origin on staticmq; no
    logic position (-1, -1) on RocketMQ, whose revive keeps neither queue nor offset."""
    return (-1, -1) if backend.name == "rocketmq" else (origin.queue_id, origin.queue_offset)


@POPS
def test_pop_delivers_every_segment_of_a_remapped_topic_at_the_logic_positions_a_pull_reads(
    backend: ClusterUnderTest,
) -> None:
    """Pop reads the old segments too (on RocketMQ: every broker of the route, its physical
    queues), and names each message by the logic queue and offset a pull gives it."""
    topic = topic_name(backend, "pop-remap")
    pulled = remapped(backend, topic, 2)
    with PopConsumer(backend.address, f"conf-pop-{backend.name}-{unique()}", topic) as consumer:
        got = _pop_all(consumer, 20, 60)
        assert consumer.receive(32, 30.0, wait_s=1.0) == []  # acked ones never come back
    popped = sorted((m.queue_id, m.queue_offset, m.body) for m in got)
    assert popped == sorted((q, o, b) for q, rows in pulled.items() for o, b in rows)
    assert not any(m.retried or m.reconsume_times for m in got)
    assert {m.broker for m in got} <= set(backend.brokers)


@POPS
def test_pop_one_receive_gathers_up_to_max_messages_from_every_broker_of_the_topic(backend: ClusterUnderTest) -> None:
    """How many messages one receive returns, one rule on every backend (PopConsumer's docstring):
    every broker once without waiting, each asked for what is still missing, until max_messages
    are gathered or the pass ends - so one call returns messages of both brokers of a topic whose
    logic queues are on two brokers, and no more than max_messages."""
    topic = topic_name(backend, "pop-gather")
    backend.create(topic, 2, backend.brokers[:2])
    send_numbered(backend, topic, 0, "a", 3)
    send_numbered(backend, topic, 1, "b", 3)
    with PullConsumer(backend.address) as puller:  # stored and readable on both brokers
        wait_until(lambda: all(len(read_queue(puller, topic, q)) == 3 for q in (0, 1)), 30, message="6 messages")
    with PopConsumer(backend.address, f"conf-popgather-{backend.name}-{unique()}", topic) as consumer:
        got = consumer.receive(5, 30.0, wait_s=5.0)
        assert len(got) == 5, [m.body for m in got]
        assert {m.broker for m in got} == set(backend.brokers[:2]), "one receive, both brokers"
        rest = consumer.receive(5, 30.0, wait_s=5.0)
        assert consumer.ack_batch([*got, *rest]).acked == 6
    assert sorted(m.body.decode() for m in [*got, *rest]) == [f"{p}-{i}" for p in "ab" for i in range(3)]


@POPS
def test_pop_ack_and_batch_ack_are_final_and_an_unacked_message_comes_back_retried(backend: ClusterUnderTest) -> None:
    topic = topic_name(backend, "pop-ack")
    backend.create(topic, 1, backend.brokers[:1])
    send_numbered(backend, topic, 0, "m", 4)
    with PopConsumer(backend.address, f"conf-popack-{backend.name}-{unique()}", topic) as consumer:
        first = _pop_all(consumer, 4, 30, ack=False, invisible_s=3.0)
        by_body = {m.body.decode(): m for m in first}
        assert sorted(by_body) == ["m-0", "m-1", "m-2", "m-3"]
        assert sorted((m.queue_id, m.queue_offset) for m in first) == [(0, i) for i in range(4)]
        consumer.ack(by_body["m-0"])
        assert consumer.ack_batch([by_body["m-1"], by_body["m-2"]]).acked == 2
        # m-3 is never acked: its invisible time (3 s, as the others') ends and it comes back; the
        # acked ones would come back with it, so draining a while longer shows they do not
        back = _pop_all(consumer, 1, 60)
        back += [m for _ in range(10) for m in consumer.receive(32, 30.0, wait_s=0.5)]
    assert [(m.body, m.retried, m.reconsume_times) for m in back] == [(b"m-3", True, 1)]
    assert (back[0].queue_id, back[0].queue_offset) == _retried_position(backend, by_body["m-3"])


@POPS
def test_pop_change_invisible_time_holds_a_message_back_until_its_new_time_ends(backend: ClusterUnderTest) -> None:
    topic = topic_name(backend, "pop-cit")
    backend.create(topic, 1, backend.brokers[:1])
    send_numbered(backend, topic, 0, "c", 2)
    with PopConsumer(backend.address, f"conf-popcit-{backend.name}-{unique()}", topic) as consumer:
        held, short = sorted(_pop_all(consumer, 2, 30, ack=False, invisible_s=2.0), key=lambda m: m.body)
        extended = consumer.change_invisible_time(held, 10.0)
        assert extended.invisible_until >= held.invisible_until + 7_000
        assert extended.body == held.body and extended.queue_offset == held.queue_offset
        back = _pop_all(consumer, 1, 60)  # the short one's invisible time ends first
        assert [m.body for m in back] == [short.body]
        assert time.time() * 1000 < extended.invisible_until, "the held message must still be invisible"
        again = _pop_all(consumer, 1, 60)  # then the held one, once its new invisible time ended
        assert [(m.body, m.retried) for m in again] == [(held.body, True)]
        assert time.time() * 1000 >= extended.invisible_until


@POPS
def test_pop_on_a_remapped_topic_brings_back_only_the_unacked_messages_of_every_segment(
    backend: ClusterUnderTest,
) -> None:
    topic = topic_name(backend, "pop-back")
    pulled = remapped(backend, topic, 1)
    with PopConsumer(backend.address, f"conf-popback-{backend.name}-{unique()}", topic) as consumer:
        first = _pop_all(consumer, 10, 60, ack=False, invisible_s=3.0)
        kept = [m for m in first if m.queue_offset % 2 == 0]  # acked: one or more in each segment
        assert consumer.ack_batch(kept).acked == len(kept)
        back = _pop_all(consumer, 10 - len(kept), 60)
        back += [m for _ in range(8) for m in consumer.receive(32, 30.0, wait_s=0.5)]
    assert sorted((m.queue_offset, m.body) for m in first) == sorted(pulled[0])
    origin = {m.body: m for m in first}
    assert sorted(m.body for m in back) == sorted(m.body for m in first if m.queue_offset % 2)
    assert all(m.retried and m.reconsume_times == 1 for m in back)
    assert all((m.queue_id, m.queue_offset) == _retried_position(backend, origin[m.body]) for m in back)


# ---------------------------------------------------------------------------- exclusive consumption


def _exclusive_rows(consumer: ExclusiveConsumer, want: int, timeout_s: float) -> list[tuple[int, int, bytes]]:
    """(logic queue, logic offset, body) of what `consumer` hands out, until `want` rows or time is up."""
    rows: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    while len(rows) < want and time.monotonic() < deadline:
        for r in consumer.poll(max_messages=4, wait_s=0.3):
            offsets, bodies = r.batch.column("queue_offset").to_pylist(), r.batch.column("body").to_pylist()
            rows.extend((r.queue_id, o, b) for o, b in zip(offsets, bodies, strict=True))
    return rows


@EXCLUSIVE
def test_exclusive_consumer_reads_a_remapped_queue_in_order_and_its_successor_resumes_at_its_commit(
    backend: ClusterUnderTest,
) -> None:
    topic = topic_name(backend, "exclusive")
    expected = remapped(backend, topic, 2)[1]  # logic offsets 0..4, 10000..10002, 20000..20001
    group = f"conf-excl-{backend.name}-{unique()}"
    first = ExclusiveConsumer(backend.address, group, topic, queues=[1], lease_s=5)
    second = ExclusiveConsumer(backend.address, group, topic, queues=[1], lease_s=5)
    try:
        got = _exclusive_rows(first, 6, 30)
        assert [(o, b) for _, o, b in got] == expected[: len(got)] and {q for q, _, _ in got} == {1}
        assert [q.queue_id for q in first.held] == [1]
        first.commit()
        assert second.poll(max_messages=4, wait_s=1) == [] and second.held == []  # the first one holds it
        first.close()  # commits and releases at once
        rest = _exclusive_rows(second, len(expected) - len(got), 30)
        assert [(o, b) for _, o, b in rest] == expected[len(got) :]
        assert [q.queue_id for q in second.held] == [1]
    finally:
        second.close()
        first.close()


@EXCLUSIVE
def test_exclusive_consumers_of_one_group_never_hold_one_queue_at_once_and_together_hold_all(
    backend: ClusterUnderTest,
) -> None:
    topic = topic_name(backend, "exclusive-pair")
    backend.create(topic, 4, backend.brokers)
    group = f"conf-excl-pair-{backend.name}-{unique()}"
    with (
        ExclusiveConsumer(backend.address, group, topic, lease_s=5) as one,
        ExclusiveConsumer(backend.address, group, topic, lease_s=5) as two,
    ):
        seen: list[tuple[set[int], set[int]]] = []

        def covered() -> bool:
            held = ({q.queue_id for q in one.renew()}, {q.queue_id for q in two.renew()})
            seen.append(held)
            return held[0] | held[1] == {0, 1, 2, 3}

        wait_until(covered, 60, interval_s=0.2, message=lambda: f"every queue held; held {seen[-3:]}")
        for _ in range(10):
            covered()
        assert all(not (a & b) for a, b in seen), seen
