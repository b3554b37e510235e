"""Static topics on real 3-broker clusters: creation, sends and pulls over logic queues, remap
chains, double-read-check, undecided leaders, no-target brokers, refusals, file isolation."""

from __future__ import annotations

import shutil
from collections import Counter

import pytest

from staticmq_spark.backends.address import parse_address
from staticmq_spark.backends.staticmq.client_instance import StaticMQClientInstance
from staticmq_spark.backends.staticmq.rpc import Channels, invoke
from staticmq_spark.client import Admin, Producer, PullConsumer, PullStatus
from staticmq_spark.errors import (
    InconsistentTopicError,
    InvalidArgumentError,
    MappingRejectedError,
    StaticTopicRefusedError,
    TopicNotFoundError,
)
from staticmq_spark.mapping import TopicQueueMapping
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from tests.support.static_helpers import read_queue, send_numbered
from tests.support.waiting import wait_until


def wait_route(namesrv: str, topic: str, expect: dict[int, str], timeout: float = 10) -> None:
    with Admin(namesrv) as admin:

        def leaders() -> dict[int, str]:
            view = admin.route_view(topic)
            return {q: view.write_queues[q].broker for q in expect}

        wait_until(lambda: leaders() == expect, timeout, message=lambda: f"route of {topic} to show {expect}")


def test_create_spreads_logic_queues_and_every_broker_holds_a_copy(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=3)
    topic = unique_topic("static")
    with Admin(c.namesrv) as admin:
        result = admin.update_static_topic(topic, 8, cluster="DefaultCluster")
        assert sorted(Counter(result.created.values()).values()) == [2, 3, 3]
        states = admin.broker_states(topic)
        assert all(s.mapping is not None for s in states.values())
        assert {s.mapping.epoch for s in states.values() if s.mapping} == {result.epoch}
        view = admin.route_view(topic)
        assert view.is_static and view.total_queues == 8 and len(view.write_queues) == 8


def test_send_and_pull_across_all_logic_queues(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=3)
    topic = unique_topic("static")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 6, cluster="DefaultCluster")
    keys = [f"user-{i}" for i in range(300)]
    with Producer(c.namesrv) as producer:
        producer.send_batch(topic, [k.encode() for k in keys], keys=keys)
    with PullConsumer(c.namesrv) as consumer:
        got = []
        for q in range(6):
            rows = read_queue(consumer, topic, q)
            assert [o for o, _ in rows] == list(range(len(rows)))
            got.extend(b.decode() for _, b in rows)
    assert sorted(got) == sorted(keys)


