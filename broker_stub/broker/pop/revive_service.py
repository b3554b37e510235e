"""Revive: when a CK's invisible time is over (plus a small margin), its un-acked messages go back
through the group's retry topic with their reconsume count raised, or - past the max reconsume
count - to the group's DLQ; then a DONE row ends the CK. An order CK is never revived: it ends
(a DONE row), its lane opens again (waiting pops are woken) and the next pop redelivers in order.

Where due CKs come from:
- buffer merge on (default): the in-memory CK buffer, where acks were matched as they came;
- buffer merge off: a follower that reads the revive log's CK and ACK rows and matches them
  itself (RocketMQ's revive consumer); the buffer is then used for handle checks only.

The retry and DLQ appends carry an idempotency key per CK, so a crash between them and the DONE
row, which makes the CK revive again after the restart, stores the messages once.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import numpy.typing as npt

from broker_stub.broker.long_poll import ArrivalNotifier
from broker_stub.broker.pop.checkpoints import CheckPoint, CheckpointTable
from broker_stub.broker.pop.pop_service import group_wake_key
from broker_stub.broker.pop.pop_state import PopState, apply_to_table
from broker_stub.broker.pop.records import DoneRecord
from broker_stub.broker.pop.requeue import Requeue
from broker_stub.broker.pop.retry_rows import origin_fields, revived_rows
from broker_stub.broker.pop.sources import PopSources
from staticmq_spark.errors import StaticMQError
from staticmq_spark.protocol.rows.codec import PackedBatch, take_rows

log = logging.getLogger(__name__)

RETRY_LATER_MS = 1000


class ReviveLogFollower:
    """Buffer merge off: a CK table built from the revive log alone, caught up on each tick."""

    def __init__(self, state: PopState, start: int) -> None:
        self._state = state
        self.table = CheckpointTable()
        self._cursor = start

    def catch_up(self) -> None:
        while True:
            rows, nxt = self._state.log.read(self._cursor)
            for offset, rec in rows:
                apply_to_table(self.table, offset, rec)
            if nxt <= self._cursor:
                return
            self._cursor = nxt


class ReviveService:
    def __init__(
        self,
        state: PopState,
        sources: PopSources,
        requeue: Requeue,
        notifier: ArrivalNotifier,
        *,
        max_reconsume_times: int,
        buffer_merge: bool,
        interval_ms: int,
        margin_ms: int,
    ) -> None:
        self._state = state
        self._sources = sources
        self._requeue = requeue
        self._notifier = notifier
        self._max_reconsume = max_reconsume_times
        self._interval_s = interval_ms / 1000
        self._margin_ms = margin_ms
        self._follower: ReviveLogFollower | None = None
        self._buffer_merge = buffer_merge
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pop-revive", daemon=True)

    def start(self) -> None:
        """Start reviving (after the state was recovered)."""
        if not self._buffer_merge:
            with self._state.lock:
                start = self._state.snapshot().revive_offset
            self._follower = ReviveLogFollower(self._state, start)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.revive_due()
            except Exception:
                log.exception("pop revive failed")

    def revive_due(self) -> int:
        """Revive every CK due now; returns how many CKs were ended. The clock is read under the
        state lock, so an ack judged before this (not expired) is applied before, and any ack
        judged after finds the CK expired: a message is either acked or revived, never both."""
        with self._state.lock:
            now_ms = int(time.time() * 1000)
            due = self._state.table.take_due(now_ms - self._margin_ms)
            lapsed = [ck for ck in due if ck.record.order]
            if lapsed:  # order CKs end here: their lanes (in the checkpoint snapshot) redeliver
                self._state.commit([DoneRecord(np.array([ck.ck_id for ck in lapsed], dtype=np.int64))])
        for group, topic in {(ck.record.group, ck.record.origin_topic) for ck in lapsed}:
            self._notifier.notify(*group_wake_key(group, topic))
        if self._follower is not None:
            self._follower.catch_up()
            candidates = self._follower.table.take_due(now_ms - self._margin_ms)
        else:
            candidates = due
        return self._revive([ck for ck in candidates if not ck.record.order])

    def _revive(self, cks: list[CheckPoint]) -> int:
        ended: list[int] = []
        for ck in cks:
            try:
                self._requeue_pending(ck)
            except StaticMQError as exc:
                log.warning("revive of checkpoint %d postponed: %s", ck.ck_id, exc.message)
                table = self._follower.table if self._follower is not None else self._state.table
                with self._state.lock:
                    table.reschedule(ck, int(time.time() * 1000) + RETRY_LATER_MS)
                continue
            ended.append(ck.ck_id)
        if not ended:
            return 0
        ids = np.array(ended, dtype=np.int64)
        with self._state.lock:
            self._state.commit([DoneRecord(ids)])
        if self._follower is not None:
            for ck_id in ended:
                self._follower.table.retire(ck_id)
        return len(ended)

    def _requeue_pending(self, ck: CheckPoint) -> None:
        rec = ck.record
        idx = ck.pending_indices()
        if idx.size == 0:
            return
        rows = self._sources.read_back(rec.source_bname, rec.topic, rec.source_queue, rec.start_offset, idx)
        if rows is None:
            log.warning("checkpoint %d: its messages in %s are gone (retention); not revived", ck.ck_id, rec.topic)
            return
        if rec.retry:
            queue_ids, offsets, reconsume = origin_fields(rows)
        else:
            queue_ids = np.full(idx.size, rec.queue_id, dtype=np.int64)
            offsets, reconsume = ck.logic_offsets(idx), np.zeros(idx.size, dtype=np.int64)
        dead = reconsume >= self._max_reconsume
        self._send(ck, rows, ~dead, queue_ids, offsets, reconsume + 1, dlq=False)
        self._send(ck, rows, dead, queue_ids, offsets, reconsume + 1, dlq=True)

    def _send(
        self,
        ck: CheckPoint,
        rows: PackedBatch,
        mask: npt.NDArray[np.bool_],
        queue_ids: npt.NDArray[np.int64],
        offsets: npt.NDArray[np.int64],
        reconsume: npt.NDArray[np.int64],
        *,
        dlq: bool,
    ) -> None:
        pick = np.flatnonzero(mask).astype(np.int64)
        if pick.size == 0:
            return
        rec = ck.record
        out = revived_rows(take_rows(rows, pick), rec.origin_topic, queue_ids[pick], offsets[pick], reconsume[pick])
        if dlq:
            self._requeue.to_dlq(rec.group, out, f"revive-{ck.ck_id}-dlq")
        else:
            self._requeue.to_retry(rec.group, rec.origin_topic, out, f"revive-{ck.ck_id}-retry")
            self._notifier.notify(*group_wake_key(rec.group, rec.origin_topic))  # its retry topic may be new
