"""driverReadMaxMessages: a micro-batch of at most that many messages is read by the query's
driver-side process and handed to Spark with the plan (no Python read task); a larger one is
planned and read as usual. The hand-off is pyspark's own runner function, run here in-process."""

from __future__ import annotations

import io
import itertools
import json
import pickle
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark.serializers import read_int, write_with_length
from pyspark.sql.streaming import python_streaming_source_runner as runner

from staticmq_spark.backends.memory import MemoryCluster
from staticmq_spark.data_source import StaticMQDataSource
from staticmq_spark.errors import InvalidOptionError
from staticmq_spark.session.features import ADMISSION_CONTROL, ReadAllAvailable, ReadMaxRows
from staticmq_spark.source import stream_reader
from staticmq_spark.source.driver_read import DriverReadStreamReader, QueuesPartition
from staticmq_spark.source.options import parse_source_options
from staticmq_spark.source.partition import QueuePartition
from staticmq_spark.source.schema import spark_schema
from staticmq_spark.source.stream_reader import StaticMQStreamReader

_names = itertools.count()
KEYS = [f"key-{i}" for i in range(8)]


@pytest.fixture
def cluster() -> Iterator[MemoryCluster]:
    c = MemoryCluster(f"driver{next(_names)}", ["b0", "b1"])
    c.create_static_topic("orders", 4, ["b0"])
    yield c
    c.close()


def _options(c: MemoryCluster, **extra: str) -> dict[str, str]:
    return {"namesrv": f"memory://{c.name}", "topic": "orders", "startingOffsets": "earliest", **extra}


def _reader(c: MemoryCluster, most: int) -> DriverReadStreamReader:
    reader = StaticMQDataSource(_options(c, driverReadMaxMessages=str(most))).streamReader(spark_schema(True))
    assert isinstance(reader, DriverReadStreamReader)
    return reader


def _send(c: MemoryCluster, round_: int) -> list[bytes]:
    values = [f"{k}#{round_}".encode() for k in KEYS]
    c.send("orders", KEYS, values)
    return values


def _values(batches: Any) -> list[bytes]:
    return sorted(v for b in batches for v in b.column("value").to_pylist())


def _run_partitions_func(reader: Any, start: dict[str, Any], end: dict[str, Any]) -> tuple[list[Any], Any]:
    """pyspark 4.2's runner answering the JVM's planInputPartitions: (partitions, prefetched rows
    as an Arrow table, or None when it sent none)."""
    infile = io.BytesIO()
    for offsets in (start, end):
        write_with_length(json.dumps(offsets).encode("utf-8"), infile)
    infile.seek(0)
    outfile = io.BytesIO()
    schema = spark_schema(True)
    runner.partitions_func(reader, StaticMQDataSource({}), schema, 10_000, infile, outfile)
    out = io.BytesIO(outfile.getvalue())
    parts = [pickle.loads(out.read(read_int(out))) for _ in range(read_int(out))]
    kind = read_int(out)
    if kind == runner.PREFETCHED_RECORDS_NOT_FOUND:
        return parts, None
    if kind == runner.EMPTY_PYARROW_RECORD_BATCHES:
        return parts, pa.table({"value": pa.array([], pa.binary())})
    assert kind == runner.NON_EMPTY_PYARROW_RECORD_BATCHES
    read_int(out)  # SpecialLengths.START_ARROW_STREAM
    return parts, pa.ipc.open_stream(out).read_all()


def test_driver_read_sends_a_small_micro_batch_with_its_plan_through_pysparks_runner(cluster: MemoryCluster) -> None:
    reader = _reader(cluster, most=8)
    start = reader.initialOffset()
    sent = _send(cluster, 0)
    end = reader.latestOffset(start, ReadAllAvailable())
    parts, rows = _run_partitions_func(reader, start, end)
    assert len(parts) == 1 and isinstance(parts[0], QueuesPartition) and len(parts[0].parts) == 4
    assert rows is not None and sorted(rows.column("value").to_pylist()) == sorted(sent)
    assert rows.schema.names == spark_schema(True).fieldNames()


