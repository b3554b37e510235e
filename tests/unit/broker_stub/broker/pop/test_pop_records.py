"""Revive-log rows: CK, ACK, SUP and DONE records survive encoding as packed rows."""

from __future__ import annotations

import numpy as np
import pytest

from broker_stub.broker.pop.records import (
    AckRecord,
    CkRecord,
    DoneRecord,
    RecordFormatError,
    decode_row,
    decode_rows,
    encode_ack,
    encode_ck,
    encode_done,
    pack_rows,
)
from staticmq_spark.protocol.rows.decode import parse_headers


def ck(**changes: object) -> CkRecord:
    base = {
        "group": "g",
        "topic": "%RETRY%g_orders",
        "origin_topic": "orders",
        "queue_id": 3,
        "source_bname": "broker-1",
        "source_queue": 5,
        "gen": 2,
        "pop_time": 1_000,
        "invisible_ms": 30_000,
        "start_offset": 77,
        "offset_delta": 10_000,
        "count": 4,
        "next_begin": 10_081,
        "retry": True,
    }
    base.update(changes)
    return CkRecord(**base)  # type: ignore[arg-type]


def test_a_ck_record_round_trips() -> None:
    record = ck()
    assert decode_row(memoryview(encode_ck(record))) == record
    assert record.deadline == 31_000


def test_an_order_ck_keeps_its_done_flags_and_attempts() -> None:
    record = ck(
        order=True,
        retry=False,
        done_before=bytes([1, 0, 0, 1]),
        attempts=np.array([1, 2, 1, 0], dtype="<i4").tobytes(),
    )
    assert decode_row(memoryview(encode_ck(record))) == record


def test_an_order_ck_without_per_message_data_is_refused() -> None:
    with pytest.raises(RecordFormatError, match="one done flag"):
        encode_ck(ck(order=True))


def test_ack_sup_and_done_rows_round_trip_in_one_packed_batch() -> None:
    ids = np.array([5, 5, 9], dtype=np.int64)
    idx = np.array([0, 3, 1], dtype=np.int64)
    batch = pack_rows([encode_ack(ids, idx), encode_ack(ids[:1], idx[:1], superseded=True), encode_done(ids[2:])])
    parse_headers(batch)  # valid packed rows, like any message batch
    ack, sup, done = decode_rows(batch.data, batch.sizes)
    assert isinstance(ack, AckRecord) and not ack.superseded
    assert ack.ck_ids.tolist() == [5, 5, 9] and ack.indices.tolist() == [0, 3, 1]
    assert isinstance(sup, AckRecord) and sup.superseded and sup.ck_ids.tolist() == [5]
    assert isinstance(done, DoneRecord) and done.ck_ids.tolist() == [9]


def test_a_row_with_an_unknown_tag_is_refused() -> None:
    row = bytearray(encode_done(np.array([1], dtype=np.int64)))
    row[28:32] = b"nope"
    with pytest.raises(RecordFormatError, match="unknown tag"):
        decode_row(memoryview(bytes(row)))


def test_acks_are_stored_as_runs_and_read_back_sorted() -> None:
    ids = np.array([9, 4, 4, 4, 9, 4], dtype=np.int64)
    idx = np.array([0, 2, 0, 1, 1, 7], dtype=np.int64)
    row = encode_ack(ids, idx)
    whole_batch = encode_ack(np.full(1000, 3, dtype=np.int64), np.arange(1000, dtype=np.int64))
    assert len(whole_batch) < 60, "one run for a whole batch"
    ack = decode_row(memoryview(row))
    assert isinstance(ack, AckRecord)
    assert list(zip(ack.ck_ids.tolist(), ack.indices.tolist(), strict=True)) == [
        (4, 0),
        (4, 1),
        (4, 2),
        (4, 7),
        (9, 0),
        (9, 1),
    ]
