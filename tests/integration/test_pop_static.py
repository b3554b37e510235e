"""Pop on static topics: each logic queue is popped at its leader, through the mapping across
segments and remaps; queue offsets are logic offsets."""

from __future__ import annotations

from collections import Counter

from staticmq_spark.client import Admin, PopConsumer, Producer
from tests.support.pop_helpers import drain, wait_leader
from tests.support.static_helpers import send_numbered


def test_pop_on_a_static_topic_after_a_remap_reads_across_segments(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2)
    topic = unique_topic("popstatic")
    with Admin(c.namesrv) as admin, Producer(c.namesrv) as producer:
        admin.update_static_topic(topic, 1, brokers=["broker-0"])
        send_numbered(producer, topic, 0, "old", 7)
        with PopConsumer(c.namesrv, "gstatic", topic) as consumer:
            first = consumer.receive(3, invisible_time=30.0, wait_s=2)
            assert [(m.queue_id, m.queue_offset, m.broker) for m in first] == [(0, i, "broker-0") for i in range(3)]
            consumer.ack_batch(first)
            in_flight = consumer.receive(2, invisible_time=1.5, wait_s=2)  # never acked: revived on broker-0
            assert [m.queue_offset for m in in_flight] == [3, 4]

            admin.remapping_static_topic(topic, brokers=["broker-1"])
            wait_leader(c.namesrv, topic, 0, "broker-1")
            new_offsets = send_numbered(producer, topic, 0, "new", 7)
            assert new_offsets == list(range(10_000, 10_007))
            rest = drain(consumer, 5.0)

    acked = Counter((m.queue_offset, m.body.decode()) for m in [*first, *rest])
    expected = {(i, f"old-{i}") for i in range(7)} | {(10_000 + i, f"new-{i}") for i in range(7)}
    assert set(acked) == expected and set(acked.values()) == {1}
    by_offset = {m.queue_offset: m for m in rest}
    assert {by_offset[o].broker for o in (5, 6)} == {"broker-1"}, "the new leader read the old segment remotely"
    assert {by_offset[o].broker for o in range(10_000, 10_007)} == {"broker-1"}
    assert [(by_offset[o].broker, by_offset[o].reconsume_times) for o in (3, 4)] == [("broker-0", 1)] * 2


def test_every_logic_queue_is_popped_once_by_its_leader(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=3)
    topic = unique_topic("popstatic6")
    with Admin(c.namesrv) as admin, Producer(c.namesrv) as producer:
        admin.update_static_topic(topic, 6, cluster="DefaultCluster")
        keys = [f"user-{i}" for i in range(300)]
        producer.send_batch(topic, [k.encode() for k in keys], keys=keys)
        with PopConsumer(c.namesrv, "gs6", topic) as consumer:
            got = drain(consumer, 3.0, batch=50)
    assert sorted(m.body.decode() for m in got) == sorted(keys)
    per_queue: dict[int, list[int]] = {}
    for m in got:
        per_queue.setdefault(m.queue_id, []).append(m.queue_offset)
    assert set(per_queue) == set(range(6))
    assert all(sorted(offsets) == list(range(len(offsets))) for offsets in per_queue.values())
    assert len({m.broker for m in got}) == 3
