"""The stream reader on a pyspark runner without admission control (4.0, 4.1): it is asked
`latestOffset()` with neither a start nor a limit, so it starts where the last micro-batch it
planned ended (or at its initial offset); a run's first micro-batch reads everything available
(it may be Trigger.AvailableNow's only one), the next ones take their limit from the options."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from staticmq_spark.backends.memory import MemoryCluster
from staticmq_spark.source import offsets as offset_json
from staticmq_spark.source.executor import read_partition
from staticmq_spark.source.options import parse_source_options
from staticmq_spark.source.stream_reader import StaticMQStreamReader

_names = itertools.count()
KEYS = [f"key-{i}" for i in range(8)]


@pytest.fixture
def cluster() -> Iterator[MemoryCluster]:
    c = MemoryCluster(f"noac{next(_names)}", ["b0"])
    c.create_static_topic("orders", 4, ["b0"])
    yield c
    c.close()


def _reader(c: MemoryCluster, **options: str) -> StaticMQStreamReader:
    opts = {"namesrv": f"memory://{c.name}", "topic": "orders", "startingOffsets": "earliest", **options}
    return StaticMQStreamReader(parse_source_options(opts, streaming=True))


def _send(c: MemoryCluster, rounds: range) -> None:
    for r in rounds:
        c.send("orders", KEYS, [f"{k}#{r}".encode() for k in KEYS])


def _rows(parts: list[Any]) -> list[bytes]:
    return sorted(v for p in parts for b in read_partition(p) for v in b.column("value").to_pylist())


def _total(offsets: dict[str, Any]) -> int:
    return sum(offset_json.from_json(offsets, "orders", 4).values())


def test_without_admission_control_the_first_batch_starts_at_the_initial_offset(cluster: MemoryCluster) -> None:
    _send(cluster, range(2))
    reader = _reader(cluster)
    end = reader.latestOffset()  # Spark asks before initialOffset() on a fresh query
    start = reader.initialOffset()
    assert _total(start) == 0 and _total(end) == 16
    assert len(_rows(reader.partitions(start, end))) == 16


def test_without_admission_control_the_first_batch_of_a_run_reads_everything_available(
    cluster: MemoryCluster,
) -> None:
    _send(cluster, range(5))
    reader = _reader(cluster, maxMessagesPerTrigger="12")
    start = reader.initialOffset()
    end = reader.latestOffset()
    assert _total(end) == 40, "Trigger.AvailableNow's single micro-batch must not stop at the limit"
    assert len(_rows(reader.partitions(start, end))) == 40


def test_without_admission_control_the_limit_comes_from_the_options(cluster: MemoryCluster) -> None:
    reader = _reader(cluster, maxMessagesPerTrigger="12")
    start = reader.initialOffset()
    assert reader.latestOffset() == start, "nothing yet: the run's first answer"
    _send(cluster, range(5))  # 40 messages
    seen: list[bytes] = []
    for _ in range(3):
        end = reader.latestOffset()
        assert _total(end) - _total(start) == 12
        seen += _rows(reader.partitions(start, end))
        start = end
    end = reader.latestOffset()
    assert _total(end) == 40
    seen += _rows(reader.partitions(start, end))
    assert sorted(seen) == sorted(f"{k}#{r}".encode() for k in KEYS for r in range(5))
    assert reader.latestOffset() == end, "nothing new: the same end, no empty micro-batch"


def test_without_admission_control_a_restart_continues_from_the_checkpoints_last_end(cluster: MemoryCluster) -> None:
    first = _reader(cluster, maxMessagesPerTrigger="10")
    start = first.initialOffset()
    assert first.latestOffset() == start  # the run's first answer, before any message
    _send(cluster, range(2))
    end = first.latestOffset()
    assert _total(end) == 10
    first.partitions(start, end)
    first.stop()
    _send(cluster, range(2, 4))
    restarted = _reader(cluster, maxMessagesPerTrigger="10")
    restarted.partitions(end, end)  # Spark's setLatestSeenOffset: the checkpoint's last end
    following = restarted.latestOffset()
    assert _total(following) == 32, "the restarted run's first answer: everything from the last end"
    assert len(_rows(restarted.partitions(end, following))) == 22
    assert _total(restarted.latestOffset()) == 32


def test_without_admission_control_a_restart_under_the_available_now_wrapper_reads_on_from_the_checkpoint(
    cluster: MemoryCluster,
) -> None:
    """Spark's AvailableNow wrapper asks the restarted reader for its end before telling it where
    the checkpoint is: that end (everything there) says nothing about where the next batch starts."""
    _send(cluster, range(2))
    first = _reader(cluster)
    start = first.initialOffset()
    end = first.latestOffset()
    assert len(_rows(first.partitions(start, end))) == 16
    first.stop()
    _send(cluster, range(2, 4))
    restarted = _reader(cluster)
    everything = restarted.latestOffset()  # the wrapper's prefetch, before the checkpoint's end
    restarted.partitions(end, end)  # Spark's setLatestSeenOffset
    rows = _rows(restarted.partitions(end, everything))
    assert rows == sorted(f"{k}#{r}".encode() for k in KEYS for r in range(2, 4)), "only what came after the checkpoint"
