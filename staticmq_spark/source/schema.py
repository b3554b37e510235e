"""The source's row schema, and pulled messages as Arrow batches of exactly that schema."""

from __future__ import annotations

from functools import cache

import numpy as np
import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from staticmq_spark.backends.types import MessageColumns
from staticmq_spark.protocol.rows import arrays


def spark_schema(include_properties: bool) -> StructType:
    """topic, queueId, queueOffset (logic), key, tags, value, [properties], bornTimestamp,
    storeTimestamp, and for diagnosis brokerName / physicalOffset of the segment read."""
    fields = [
        StructField("topic", StringType(), False),
        StructField("queueId", IntegerType(), False),
        StructField("queueOffset", LongType(), False),
        StructField("key", StringType(), True),
        StructField("tags", StringType(), True),
        StructField("value", BinaryType(), True),
    ]
    if include_properties:
        fields.append(StructField("properties", MapType(StringType(), StringType(), True), True))
    fields += [
        StructField("bornTimestamp", TimestampType(), True),
        StructField("storeTimestamp", TimestampType(), True),
        StructField("brokerName", StringType(), False),
        StructField("physicalOffset", LongType(), False),
    ]
    return StructType(fields)


TIMESTAMP = pa.timestamp("us", tz="UTC")


@cache
def arrow_schema(include_properties: bool) -> pa.Schema:
    """What Spark expects back from read(): the Arrow form of spark_schema, as pyspark's
    `to_arrow_schema` gives it on every supported version (whose keywords differ between them:
    tests/unit/source/test_source_schema.py holds the two equal). Built once per process."""
    fields = [
        pa.field("topic", pa.string(), False),
        pa.field("queueId", pa.int32(), False),
        pa.field("queueOffset", pa.int64(), False),
        pa.field("key", pa.string()),
        pa.field("tags", pa.string()),
        pa.field("value", pa.binary()),
    ]
    if include_properties:
        fields.append(pa.field("properties", pa.map_(pa.field("key", pa.string(), False), pa.string())))
    fields += [
        pa.field("bornTimestamp", TIMESTAMP),
        pa.field("storeTimestamp", TIMESTAMP),
        pa.field("brokerName", pa.string(), False),
        pa.field("physicalOffset", pa.int64(), False),
    ]
    return pa.schema(fields)


def constant_strings(value: str, n: int) -> pa.Array:
    raw = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(raw * n))


def _timestamps(ms: np.ndarray) -> pa.Array:
    """Milliseconds as Spark's timestamps (microseconds, UTC), built on the buffer (no cast kernel)."""
    us = ms.astype(np.int64) * 1000
    return pa.Array.from_buffers(TIMESTAMP, len(us), [None, pa.py_buffer(us)])


def to_spark_batch(
    messages: MessageColumns,
    *,
    topic: str,
    logic_queue: int,
    offset_delta: int,
    bname: str,
    schema: pa.Schema,
    include_properties: bool,
    limit: int | None = None,
) -> pa.RecordBatch:
    """Pulled columns as one Arrow batch in the source schema (vectorized, no row loop); `limit`
    keeps the first rows only (a backend may answer past the planned end of a segment)."""
    decoded = messages.columns
    n = messages.count if limit is None else min(limit, messages.count)
    if n < messages.count:
        decoded = decoded.slice(0, n)
    physical = messages.queue_offsets[:n]
    columns = [
        constant_strings(topic, n),
        arrays.numbers(np.full(n, logic_queue, dtype=np.int32)),
        arrays.numbers(physical + offset_delta),
        decoded.column("key"),
        decoded.column("tags"),
        decoded.column("body"),
    ]
    if include_properties:
        columns.append(decoded.column("properties"))
    columns += [
        _timestamps(arrays.int64_values(decoded.column("born_timestamp"))),
        _timestamps(messages.store_timestamps[:n]),
        constant_strings(bname, n),
        arrays.numbers(physical),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
