"""The pop state of one broker and the one way it changes: records written to the revive log,
then applied to memory by the same `apply` that replays the log after a restart.

State: the CK buffer (checkpoints.CheckpointTable), the pop offset of every (group, topic,
queue) popped without order, and the order lanes. `commit` appends and applies under `lock`, so
memory never shows a change the log does not hold, and the checkpoint snapshot (taken under the
same lock) is consistent with the log offset it names.

Consumer offsets follow the state: applying a CK moves its queue's pop offset to the CK's
`next_begin` (the CK is stored, so un-acked messages can only come back through the retry
topic); applying acks moves an order lane's commit offset. Those moves are queued in
`offset_moves` for the caller to commit to the consumer offsets once the lock is released (a
static topic's commit may go to another broker).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import numpy as np

from broker_stub.broker.pop.checkpoints import ACKED, SUPERSEDED, CheckPoint, CheckpointTable
from broker_stub.broker.pop.order_lanes import LaneKey, OrderLane
from broker_stub.broker.pop.records import (
    AckRecord,
    CkRecord,
    Record,
    encode_ack,
    encode_ck,
    encode_done,
)
from broker_stub.broker.pop.revive_log import PopCheckpointData, ReviveLog

log = logging.getLogger(__name__)

PopKey = tuple[str, str, int]  # group, popped topic (the retry topic for retried messages), queue


@dataclass(frozen=True, slots=True)
class OffsetMove:
    group: str
    topic: str
    queue_id: int
    offset: int


def encode_record(rec: Record) -> bytes:
    if isinstance(rec, CkRecord):
        return encode_ck(rec)
    if isinstance(rec, AckRecord):
        return encode_ack(rec.ck_ids, rec.indices, superseded=rec.superseded)
    return encode_done(rec.ck_ids)


def apply_to_table(table: CheckpointTable, offset: int, rec: Record) -> list[CheckPoint]:
    """The CK buffer's part of applying a record; returns the CKs it touched."""
    if isinstance(rec, CkRecord):
        return [table.add(offset, rec)]
    if isinstance(rec, AckRecord):
        touched = [ck for ck in (table.get(c) for c in np.unique(rec.ck_ids).tolist()) if ck is not None]
        table.mark(rec.ck_ids, rec.indices, SUPERSEDED if rec.superseded else ACKED)
        return touched
    return [ck for ck in (table.retire(c) for c in rec.ck_ids.tolist()) if ck is not None]


class PopState:
    def __init__(self, revive_log: ReviveLog, table: CheckpointTable | None = None) -> None:
        self.lock = threading.Lock()
        self.log = revive_log
        self.table = table or CheckpointTable()
        self.offsets: dict[PopKey, tuple[int, int]] = {}  # -> (static leader gen, offset)
        self.lanes: dict[LaneKey, OrderLane] = {}
        self.offset_moves: list[OffsetMove] = []
        self.last_end_pos = 0  # commit-log position after the newest revive-log row

    # ------------------------------------------------------------------ changes

    def commit(self, records: list[Record]) -> tuple[int, int]:
        """Append `records` in one atomic revive-log append, then apply them. Caller holds
        `lock`. Returns (revive-log offset of the first record = id of a CK there, end position)."""
        base, end = self.log.append([encode_record(r) for r in records])
        self.last_end_pos = end
        for i, rec in enumerate(records):
            self.apply(base + i, rec)
        return base, end

    def apply(self, offset: int, rec: Record) -> None:
        touched = apply_to_table(self.table, offset, rec)
        if isinstance(rec, CkRecord):
            if rec.order:
                self._lane_for(rec).apply_ck(touched[0])
            elif rec.next_begin >= 0:
                self._move_pop_offset(rec)
        elif isinstance(rec, AckRecord):
            if not rec.superseded:
                self._lanes_acked(rec, touched)
        else:
            for ck in touched:
                lane = self.lanes.get(_lane_key(ck.record)) if ck.record.order else None
                if lane is not None:
                    lane.inflight.pop(ck.ck_id, None)

    def _move_pop_offset(self, rec: CkRecord) -> None:
        key = (rec.group, rec.topic, rec.queue_id)
        current = self.offsets.get(key)
        if current is None or current[0] != rec.gen or current[1] < rec.next_begin:
            self.offsets[key] = (rec.gen, rec.next_begin)
            self.offset_moves.append(OffsetMove(rec.group, rec.topic, rec.queue_id, rec.next_begin))

    def _lane_for(self, rec: CkRecord) -> OrderLane:
        key = _lane_key(rec)
        lane = self.lanes.get(key)
        if lane is None or lane.gen != rec.gen:
            start = rec.start_offset + rec.offset_delta
            lane = OrderLane(rec.gen, start, start)
            self.lanes[key] = lane
        return lane

    def _lanes_acked(self, rec: AckRecord, touched: list[CheckPoint]) -> None:
        for ck in touched:
            if not ck.record.order:
                continue
            lane = self.lanes.get(_lane_key(ck.record))
            if lane is None:
                continue
            idx = rec.indices[rec.ck_ids == ck.ck_id]
            if ck.pending == 0:
                lane.inflight.pop(ck.ck_id, None)
            if lane.mark_done(ck.logic_offsets(idx).tolist()):
                rec_ck = ck.record
                self.offset_moves.append(OffsetMove(rec_ck.group, rec_ck.topic, rec_ck.queue_id, lane.commit))

    def take_offset_moves(self) -> list[OffsetMove]:
        """Consumer-offset commits to make (caller holds `lock`; commit them after releasing)."""
        moves, self.offset_moves = self.offset_moves, []
        latest: dict[tuple[str, str, int], OffsetMove] = {}
        for m in moves:
            latest[(m.group, m.topic, m.queue_id)] = m
        return list(latest.values())

    # ------------------------------------------------------------------ recovery and checkpoint

    def recover(self) -> None:
        """Rebuild the state: the checkpoint snapshot, then every revive-log row after it."""
        data = self.log.load_checkpoint()
        self.offsets = {(g, t, int(q)): (int(gen), int(o)) for g, t, q, gen, o in data.pop_offsets}
        self.lanes = {(g, t, int(q)): OrderLane.restore(raw) for g, t, q, raw in data.lanes}
        rows = 0
        for offset, rec in self.log.replay(data.revive_offset):
            self.apply(offset, rec)
            rows += 1
        log.info(
            "pop state recovered: %d revive-log rows replayed from %d, %d checkpoints in flight",
            rows,
            data.revive_offset,
            len(self.table),
        )

    def snapshot(self) -> PopCheckpointData:
        """Caller holds `lock`."""
        first_live = self.table.min_live()
        return PopCheckpointData(
            revive_offset=first_live if first_live is not None else self.log.end_offset(),
            pop_offsets=[[g, t, q, gen, o] for (g, t, q), (gen, o) in self.offsets.items()],
            lanes=[[g, t, q, lane.snapshot()] for (g, t, q), lane in self.lanes.items()],
        )


def _lane_key(rec: CkRecord) -> LaneKey:
    return (rec.group, rec.origin_topic, rec.queue_id)
