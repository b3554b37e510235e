"""Pulled messages as columns: what every backend hands the Spark reader (no per-message objects)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from staticmq_spark.protocol.codec import PackedBatch
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.row_decode import decode_batch

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class MessageColumns:
    """`columns` in protocol.codec.DECODED_SCHEMA (key, tags, body, properties, born_timestamp),
    with each message's physical queue offset and store time (ms)."""

    columns: pa.RecordBatch
    queue_offsets: I64
    store_timestamps: I64

    @property
    def count(self) -> int:
        return int(self.columns.num_rows)


def packed_columns(
    response: pb.PullResponse,
    *,
    properties: bool = True,
    batch: tuple[bytes | memoryview, bytes | memoryview] | None = None,
) -> MessageColumns:
    """A broker_stub pull answer's packed rows as columns (vectorized decode, no row loop).
    `batch`: the rows as (data, sizes) when they were read apart from `response` (pull_wire)."""
    data, sizes = batch if batch is not None else (response.batch.data, response.batch.sizes)
    packed = PackedBatch.from_wire(data, sizes)
    n = packed.count
    return MessageColumns(
        decode_batch(packed, properties=properties),
        response.base_offset + np.arange(n, dtype=np.int64),
        np.frombuffer(response.store_timestamps, dtype="<i8", count=n).astype(np.int64),
    )
