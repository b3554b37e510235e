"""The source's row schema, and pulled messages as Arrow batches of exactly that schema."""

from __future__ import annotations

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

from staticmq_spark.protocol.codec import PackedBatch
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.row_decode import decode_batch


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


def arrow_schema(include_properties: bool) -> pa.Schema:
    """What Spark expects back from read(): pyspark's own Arrow form of spark_schema."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema(include_properties), timezone="UTC")


def constant_strings(value: str, n: int) -> pa.Array:
    raw = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(raw * n))


def _timestamps(ms: np.ndarray) -> pa.Array:
    return pa.array(ms.astype(np.int64) * 1000, pa.int64()).cast(pa.timestamp("us", tz="UTC"))


def to_spark_batch(
    response: pb.PullResponse,
    *,
    topic: str,
    logic_queue: int,
    offset_delta: int,
    bname: str,
    schema: pa.Schema,
    include_properties: bool,
) -> pa.RecordBatch:
    """A physical pull answer as one Arrow batch in the source schema (vectorized, no row loop)."""
    packed = PackedBatch.from_wire(response.batch.data, response.batch.sizes)
    decoded = decode_batch(packed, properties=include_properties)
    n = packed.count
    physical = response.base_offset + np.arange(n, dtype=np.int64)
    stamps = np.frombuffer(response.store_timestamps, dtype="<i8", count=n)
    columns = [
        constant_strings(topic, n),
        pa.array(np.full(n, logic_queue, dtype=np.int32)),
        pa.array(physical + offset_delta),
        decoded.column("key"),
        decoded.column("tags"),
        decoded.column("body"),
    ]
    if include_properties:
        columns.append(decoded.column("properties"))
    columns += [
        _timestamps(np.asarray(decoded.column("born_timestamp"))),
        _timestamps(stamps),
        constant_strings(bname, n),
        pa.array(physical),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
