"""Recovery's re-dispatch: the consume-queue entries of the commit-log records after the
checkpoint are rebuilt from the records themselves - a plain record's from its header, a link
record's (the sink's write-once commit) from its entries, which point at staged records earlier
in the log. Entries a queue already has are kept; a queue that ran ahead is cut back."""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker_stub.store.commit_log import CommitLog
from broker_stub.store.consume_queue import ConsumeQueue, entries_for
from broker_stub.store.record import FLAG_LINK, FLAG_STAGED, RecordHeader, decode_link
from staticmq_spark.protocol.rows.codec import Int32Array

log = logging.getLogger(__name__)


class Redispatcher:
    """Fed every record recovery checks, in log order; counts the entries it re-dispatched."""

    def __init__(self, commit_log: CommitLog, uids: dict[str, int], queue: Callable[[str, int], ConsumeQueue]) -> None:
        self._log = commit_log
        self._uids = uids
        self._queue = queue
        self._staged: dict[int, tuple[int, Int32Array]] = {}  # staged records seen: pos -> (rows offset, sizes)
        self.count = 0

    def record(self, pos: int, header: RecordHeader, sizes: Int32Array) -> None:
        if header.flags == FLAG_STAGED:
            self._staged[pos] = (header.rows_offset, sizes)
        elif self._uids.get(header.topic) != header.topic_uid:
            return
        elif header.flags == FLAG_LINK:
            self._link(pos, header)
        else:
            self._dispatch(
                header.topic,
                header.queue_id,
                header.base_offset,
                pos + header.rows_offset,
                sizes,
                header.store_timestamp,
            )

    def _link(self, pos: int, header: RecordHeader) -> None:
        """A link record's entries; the staged records' sizes come from this walk when it saw
        them, else from the log."""
        for queue, _count, base, record_pos in decode_link(self._log.read_record(pos), header).tolist():
            found = self._staged.get(record_pos)
            if found is None:
                staged_header, staged_sizes = self._log.record_at(record_pos)
                found = (staged_header.rows_offset, staged_sizes)
            rows_offset, sizes = found
            self._dispatch(header.topic, queue, base, record_pos + rows_offset, sizes, header.store_timestamp)

    def _dispatch(self, topic: str, queue_id: int, base: int, rows_at: int, sizes: Int32Array, store_ts: int) -> None:
        cq = self._queue(topic, queue_id)
        count = int(sizes.shape[0])
        if cq.max_offset >= base + count:
            return
        if cq.max_offset < base:
            log.error(
                "recovery: %s/%d consume queue ends at %d but the next record starts at %d",
                topic,
                queue_id,
                cq.max_offset,
                base,
            )
            return
        if cq.max_offset > base:
            cq.truncate_to(base)
        cq.append(entries_for(rows_at, sizes, store_ts))
        self.count += count
