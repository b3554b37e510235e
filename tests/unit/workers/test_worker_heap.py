"""The cyclic garbage collector on Spark's Python workers (staticmq_spark.workers.heap): the sink's
write tasks pause it, a worker's long-lived heap is frozen once, after its first read task or at
its first write task, and a read task's own data is still freed after that."""

from __future__ import annotations

import gc
import itertools
import weakref
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from staticmq_spark.backends.memory import MemoryCluster
from staticmq_spark.session.features import ReadAllAvailable
from staticmq_spark.source.options import parse_source_options
from staticmq_spark.source.partition import QueuePartition
from staticmq_spark.source.stream_reader import StaticMQStreamReader
from staticmq_spark.workers import heap as worker_heap
from staticmq_spark.workers.heap import gc_paused

_names = itertools.count()


@pytest.fixture
def fresh_worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """This process as a Python worker that has not frozen its heap yet; the freezes counted (the
    frozen generation's size is no witness: a frozen object that dies leaves it, one did in a CI
    run, and would read as a change either way). Unfrozen again at the end."""
    freezes: list[int] = []
    real_freeze = gc.freeze

    def counting_freeze() -> None:
        freezes.append(1)
        real_freeze()

    was = worker_heap._HEAP_FROZEN
    monkeypatch.setattr(gc, "freeze", counting_freeze)
    worker_heap._HEAP_FROZEN = False
    try:
        yield freezes
    finally:
        gc.unfreeze()
        worker_heap._HEAP_FROZEN = was


@pytest.fixture
def cluster() -> Iterator[MemoryCluster]:
    c = MemoryCluster(f"heap{next(_names)}", ["b0"])
    c.create_static_topic("orders", 2, ["b0"])
    c.send("orders", [f"key-{i}" for i in range(40)], [f"value-{i}".encode() * 8 for i in range(40)])
    yield c
    c.close()


def _reader_and_partitions(c: MemoryCluster) -> tuple[StaticMQStreamReader, list[QueuePartition]]:
    opts = {"namesrv": f"memory://{c.name}", "topic": "orders", "startingOffsets": "earliest"}
    reader = StaticMQStreamReader(parse_source_options(opts, streaming=True))
    start = reader.initialOffset()
    parts = reader.partitions(start, reader.latestOffset(start, _all()))
    assert parts and all(isinstance(p, QueuePartition) for p in parts)
    return reader, parts  # type: ignore[return-value]


def _all() -> Any:
    """pyspark's ReadAllAvailable where it has admission control (4.2), else the connector's
    same-named stand-in (session/features.py), as the stream reader sees on 4.0 and 4.1."""
    return ReadAllAvailable()


class TaskData:
    """What a read task holds on a worker (the reader and partition pyspark unpickled, its closures)
    as a reference cycle, as cloudpickled functions often are: only the cyclic collector frees it."""

    def __init__(self, partition: QueuePartition) -> None:
        self.partition = partition
        self.me = self
        self.batches: list[pa.RecordBatch] = []


def _run_task(reader: StaticMQStreamReader, partition: QueuePartition) -> tuple[weakref.ref[Any], list[Any]]:
    """One read task as a worker runs it: read() to the end, then what pyspark's daemon does after
    a task (gc.collect()); weak references to the task's data and to the rows it yielded."""
    task = TaskData(partition)
    task.batches.extend(reader.read(task.partition))
    rows = [weakref.ref(b) for b in task.batches]
    ref = weakref.ref(task)
    del task
    gc.collect()
    return ref, rows


def test_the_long_lived_heap_is_frozen_once_per_worker_process(fresh_worker: list[int]) -> None:
    frozen_before = gc.get_freeze_count()
    worker_heap.freeze_long_lived_heap()
    assert len(fresh_worker) == 1
    assert gc.get_freeze_count() > frozen_before
    young = [[n] for n in range(10)]  # tracked containers allocated after the freeze
    worker_heap.freeze_long_lived_heap()
    assert len(fresh_worker) == 1, "the heap was frozen a second time"
    assert all(gc.is_tracked(y) for y in young)


def test_a_worker_freezes_its_heap_once_after_its_first_read_task_has_yielded_its_rows(
    fresh_worker: list[int], cluster: MemoryCluster
) -> None:
    reader, parts = _reader_and_partitions(cluster)
    rows = reader.read(parts[0])
    assert next(rows).num_rows > 0
    assert not fresh_worker, "frozen before the first read task handed Spark its rows"
    list(rows)
    assert len(fresh_worker) == 1
    for p in parts * 3:
        list(reader.read(p))
    assert len(fresh_worker) == 1, "a later read task froze the heap again"


def test_a_failed_first_read_leaves_the_freeze_to_the_next_read(
    fresh_worker: list[int], cluster: MemoryCluster
) -> None:
    reader, parts = _reader_and_partitions(cluster)
    cluster.close()  # the cluster gone: the read fails
    with pytest.raises(Exception):  # noqa: B017 - whatever the backend raises
        list(reader.read(parts[0]))
    assert not fresh_worker


def test_after_the_freeze_a_read_tasks_data_is_freed_by_the_daemons_collection(
    fresh_worker: list[int], cluster: MemoryCluster
) -> None:
    reader, parts = _reader_and_partitions(cluster)
    _run_task(reader, parts[0])  # the worker's first read: the heap frozen at its end
    assert len(fresh_worker) == 1
    for p in parts * 5:
        task, rows = _run_task(reader, p)
        assert rows and all(r() is None for r in rows), "a read task's rows outlived it"
        assert task() is None, "a read task's data (a reference cycle) outlived the collection after it"


def test_repeated_read_tasks_after_the_freeze_leave_no_objects_behind(
    fresh_worker: list[int], cluster: MemoryCluster
) -> None:
    reader, parts = _reader_and_partitions(cluster)
    for p in parts * 2:  # the first read freezes; caches of the read path fill
        _run_task(reader, p)
    before = len(gc.get_objects())  # tracked objects outside the frozen generation
    for p in parts * 20:
        _run_task(reader, p)
    after = len(gc.get_objects())
    assert after - before < 20, f"{after - before} objects more after 40 read tasks"


def test_garbage_collection_is_paused_while_a_task_stages_and_restored_after() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_garbage_collection_is_restored_when_staging_fails() -> None:
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("a broker refused the rows")
    assert gc.isenabled()


def test_a_collector_disabled_before_the_task_stays_disabled() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