def test_remap_chain_keeps_every_message_in_order_with_jumps(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=3)
    topic = unique_topic("static")
    with Admin(c.namesrv) as admin, Producer(c.namesrv) as producer, PullConsumer(c.namesrv, group="g") as consumer:
        admin.update_static_topic(topic, 1, brokers=["broker-0"])
        expected: list[bytes] = []
        committed = []
        for gen, target in enumerate(["broker-1", "broker-2", "broker-0"]):
            send_numbered(producer, topic, 0, f"gen{gen}", 7)
            expected += [f"gen{gen}-{i}".encode() for i in range(7)]
            rows = read_queue(consumer, topic, 0)
            consumer.commit(topic, 0, rows[-1][0] + 1)  # committed on the segment that holds it
            committed.append(rows[-1][0] + 1)
            admin.remapping_static_topic(topic, brokers=[target])
            wait_route(c.namesrv, topic, {0: target})
            assert consumer.committed(topic, 0) == committed[-1]  # double-read-check after the move
        send_numbered(producer, topic, 0, "gen3", 7)
        expected += [f"gen3-{i}".encode() for i in range(7)]
        rows = read_queue(consumer, topic, 0)
        assert [b for _, b in rows] == expected
        offsets = [o for o, _ in rows]
        assert offsets == sorted(offsets) and offsets[:7] == list(range(7))
        assert {o // 10_000 for o in offsets} == {0, 1, 2, 3}
        tail = read_queue(consumer, topic, 0, start=consumer.committed(topic, 0) or 0)
        assert [b for _, b in tail] == expected[21:]
        status = admin.static_topic_status(topic)[0]
        assert status.ok and [i.gen for i in status.chains[0]] == [0, 1, 2, 3]


def test_remapping_onto_the_current_layout_moves_nothing(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2)
    topic = unique_topic("static")
    with Admin(c.namesrv) as admin:
        created = admin.update_static_topic(topic, 4, cluster="DefaultCluster")
        result = admin.remapping_static_topic(topic, cluster="DefaultCluster")
        assert result.moved == {} and result.epoch == created.epoch


def test_growing_adds_queues_without_moving_and_shrinking_is_refused(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2)
    topic = unique_topic("static")
    with Admin(c.namesrv) as admin:
        first = admin.update_static_topic(topic, 3, cluster="DefaultCluster")
        grown = admin.update_static_topic(topic, 5, cluster="DefaultCluster")
        assert set(grown.created) == {3, 4} and grown.epoch >= first.epoch + 1000
        report, _ = admin.static_topic_status(topic)
        assert {q: report.chains[q][-1].bname for q in range(3)} == first.created
        with pytest.raises(InvalidArgumentError, match="shrinking"):
            admin.update_static_topic(topic, 2, cluster="DefaultCluster")


def test_undecided_leader_is_writable_but_never_read_and_repair_settles_it(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2)
    topic = unique_topic("static")
    with Admin(c.namesrv) as admin, Producer(c.namesrv) as producer, PullConsumer(c.namesrv) as consumer:
        admin.update_static_topic(topic, 1, brokers=["broker-0"])
        send_numbered(producer, topic, 0, "old", 5)

        class Stop(Exception):
            pass

        def stop_at(step: str) -> None:
            if step == "fenced":
                raise Stop

        with pytest.raises(Stop):
            admin.remapping_static_topic(topic, brokers=["broker-1"], on_step=stop_at)
        wait_route(c.namesrv, topic, {0: "broker-1"})
        sent = producer.send(topic, b"while-undecided", queue=0)
        assert sent.queue_offset == -1 and sent.broker == "broker-1"
        assert [b for _, b in read_queue(consumer, topic, 0)] == [f"old-{i}".encode() for i in range(5)]
        assert consumer.pull(topic, 0, 5).status is PullStatus.NOT_FOUND
        report, _ = admin.static_topic_status(topic)
        assert report.undecided == [0]
        with pytest.raises(InconsistentTopicError, match="undecided"):
            admin.update_static_topic(topic, 2, cluster="DefaultCluster")
        with pytest.raises(InconsistentTopicError, match="repairStaticTopic"):
            admin.remapping_static_topic(topic, brokers=["broker-0"])
        admin.repair_static_topic(topic)
        assert admin.static_topic_status(topic)[0].ok
        rows = read_queue(consumer, topic, 0)
        assert [b for _, b in rows] == [*(f"old-{i}".encode() for i in range(5)), b"while-undecided"]
        assert rows[-1][0] == 10_000


def test_no_target_brokers_make_a_lost_broker_detectable(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=3, heartbeat_ms=200, broker_timeout_ms=1500)
    topic = unique_topic("static")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 1, brokers=["broker-2"])
        states = admin.broker_states(topic)
        assert states["broker-0"].mapping is not None and states["broker-0"].mapping.hosted == {}
        c.kill_broker("broker-2")
        wait_until(
            lambda: "broker-2" not in {b.name for b in admin.cluster_info()},
            10,
            interval_s=0.1,
            message="the name server to drop the killed broker-2",
        )
        with pytest.raises(InconsistentTopicError, match="logic queue 0: no live broker hosts it"):
            admin.update_static_topic(topic, 2, cluster="DefaultCluster")
        c.start_broker("broker-2")
        assert admin.update_static_topic(topic, 2, cluster="DefaultCluster").created


def test_update_topic_on_a_static_topic_and_name_conflicts_are_refused(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2)
    static, dynamic = unique_topic("static"), unique_topic("dynamic")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(static, 2, cluster="DefaultCluster")
        with pytest.raises(StaticTopicRefusedError, match="updateStaticTopic"):
            admin.update_topic(static, cluster="DefaultCluster")
        admin.update_topic(dynamic, cluster="DefaultCluster")
        with pytest.raises(StaticTopicRefusedError, match="dynamic"):
            admin.update_static_topic(dynamic, 2, cluster="DefaultCluster")


def test_broker_refuses_mappings_that_break_the_rules(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2)
    topic = unique_topic("static")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 2, cluster="DefaultCluster")
        st = admin.broker_states(topic)["broker-0"]
        assert st.mapping is not None
        good = st.mapping
        stub = StaticMQClientInstance(parse_address(c.namesrv)).channels.broker(st.addr)
        from dataclasses import replace

        def write(m: TopicQueueMapping) -> None:
            invoke("broker-0", stub.WriteMapping, pb.WriteMappingRequest(mapping_json=m.to_json()), 10)

        write(good)  # identical data again: accepted
        with pytest.raises(MappingRejectedError, match="older than the stored epoch"):
            write(replace(good, epoch=good.epoch - 1))
        with pytest.raises(MappingRejectedError, match="names broker 'broker-1'"):
            write(replace(good, bname="broker-1"))
        q, chain = next(iter(good.hosted.items()))
        with pytest.raises(MappingRejectedError, match="cannot become"):
            write(good.with_chains(good.epoch, {q: (replace(chain[0], logic_offset=7),)}))
        reused = replace(chain[0], gen=chain[0].gen + 1, logic_offset=100)
        with pytest.raises(MappingRejectedError, match="two segments"):
            write(good.with_chains(good.epoch, {q: (*chain, reused)}))
        with pytest.raises(MappingRejectedError, match="malformed"):
            invoke("broker-0", stub.WriteMapping, pb.WriteMappingRequest(mapping_json="{}"), 10)
        assert admin.static_topic_status(topic)[0].ok


