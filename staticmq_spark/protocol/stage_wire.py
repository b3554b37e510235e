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

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from google.protobuf.message import DecodeError

from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.protocol.codec import Int32Array
from staticmq_spark.protocol.pb import staticmq_pb2 as pb

_ROWS_FIELD = pb.StageRequest.DESCRIPTOR.fields_by_name["rows"].number
_DATA_FIELD = pb.MessageBatch.DESCRIPTOR.fields_by_name["data"].number
_SIZES_FIELD = pb.MessageBatch.DESCRIPTOR.fields_by_name["sizes"].number
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


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


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field_head(number: int, length: int) -> bytes:
    """Tag and length of a length-delimited field."""
    return _varint(number << 3 | _LEN) + _varint(length)


def encode_stage_request(head: pb.StageRequest, data: list[pa.Buffer], sizes: Int32Array) -> bytes:
    """`head` (a StageRequest without rows) plus rows made of `data` (concatenated) and `sizes`;
    parses exactly like `pb.StageRequest(..., rows=pb.MessageBatch(data=..., sizes=...))`."""
    sizes_b = sizes.astype("<i4", copy=False).tobytes()
    data_len = sum(p.size for p in data)
    sizes_part = _field_head(_SIZES_FIELD, len(sizes_b)) + sizes_b
    data_head = _field_head(_DATA_FIELD, data_len)
    rows_head = _field_head(_ROWS_FIELD, len(sizes_part) + len(data_head) + data_len)
    return b"".join([head.SerializeToString(), rows_head, sizes_part, data_head, *data])


def decode_stage_request(raw: bytes) -> StageChunk:
    """A serialized StageRequest, its rows left in `raw` (views, no copy)."""
    view = memoryview(raw)
    head_parts: list[memoryview] = []
    data: memoryview = view[:0]
    sizes: memoryview = view[:0]
    for number, wire_type, start, value_start, end in _fields(view, 0, len(view)):
        if number == _ROWS_FIELD and wire_type == _LEN:
            for inner, inner_type, _, lo, hi in _fields(view, value_start, end):
                if inner == _DATA_FIELD and inner_type == _LEN:
                    data = view[lo:hi]
                elif inner == _SIZES_FIELD and inner_type == _LEN:
                    sizes = view[lo:hi]
        else:
            head_parts.append(view[start:end])
    try:
        head = pb.StageRequest.FromString(b"".join(head_parts))
    except DecodeError as exc:
        raise InvalidArgumentError(f"malformed StageRequest: {exc}") from None
    return StageChunk(head, data, sizes)


def _fields(view: memoryview, pos: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(field number, wire type, start of the field, start of its value, end) of each field of
    the message encoded in view[pos:end]."""
    while pos < end:
        start = pos
        key, pos = _read_varint(view, pos, end)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise InvalidArgumentError(f"malformed StageRequest: field number 0 at byte {start}")
        value_start = pos
        if wire_type == _VARINT:
            _, pos = _read_varint(view, pos, end)
        elif wire_type == _LEN:
            length, value_start = _read_varint(view, pos, end)
            pos = value_start + length
        elif wire_type in (_I64, _I32):
            pos += 8 if wire_type == _I64 else 4
        else:
            raise InvalidArgumentError(f"malformed StageRequest: unsupported wire type {wire_type} at byte {start}")
        if pos > end:
            raise InvalidArgumentError(f"malformed StageRequest: field {number} at byte {start} runs past its end")
        yield number, wire_type, start, value_start, pos


def _read_varint(view: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while pos < end and shift < 64:
        byte = view[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise InvalidArgumentError(f"malformed StageRequest: truncated or overlong varint before byte {pos}")
