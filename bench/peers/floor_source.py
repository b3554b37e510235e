"""The floor of any Python streaming data source in pyspark: a queue that is a file of fixed-size records.

`format("bench_floor").option("path", FILE)` reads FILE as records of RECORD bytes: latestOffset is the
file's size over RECORD (one `stat`), read() is one `pread` and one Arrow array. Partitions: the new
range in the first and an empty second one (option `partitions` "2", the default: what staticmq plans
for probes that all go to one of its 2 logic queues), or the range alone ("1": what Kafka's source
plans, which leaves out partitions without new records). No network, no broker, no planning: what a
trigger costs with it is what pyspark's Python data source machinery costs (the driver-side runner's
calls, a Python worker per read task, the Arrow hand-off), the part no Python source can go below.
`append(FILE, value)` is its producer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.errors import PySparkNotImplementedError
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition, SimpleDataSourceStreamReader
from pyspark.sql.types import BinaryType, StructField, StructType

from staticmq_spark.source.schema import TIMESTAMP, arrow_schema, constant_strings, spark_schema
from staticmq_spark.workers.heap import frozen_after

RECORD = 100


def append(path: str, value: bytes) -> None:
    """One record (padded or cut to RECORD bytes), appended in one write."""
    with open(path, "ab") as f:
        f.write(value[:RECORD].ljust(RECORD, b" "))


def records(path: str) -> int:
    """Records in the queue file (0 before the first append)."""
    try:
        return os.stat(path).st_size // RECORD
    except FileNotFoundError:
        return 0


class FloorSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench_floor"

    def _wide(self) -> bool:
        """Option `schema` "staticmq": the records in staticmq's source schema."""
        return self.options.get("schema") == "staticmq"

    def schema(self) -> StructType:
        if self._wide():
            return spark_schema(include_properties=True)
        return StructType([StructField("value", BinaryType(), True)])

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        if self.options.get("partitions") == "driver":
            raise PySparkNotImplementedError(  # pyspark then asks simpleStreamReader
                errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "streamReader"}
            )
        return FloorReader(self.options["path"], int(self.options.get("partitions", "2")), self._wide())

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        return DriverFloorReader(self.options["path"], self._wide())


class Range(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        super().__init__((start, end))
        self.start, self.end = start, end


class FloorReader(DataSourceStreamReader):
    def __init__(self, path: str, partitions: int, wide: bool = False) -> None:
        self.path = path
        self.count = partitions
        self.wide = wide

    def initialOffset(self) -> dict[str, Any]:
        return {"n": records(self.path)}  # like startingOffsets=latest

    def latestOffset(self) -> dict[str, Any]:
        return {"n": records(self.path)}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        lo, hi = start["n"], end["n"]
        return [Range(lo, hi)] + [Range(hi, hi) for _ in range(self.count - 1)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        """The records of the range; the worker's heap frozen after its first read, as staticmq's
        read tasks do (staticmq_spark.workers.heap), so that pyspark's collection after each task
        costs the floor no more than it costs staticmq."""
        return frozen_after(self._read(partition))

    def _read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Range)
        n = partition.end - partition.start
        if n <= 0:
            return
        with open(self.path, "rb") as f:
            raw = os.pread(f.fileno(), n * RECORD, partition.start * RECORD)
        values = pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(_offsets(n)), pa.py_buffer(raw)])
        if not self.wide:
            yield pa.RecordBatch.from_arrays([values], names=["value"])
            return
        yield pa.RecordBatch.from_arrays(_staticmq_columns(values, partition.start), schema=arrow_schema(True))

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to commit: the records stay in their file, and the floor is what a source pays
        with no commit work of its own."""


def _staticmq_columns(values: pa.Array, start: int) -> list[pa.Array]:
    """The records in staticmq's source schema (11 columns, a map among them): constant strings,
    the record numbers as offsets, now as both timestamps, no key, tags or properties."""
    n = len(values)
    offsets = pa.array(range(start, start + n), pa.int64())
    now = pa.array([time.time_ns() // 1000] * n, pa.int64()).view(TIMESTAMP)
    nulls = pa.nulls(n, pa.string())
    properties = pa.nulls(n, arrow_schema(True).field("properties").type)
    return [constant_strings("floor", n), pa.array([0] * n, pa.int32()), offsets, nulls, nulls, values, properties,
            now, now, constant_strings("floor", n), offsets]  # fmt: skip


def _offsets(n: int) -> bytes:
    import numpy as np

    return (np.arange(n + 1, dtype=np.int32) * RECORD).tobytes()


class DriverFloorReader(SimpleDataSourceStreamReader):
    """The records read in the query's driver-side runner: pyspark hands them to Spark with the plan,
    and the micro-batch runs no Python read task."""

    def __init__(self, path: str, wide: bool = False) -> None:
        self.path = path
        self.wide = wide

    def initialOffset(self) -> dict[str, Any]:
        return {"n": records(self.path)}

    def read(self, start: dict[str, Any]) -> tuple[Iterator[pa.RecordBatch], dict[str, Any]]:  # type: ignore[override]
        end = {"n": records(self.path)}
        return iter(list(self.readBetweenOffsets(start, end))), end  # pyspark copies the iterator

    def readBetweenOffsets(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return FloorReader(self.path, 1, self.wide).read(Range(start["n"], end["n"]))

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to commit."""
