"""The revive log: CK, ACK/SUP and DONE rows appended to the internal topic `rmq_sys_REVIVE_LOG`
(queue 0) of the broker's own message store, so they share its commit log, flushing (group
commit with flush=sync), CRC checks and crash recovery; plus the pop checkpoint file.

The checkpoint file (pop/checkpoint.json) says from which revive-log offset a restart must
replay, with the pop offsets and order lanes as they stood at that instant: every CK below that
offset is finished, and its effect on offsets is in the snapshot. It is rewritten atomically.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker_stub.broker.pop.records import Record, RecordFormatError, decode_row, pack_rows
from broker_stub.broker.topic_service import TopicService
from broker_stub.store.atomic_file import atomic_write_json, read_json
from broker_stub.store.message_store import MessageStore
from staticmq_spark.errors import DataDirError
from staticmq_spark.protocol.consume.pull_status import PullStatus
from staticmq_spark.protocol.topics.config import TopicConfig

log = logging.getLogger(__name__)

REVIVE_TOPIC = "rmq_sys_REVIVE_LOG"
REVIVE_QUEUE = 0
REPLAY_BATCH = 4096
REPLAY_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class PopCheckpointData:
    revive_offset: int = 0
    pop_offsets: list[list[Any]] = field(default_factory=list)  # [group, topic, queue_id, gen, offset]
    lanes: list[list[Any]] = field(default_factory=list)  # [group, topic, queue_id, lane snapshot]


class ReviveLog:
    def __init__(self, store: MessageStore, topics: TopicService, pop_dir: Path) -> None:
        self._store = store
        self._topics = topics
        self._checkpoint_path = pop_dir / "checkpoint.json"

    def open(self) -> None:
        """Create the internal topic on first use (it is a plain one-queue topic)."""
        if self._topics.topics.get(REVIVE_TOPIC) is None:
            self._topics.update(TopicConfig(REVIVE_TOPIC, 1, 1), internal=True)

    def append(self, rows: list[bytes]) -> tuple[int, int]:
        """Append rows in one commit-log record (atomic). Returns (offset of the first row,
        commit-log end position): with flush=sync, durable once `wait_durable(end)` returns."""
        result = self._store.append(REVIVE_TOPIC, REVIVE_QUEUE, pack_rows(rows), durable=False)
        return result.base_offset, result.end_pos

    def wait_durable(self, end_pos: int) -> None:
        self._store.wait_durable(end_pos)

    def end_offset(self) -> int:
        return self._store.offsets(REVIVE_TOPIC, REVIVE_QUEUE)[1]

    def read(self, start: int, limit: int = REPLAY_BATCH) -> tuple[list[tuple[int, Record]], int]:
        """Rows from `start` on: ([(offset, record)], next offset). Rows removed by retention are
        skipped (with a warning); a row that does not decode is skipped loudly."""
        result = self._store.read(REVIVE_TOPIC, REVIVE_QUEUE, start, limit, REPLAY_BYTES)
        if result.pull_status is PullStatus.OFFSET_MOVED and result.next_offset > start:  # below the min
            log.warning("revive log: rows %d..%d were removed by retention; skipped", start, result.next_offset)
            return [], result.next_offset
        if result.pull_status is not PullStatus.FOUND or result.sizes is None:
            return [], start
        out: list[tuple[int, Record]] = []
        view = memoryview(result.data)
        pos = 0
        for i, size in enumerate(result.sizes.tolist()):
            try:
                out.append((result.base_offset + i, decode_row(view[pos : pos + size])))
            except RecordFormatError as exc:
                log.error("revive log row %d skipped: %s", result.base_offset + i, exc)
            pos += size
        return out, result.next_offset

    def replay(self, start: int) -> Iterator[tuple[int, Record]]:
        offset = start
        while True:
            rows, nxt = self.read(offset)
            yield from rows
            if nxt <= offset:
                return
            offset = nxt

    # ------------------------------------------------------------------ checkpoint file

    def load_checkpoint(self) -> PopCheckpointData:
        try:
            raw = read_json(self._checkpoint_path)
        except ValueError as exc:
            raise DataDirError(f"{self._checkpoint_path} is not valid JSON: {exc}") from None
        if raw is None:
            return PopCheckpointData()
        return PopCheckpointData(int(raw["revive_offset"]), list(raw["pop_offsets"]), list(raw["lanes"]))

    def save_checkpoint(self, data: PopCheckpointData) -> None:
        atomic_write_json(
            self._checkpoint_path,
            {"version": 1, "revive_offset": data.revive_offset, "pop_offsets": data.pop_offsets, "lanes": data.lanes},
        )
