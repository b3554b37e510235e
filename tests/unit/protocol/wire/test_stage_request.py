"""StageRequest on the wire: the hand-made encoding parses like protobuf's, and the broker's
decoding keeps the rows as views of the request while agreeing with protobuf on every layout."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.wire.stage_request import StageChunk, decode_stage_request, encode_stage_request

HEAD = pb.StageRequest(writer="q-1", batch=7, staging_id="s" * 32, topic="t", queue_id=3, seq=11)


def _same(chunk: StageChunk, message: pb.StageRequest) -> None:
    head = pb.StageRequest()
    head.CopyFrom(message)
    head.ClearField("rows")
    assert chunk.head == head
    assert bytes(chunk.data) == message.rows.data
    assert bytes(chunk.sizes) == message.rows.sizes


def test_the_hand_made_encoding_parses_like_protobuf() -> None:
    pieces = [pa.py_buffer(b"abc"), pa.py_buffer(b""), pa.py_buffer(b"defgh" * 40)]
    sizes = np.array([3, 100, 100], dtype=np.int32)
    raw = encode_stage_request(HEAD, pieces, sizes)
    expected = pb.StageRequest()
    expected.CopyFrom(HEAD)
    expected.rows.data = b"abc" + b"defgh" * 40
    expected.rows.sizes = sizes.astype("<i4").tobytes()
    assert pb.StageRequest.FromString(raw) == expected
    _same(decode_stage_request(raw), expected)


def test_decoded_rows_are_views_of_the_request_not_copies() -> None:
    raw = encode_stage_request(HEAD, [pa.py_buffer(b"x" * 1000)], np.array([1000], dtype=np.int32))
    chunk = decode_stage_request(raw)
    assert isinstance(chunk.data, memoryview) and chunk.data.obj is raw
    assert isinstance(chunk.sizes, memoryview) and chunk.sizes.obj is raw


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(
            pb.StageRequest(
                writer="w", batch=1, rows=pb.MessageBatch(data=b"rows", sizes=b"\x04\0\0\0")
            ).SerializeToString(),
            id="protobuf-order",
        ),
        pytest.param(
            pb.StageRequest(rows=pb.MessageBatch(data=b"rows", sizes=b"\x04\0\0\0")).SerializeToString()
            + pb.StageRequest(writer="w", batch=1, seq=2).SerializeToString(),
            id="rows-first",
        ),
        pytest.param(
            pb.StageRequest(rows=pb.MessageBatch(data=b"old", sizes=b"\x04\0\0\0")).SerializeToString()
            + pb.StageRequest(topic="t", rows=pb.MessageBatch(data=b"new")).SerializeToString(),
            id="repeated-rows-merge",
        ),
        pytest.param(b"", id="empty"),
        pytest.param(
            pb.StageRequest(writer="w").SerializeToString() + b"\xa0\x06\x96\x01" + b"\xad\x06\x01\x02\x03\x04",
            id="unknown-fields",
        ),
    ],
)
def test_decoding_agrees_with_protobuf(raw: bytes) -> None:
    _same(decode_stage_request(raw), pb.StageRequest.FromString(raw))


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"\x3a\x10abc", "runs past its end"),
        (b"\x08" + b"\xff" * 11, "varint"),
        (b"\x0b\x00", "wire type 3"),
        (b"\x00\x01", "field number 0"),
        (b"\x0a\x02\xff\xfe", "malformed StageRequest"),  # writer is not UTF-8
    ],
)
def test_a_malformed_request_is_refused_with_a_clear_error(raw: bytes, says: str) -> None:
    with pytest.raises(InvalidArgumentError, match=says):
        decode_stage_request(raw)
