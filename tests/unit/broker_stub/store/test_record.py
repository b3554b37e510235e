"""Commit-log records: encoding and the checks that catch torn or corrupt records."""

from __future__ import annotations

import numpy as np
import pytest

from broker_stub.store.record import HEADER_SIZE, RecordError, decode_header, encode_record, parse_record
from staticmq_spark.protocol.rows.encode import encode_messages


def _record(attrs: bytes = b"") -> bytes:
    packed = encode_messages([b"one", b"two"])
    parts = encode_record(
        topic="t1",
        queue_id=3,
        base_offset=10,
        store_timestamp=123,
        topic_uid=9,
        attrs=attrs,
        sizes=packed.sizes,
        data=packed.data,
    )
    return b"".join(parts)


def test_record_round_trips_its_header_and_sizes() -> None:
    header, sizes = parse_record(_record(b"key-1"))
    assert (header.topic, header.queue_id, header.base_offset, header.count) == ("t1", 3, 10, 2)
    assert (header.store_timestamp, header.topic_uid, header.attrs) == (123, 9, b"key-1")
    assert sizes.tolist() == encode_messages([b"one", b"two"]).sizes.tolist()


def test_flipped_byte_fails_the_crc() -> None:
    raw = bytearray(_record())
    raw[-1] ^= 0xFF
    with pytest.raises(RecordError, match="crc"):
        parse_record(bytes(raw))


def test_torn_record_is_detected_by_its_length() -> None:
    raw = _record()
    with pytest.raises(RecordError):
        decode_header(raw[:HEADER_SIZE], len(raw) - 5)


def test_zeroed_space_is_not_a_record() -> None:
    with pytest.raises(RecordError, match="magic"):
        decode_header(bytes(HEADER_SIZE), 1000)


def test_sizes_that_do_not_fill_the_record_are_refused() -> None:
    packed = encode_messages([b"one"])
    parts = encode_record(
        topic="t",
        queue_id=0,
        base_offset=0,
        store_timestamp=1,
        topic_uid=1,
        attrs=b"",
        sizes=np.array([packed.sizes[0] + 1], np.int32),
        data=packed.data,
    )
    with pytest.raises(RecordError):
        parse_record(b"".join(parts))