def test_mapping_file_copied_to_another_broker_is_reported_and_never_served(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2)
    topic = unique_topic("static")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 2, brokers=["broker-0"])
        c.stop_broker("broker-1")
        src = c.data_dir / "broker-0" / "config" / "mappings" / f"{topic}.json"
        dst = c.data_dir / "broker-1" / "config" / "mappings" / f"{topic}.json"
        shutil.copy(src, dst)
        c.start_broker("broker-1")
        state = admin.broker_states(topic)["broker-1"]
        assert state.mapping is None and state.foreign_bname == "broker-0"
        report, _ = admin.static_topic_status(topic)
        assert "holds a mapping file of broker 'broker-0'" in report.describe()
        log = (c.data_dir / "logs" / "broker-1.log").read_text()
        assert "belongs to broker 'broker-0'" in log
        channels = Channels()
        with pytest.raises(TopicNotFoundError, match="no mapping on broker-1"):
            invoke(
                "broker-1", channels.broker(c.broker_addr("broker-1")).Send, pb.SendRequest(topic=topic, queue_id=0), 5
            )
        channels.close()


def test_stale_route_after_remap_is_refreshed_transparently(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2)
    topic = unique_topic("static")
    with Admin(c.namesrv) as admin, Producer(c.namesrv) as producer, PullConsumer(c.namesrv) as consumer:
        admin.update_static_topic(topic, 1, brokers=["broker-0"])
        assert producer.send(topic, b"a", queue=0).broker == "broker-0"
        admin.remapping_static_topic(topic, brokers=["broker-1"])
        wait_route(c.namesrv, topic, {0: "broker-1"})
        result = producer.send(topic, b"b", queue=0)  # cached route still says broker-0
        assert result.broker == "broker-1" and result.queue_offset == 10_000
        assert [b for _, b in read_queue(consumer, topic, 0)] == [b"a", b"b"]


def test_delete_removes_the_static_topic_from_every_broker(local_cluster, unique_topic) -> None:
    c = local_cluster(brokers=2)
    topic = unique_topic("static")
    with Admin(c.namesrv) as admin:
        admin.update_static_topic(topic, 2, cluster="DefaultCluster")
        assert sorted(admin.delete_topic(topic)) == ["broker-0", "broker-1"]
        assert all(s.mapping is None and s.config is None for s in admin.broker_states(topic).values())


def test_items_whose_data_retention_removed_are_dropped_from_the_chain(local_cluster, unique_topic) -> None:
    store = {
        "segment_bytes": 256 * 1024,
        "max_batch_bytes": 128 * 1024,
        "retention_bytes": 512 * 1024,
        "retention_check_interval_ms": 100,
    }
    c = local_cluster(brokers=2, store=store)
    topic, filler = unique_topic("static"), unique_topic("filler")
    with Admin(c.namesrv) as admin, Producer(c.namesrv) as producer, PullConsumer(c.namesrv) as consumer:
        admin.update_static_topic(topic, 1, brokers=["broker-0"])
        admin.update_topic(filler, brokers=["broker-0"], read_queues=1, write_queues=1)
        producer.send_batch(topic, [b"old" * 100] * 50, queue=0)
        admin.remapping_static_topic(topic, brokers=["broker-1"])
        wait_route(c.namesrv, topic, {0: "broker-1"})
        producer.send_batch(topic, [b"new"] * 5, queue=0)
        for _ in range(12):  # roll broker-0's log past the old segment; retention deletes it
            producer.send_batch(filler, [b"x" * 1000] * 100, queue=0)

        def old_segment_gone() -> bool:
            old = admin.broker_states(topic)["broker-0"].physical[0]
            return old.min_offset == old.max_offset == 50

        wait_until(old_segment_gone, 15, interval_s=0.2, message="retention to delete broker-0's old segment")
        assert consumer.pull(topic, 0, 0).status is PullStatus.OFFSET_MOVED
        admin.remapping_static_topic(topic, brokers=["broker-0"])
        report, _ = admin.static_topic_status(topic)
        assert report.ok
        assert [i.bname for i in report.chains[0]] == ["broker-1", "broker-0"], "the expired gen-0 item is gone"
        assert [b for _, b in read_queue(consumer, topic, 0)] == [b"new"] * 5
