"""The message store against real files: appends, reads, recovery after torn writes, retention,
timestamps and idempotency keys."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from broker_stub.config import StoreConfig
from broker_stub.store.message_store import MessageStore
from broker_stub.store.store_results import ReadStatus
from staticmq_spark.errors import InvalidBatchError
from staticmq_spark.protocol.rows.codec import PackedBatch
from staticmq_spark.protocol.rows.decode import decode_batch
from staticmq_spark.protocol.rows.encode import encode_messages

UID = 42


def open_store(path: Path, **overrides: object) -> MessageStore:
    config = StoreConfig(**{"segment_bytes": 64 * 1024, "max_batch_bytes": 32 * 1024, **overrides})  # type: ignore[arg-type]
    store = MessageStore(path, config)
    store.open({"t": UID})
    store.register_topic("t", UID)
    return store


def bodies(result) -> list[bytes]:  # type: ignore[no-untyped-def]
    return decode_batch(PackedBatch(result.data, result.sizes)).column("body").to_pylist()


def test_offsets_start_at_zero_and_are_contiguous(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    a = store.append("t", 0, encode_messages([b"a", b"b"]))
    b = store.append("t", 0, encode_messages([b"c"]))
    c = store.append("t", 1, encode_messages([b"x"]))
    assert (a.base_offset, b.base_offset, c.base_offset) == (0, 2, 0)
    assert store.offsets("t", 0) == (0, 3)
    store.close()


def test_read_returns_messages_from_any_offset(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.append("t", 0, encode_messages([b"a", b"b", b"c"]))
    store.append("t", 0, encode_messages([b"d"]))
    result = store.read("t", 0, 1, 10, 1 << 20)
    assert result.status is ReadStatus.FOUND
    assert (result.base_offset, result.next_offset) == (1, 4)
    assert bodies(result) == [b"b", b"c", b"d"]
    store.close()


def test_read_honours_max_messages_and_max_bytes_but_returns_at_least_one(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.append("t", 0, encode_messages([b"x" * 100] * 5))
    assert store.read("t", 0, 0, 2, 1 << 20).count == 2
    assert store.read("t", 0, 0, 10, 1).count == 1
    store.close()


def test_read_past_the_end_and_before_the_start(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.append("t", 0, encode_messages([b"a"]))
    assert store.read("t", 0, 1, 10, 1000).status is ReadStatus.NO_NEW_MESSAGE
    over = store.read("t", 0, 5, 10, 1000)
    assert (over.status, over.next_offset) == (ReadStatus.OFFSET_OVERFLOW, 1)
    store.close()


def test_data_survives_reopen(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    for i in range(50):
        store.append("t", i % 3, encode_messages([f"m{i}".encode()]))
    store.close()
    again = open_store(tmp_path)
    assert [again.offsets("t", q)[1] for q in range(3)] == [17, 17, 16]
    assert bodies(again.read("t", 1, 0, 100, 1 << 20))[:2] == [b"m1", b"m4"]
    again.close()


def _segments(path: Path) -> list[Path]:
    return sorted((path / "commitlog").glob("*.log"))


def test_torn_tail_is_cut_and_indexes_rebuilt(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.append("t", 0, encode_messages([b"keep-1", b"keep-2"]))
    store.append("t", 0, encode_messages([b"torn"]))
    store.close()
    last = _segments(tmp_path)[-1]
    with last.open("r+b") as fh:  # cut the last record in half, as a crash mid-write would
        fh.truncate(last.stat().st_size - 10)
    again = open_store(tmp_path)
    assert again.offsets("t", 0) == (0, 2)
    assert bodies(again.read("t", 0, 0, 10, 1 << 20)) == [b"keep-1", b"keep-2"]
    after = again.append("t", 0, encode_messages([b"next"]))
    assert after.base_offset == 2
    again.close()


def test_corrupt_record_is_never_served(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.append("t", 0, encode_messages([b"good"]))
    store.append("t", 0, encode_messages([b"evil"]))
    store.close()
    last = _segments(tmp_path)[-1]
    data = bytearray(last.read_bytes())
    data[-1] ^= 0x55
    last.write_bytes(bytes(data))
    os.remove(tmp_path / "checkpoint.json")  # no checkpoint: everything is verified
    again = open_store(tmp_path)
    assert bodies(again.read("t", 0, 0, 10, 1 << 20)) == [b"good"]
    again.close()


def test_lost_consume_queue_entries_are_rebuilt_from_the_log(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.append("t", 0, encode_messages([b"a", b"b"]))
    store.close()
    (tmp_path / "checkpoint.json").unlink()
    for cq in (tmp_path / "consumequeue" / "t" / "0").glob("*.cq"):
        cq.unlink()
    again = open_store(tmp_path)
    assert bodies(again.read("t", 0, 0, 10, 1 << 20)) == [b"a", b"b"]
    again.close()


def test_retention_by_size_deletes_old_segments_and_raises_min_offset(tmp_path: Path) -> None:
    store = open_store(tmp_path, retention_bytes=100 * 1024)
    for _ in range(40):
        store.append("t", 0, encode_messages([b"x" * 10_000]))
    store.run_retention()
    lo, hi = store.offsets("t", 0)
    assert lo > 0 and hi == 40
    assert store.read("t", 0, 0, 10, 1 << 20).status is ReadStatus.OFFSET_TOO_SMALL
    assert store.read("t", 0, lo, 1, 1 << 20).status is ReadStatus.FOUND
    store.close()
    again = open_store(tmp_path, retention_bytes=100 * 1024)
    assert again.offsets("t", 0) == (lo, hi)
    again.close()


def test_retention_by_age_keeps_the_active_segment(tmp_path: Path) -> None:
    store = open_store(tmp_path, retention_hours=1e-9)
    for _ in range(20):
        store.append("t", 0, encode_messages([b"x" * 10_000]))
    time.sleep(0.01)  # not a wait: every segment grows older than the (microseconds long) retention age
    store.run_retention()
    lo, hi = store.offsets("t", 0)
    assert 0 < lo < hi
    store.close()


def test_offset_for_timestamp_finds_the_first_message_at_or_after(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.append("t", 0, encode_messages([b"early"]))
    time.sleep(0.02)  # not a wait: "early" is stored strictly before `middle`, "late" strictly after
    middle = int(time.time() * 1000)
    time.sleep(0.02)
    store.append("t", 0, encode_messages([b"late"]))
    assert store.offset_for_timestamp("t", 0, 0) == 0
    assert store.offset_for_timestamp("t", 0, middle) == 1
    assert store.offset_for_timestamp("t", 0, middle + 10_000_000) == 2
    store.close()


def test_idempotency_key_stores_a_batch_once_even_after_restart(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    first = store.append("t", 0, encode_messages([b"a", b"b"]), b"k1")
    again = store.append("t", 0, encode_messages([b"a", b"b"]), b"k1")
    assert again.duplicate and again.base_offset == first.base_offset
    store.close()
    reopened = open_store(tmp_path)
    third = reopened.append("t", 0, encode_messages([b"a", b"b"]), b"k1")
    assert third.duplicate and reopened.offsets("t", 0) == (0, 2)
    reopened.close()


def test_idempotency_key_reused_for_another_batch_is_refused(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.append("t", 0, encode_messages([b"a"]), b"k1")
    with pytest.raises(InvalidBatchError, match="reused"):
        store.append("t", 0, encode_messages([b"a", b"b"]), b"k1")
    store.close()


def test_recreated_topic_does_not_see_old_records(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.append("t", 0, encode_messages([b"old"]))
    store.delete_topic("t")
    store.register_topic("t", UID + 1)
    store.append("t", 0, encode_messages([b"new"]))
    store.close()
    (tmp_path / "checkpoint.json").unlink()
    again = MessageStore(tmp_path, StoreConfig(segment_bytes=64 * 1024, max_batch_bytes=32 * 1024))
    again.open({"t": UID + 1})
    assert bodies(again.read("t", 0, 0, 10, 1 << 20)) == [b"new"]
    again.close()


def test_many_small_interleaved_records_are_gathered_in_order(tmp_path: Path) -> None:
    store = open_store(tmp_path, segment_bytes=4 << 20, max_batch_bytes=1 << 20)
    for i in range(300):
        store.append("t", i % 2, encode_messages([f"{i}".encode()]))
    result = store.read("t", 0, 0, 1000, 1 << 20)
    assert bodies(result) == [f"{i}".encode() for i in range(0, 300, 2)]
    assert np.all(np.diff(result.store_timestamps) >= 0)
    store.close()


def test_async_flush_acknowledges_before_fsync_and_still_persists_on_close(tmp_path: Path) -> None:
    store = open_store(tmp_path, flush="async", flush_interval_ms=50)
    store.start()
    store.append("t", 0, encode_messages([b"a"]))
    store.close()
    again = open_store(tmp_path)
    assert again.offsets("t", 0) == (0, 1)
    again.close()
