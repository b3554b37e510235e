"""broker_stub's answers as the seam's values: pulled rows as columns, queue bounds, pull results."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from staticmq_spark.backends.types import (
    MessageColumns,
    PhysicalBounds,
    PullResult,
    PullStatus,
    empty_pulled_batch,
    pulled_columns,
)
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.rows.codec import PackedBatch
from staticmq_spark.protocol.rows.decode import decode_batch


def packed_columns(
    response: pb.PullResponse,
    *,
    properties: bool = True,
    batch: tuple[bytes | memoryview, bytes | memoryview] | None = None,
) -> MessageColumns:
    """A broker_stub pull answer's packed rows as columns (vectorized decode, no row loop).
    `batch`: the rows as (data, sizes) when they were read apart from `response` (protocol.wire.pull_response)."""
    data, sizes = batch if batch is not None else (response.batch.data, response.batch.sizes)
    packed = PackedBatch.from_wire(data, sizes)
    n = packed.count
    return MessageColumns(
        decode_batch(packed, properties=properties),
        np.frombuffer(response.queue_offsets, dtype="<i8", count=n).astype(np.int64)
        if response.queue_offsets
        else response.base_offset + np.arange(n, dtype=np.int64),
        np.frombuffer(response.store_timestamps, dtype="<i8", count=n).astype(np.int64),
    )


def bounds_from_pb(q: pb.QueueOffsets) -> PhysicalBounds:
    return PhysicalBounds(q.min_offset, q.max_offset, q.last_store_timestamp, q.avg_message_bytes)


def pulled_batch(response: pb.PullResponse) -> pa.RecordBatch:
    """The messages of a pull answer as Arrow, offsets converted with offset_delta."""
    if not response.batch.sizes:
        return empty_pulled_batch()
    return pulled_columns(packed_columns(response), response.offset_delta)


def pull_result(topic: str, queue_id: int, response: pb.PullResponse) -> PullResult:
    return PullResult(
        status=PullStatus(response.status),
        topic=topic,
        queue_id=queue_id,
        next_offset=response.next_offset,
        min_offset=response.min_offset,
        max_offset=response.max_offset,
        broker=response.bname,
        offset_delta=response.offset_delta,
        batch=pulled_batch(response),
    )
