"""The sink's write-once commit against real files: staging files written as commit-log records,
adopted by the commit log and linked into queues (MessageStore.link), recovery of link records,
a link applied once, files adopted before a crash, and the staging file rules."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from broker_stub.config import StoreConfig
from broker_stub.store.message_store import CHECKPOINT_FILE, MessageStore
from broker_stub.store.sink_staging import ChunkInfo, SinkStaging, read_chunk, scan_staged
from broker_stub.store.store_results import ReadStatus, StagedRecord
from staticmq_spark.errors import ConflictError
from staticmq_spark.protocol.rows.codec import PackedBatch
from staticmq_spark.protocol.rows.decode import decode_batch
from staticmq_spark.protocol.rows.encode import encode_messages

UID = 42


def open_store(path: Path) -> MessageStore:
    store = MessageStore(path, StoreConfig(segment_bytes=64 * 1024, max_batch_bytes=32 * 1024))
    store.open({"t": UID})
    store.register_topic("t", UID)
    return store


def bodies(store: MessageStore, queue: int, offset: int = 0) -> list[bytes]:
    result = store.read("t", queue, offset, 1000, 1 << 20)
    if result.status is not ReadStatus.FOUND:
        return []
    return decode_batch(PackedBatch(result.data, result.sizes)).column("body").to_pylist()


def stage(staging: SinkStaging, staging_id: str, chunks: list[tuple[int, list[bytes]]]) -> dict[int, ChunkInfo]:
    """Stage chunks (queue, bodies) with seqs 0, 1, ...; returns the file's index."""
    for seq, (queue, rows) in enumerate(chunks):
        staging.stage("w", 0, staging_id, queue, seq, encode_messages(rows), topic="t", uid=UID)
    return staging.index("w", 0, staging_id)


def record(info: ChunkInfo, source: int = 0) -> StagedRecord:
    return StagedRecord(source, info.offset, info.rows_offset, info.sizes)