def test_driver_read_plans_a_larger_micro_batch_one_partition_per_logic_queue(cluster: MemoryCluster) -> None:
    reader = _reader(cluster, most=7)
    start = reader.initialOffset()
    sent = _send(cluster, 0)  # 8 messages, one more than driverReadMaxMessages
    end = reader.latestOffset(start, ReadAllAvailable())
    parts, rows = _run_partitions_func(reader, start, end)
    assert rows is None, "no rows sent with the plan: Spark runs the read tasks"
    assert [p.queue for p in parts] == [0, 1, 2, 3] and all(isinstance(p, QueuePartition) for p in parts)
    assert _values(b for p in parts for b in reader.read(p)) == sorted(sent)


def test_driver_read_limits_each_micro_batch_by_its_admitted_messages(cluster: MemoryCluster) -> None:
    reader = _reader(cluster, most=4)
    start = reader.initialOffset()
    sent = _send(cluster, 0) + _send(cluster, 1)  # 16 messages, admitted 4 per micro-batch
    got: list[bytes] = []
    while len(got) < len(sent):
        end = reader.latestOffset(start, ReadMaxRows(4))
        parts, rows = _run_partitions_func(reader, start, end)
        assert len(parts) == 1 and rows is not None and rows.num_rows == 4
        got += rows.column("value").to_pylist()
        reader.commit(end)
        start = end
    assert sorted(got) == sorted(sent)


def test_driver_read_starts_reading_a_small_micro_batch_when_latest_offset_chooses_its_end(
    cluster: MemoryCluster,
) -> None:
    """The read overlaps Spark's offset-log write; it holds the chosen end's messages, never the
    ones that arrive after it."""
    reader = _reader(cluster, most=8)
    start = reader.initialOffset()
    sent = _send(cluster, 0)
    end = reader.latestOffset(start, ReadAllAvailable())
    started = reader._batch
    assert started is not None and started.end == end and started.rows is not None
    assert _values(started.rows.result(timeout=30)) == sorted(sent), "read before Spark plans the batch"
    _send(cluster, 1)  # after the end was chosen: the next micro-batch's
    parts, rows = _run_partitions_func(reader, start, end)
    assert parts[0].messages == 8 and rows is not None and sorted(rows.column("value").to_pylist()) == sorted(sent)
    reader.stop()


