"""The stream reader plans a micro-batch from the snapshots its latestOffset just took (one round of
requests to the brokers per trigger), and from new ones for any other end (a restart's replay)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from staticmq_spark.backends.memory import MemoryCluster
from staticmq_spark.session.features import ReadAllAvailable
from staticmq_spark.source.executor import read_partition
from staticmq_spark.source.options import parse_source_options
from staticmq_spark.source.stream_reader import StaticMQStreamReader

_names = itertools.count()
KEYS = [f"key-{i}" for i in range(8)]


@pytest.fixture
def cluster() -> Iterator[MemoryCluster]:
    c = MemoryCluster(f"plan{next(_names)}", ["b0", "b1"])
    c.create_static_topic("orders", 4, ["b0"])
    yield c
    c.close()


def _reader(c: MemoryCluster) -> tuple[StaticMQStreamReader, list[str]]:
    opts = {"namesrv": f"memory://{c.name}", "topic": "orders", "startingOffsets": "earliest"}
    reader = StaticMQStreamReader(parse_source_options(opts, streaming=True))
    access = reader._cluster()
    gathered: list[str] = []
    real = access.gather

    def gather(topic: str, brokers: Any = None) -> Any:
        gathered.append(topic)
        return real(topic, brokers)

    access.gather = gather  # type: ignore[method-assign]
    return reader, gathered


def _send(c: MemoryCluster, round_: int) -> None:
    c.send("orders", KEYS, [f"{k}#{round_}".encode() for k in KEYS])


def _rows(parts: list[Any]) -> list[bytes]:
    return sorted(v for p in parts for b in read_partition(p) for v in b.column("value").to_pylist())


def test_partitions_of_the_end_latest_offset_returned_ask_no_broker_again(cluster: MemoryCluster) -> None:
    reader, gathered = _reader(cluster)
    start = reader.initialOffset()
    _send(cluster, 0)
    end = reader.latestOffset(start, ReadAllAvailable())
    asked = len(gathered)
    parts = reader.partitions(start, dict(end))
    assert len(gathered) == asked, "partitions() took a new snapshot for the end latestOffset just planned"
    assert _rows(parts) == sorted(f"{k}#0".encode() for k in KEYS)


def test_any_other_end_and_a_second_call_take_new_snapshots(cluster: MemoryCluster) -> None:
    reader, gathered = _reader(cluster)
    start = reader.initialOffset()
    _send(cluster, 0)
    first = reader.latestOffset(start, ReadAllAvailable())
    reader.partitions(start, first)
    asked = len(gathered)
    reader.partitions(start, first)  # replanned (a retried batch): the cached view is used once only
    assert len(gathered) == asked + 1
    _send(cluster, 1)
    second = reader.latestOffset(first, ReadAllAvailable())
    asked = len(gathered)
    replay = reader.partitions(start, first)  # not the end just returned: a restart replaying batch 0
    assert len(gathered) == asked + 1
    assert _rows(replay) == sorted(f"{k}#0".encode() for k in KEYS)
    assert _rows(reader.partitions(first, second)) == sorted(f"{k}#1".encode() for k in KEYS)


def test_a_remap_between_latest_offset_and_partitions_reads_every_planned_row(cluster: MemoryCluster) -> None:
    reader, _ = _reader(cluster)
    start = reader.initialOffset()
    _send(cluster, 0)
    end = reader.latestOffset(start, ReadAllAvailable())
    assert cluster.remap("orders", ["b0", "b1"]).moved
    _send(cluster, 1)  # lands on the new segments, past the planned end
    assert _rows(reader.partitions(start, end)) == sorted(f"{k}#0".encode() for k in KEYS)


def test_a_pickled_reader_carries_no_planned_snapshot(cluster: MemoryCluster) -> None:
    reader, _ = _reader(cluster)
    start = reader.initialOffset()
    _send(cluster, 0)
    reader.latestOffset(start, ReadAllAvailable())
    assert reader.__getstate__()["_planned"] is None


def _with_messages(c: MemoryCluster) -> StaticMQStreamReader:
    opts = {"namesrv": f"memory://{c.name}", "topic": "orders", "startingOffsets": "earliest"}
    return StaticMQStreamReader(parse_source_options({**opts, "queuePartitions": "with-messages"}, streaming=True))


def test_queue_partitions_with_messages_plans_only_queues_that_have_new_ones(cluster: MemoryCluster) -> None:
    reader = _with_messages(cluster)
    start = reader.initialOffset()
    cluster.send("orders", ["key-1"] * 3, [b"a", b"b", b"c"])  # one key: one logic queue
    end = reader.latestOffset(start, ReadAllAvailable())
    parts = reader.partitions(start, end)
    assert len(parts) == 1 and parts[0].end - parts[0].start == 3
    assert _rows(parts) == [b"a", b"b", b"c"]
    default, _ = _reader(cluster)
    assert len(default.partitions(start, end)) == 4, "the default plans every logic queue"


def test_queue_partitions_with_messages_keeps_one_task_when_no_queue_has_any(cluster: MemoryCluster) -> None:
    reader = _with_messages(cluster)
    start = reader.initialOffset()
    parts = reader.partitions(start, start)
    assert len(parts) == 1 and _rows(parts) == []


@pytest.mark.parametrize("scheme", ["staticmq", "rocketmq"])
def test_a_query_planning_process_loads_no_arrow_compute_kernels_no_pandas_and_no_sink(scheme: str) -> None:
    """pyspark's per-query source runner imports the data source, builds the stream reader and
    opens a backend: Arrow's compute kernels (about 50 ms to import), pandas (0.3 s, pulled in by
    the first `pa.array` call) and the sinks are what read tasks and writers need, not planning."""
    code = (
        "import sys\n"
        "from staticmq_spark.data_source import StaticMQDataSource\n"
        "from staticmq_spark.backends.registry import backend_class\n"
        "ds = StaticMQDataSource({'namesrv': '127.0.0.1:1', 'topic': 't', 'subscription': 'a || b'})\n"
        "ds.streamReader(ds.schema())\n"
        f"backend_class({scheme!r})\n"
        "print(sorted(m for m in sys.modules if m in ('pyarrow.compute', 'pandas') or 'sink' in m))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
