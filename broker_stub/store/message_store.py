"""The message store of one broker: appends, reads and offsets of physical queues, recovery,
flushing (sync group commit or async interval), checkpoints and retention.

Invariants:
- an appended batch is one commit-log record; its consume-queue entries are written right after
  it under the same lock, so readers never see an entry whose bytes are not written;
- with flush=sync, `append` returns only once the record is fsynced;
- the checkpoint's `cq_safe_pos` is a record boundary below which every consume-queue entry is
  on disk: recovery verifies (CRC) and re-dispatches only the records from there on; a queue
  with an impossible entry, or shorter than the checkpoint's `queues` says, is rebuilt;
- `link` (the sink's write-once commit) adopts staging files as segments and appends one link
  record naming the staged records that become visible, then their consume-queue entries, under
  the same lock; recovery re-dispatches a link record like a plain one.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from broker_stub.config import StoreConfig
from broker_stub.store import queue_check
from broker_stub.store.atomic_file import atomic_write_json, read_json
from broker_stub.store.commit_log import CommitLog, DataGoneError
from broker_stub.store.consume_queue import ConsumeQueue, entries_for
from broker_stub.store.group_commit import GroupCommit
from broker_stub.store.idempotency import IdempotencyIndex, StoredBatch
from broker_stub.store.record import (
    FLAG_LINK,
    FLAG_STAGED,
    LINK_ENTRY,
    MisalignedRead,
    RecordHeader,
    encode_link,
    encode_record,
)
from broker_stub.store.redispatch import Redispatcher
from broker_stub.store.retired_fds import RetiredFds
from broker_stub.store.store_results import AppendResult, ReadResult, ReadStatus, StagedRecord, duplicate_of, plan_link
from staticmq_spark.errors import InvalidBatchError
from staticmq_spark.protocol.consume.tag_filter import batch_tag_codes, kept_by_codes
from staticmq_spark.protocol.rows.codec import Int32Array, PackedBatch

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "checkpoint.json"
FILTER_SCAN_FACTOR = 16  # consume-queue entries a filtered read looks at, per message asked for
FILTER_SCAN_MAX = 65536
IDEMPOTENCY_SEGMENTS = 2


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
        for _pos, header in self._log.walk_headers(IDEMPOTENCY_SEGMENTS * self.config.segment_bytes, verify_from):
            self._remember_key(header)
        redispatch = Redispatcher(self._log, self._uids, self._queue)
        for pos, header, sizes in self._log.recover(verify_from):
            redispatch.record(pos, header, sizes)
            self._remember_key(header)
            self._last_store_ts = max(self._last_store_ts, header.store_timestamp)
        valid_end = self._log.written_pos
        # an index that lies is rebuilt from the commit log, so nothing hides or is reused
        recorded = checkpoint.get("queues") or {}
        rebuild = Redispatcher(self._log, self._uids, self._queue)
        queue_check.check_queues(self._dir, self._log, self._queues, recorded, self.config.max_batch_bytes, rebuild)
        for cq in self._queues.values():
            cq.truncate_beyond(valid_end)
            cq.advance_min(self._log.min_pos)
            self._last_store_ts = max(self._last_store_ts, cq.last_store_timestamp())
        if redispatch.count:
            log.info("recovery: re-dispatched %d consume-queue entries", redispatch.count)
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
        self,
        topic: str,
        queue_id: int,
        batch: PackedBatch,
        idempotency_key: bytes = b"",
        *,
        durable: bool = True,
        header: npt.NDArray[Any] | None = None,
    ) -> AppendResult:
        """Append one batch to a physical queue. With flush=sync it is durable on return, unless
        `durable=False`: then the caller must call wait_durable(result.end_pos) itself. `header`:
        the batch's row headers when the caller validated it (validate_batch), else read again."""
        uid = self._uids.get(topic)
        if uid is None:
            raise InvalidBatchError(f"topic {topic!r} is not registered with the store")
        if len(batch.data) > self.config.max_batch_bytes:
            raise InvalidBatchError(
                f"batch of {len(batch.data)} bytes exceeds the {self.config.max_batch_bytes}-byte limit"
            )
        codes = batch_tag_codes(batch, header)  # outside the lock: appends to other queues need not wait for it
        with self._append_lock:
            if idempotency_key:
                seen = self._idempotency.get(idempotency_key)
                if seen is not None:
                    return duplicate_of(seen, topic, queue_id, batch.count)
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
            cq.append(entries_for(rows_at, batch.sizes, now, codes))
            self._last_store_ts = now
            end = self._log.written_pos
            if idempotency_key:
                self._idempotency.add(idempotency_key, StoredBatch(topic, queue_id, base, batch.count, now))
        if durable:
            self.wait_durable(end)
        if self._on_arrival is not None:
            self._on_arrival(topic, queue_id)
        return AppendResult(base, batch.count, now, end_pos=end)

    def link(
        self,
        topic: str,
        key: bytes,
        files: Sequence[Path | int],
        groups: Sequence[tuple[int, Sequence[StagedRecord]]],
        before_adopt: Callable[[list[int]], None] | None = None,
    ) -> int:
        """Make staged records visible without writing their rows again: each file of `files`
        that is a Path (durable whole records) is adopted as the next commit-log segment (an
        int is a file adopted before, at that position); then one link record, keyed `key`,
        gives each group's records, in order, the next offsets of its physical queue. The link
        record is fsynced (whatever the flush mode) before the consume queues get its entries.
        `before_adopt(bases)` is told where the files will be, before any is moved. Returns the rows made visible (0
        if `key` was linked before)."""
        uid = self._uids.get(topic)
        if uid is None:
            raise InvalidBatchError(f"topic {topic!r} is not registered with the store")
        with self._append_lock:
            if self._idempotency.get(key) is not None:
                return 0
            self._group_commit.wait(self._log.written_pos)  # nothing torn may precede adopted segments
            paths = [f for f in files if isinstance(f, Path)]
            if before_adopt is not None:
                before_adopt(self._log.planned_bases(paths))
            adopted = iter(self._log.adopt(paths))
            bases = [next(adopted) if isinstance(f, Path) else f for f in files]
            now = max(int(time.time() * 1000), self._last_store_ts)
            link_rows, pending = plan_link(groups, bases, lambda q: self._queue(topic, q).max_offset, now)
            if not link_rows:
                return 0
            sizes, data = encode_link(np.array(link_rows, dtype=LINK_ENTRY))
            self._log.append(
                encode_record(
                    topic=topic,
                    queue_id=-1,
                    base_offset=0,
                    store_timestamp=now,
                    topic_uid=uid,
                    attrs=key,
                    sizes=sizes,
                    data=data,
                    flags=FLAG_LINK,
                )
            )
            # durable before any consume-queue entry exists: an entry of a linked record points
            # below the link, so recovery could not tell it from a kept one if the link were lost
            end = self._log.written_pos
            self._group_commit.wait(end)
            for queue, parts in pending.items():
                self._queue(topic, queue).append(np.concatenate(parts) if len(parts) > 1 else parts[0])
            self._last_store_ts = now
            total = sum(row[1] for row in link_rows)
            self._idempotency.add(key, StoredBatch(topic, -1, 0, total, now))
        if self._on_arrival is not None:
            for queue in pending:
                self._on_arrival(topic, queue)
        return total

    def segment_file(self, base: int) -> Path | None:
        """The commit-log file of the segment starting at `base` (e.g. one `link` adopted)."""
        return self._log.segment_file(base)

    log_directory = property(lambda self: self._dir / "commitlog")

    def stored_key(self, key: bytes) -> StoredBatch | None:
        """What a batch sent with this idempotency key became, if it is still remembered."""
        return self._idempotency.get(key)

    def wait_durable(self, end_pos: int) -> None:
        """With flush=sync: return once the commit log is fsynced up to `end_pos`."""
        if self.config.flush == "sync":
            self._group_commit.wait(end_pos)

    def _remember_key(self, header: RecordHeader) -> None:
        if header.attrs and header.flags != FLAG_STAGED and self._uids.get(header.topic) == header.topic_uid:
            self._idempotency.add(
                header.attrs,
                StoredBatch(header.topic, header.queue_id, header.base_offset, header.count, header.store_timestamp),
            )

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

    def read(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_messages: int,
        max_bytes: int,
        codes: Int32Array | None = None,
    ) -> ReadResult:
        """Messages from `offset` on. With `codes` (a tag filter's, protocol.consume.tag_filter) only
        entries with one of those codes (or none recorded) are read from the commit log: up to
        FILTER_SCAN_FACTOR x `max_messages` entries are looked at, and when none matches the answer
        is NO_MATCHED_MESSAGE with the offset after them."""
        cq = self._queues.get((topic, queue_id))
        lo, hi = (0, 0) if cq is None else (cq.min_offset, cq.max_offset)
        if offset < lo:
            return ReadResult(ReadStatus.OFFSET_TOO_SMALL, lo, lo, hi)
        if offset > hi:
            return ReadResult(ReadStatus.OFFSET_OVERFLOW, hi, lo, hi)
        if offset == hi or cq is None:
            return ReadResult(ReadStatus.NO_NEW_MESSAGE, offset, lo, hi)
        want = max(1, max_messages)
        entries = cq.read(offset, want if codes is None else min(want * FILTER_SCAN_FACTOR, FILTER_SCAN_MAX))
        if len(entries) == 0:
            return ReadResult(ReadStatus.NO_NEW_MESSAGE, offset, lo, hi)
        matched = None if codes is None else np.flatnonzero(kept_by_codes(entries["flags"], codes))
        if matched is not None and matched.size == 0:
            return ReadResult(ReadStatus.NO_MATCHED_MESSAGE, offset + len(entries), lo, hi)
        chosen = entries if matched is None else entries[matched[:want]]
        sizes = chosen["size"].astype(np.int32)
        keep = max(1, int(np.searchsorted(np.cumsum(sizes, dtype=np.int64), max_bytes, side="right")))
        chosen, sizes = chosen[:keep], sizes[:keep]
        rows = None if matched is None else matched[:want][:keep]  # entry index of each message read
        try:
            data = self._log.read_many(chosen["pos"].astype(np.int64), sizes)
        except MisalignedRead as exc:
            bad = offset + (exc.row if rows is None else int(rows[exc.row]))
            raise queue_check.report_misaligned(self._dir, topic, queue_id, bad) from None
        except DataGoneError:
            cq.advance_min(self._log.min_pos)
            return ReadResult(ReadStatus.OFFSET_TOO_SMALL, cq.min_offset, cq.min_offset, cq.max_offset)
        store_ts = chosen["store_ts"].astype(np.int64)
        if rows is None or matched is None:
            return ReadResult(ReadStatus.FOUND, offset + keep, lo, hi, offset, data, sizes, store_ts)
        # stopped before the last match: go on after the last message taken; else every entry
        # looked at after it is filtered out too
        next_offset = offset + (int(rows[-1]) + 1 if len(rows) < len(matched) else len(entries))
        first = offset + int(rows[0])
        offsets = offset + rows.astype(np.int64)
        return ReadResult(ReadStatus.FOUND, next_offset, lo, hi, first, data, sizes, store_ts, offsets=offsets)

    def queues_of(self, topic: str) -> list[int]:
        return sorted(q for t, q in self._queues if t == topic)

    # ------------------------------------------------------------------ background jobs

    def checkpoint(self) -> None:
        """Persist consume queues and record how far they are complete."""
        with self._append_lock:
            safe = self._log.written_pos
            queues = list(self._queues.values())
            ends = {f"{t}/{q}": cq.max_offset for (t, q), cq in self._queues.items()}
        for cq in queues:
            cq.sync()
        self._group_commit.wait(safe)
        self._write_checkpoint(safe, ends)

    def _write_checkpoint(self, safe: int, ends: dict[str, int] | None = None) -> None:
        """The safe position, and each queue's end there (a shorter queue at start is damaged)."""
        ends = ends if ends is not None else {f"{t}/{q}": cq.max_offset for (t, q), cq in self._queues.items()}
        atomic_write_json(
            self._dir / CHECKPOINT_FILE, {"cq_safe_pos": safe, "written_at": int(time.time() * 1000), "queues": ends}
        )

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
