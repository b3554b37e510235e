"""A PullResponse written and read by hand is the same message protobuf writes and reads."""

from __future__ import annotations

from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.wire.pull_response import decode_pull_response, encode_pull_response

HEAD = pb.PullResponse(status=pb.FOUND, next_offset=12, base_offset=10, store_timestamps=b"\1" * 16, bname="b-0")


def test_a_hand_written_answer_parses_as_the_protobuf_message() -> None:
    raw = encode_pull_response(HEAD, b"rows" * 1000, b"\x04\0\0\0" * 1000)
    expected = pb.PullResponse()
    expected.CopyFrom(HEAD)
    expected.batch.data, expected.batch.sizes = b"rows" * 1000, b"\x04\0\0\0" * 1000
    assert pb.PullResponse.FromString(raw) == expected


def test_a_protobuf_answer_reads_back_without_copying_the_batch() -> None:
    message = pb.PullResponse()
    message.CopyFrom(HEAD)
    message.batch.data, message.batch.sizes = b"abc", b"\x03\0\0\0"
    raw = message.SerializeToString()
    head, data, sizes = decode_pull_response(raw)
    assert bytes(data) == b"abc" and bytes(sizes) == b"\x03\0\0\0" and data.obj is raw
    assert head.next_offset == 12 and head.bname == "b-0" and not head.HasField("batch")


def test_an_answer_without_messages_has_no_batch() -> None:
    head, data, sizes = decode_pull_response(encode_pull_response(pb.PullResponse(status=pb.NO_NEW_MESSAGE), b"", b""))
    assert head.status == pb.NO_NEW_MESSAGE and len(data) == 0 and len(sizes) == 0
