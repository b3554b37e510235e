"""The memory:// backend: real static-topic semantics in this process (no broker, no Spark session),
driven through the source's planning, executor, admission control and the sink's two phases."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from staticmq_spark.backends import open_backend
from staticmq_spark.backends.memory import MemoryCluster
from staticmq_spark.backends.types import WriteSettings
from staticmq_spark.errors import DataLossError, InvalidOptionError, NotFoundError, UnsupportedOperationError
from staticmq_spark.source.admission import advance, count_rows, share_budget
from staticmq_spark.source.executor import read_partition
from staticmq_spark.source.options import parse_source_options
from staticmq_spark.source.partition import QueuePartition, ReadSettings
from staticmq_spark.source.planner import plan_partitions, resolve_offsets
from staticmq_spark.source.snapshot import take_snapshot
from staticmq_spark.source.subscription import Subscription
from tests.support.sink_tasks import write_task

_names = itertools.count()
KEYS = [f"key-{i}" for i in range(12)]


@pytest.fixture
def cluster() -> Iterator[MemoryCluster]:
    c = MemoryCluster(f"mem{next(_names)}", ["b0", "b1"])
    yield c
    c.close()


def namesrv(c: MemoryCluster) -> str:
    return f"memory://{c.name}"


def settings(c: MemoryCluster, *, fail_on_data_loss: bool = True) -> ReadSettings:
    return ReadSettings(namesrv(c), True, fail_on_data_loss, pull_batch_size=5, retry_timeout_ms=1000)


def send_rounds(c: MemoryCluster, topic: str, rounds: range) -> list[tuple[str, bytes]]:
    sent = []
    for r in rounds:
        bodies = [f"{k}#{r}".encode() for k in KEYS]
        c.send(topic, KEYS, bodies)
        sent += list(zip(KEYS, bodies, strict=True))
    return sent


def remapped_topic(c: MemoryCluster, topic: str = "orders") -> list[tuple[str, bytes]]:
    """4 logic queues on b0, 3 rounds sent, remapped over b0 and b1, 2 more rounds sent."""
    c.create_static_topic(topic, 4, ["b0"])
    sent = send_rounds(c, topic, range(3))
    moved = c.remap(topic, ["b0", "b1"]).moved
    assert len(moved) == 2
    return sent + send_rounds(c, topic, range(3, 5))


def read_rows(partitions: list[QueuePartition]) -> list[dict[str, Any]]:
    return [row for p in partitions for batch in read_partition(p) for row in batch.to_pylist()]


def test_a_remap_makes_logic_offsets_jump_and_planned_partitions_read_every_message_once_in_key_order(
    cluster: MemoryCluster,
) -> None:
    sent = remapped_topic(cluster)
    reader = open_backend(namesrv(cluster)).reader()
    snap = take_snapshot(reader, "orders")
    moved = [q for q, chain in snap.chains.items() if len(chain) == 2]
    assert len(moved) == 2
    for q in moved:
        old, new = snap.chains[q]
        assert new.logic_offset >= old.logic_end() + 5000 and new.logic_offset % 10000 == 0
    spec = parse_source_options({"namesrv": namesrv(cluster), "topic": "orders"}, streaming=False).starting
    starts = resolve_offsets(snap, spec, reader)
    partitions = plan_partitions(snap, starts, snap.latest(), settings(cluster))
    assert sum(s.physical_end - s.physical_start for p in partitions for s in p.segments) == len(sent)
    assert all(len(partitions[q].segments) == 2 for q in moved)

    rows = read_rows(partitions)
    assert sorted((r["key"], r["value"]) for r in rows) == sorted(sent)
    by_key: dict[str, list[tuple[int, bytes]]] = defaultdict(list)
    for r in rows:
        by_key[r["key"]].append((r["queueOffset"], r["value"]))
    for key, seen in by_key.items():
        assert [v for _, v in seen] == [f"{key}#{n}".encode() for n in range(5)]
        assert [o for o, _ in seen] == sorted(o for o, _ in seen)


def test_a_topic_list_and_a_topic_pattern_subscribe_to_the_matching_static_topics(cluster: MemoryCluster) -> None:
    for topic in ("orders-eu", "orders-us", "payments"):
        cluster.create_static_topic(topic, 2)
    reader = open_backend(namesrv(cluster)).reader()
    listed = parse_source_options({"namesrv": namesrv(cluster), "topic": "orders-eu,payments"}, streaming=True)
    assert sorted(Subscription(listed).snapshots(reader)) == ["orders-eu", "payments"]
    pattern = parse_source_options({"namesrv": namesrv(cluster), "topicPattern": "orders-.*"}, streaming=True)
    snaps = Subscription(pattern).snapshots(reader)
    assert sorted(snaps) == ["orders-eu", "orders-us"]
    assert all(s.total_queues == 2 for s in snaps.values())


def test_admission_control_counts_no_messages_in_the_logic_offset_gap_of_a_remapped_queue(
    cluster: MemoryCluster,
) -> None:
    remapped_topic(cluster)
    snap = take_snapshot(open_backend(namesrv(cluster)).reader(), "orders")
    q = next(q for q, chain in snap.chains.items() if len(chain) == 2)
    old, new = snap.chains[q]
    segments = snap.segments({q: 0}, {q: snap.latest()[q]})[q]
    before, after = old.end_offset - old.start_offset, segments[-1].count
    assert count_rows(segments) == before + after
    assert snap.latest()[q] - snap.earliest()[q] > count_rows(segments)  # the gap holds nothing
    end_of_old = advance(segments, 0, before)  # the old segment's end, or the jump's far side
    assert old.logic_end() <= end_of_old <= new.logic_offset
    assert count_rows(snap.segments({q: 0}, {q: end_of_old})[q]) == before
    assert advance(segments, 0, before + 1) == new.logic_offset + 1
    available = [count_rows(snap.segments({p: 0}, {p: snap.latest()[p]})[p]) for p in range(4)]
    shares = share_budget(available, sum(available) // 2)
    assert sum(shares) == sum(available) // 2
    assert all(0 <= s <= a for s, a in zip(shares, available, strict=True))


def test_staged_sink_rows_stay_invisible_until_commit_and_a_second_commit_adds_nothing(
    cluster: MemoryCluster,
) -> None:
    cluster.create_static_topic("out", 3)
    backend = open_backend(namesrv(cluster))
    sink, reader = backend.sink(), backend.reader()
    write = WriteSettings(namesrv(cluster), "out")
    rb = pa.RecordBatch.from_pydict({"key": KEYS, "value": [k.encode() for k in KEYS]})
    tasks = [write_task(sink, write, "w1", 7, p, [rb.slice(p * 6, 6)]) for p in range(2)]
    assert sum(t.rows for t in tasks) == len(KEYS)
    assert sum(take_snapshot(reader, "out").latest().values()) == 0
    assert sink.commit(write, "w1", 7, tasks) == len(KEYS)
    assert sink.commit(write, "w1", 7, tasks) == 0
    assert sum(take_snapshot(reader, "out").latest().values()) == len(KEYS)
    before = take_snapshot(reader, "out").latest()[2]
    pinned = pa.RecordBatch.from_pydict({"value": [b"a", b"b"], "queueId": [2, 2]})
    sink.commit(write, "w1", 8, [write_task(sink, write, "w1", 8, 0, [pinned])])
    assert take_snapshot(reader, "out").latest()[2] == before + 2  # a queueId column wins over keys


def test_messages_expired_after_planning_fail_the_read_with_fail_on_data_loss_and_are_skipped_without(
    cluster: MemoryCluster,
) -> None:
    cluster.create_static_topic("logs", 1)
    send_rounds(cluster, "logs", range(1))
    snap = take_snapshot(open_backend(namesrv(cluster)).reader(), "logs")
    planned = plan_partitions(snap, snap.earliest(), snap.latest(), settings(cluster))
    lenient = plan_partitions(snap, snap.earliest(), snap.latest(), settings(cluster, fail_on_data_loss=False))
    seg = planned[0].segments[0]
    cluster.expire("logs", seg.bname, seg.queue, below=4)
    with pytest.raises(DataLossError, match=r"logic offsets \[0, 4\)"):
        read_rows(planned)
    assert [r["queueOffset"] for r in read_rows(lenient)] == list(range(4, len(KEYS)))


def test_operations_the_memory_backend_lacks_raise_unsupported_operation_naming_them(cluster: MemoryCluster) -> None:
    backend = open_backend(namesrv(cluster))
    with pytest.raises(UnsupportedOperationError, match="POP"):
        backend.pop_consumer("g", "t")
    with pytest.raises(UnsupportedOperationError, match="deleteTopic"):
        backend.admin().delete_topic("t")


# ---------------------------------------------------------------------- startingOffsets=group


@pytest.fixture
def grouped() -> Iterator[MemoryCluster]:
    c = MemoryCluster("grouped", ["broker-0", "broker-1"])
    c.create_static_topic("orders", 4, ["broker-0", "broker-1"])
    c.send("orders", [f"user-{i}" for i in range(80)])
    yield c
    c.close()


def _group_start(missing: str | None = None) -> dict[int, int]:
    raw = {"namesrv": "memory://grouped", "topic": "orders", "startingOffsets": "group", "group": "etl"}
    if missing is not None:
        raw["groupMissingOffsets"] = missing
    opts = parse_source_options(raw, streaming=True)
    reader = open_backend("memory://grouped").reader()
    return resolve_offsets(take_snapshot(reader, "orders"), opts.starting, reader)


def test_starting_offsets_group_starts_each_queue_at_the_groups_committed_offset(grouped: MemoryCluster) -> None:
    reader = open_backend("memory://grouped").reader()
    reader.commit_offset("etl", "orders", 0, 3)
    reader.commit_offset("etl", "orders", 2, 1)
    snap = take_snapshot(reader, "orders")
    starts = _group_start()
    assert (starts[0], starts[2]) == (3, 1)
    assert (starts[1], starts[3]) == (snap.bounds[1].min_offset, snap.bounds[3].min_offset)
    latest = _group_start("latest")
    assert (latest[1], latest[3]) == (snap.bounds[1].max_offset, snap.bounds[3].max_offset)
    with pytest.raises(NotFoundError, match=r"no committed offset .* logic queue\(s\) \[1, 3\]"):
        _group_start("fail")


def test_a_group_offset_committed_before_a_remap_is_found_through_the_offset_jump(grouped: MemoryCluster) -> None:
    reader = open_backend("memory://grouped").reader()
    reader.commit_offset("etl", "orders", 0, 2)  # on the old leader's segment
    grouped.remap("orders", ["broker-1"])
    assert _group_start()[0] == 2
    reader.commit_offset("etl", "orders", 0, take_snapshot(reader, "orders").bounds[0].max_offset)
    assert _group_start()[0] == take_snapshot(reader, "orders").bounds[0].max_offset


def test_group_start_options_are_checked_when_the_query_is_planned() -> None:
    base = {"namesrv": "memory://grouped", "topic": "orders"}
    with pytest.raises(InvalidOptionError, match="name the consumer group with option 'group'"):
        parse_source_options({**base, "startingOffsets": "group"}, streaming=True)
    with pytest.raises(InvalidOptionError, match="applies with startingOffsets=group only"):
        parse_source_options({**base, "group": "etl", "groupMissingOffsets": "latest"}, streaming=True)
    with pytest.raises(InvalidOptionError, match="'groupMissingOffsets' must be earliest or latest or fail, got 'x'"):
        parse_source_options(
            {**base, "startingOffsets": "group", "group": "g", "groupMissingOffsets": "x"}, streaming=True
        )
