"""The same static-topic scenarios on broker_stub, on a real Apache RocketMQ cluster and on the
memory backend: create and remap with the backend's own admin, send keyed rows, pull across remaps,
offsets and group offsets, the exactly-once sink and tag filters applied by the brokers (pop and
exclusive consumption: test_backend_consumption_conformance.py).

Each scenario runs on every cluster whose backend declares the capabilities it uses
(`Capabilities`, see tests/support/clusters_under_test.py): the memory backend has no producer
and no pull consumer, so the scenarios that send or pull outside Spark run on the other two, and
`test_a_backend_without_a_producer_or_pull_consumer_refuses_naming_the_operation` holds that it
says so; the ones that use only the admin, the reader and the sink run on all three."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from staticmq_spark.backends import open_backend
from staticmq_spark.backends.types import WriteSettings
from staticmq_spark.client import Admin, Producer, PullConsumer, PullStatus
from staticmq_spark.errors import InvalidArgumentError, UnsupportedOperationError
from staticmq_spark.hashing import queue_for_key
from staticmq_spark.source.snapshot import take_snapshot
from tests.support.clusters_under_test import ClusterUnderTest, kinds_without
from tests.support.conformance import EVERY, SENDS_AND_PULLS, on, remapped, send_numbered, topic_name, unique
from tests.support.sink_tasks import write_task
from tests.support.static_helpers import read_queue, read_through_reader


@SENDS_AND_PULLS
def test_keyed_send_lands_in_murmur3_logic_queue(backend: ClusterUnderTest) -> None:
    topic = topic_name(backend, "keyed")
    backend.create(topic, 4, backend.brokers)
    keys = [f"user-{i}" for i in range(40)]
    with Producer(backend.address) as producer:
        results = producer.send_batch(topic, [f"v-{k}" for k in keys], keys=keys)
    placed = {keys[row]: r.queue_id for r in results for row in (r.rows or range(r.count))}
    assert placed == {k: queue_for_key(k, 4) for k in keys}
    with PullConsumer(backend.address) as consumer:
        for q in range(4):
            got = read_queue(consumer, topic, q)
            assert sorted(body.decode() for _, body in got) == sorted(f"v-{k}" for k in keys if placed[k] == q)


@SENDS_AND_PULLS
def test_pull_reads_across_two_remaps_in_send_order(backend: ClusterUnderTest) -> None:
    topic = topic_name(backend, "remap")
    read = remapped(backend, topic, 2)
    for q, rows in read.items():
        bodies = [b.decode() for _, b in rows]
        assert bodies == [f"g0-{i}" for i in range(5)] + [f"g1-{i}" for i in range(3)] + [f"g2-{i}" for i in range(2)]
        offsets = [o for o, _ in rows]
        assert offsets == sorted(set(offsets)), f"queue {q}: offsets not strictly increasing: {offsets}"
        assert offsets[:5] == [0, 1, 2, 3, 4]
        # each remap starts the new segment at the next multiple of 10000 past old end + 5000
        assert offsets[5] == 10000 and offsets[8] == 20000, offsets


@SENDS_AND_PULLS
def test_min_and_max_offsets_after_remap_span_every_segment(backend: ClusterUnderTest) -> None:
    topic = topic_name(backend, "bounds")
    remapped(backend, topic, 2)
    with PullConsumer(backend.address) as consumer:
        for q in range(2):
            assert consumer.min_offset(topic, q) == 0
            assert consumer.max_offset(topic, q) == 20002


@SENDS_AND_PULLS
def test_pull_in_the_hole_between_segments_points_at_the_next_segment(backend: ClusterUnderTest) -> None:
    topic = topic_name(backend, "hole")
    remapped(backend, topic, 1)
    with PullConsumer(backend.address) as consumer:
        res = consumer.pull(topic, 0, 7)
        if backend.name == "rocketmq":  # PULL_RETRY_IMMEDIATELY, next = the new segment's start
            assert res.status is PullStatus.RETRY_AT_NEXT and res.next_offset == 10000 and res.count == 0
        else:  # broker_stub skips the hole in the same call (docs/rocketmq.md, conformance table)
            assert res.status is PullStatus.FOUND
            assert res.batch.column("queue_offset").to_pylist() == [10000, 10001, 10002]
        at_end = consumer.pull(topic, 0, 20002)
        assert at_end.status is PullStatus.NO_NEW_MESSAGE and at_end.count == 0
        beyond = consumer.pull(topic, 0, 30000)  # past the leader's max: moved back to it, on both
        assert (beyond.status, beyond.next_offset) == (PullStatus.OFFSET_MOVED, 20002)


@SENDS_AND_PULLS
def test_group_offsets_commit_and_read_back_in_every_segment(backend: ClusterUnderTest) -> None:
    topic = topic_name(backend, "group")
    remapped(backend, topic, 1)
    group = f"conf-group-{backend.name}-{unique()}"
    with PullConsumer(backend.address, group=group) as consumer:
        assert consumer.committed(topic, 0) is None
        for offset in (3, 10001, 20001):
            consumer.commit(topic, 0, offset)
            assert consumer.committed(topic, 0) == offset


@SENDS_AND_PULLS
def test_snapshot_resolves_the_chain_with_fenced_old_segments(backend: ClusterUnderTest) -> None:
    topic = topic_name(backend, "chain")
    remapped(backend, topic, 1)
    access = open_backend(backend.address).reader()
    try:
        snap = take_snapshot(access, topic)
    finally:
        access.close()
    chain = snap.chains[0]
    assert [i.bname for i in chain] == [backend.brokers[0], backend.brokers[1], backend.brokers[0]]
    assert [i.logic_offset for i in chain] == [0, 10000, 20000]
    assert [i.logic_end() if i.end_offset >= 0 else None for i in chain[:-1]] == [5, 10003]
    assert snap.bounds[0].min_offset == 0 and snap.bounds[0].max_offset == 20002


@EVERY
def test_topic_names_include_every_static_topic(backend: ClusterUnderTest) -> None:
    """What topicPattern subscriptions list: the cluster's topics (every static one among them)."""
    topic = topic_name(backend, "listed")
    backend.create(topic, 2, backend.brokers)
    access = open_backend(backend.address).reader()
    try:
        names = access.topic_names()
    finally:
        access.close()
    assert topic in names


