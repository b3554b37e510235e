"""The message store of one broker: appends, reads and offsets of physical queues, recovery,
flushing (sync group commit or async interval), checkpoints and retention.

Invariants:
- an appended batch is one commit-log record; its consume-queue entries are written right after
  it under the same lock, so readers never see an entry whose bytes are not written;
- with flush=sync, `append` returns only once the record is fsynced;
- the checkpoint's `cq_safe_pos` is a record boundary below which every consume-queue entry is
  on disk: recovery verifies (CRC) and re-dispatches only the records from there on.
"""

from __future__ import annotations

import enum
import logging
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from broker_stub.config import StoreConfig
from broker_stub.store.atomic_file import atomic_write_json, read_json
from broker_stub.store.commit_log import CommitLog, DataGoneError
from broker_stub.store.consume_queue import ENTRY_DTYPE, ConsumeQueue
from broker_stub.store.group_commit import GroupCommit
from broker_stub.store.idempotency import IdempotencyIndex, StoredBatch
from broker_stub.store.record import RecordHeader, encode_record
from broker_stub.store.retired_fds import RetiredFds
from staticmq_spark.errors import InvalidBatchError
from staticmq_spark.protocol.codec import Int32Array, PackedBatch

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "checkpoint.json"
IDEMPOTENCY_SEGMENTS = 2


class ReadStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MESSAGE = "NO_NEW_MESSAGE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    OFFSET_OVERFLOW = "OFFSET_OVERFLOW"


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    count: int
    store_timestamp: int
    duplicate: bool = False
    end_pos: int = 0  # commit-log position after the record: durable once flushed past it


@dataclass(frozen=True, slots=True)
class ReadResult:
    status: ReadStatus
    next_offset: int
    min_offset: int
    max_offset: int
    base_offset: int = 0
    data: bytes = b""
    sizes: Int32Array | None = None
    store_timestamps: np.ndarray | None = None

    @property
    def count(self) -> int:
        return 0 if self.sizes is None else int(self.sizes.shape[0])