def test_link_makes_staged_rows_visible_without_writing_them_again(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store")
    staging = SinkStaging(tmp_path / "sink")
    store.append("t", 0, encode_messages([b"p1", b"p2"]))
    index = stage(staging, "s1", [(0, [b"a", b"b"]), (1, [b"x"]), (0, [b"c"])])
    path = staging.staging_path("w", 0, "s1")
    inode, size = os.stat(path).st_ino, os.stat(path).st_size
    written = store.disk_usage()

    rows = store.link("t", b"w/0/b/link", [path], [(0, [record(index[0]), record(index[2])]), (1, [record(index[1])])])

    assert rows == 4
    assert bodies(store, 0) == [b"p1", b"p2", b"a", b"b", b"c"]
    assert bodies(store, 1) == [b"x"]
    assert not path.exists()
    adopted = [p for p in (tmp_path / "store" / "commitlog").iterdir() if p.stat().st_ino == inode]
    assert len(adopted) == 1, "the staging file was not moved into the commit log"
    assert store.disk_usage() - written < size + 1024, "rows were written a second time"
    after = store.append("t", 0, encode_messages([b"later"]))
    assert after.base_offset == 5 and bodies(store, 0, 5) == [b"later"]
    store.close()


def test_linked_rows_are_recovered_from_the_link_record_after_losing_the_consume_queues(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store")
    staging = SinkStaging(tmp_path / "sink")
    store.append("t", 0, encode_messages([b"p1"]))
    index = stage(staging, "s1", [(0, [b"a", b"b"]), (1, [b"x", b"y"])])
    store.link("t", b"k", [staging.staging_path("w", 0, "s1")], [(0, [record(index[0])]), (1, [record(index[1])])])
    store.append("t", 1, encode_messages([b"z"]))
    store.close()
    (tmp_path / "store" / CHECKPOINT_FILE).unlink()
    for queue in ("0", "1"):
        shutil.rmtree(tmp_path / "store" / "consumequeue" / "t" / queue)

    store = open_store(tmp_path / "store")
    assert bodies(store, 0) == [b"p1", b"a", b"b"]
    assert bodies(store, 1) == [b"x", b"y", b"z"]
    store.close()


def test_a_link_key_is_applied_once_even_after_a_restart(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store")
    staging = SinkStaging(tmp_path / "sink")
    index = stage(staging, "s1", [(0, [b"a"])])
    bases: list[int] = []
    assert store.link("t", b"k", [staging.staging_path("w", 0, "s1")], [(0, [record(index[0])])], bases.extend) == 1
    assert store.link("t", b"k", [bases[0]], [(0, [record(index[0])])]) == 0
    store.close()
    store = open_store(tmp_path / "store")
    assert store.link("t", b"k", [bases[0]], [(0, [record(index[0])])]) == 0
    assert bodies(store, 0) == [b"a"]
    store.close()


def test_files_adopted_before_a_crash_are_linked_by_their_position(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = open_store(tmp_path / "store")
    staging = SinkStaging(tmp_path / "sink")
    index = stage(staging, "s1", [(0, [b"a", b"b"])])
    bases: list[int] = []

    def crash(parts: object) -> int:
        raise OSError("killed before the link record")

    monkeypatch.setattr(store._log, "append", crash)
    with pytest.raises(OSError):
        store.link("t", b"k", [staging.staging_path("w", 0, "s1")], [(0, [record(index[0])])], bases.extend)
    monkeypatch.undo()

    store = open_store(tmp_path / "store")  # the crashed store is abandoned, as after kill -9
    assert bodies(store, 0) == [], "staged records became visible without a link"
    moved = store.segment_file(bases[0])
    assert moved is not None
    found = scan_staged(moved)[0]
    assert store.link("t", b"k", [bases[0]], [(0, [record(found[0])])]) == 2
    assert bodies(store, 0) == [b"a", b"b"]
    store.close()


def test_staging_cuts_a_torn_tail_before_writing_again(tmp_path: Path) -> None:
    staging = SinkStaging(tmp_path / "sink")
    stage(staging, "s1", [(0, [b"a"])])
    path = staging.staging_path("w", 0, "s1")
    whole = path.stat().st_size
    with path.open("ab") as fh:
        fh.write(b"\x31\x51\x4d\x53torn")

    restarted = SinkStaging(tmp_path / "sink")
    restarted.stage("w", 0, "s1", 1, 1, encode_messages([b"b"]), topic="t", uid=UID)

    infos, torn_at = scan_staged(path)
    assert torn_at is None and sorted(infos) == [0, 1]
    assert infos[1].offset == whole
    assert decode_batch(read_chunk(path, infos[1])).column("body").to_pylist() == [b"b"]


def test_a_prepared_transaction_takes_no_more_rows(tmp_path: Path) -> None:
    staging = SinkStaging(tmp_path / "sink")
    stage(staging, "s1", [(0, [b"a"])])
    staging.record_decision("w", 0, b"decision", committed=False)
    with pytest.raises(ConflictError, match="already prepared"):
        staging.stage("w", 0, "s1", 0, 1, encode_messages([b"late"]), topic="t", uid=UID)
    assert sorted(staging.index("w", 0, "s1")) == [0]


def test_large_staged_chunks_written_past_the_page_cache_read_back_whole(tmp_path: Path) -> None:
    staging = SinkStaging(tmp_path / "sink")
    large = [bytes([i % 256]) * 1000 for i in range(600)]  # ~600 KB: its aligned middle goes O_DIRECT
    index = stage(staging, "s1", [(0, [b"small"]), (1, large), (0, [b"after"])])
    path = staging.staging_path("w", 0, "s1")
    staging.make_durable("w", 0, "s1")

    scanned, torn_at = scan_staged(path)
    assert torn_at is None and scanned == index
    assert decode_batch(read_chunk(path, scanned[1])).column("body").to_pylist() == large
    assert decode_batch(read_chunk(path, scanned[2])).column("body").to_pylist() == [b"after"]
    assert staging.index("w", 0, "s1") == SinkStaging(tmp_path / "sink").index("w", 0, "s1")
