"""What sends and pulls answer: SendResult, PullResult, and pulled batches as Arrow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from staticmq_spark.cluster.messages import MessageColumns, packed_columns
from staticmq_spark.protocol.codec import DECODED_SCHEMA
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.pull_status import PullStatus

PULLED_SCHEMA = pa.schema(
    [
        ("queue_offset", pa.int64()),
        *DECODED_SCHEMA,
        ("store_timestamp", pa.int64()),
        ("physical_offset", pa.int64()),
    ]
)


@dataclass(frozen=True, slots=True)
class SendResult:
    topic: str
    queue_id: int
    queue_offset: int  # offset of the first message; -1 while a static leader's offset is undecided
    count: int
    broker: str
    physical_offset: int
    store_timestamp: int
    duplicate: bool = False
    rows: tuple[int, ...] | None = None  # which input rows this request carried, when grouped


@dataclass(frozen=True, slots=True)
class PullResult:
    status: PullStatus
    topic: str
    queue_id: int
    next_offset: int
    min_offset: int
    max_offset: int
    broker: str
    offset_delta: int
    batch: pa.RecordBatch  # PULLED_SCHEMA; queue_offset is already in logic space

    @property
    def count(self) -> int:
        return int(self.batch.num_rows)

    def messages(self) -> list[dict[str, Any]]:
        """Rows as dicts (for printing and small tools; the batch is the fast path)."""
        return list(self.batch.to_pylist())


def empty_pulled_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in PULLED_SCHEMA], schema=PULLED_SCHEMA)


def pulled_batch(response: pb.PullResponse) -> pa.RecordBatch:
    """The messages of a pull answer as Arrow, offsets converted with offset_delta."""
    if not response.batch.sizes:
        return empty_pulled_batch()
    return pulled_columns(packed_columns(response), response.offset_delta)


def pulled_columns(messages: MessageColumns, offset_delta: int) -> pa.RecordBatch:
    """Decoded messages (any backend) as PULLED_SCHEMA: logic offset first, physical last."""
    physical = messages.queue_offsets
    columns = [
        pa.array(physical + offset_delta, pa.int64()),
        *messages.columns.columns,
        pa.array(messages.store_timestamps, pa.int64()),
        pa.array(physical, pa.int64()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=PULLED_SCHEMA)


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