@pytest.mark.parametrize("most", [8, 7])  # the 8 messages as one partition, and one per logic queue
def test_driver_read_plans_each_micro_batch_once_when_latest_offset_chooses_its_end(
    cluster: MemoryCluster, most: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = _reader(cluster, most=most)
    start = reader.initialOffset()
    _send(cluster, 0)
    end = reader.latestOffset(start, ReadAllAvailable())

    def no_second_look(*_args: Any) -> None:
        raise AssertionError("partitions() asked the brokers again for a micro-batch latestOffset planned")

    monkeypatch.setattr(stream_reader, "take_snapshot", no_second_look)
    parts, rows = _run_partitions_func(reader, start, end)
    assert len(parts) == (1 if most == 8 else 4) and (rows is None) == (most == 7)
    reader.stop()


def test_driver_read_plans_and_reads_a_replayed_micro_batch_without_latest_offset(cluster: MemoryCluster) -> None:
    """After a restart Spark replays the logged micro-batch: partitions(start, end) and getCache
    come to a new reader whose latestOffset was never asked for that end."""
    first = _reader(cluster, most=8)
    start = first.initialOffset()
    sent = _send(cluster, 0)
    end = first.latestOffset(start, ReadAllAvailable())
    first.stop()
    restarted = _reader(cluster, most=8)
    parts, rows = _run_partitions_func(restarted, start, end)
    assert len(parts) == 1 and rows is not None and sorted(rows.column("value").to_pylist()) == sorted(sent)


def test_driver_read_partition_run_as_a_task_reads_every_logic_queue_it_holds(cluster: MemoryCluster) -> None:
    """Had Spark not taken the rows sent with the plan, it would run the one partition as a Python
    task on a pickled reader: that task reads every queue of the micro-batch."""
    reader = _reader(cluster, most=100)
    start = reader.initialOffset()
    sent = _send(cluster, 0)
    end = reader.latestOffset(start, ReadAllAvailable())
    (whole,) = reader.partitions(start, end)
    copy = pickle.loads(pickle.dumps(reader))
    assert _values(copy.read(pickle.loads(pickle.dumps(whole)))) == sorted(sent)
    assert reader.getCache(start, end) is not None and reader.getCache(start, end) is None, "handed over once"


@pytest.mark.skipif(not ADMISSION_CONTROL, reason="this pyspark's runner has no admission control")
def test_driver_read_keeps_admission_control_and_trigger_available_now_in_pysparks_runner(
    cluster: MemoryCluster,
) -> None:
    reader = _reader(cluster, most=10)
    out = io.BytesIO()
    runner.check_support_func(reader, out)
    flags = read_int(io.BytesIO(out.getvalue()))
    assert flags & runner.SUPPORTS_ADMISSION_CONTROL and flags & runner.SUPPORTS_TRIGGER_AVAILABLE_NOW
    _send(cluster, 0)
    runner.prepare_for_trigger_available_now_func(reader, io.BytesIO())
    assert reader._target is not None and sum(reader._target["orders"].values()) == 8


def test_without_driver_read_max_messages_the_stream_reader_plans_read_tasks(cluster: MemoryCluster) -> None:
    reader = StaticMQDataSource(_options(cluster)).streamReader(spark_schema(True))
    assert type(reader) is StaticMQStreamReader
    start = reader.initialOffset()
    _send(cluster, 0)
    end = reader.latestOffset(start, ReadAllAvailable())
    parts, rows = _run_partitions_func(reader, start, end)
    assert rows is None and len(parts) == 4


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_driver_read_max_messages_must_be_a_positive_integer(value: str) -> None:
    with pytest.raises(InvalidOptionError, match="driverReadMaxMessages"):
        parse_source_options(
            {"namesrv": "127.0.0.1:9876", "topic": "t", "driverReadMaxMessages": value}, streaming=True
        )


def test_driver_read_max_messages_applies_to_streaming_queries_only() -> None:
    opts = {"namesrv": "127.0.0.1:9876", "topic": "t", "driverReadMaxMessages": "100"}
    with pytest.raises(InvalidOptionError, match=r"driverReadMaxMessages.*streaming queries only"):
        parse_source_options(opts, streaming=False)


def test_driver_read_answers_a_runner_that_asks_latest_offset_without_start_or_limit(cluster: MemoryCluster) -> None:
    """pyspark 4.0/4.1's runner (and 4.2's for readers without admission control) asks
    `latestOffset()` alone: the start is the last end planned and, after the run's first answer,
    the limit comes from the options."""
    options = _options(cluster, driverReadMaxMessages="100", maxMessagesPerTrigger="5")
    reader = StaticMQDataSource(options).streamReader(spark_schema(True))
    assert isinstance(reader, DriverReadStreamReader)
    start = reader.initialOffset()
    out = io.BytesIO()
    runner.latest_offset_func(reader, out)  # the run's first answer, before any message
    _send(cluster, 0)
    ends = []
    for _ in range(2):
        out = io.BytesIO()
        runner.latest_offset_func(reader, out)
        body = io.BytesIO(out.getvalue())
        end = json.loads(body.read(read_int(body)))
        parts, rows = _run_partitions_func(reader, start, end)
        assert len(parts) == 1 and rows is not None and rows.num_rows == (5 if not ends else 3)
        ends.append(end)
        start = end