class MessageStore:
    def __init__(
        self,
        data_dir: Path,
        config: StoreConfig,
        on_arrival: Callable[[str, int], None] | None = None,
    ) -> None:
        self._dir = data_dir
        self.config = config
        self._on_arrival = on_arrival
        self._retired = RetiredFds()
        self._log = CommitLog(data_dir / "commitlog", config.segment_bytes, self._retired)
        self._cq_root = data_dir / "consumequeue"
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._uids: dict[str, int] = {}
        self._append_lock = threading.Lock()
        self._queues_lock = threading.Lock()
        self._group_commit = GroupCommit(lambda: self._log.written_pos, self._log.sync)
        self._idempotency = IdempotencyIndex(config.idempotency_window)
        self._last_store_ts = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ lifecycle

    def open(self, topic_uids: dict[str, int]) -> None:
        """Recover: check the commit-log tail, cut torn records, rebuild consume queues."""
        self._uids = dict(topic_uids)
        self._log.open()
        self._open_queues()
        checkpoint = read_json(self._dir / CHECKPOINT_FILE) or {}
        verify_from = int(checkpoint.get("cq_safe_pos", 0))
        if verify_from > self._log.written_pos or verify_from < self._log.min_pos:
            verify_from = self._log.min_pos
        for _pos, header in self._log.walk_headers(IDEMPOTENCY_SEGMENTS, verify_from):
            self._remember_key(header)
        redispatched = 0
        for pos, header, sizes in self._log.recover(verify_from):
            redispatched += self._redispatch(pos, header, sizes)
            self._remember_key(header)
            self._last_store_ts = max(self._last_store_ts, header.store_timestamp)
        valid_end = self._log.written_pos
        for cq in self._queues.values():
            cq.truncate_beyond(valid_end)
            cq.advance_min(self._log.min_pos)
            self._last_store_ts = max(self._last_store_ts, cq.last_store_timestamp())
        if redispatched:
            log.info("recovery: re-dispatched %d consume-queue entries", redispatched)
        self._group_commit.flushed = valid_end
        self._write_checkpoint(valid_end)

    def start(self) -> None:
        """Start the background flush, checkpoint and retention threads."""
        jobs: list[tuple[str, float, Callable[[], None]]] = [
            ("checkpoint", self.config.checkpoint_interval_ms / 1000, self.checkpoint),
            ("retention", self.config.retention_check_interval_ms / 1000, self.run_retention),
        ]
        if self.config.flush == "async":
            jobs.append(("flush", self.config.flush_interval_ms / 1000, self._group_commit.flush_all))
        for name, interval, fn in jobs:
            t = threading.Thread(target=self._every, args=(interval, fn), name=f"store-{name}", daemon=True)
            t.start()
            self._threads.append(t)

    def _every(self, interval: float, fn: Callable[[], None]) -> None:
        while not self._stop.wait(interval):
            try:
                fn()
            except Exception:
                log.exception("store background job %s failed", getattr(fn, "__name__", fn))

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        self.checkpoint()
        with self._append_lock:
            for cq in self._queues.values():
                cq.close()
            self._log.close()
            self._retired.close_expired(everything=True)

    # ------------------------------------------------------------------ topics / queues

    def register_topic(self, topic: str, uid: int) -> None:
        """Make `topic` (incarnation `uid`) known; a different incarnation's queues are wiped."""
        with self._queues_lock:
            if self._uids.get(topic) not in (None, uid):
                self._drop_topic_queues(topic)
            self._uids[topic] = uid
            topic_dir = self._cq_root / topic
            topic_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_json(topic_dir / "uid.json", {"uid": uid})

    def delete_topic(self, topic: str) -> None:
        with self._append_lock, self._queues_lock:
            self._drop_topic_queues(topic)
            self._uids.pop(topic, None)
            self._idempotency.forget_topic(topic)

    def _drop_topic_queues(self, topic: str) -> None:
        for key in [k for k in self._queues if k[0] == topic]:
            self._queues.pop(key).destroy()
        shutil.rmtree(self._cq_root / topic, ignore_errors=True)

    def _open_queues(self) -> None:
        if not self._cq_root.exists():
            return
        for topic_dir in sorted(p for p in self._cq_root.iterdir() if p.is_dir()):
            stored = read_json(topic_dir / "uid.json") or {}
            if self._uids.get(topic_dir.name) != stored.get("uid"):
                log.info("removing consume queues of unknown or re-created topic %s", topic_dir.name)
                shutil.rmtree(topic_dir, ignore_errors=True)
                continue
            for qdir in topic_dir.iterdir():
                if qdir.is_dir() and qdir.name.isdigit():
                    self._queue(topic_dir.name, int(qdir.name))

    def _queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            with self._queues_lock:
                cq = self._queues.get((topic, queue_id))
                if cq is None:
                    cq = ConsumeQueue(
                        self._cq_root / topic / str(queue_id), self.config.cq_entries_per_file, self._retired
                    )
                    cq.open()
                    self._queues[(topic, queue_id)] = cq
        return cq

    # ------------------------------------------------------------------ append

    def append(
        self, topic: str, queue_id: int, batch: PackedBatch, idempotency_key: bytes = b"", *, durable: bool = True
    ) -> AppendResult:
        """Append one batch to a physical queue. With flush=sync it is durable on return, unless
        `durable=False`: then the caller must call wait_durable(result.end_pos) itself."""
        uid = self._uids.get(topic)
        if uid is None:
            raise InvalidBatchError(f"topic {topic!r} is not registered with the store")
        if len(batch.data) > self.config.max_batch_bytes:
            raise InvalidBatchError(
                f"batch of {len(batch.data)} bytes exceeds the {self.config.max_batch_bytes}-byte limit"
            )
        with self._append_lock:
            if idempotency_key:
                seen = self._idempotency.get(idempotency_key)
                if seen is not None:
                    return self._duplicate(seen, topic, queue_id, batch)
            cq = self._queue(topic, queue_id)
            base = cq.max_offset
            now = max(int(time.time() * 1000), self._last_store_ts)
            parts = encode_record(
                topic=topic,
                queue_id=queue_id,
                base_offset=base,
                store_timestamp=now,
                topic_uid=uid,
                attrs=idempotency_key,
                sizes=batch.sizes,
                data=batch.data,
            )
            pos = self._log.append(parts)
            rows_at = pos + sum(len(p) for p in parts[:4])
            cq.append(_entries(rows_at, batch.sizes, now))
            self._last_store_ts = now
            end = self._log.written_pos
            if idempotency_key:
                self._idempotency.add(idempotency_key, StoredBatch(topic, queue_id, base, batch.count, now))
        if durable:
            self.wait_durable(end)
        if self._on_arrival is not None:
            self._on_arrival(topic, queue_id)
        return AppendResult(base, batch.count, now, end_pos=end)

    def stored_key(self, key: bytes) -> StoredBatch | None:
        """What a batch sent with this idempotency key became, if it is still remembered."""
        return self._idempotency.get(key)

    def wait_durable(self, end_pos: int) -> None:
        """With flush=sync: return once the commit log is fsynced up to `end_pos`."""
        if self.config.flush == "sync":
            self._group_commit.wait(end_pos)

    @staticmethod
    def _duplicate(seen: StoredBatch, topic: str, queue_id: int, batch: PackedBatch) -> AppendResult:
        if (seen.topic, seen.queue_id, seen.count) != (topic, queue_id, batch.count):
            raise InvalidBatchError(
                f"idempotency key reused for a different batch (first stored as {seen.count} messages "
                f"in {seen.topic}/{seen.queue_id}, now {batch.count} messages for {topic}/{queue_id})"
            )
        return AppendResult(seen.base_offset, seen.count, seen.store_timestamp, duplicate=True)

    def _remember_key(self, header: RecordHeader) -> None:
        if header.attrs and self._uids.get(header.topic) == header.topic_uid:
            self._idempotency.add(
                header.attrs,
                StoredBatch(header.topic, header.queue_id, header.base_offset, header.count, header.store_timestamp),
            )

    def _redispatch(self, pos: int, header: RecordHeader, sizes: Int32Array) -> int:
        if self._uids.get(header.topic) != header.topic_uid:
            return 0
        cq = self._queue(header.topic, header.queue_id)
        end = header.base_offset + header.count
        if cq.max_offset >= end:
            return 0
        if cq.max_offset < header.base_offset:
            log.error(
                "recovery: %s/%d consume queue ends at %d but the next record starts at %d",
                header.topic,
                header.queue_id,
                cq.max_offset,
                header.base_offset,
            )
            return 0
        if cq.max_offset > header.base_offset:
            cq.truncate_to(header.base_offset)
        cq.append(_entries(pos + header.rows_offset, sizes, header.store_timestamp))
        return header.count

    # ------------------------------------------------------------------ reads

    def offsets(self, topic: str, queue_id: int) -> tuple[int, int]:
        cq = self._queues.get((topic, queue_id))
        return (0, 0) if cq is None else (cq.min_offset, cq.max_offset)

    def last_store_timestamp(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get((topic, queue_id))
        return 0 if cq is None else cq.last_store_timestamp()

    def average_message_size(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get((topic, queue_id))
        return 0 if cq is None else cq.recent_average_size()

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp: int) -> int:
        """The first offset stored at or after `timestamp` (max offset when none is)."""
        cq = self._queues.get((topic, queue_id))
        return 0 if cq is None else cq.first_offset_where("store_ts", timestamp)

    def read(self, topic: str, queue_id: int, offset: int, max_messages: int, max_bytes: int) -> ReadResult:
        cq = self._queues.get((topic, queue_id))
        lo, hi = (0, 0) if cq is None else (cq.min_offset, cq.max_offset)
        if offset < lo:
            return ReadResult(ReadStatus.OFFSET_TOO_SMALL, lo, lo, hi)
        if offset > hi:
            return ReadResult(ReadStatus.OFFSET_OVERFLOW, hi, lo, hi)
        if offset == hi or cq is None:
            return ReadResult(ReadStatus.NO_NEW_MESSAGE, offset, lo, hi)
        entries = cq.read(offset, max(1, max_messages))
        if len(entries) == 0:
            return ReadResult(ReadStatus.NO_NEW_MESSAGE, offset, lo, hi)
        sizes = entries["size"].astype(np.int32)
        keep = max(1, int(np.searchsorted(np.cumsum(sizes, dtype=np.int64), max_bytes, side="right")))
        entries, sizes = entries[:keep], sizes[:keep]
        try:
            data = self._log.read_many(entries["pos"].astype(np.int64), sizes)
        except DataGoneError:
            cq.advance_min(self._log.min_pos)
            return ReadResult(ReadStatus.OFFSET_TOO_SMALL, cq.min_offset, cq.min_offset, cq.max_offset)
        return ReadResult(
            ReadStatus.FOUND, offset + keep, lo, hi, offset, data, sizes, entries["store_ts"].astype(np.int64)
        )

    def queues_of(self, topic: str) -> list[int]:
        return sorted(q for t, q in self._queues if t == topic)

    # ------------------------------------------------------------------ background jobs

    def checkpoint(self) -> None:
        """Persist consume queues and record how far they are complete."""
        with self._append_lock:
            safe = self._log.written_pos
            queues = list(self._queues.values())
        for cq in queues:
            cq.sync()
        self._group_commit.wait(safe)
        self._write_checkpoint(safe)

    def _write_checkpoint(self, safe: int) -> None:
        atomic_write_json(self._dir / CHECKPOINT_FILE, {"cq_safe_pos": safe, "written_at": int(time.time() * 1000)})

    def run_retention(self) -> None:
        """Delete expired commit-log segments and advance the queues' min offsets."""
        retention_s = self.config.retention_hours * 3600
        count = self._log.expired_prefix(time.time(), self.config.retention_bytes, retention_s)
        if count:
            with self._append_lock:
                self._log.drop_prefix(count)
            for cq in list(self._queues.values()):
                cq.advance_min(self._log.min_pos)
        self._retired.close_expired()

    def disk_usage(self) -> int:
        return self._log.total_bytes()


def _entries(rows_at: int, sizes: Int32Array, store_ts: int) -> np.ndarray:
    entries = np.zeros(sizes.shape[0], dtype=ENTRY_DTYPE)
    starts = np.zeros(sizes.shape[0], dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    entries["pos"] = rows_at + starts
    entries["size"] = sizes
    entries["store_ts"] = store_ts
    return entries
