"""StageRequest on the wire, without copying its rows.

A sink task serializes a StageRequest by hand around its rows (`encode_stage_request`), so that
the rows are copied once, from the encoder's Arrow buffers into the request, instead of into
bytes, into the message and into its serialization. The broker reads it back the same way
(`decode_stage_request`): the rows stay a view of the received request, and only the small
fields go through protobuf. Both follow the protobuf wire format, so either side interoperates
with plain `pb.StageRequest` serialization (fields in any order, repeated `rows` merged, unknown
fields kept in the head).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from google.protobuf.message import DecodeError

from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.rows.codec import Int32Array
from staticmq_spark.protocol.wire.raw_fields import field_head, split_batch

_ROWS_FIELD = pb.StageRequest.DESCRIPTOR.fields_by_name["rows"].number
_DATA_FIELD = pb.MessageBatch.DESCRIPTOR.fields_by_name["data"].number
_SIZES_FIELD = pb.MessageBatch.DESCRIPTOR.fields_by_name["sizes"].number


@dataclass(frozen=True, slots=True)
class StageChunk:
    """A StageRequest: its small fields (`head`, whose `rows` is empty) and its rows."""

    head: pb.StageRequest
    data: bytes | memoryview
    sizes: bytes | memoryview

    @staticmethod
    def from_message(request: pb.StageRequest) -> StageChunk:
        head = pb.StageRequest()
        head.CopyFrom(request)
        head.ClearField("rows")
        return StageChunk(head, request.rows.data, request.rows.sizes)


def encode_stage_request(head: pb.StageRequest, data: list[pa.Buffer], sizes: Int32Array) -> bytes:
    """`head` (a StageRequest without rows) plus rows made of `data` (concatenated) and `sizes`;
    parses exactly like `pb.StageRequest(..., rows=pb.MessageBatch(data=..., sizes=...))`."""
    sizes_b = sizes.astype("<i4", copy=False).tobytes()
    data_len = sum(p.size for p in data)
    sizes_part = field_head(_SIZES_FIELD, len(sizes_b)) + sizes_b
    data_head = field_head(_DATA_FIELD, data_len)
    rows_head = field_head(_ROWS_FIELD, len(sizes_part) + len(data_head) + data_len)
    return b"".join([head.SerializeToString(), rows_head, sizes_part, data_head, *data])


def decode_stage_request(raw: bytes) -> StageChunk:
    """A serialized StageRequest, its rows left in `raw` (views, no copy)."""
    head_bytes, data, sizes = split_batch(raw, _ROWS_FIELD, _DATA_FIELD, _SIZES_FIELD, "StageRequest")
    try:
        head = pb.StageRequest.FromString(head_bytes)
    except DecodeError as exc:
        raise InvalidArgumentError(f"malformed StageRequest: {exc}") from None
    return StageChunk(head, data, sizes)