@pytest.mark.parametrize("bad", ["rocketmq://", "kafka://h:1", "host-without-port"])
def test_bad_addresses_are_refused_naming_the_address(bad: str) -> None:
    from staticmq_spark.errors import InvalidOptionError

    with pytest.raises(InvalidOptionError, match="address"):
        open_backend(bad).reader()


@EVERY
def test_sink_is_exactly_once_through_a_failed_attempt_a_remap_between_batches_and_a_replayed_commit(
    backend: ClusterUnderTest,
) -> None:
    """The exactly-once sink on every backend, driven as Spark drives it: task attempts write,
    the driver commits the attempts that succeeded; a commit run again (a replayed micro-batch)
    makes nothing visible twice; a remap between two batches moves the next batch's rows."""
    topic = topic_name(backend, "sink")
    backend.create(topic, 4, backend.brokers)
    sink = open_backend(backend.address).sink()
    assert sink.guarantee == "exactly-once"
    settings = WriteSettings(namesrv=backend.address, topic=topic)

    def rows(batch: int) -> pa.RecordBatch:
        keys = [f"user-{i % 17}" for i in range(60)]
        return pa.RecordBatch.from_pydict({"key": keys, "value": [f"b{batch}-{i}".encode() for i in range(60)]})

    write_task(sink, settings, "conformance", 0, 0, [rows(0)])  # an attempt that failed
    first = [write_task(sink, settings, "conformance", 0, 0, [rows(0)])]
    sink.commit(settings, "conformance", 0, first)
    sink.commit(settings, "conformance", 0, first)  # the driver died after committing: replayed
    backend.remap(topic, backend.brokers[:1])
    sink.commit(settings, "conformance", 1, [write_task(sink, settings, "conformance", 1, 0, [rows(1)])])
    reader = open_backend(backend.address).reader()  # read as the Spark source reads: every backend has it
    try:
        seen = [(q, body.decode()) for q in range(4) for _, body in read_through_reader(reader, topic, q)]
    finally:
        reader.close()
    assert sorted(body for _, body in seen) == sorted(f"b{b}-{i}" for b in range(2) for i in range(60))
    keys = {f"b{b}-{i}": f"user-{i % 17}" for b in range(2) for i in range(60)}
    assert all(queue_for_key(keys[body], 4) == q for q, body in seen)


