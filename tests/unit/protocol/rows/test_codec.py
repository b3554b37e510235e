"""Packed message rows: round trips, vectorized helpers, and every validation refusal."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from staticmq_spark.errors import InvalidBatchError, MessageTooLargeError
from staticmq_spark.protocol.rows.codec import (
    HEADER_SIZE,
    PROPERTIES_TYPE,
    PackedBatch,
    byte_runs,
    split_by_bytes,
    take_rows,
)
from staticmq_spark.protocol.rows.decode import decode_batch, parse_headers, validate_batch
from staticmq_spark.protocol.rows.encode import encode_columns, encode_messages

text = st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=12)
message = st.fixed_dictionaries(
    {
        "body": st.binary(max_size=64),
        "key": st.none() | text,
        "tags": st.none() | text,
        "properties": st.none() | st.dictionaries(text, text, max_size=4),
    }
)


@settings(max_examples=200, deadline=None)
@given(st.lists(message, min_size=1, max_size=30))
def test_encode_then_decode_returns_every_field_unchanged(rows: list[dict]) -> None:
    packed = encode_messages(
        [r["body"] for r in rows],
        keys=[r["key"] for r in rows],
        tags=[r["tags"] for r in rows],
        properties=[r["properties"] for r in rows],
    )
    validate_batch(packed, 1 << 20)
    decoded = decode_batch(packed).to_pylist()
    assert [d["body"] for d in decoded] == [r["body"] for r in rows]
    assert [d["key"] for d in decoded] == [r["key"] for r in rows]
    assert [d["tags"] for d in decoded] == [r["tags"] for r in rows]
    assert [dict(d["properties"]) for d in decoded] == [r["properties"] or {} for r in rows]


def test_sizes_are_header_plus_parts() -> None:
    packed = encode_messages([b"abc"], keys=["kk"], tags=["t"], properties=[{"a": "b"}])
    assert packed.sizes.tolist() == [HEADER_SIZE + 2 + 1 + 3 + 3]
    assert len(packed.data) == int(packed.sizes.sum())


def test_encode_accepts_arrow_columns_including_sliced_ones() -> None:
    bodies = pa.array([b"a", b"b", b"c", b"d"]).slice(1)
    keys = pa.array(["k1", None, "k3", "k4"]).slice(1)
    props = pa.array([{"x": "1"}, None, {"y": "2"}, {}], type=PROPERTIES_TYPE).slice(1)
    out = decode_batch(encode_columns(bodies, key=keys, properties=props)).to_pylist()
    assert [r["body"] for r in out] == [b"b", b"c", b"d"]
    assert [r["key"] for r in out] == [None, "k3", "k4"]
    assert [dict(r["properties"]) for r in out] == [{}, {"y": "2"}, {}]


def test_string_bodies_are_stored_as_utf8_bytes() -> None:
    out = decode_batch(encode_messages(["wörld"])).to_pylist()
    assert out[0]["body"] == "wörld".encode()


def test_born_timestamps_are_kept() -> None:
    packed = encode_columns([b"x", b"y"], born_timestamp=[5, 7])
    assert decode_batch(packed).column("born_timestamp").to_pylist() == [5, 7]


def test_empty_batch_is_refused() -> None:
    with pytest.raises(InvalidBatchError, match="at least one message"):
        encode_messages([])


def test_null_body_is_refused_with_its_row() -> None:
    with pytest.raises(InvalidBatchError, match="message 1: body is null"):
        encode_columns(pa.array([b"a", None]))


def test_property_with_nul_is_refused() -> None:
    with pytest.raises(InvalidBatchError, match="NUL"):
        encode_messages([b"a"], properties=[{"k": "v\x00w"}])


def test_oversized_body_is_refused_naming_the_message() -> None:
    packed = encode_messages([b"x", b"y" * 100])
    with pytest.raises(MessageTooLargeError, match="message 1: body is 100 bytes; the limit is 50"):
        validate_batch(packed, 50)


def test_sizes_that_do_not_add_up_are_refused() -> None:
    packed = encode_messages([b"abc", b"de"])
    with pytest.raises(InvalidBatchError, match="add up"):
        parse_headers(PackedBatch(packed.data + b"x", packed.sizes))


def test_size_below_header_is_refused() -> None:
    with pytest.raises(InvalidBatchError, match="below the 28-byte header"):
        parse_headers(PackedBatch(b"\x00" * 10, np.array([10], np.int32)))


def test_header_lengths_inconsistent_with_size_are_refused() -> None:
    packed = encode_messages([b"abc"])
    raw = bytearray(packed.data)
    raw[20] = 9  # body_len says 9, the row has 3
    with pytest.raises(InvalidBatchError, match="do not match"):
        parse_headers(PackedBatch(bytes(raw), packed.sizes))


def test_unknown_flags_are_refused() -> None:
    packed = encode_messages([b"abc"])
    raw = bytearray(packed.data)
    raw[8] = 0x80
    with pytest.raises(InvalidBatchError):
        parse_headers(PackedBatch(bytes(raw), packed.sizes))


def test_invalid_utf8_key_is_refused() -> None:
    packed = encode_messages([b"abc"], keys=["kk"])
    raw = bytearray(packed.data)
    raw[HEADER_SIZE] = 0xFF
    with pytest.raises(InvalidBatchError, match="UTF-8"):
        validate_batch(PackedBatch(bytes(raw), packed.sizes), 1000)


def test_malformed_properties_are_refused() -> None:
    packed = encode_messages([b"abc"], properties=[{"k": "v"}])
    raw = bytearray(packed.data)
    raw[-2] = ord("x")  # "k\x00v" -> "kxv": no separator left
    with pytest.raises(InvalidBatchError, match="key/value pairs"):
        validate_batch(PackedBatch(bytes(raw), packed.sizes), 1000)


def test_sizes_field_not_multiple_of_four_is_refused() -> None:
    with pytest.raises(InvalidBatchError, match="multiple of 4"):
        PackedBatch.from_wire(b"", b"\x01\x02\x03")


def test_take_rows_reorders_rows() -> None:
    packed = encode_messages([b"a", b"bb", b"ccc"])
    out = decode_batch(take_rows(packed, np.array([2, 0], dtype=np.int64)))
    assert out.column("body").to_pylist() == [b"ccc", b"a"]


def test_split_by_bytes_keeps_every_row_once_and_in_order() -> None:
    packed = encode_messages([bytes([i]) * 50 for i in range(20)])
    pieces = split_by_bytes(packed, 200)
    assert all(len(p.data) <= 200 for p in pieces)
    bodies = [b for p in pieces for b in decode_batch(p).column("body").to_pylist()]
    assert bodies == [bytes([i]) * 50 for i in range(20)]


def _greedy_runs(sizes: list[int], max_bytes: int) -> list[tuple[int, int]]:
    """The splitting rule written out row by row: a run takes rows while they fit, and always one."""
    out, a = [], 0
    while a < len(sizes):
        b, total = a + 1, sizes[a]
        while b < len(sizes) and total + sizes[b] <= max_bytes:
            total += sizes[b]
            b += 1
        out.append((a, b))
        a = b
    return out


@given(st.lists(st.integers(min_value=0, max_value=300), max_size=40), st.integers(min_value=1, max_value=600))
def test_byte_runs_cover_every_row_once_in_runs_that_fit_or_hold_one_larger_row(sizes: list[int], limit: int) -> None:
    starts = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(np.array(sizes, dtype=np.int64), out=starts[1:])
    assert byte_runs(starts, limit) == _greedy_runs(sizes, limit)
    offset = starts + 1000  # boundaries need not start at 0 (a slice of a larger buffer)
    assert byte_runs(offset, limit) == _greedy_runs(sizes, limit)


def test_concat_then_slice_round_trip() -> None:
    a = encode_messages([b"1", b"2"])
    b = encode_messages([b"3"])
    both = PackedBatch.concat([a, b])
    assert decode_batch(both.slice(1, 3)).column("body").to_pylist() == [b"2", b"3"]