@EVERY
def test_sink_rows_stay_in_their_logic_queue_across_a_create_a_grow_and_two_remaps(backend: ClusterUnderTest) -> None:
    """The create/grow and remap steps as each backend's admin runs them, seen through the reader:
    a remap fences the old segment where its data ends and starts the new one past it (the next
    multiple of 10000 past old end + 5000); a grow adds logic queues and moves none."""
    topic = topic_name(backend, "steps")
    first, second = backend.brokers[0], backend.brokers[1]
    backend.create(topic, 1, [first])
    sink = open_backend(backend.address).sink()
    settings = WriteSettings(namesrv=backend.address, topic=topic)

    def write(batch: int, n: int) -> None:
        rows = pa.RecordBatch.from_pydict({"value": [f"s{batch}-{i}".encode() for i in range(n)]})
        sink.commit(settings, "steps", batch, [write_task(sink, settings, "steps", batch, 0, [rows])])

    write(0, 5)
    backend.remap(topic, [second])
    write(1, 3)
    backend.remap(topic, [first])
    write(2, 2)
    backend.create(topic, 3, [first, second])  # grow: queue 0 stays on `first`
    reader = open_backend(backend.address).reader()
    try:
        snap = take_snapshot(reader, topic)
        rows = read_through_reader(reader, topic, 0)
    finally:
        reader.close()
    assert snap.total_queues == 3
    assert [i.bname for i in snap.chains[0]] == [first, second, first]
    assert [i.logic_offset for i in snap.chains[0]] == [0, 10000, 20000]
    assert [i.logic_end() for i in snap.chains[0][:-1]] == [5, 10003]
    for q in (1, 2):  # where a grow places them is the admin's own (mqadmin's on RocketMQ)
        assert [(i.logic_offset, i.bname in (first, second)) for i in snap.chains[q]] == [(0, True)]
    assert [o for o, _ in rows] == [0, 1, 2, 3, 4, 10000, 10001, 10002, 20000, 20001]
    segments = [sorted(b.decode() for o, b in rows if lo <= o < lo + 10000) for lo in (0, 10000, 20000)]
    # (RocketMQ's transactional sink commits each row's half on its own: a batch's order may vary)
    assert segments == [[f"s{batch}-{i}" for i in range(n)] for batch, n in enumerate((5, 3, 2))]


@EVERY
def test_the_admin_reports_one_consistent_epoch_after_a_create_and_refuses_to_shrink(
    backend: ClusterUnderTest,
) -> None:
    topic = topic_name(backend, "admin")
    backend.create(topic, 4, backend.brokers)
    with Admin(backend.address) as admin:
        report, _ = admin.static_topic_status(topic)
        assert report.ok and report.total_queues == 4 and report.epoch > 0
        assert sorted(c[-1].bname for c in report.chains.values()) == sorted(backend.brokers * 2)
        with pytest.raises(InvalidArgumentError, match="shrink"):
            admin.update_static_topic(topic, 2, brokers=backend.brokers)


@on(kinds_without("producer"))
def test_a_backend_without_a_producer_or_pull_consumer_refuses_naming_the_operation(backend: ClusterUnderTest) -> None:
    assert not backend.capabilities.producer and not backend.capabilities.pull_consumer
    with pytest.raises(UnsupportedOperationError, match="producer"):
        Producer(backend.address)
    with pytest.raises(UnsupportedOperationError, match="pull consumer"):
        PullConsumer(backend.address)


@EVERY
def test_sink_places_keyless_rows_round_robin_from_the_partition(backend: ClusterUnderTest) -> None:
    """The one placement rule, the same on every backend (docs/sink.md): row i of Spark partition p
    without a key or queueId goes to logic queue (p + i) mod totalQueues; a keyed row to
    murmur3(key) mod totalQueues, and an explicit queueId wins over both."""
    topic = topic_name(backend, "keyless")
    backend.create(topic, 4, backend.brokers)
    sink = open_backend(backend.address).sink()
    settings = WriteSettings(namesrv=backend.address, topic=topic)
    tasks = []
    for partition in (0, 3):
        rb = pa.RecordBatch.from_pydict(
            {
                "key": pa.array([None, "user-7", *[None] * 8], pa.string()),
                "queueId": pa.array([None, None, 2, *[None] * 7], pa.int32()),
                "value": [f"p{partition}-{i}".encode() for i in range(10)],
            }
        )
        tasks.append(write_task(sink, settings, "keyless", 0, partition, [rb.slice(0, 4), rb.slice(4)]))
    sink.commit(settings, "keyless", 0, tasks)
    reader = open_backend(backend.address).reader()
    try:
        landed = {body.decode(): q for q in range(4) for _, body in read_through_reader(reader, topic, q)}
    finally:
        reader.close()
    expected = {f"p{p}-{i}": (p + i) % 4 for p in (0, 3) for i in range(10)}
    expected.update({f"p{p}-1": queue_for_key("user-7", 4) for p in (0, 3)})
    expected.update({f"p{p}-2": 2 for p in (0, 3)})
    assert landed == expected


@SENDS_AND_PULLS
def test_python_admin_on_each_backend_reports_clusters_and_each_physical_queue(backend: ClusterUnderTest) -> None:
    """`Admin` answers on both backends what `staticmq admin` does: each broker's cluster, and per
    physical queue of a static topic its min/max offsets and the store time of its newest message."""
    topic = topic_name(backend, "status")
    backend.create(topic, 2, backend.brokers[:1])
    before = int(time.time() * 1000) - 60_000
    send_numbered(backend, topic, 0, "s", 7)
    with Admin(backend.address) as admin:
        assert {b.cluster for b in admin.cluster_info()} == {"DefaultCluster"}
        rows = admin.topic_status(topic)
    assert {r.broker for r in rows} == {backend.brokers[0]}
    assert sum(r.max_offset - r.min_offset for r in rows) == 7
    stored = [r for r in rows if r.max_offset > r.min_offset]
    assert len(stored) == 1 and stored[0].last_store_timestamp > before
    assert all(r.last_store_timestamp == 0 for r in rows if r.max_offset == 0)


TAG_CYCLE = ["TagA", "TagB", None, "TagC", "TagB"]


@SENDS_AND_PULLS
def test_tag_filter_returns_only_matching_messages_at_their_logic_offsets_across_a_remap(
    backend: ClusterUnderTest,
) -> None:
    """`tags` (the source's `subscription`) is applied by the brokers: only messages whose tag is
    named come back, each at its own logic offset (the others are gaps), across segments."""
    topic = topic_name(backend, "tags")
    backend.create(topic, 2, backend.brokers[:1])
    sent: list[tuple[str, str | None]] = []

    def send(label: str, n: int) -> None:
        bodies = [f"{label}-{i}" for i in range(n)]
        tags = [TAG_CYCLE[i % len(TAG_CYCLE)] for i in range(n)]
        with Producer(backend.address) as producer:
            producer.send_batch(topic, bodies, tags=tags, queue=0)
        sent.extend(zip(bodies, tags, strict=True))

    send("first", 37)
    backend.remap(topic, backend.brokers[1:2])
    send("second", 23)
    with PullConsumer(backend.address) as consumer:
        everything = read_queue(consumer, topic, 0)
        assert [body.decode() for _, body in everything] == [b for b, _ in sent]
        tag_of = {body: tag for body, tag in sent}
        filtered = read_queue(consumer, topic, 0, tags="TagA || TagC")
        assert filtered == [(o, b) for o, b in everything if tag_of[b.decode()] in ("TagA", "TagC")]
        assert read_queue(consumer, topic, 0, tags="*") == everything
        assert read_queue(consumer, topic, 0, tags="NoSuchTag") == []
        with pytest.raises(InvalidArgumentError, match="names no tag"):
            consumer.pull(topic, 0, 0, tags="||")
