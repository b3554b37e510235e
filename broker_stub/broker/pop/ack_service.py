"""Ack and change_invisible_time: receipt handles checked (authentic, right group, not expired,
still pending) against the CK buffer, then the change written to the revive log before it is
applied and answered - an acked message never comes back, even after kill -9.

An ack request may carry many handles (batch ack): one verification pass, one ACK row, one
answer with an outcome per handle. change_invisible_time writes the new CK and marks the old
message SUPERSEDED in one append, so exactly one of the two handles is valid at any time.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from broker_stub.broker.long_poll import ArrivalNotifier
from broker_stub.broker.pop.pop_service import MAX_INVISIBLE_MS, group_wake_key
from broker_stub.broker.pop.pop_state import OffsetMove, PopState
from broker_stub.broker.pop.receipt_handles import HandleSigner
from broker_stub.broker.pop.records import AckRecord
from broker_stub.broker.pop.sources import PopSources
from staticmq_spark.errors import InvalidArgumentError, ReceiptHandleError, StaticMQError
from staticmq_spark.protocol.consume.ack_outcomes import AckOutcome, explain
from staticmq_spark.protocol.topics.names import validate_group, validate_topic

log = logging.getLogger(__name__)

MAX_ACK_HANDLES = 65_536


@dataclass(frozen=True, slots=True)
class Reissued:
    handle: bytes
    pop_time: int
    invisible_ms: int


class AckService:
    def __init__(self, state: PopState, sources: PopSources, signer: HandleSigner, notifier: ArrivalNotifier) -> None:
        self._state = state
        self._sources = sources
        self._signer = signer
        self._notifier = notifier

    def ack(self, group: str, topic: str, handles: bytes) -> npt.NDArray[np.uint8]:
        """Ack every handle it can; the outcome of each (AckOutcome), in request order."""
        validate_group(group)
        validate_topic(topic)
        batch = self._signer.verify(handles)
        if batch.count > MAX_ACK_HANDLES:
            raise InvalidArgumentError(f"an ack carries at most {MAX_ACK_HANDLES} handles, got {batch.count}")
        end = -1
        with self._state.lock:  # the clock is read under the lock the revive thread takes too
            verdict = self._state.table.judge(batch, group, topic, int(time.time() * 1000))
            if verdict.accepted:
                _, end = self._state.commit([AckRecord(verdict.ck_ids, verdict.indices)])
            moves = self._state.take_offset_moves()
        if end >= 0:
            self._state.log.wait_durable(end)
        self._after(group, topic, moves)
        return verdict.outcomes

    def change_invisible_time(self, group: str, topic: str, handle: bytes, invisible_ms: int) -> Reissued:
        """A new CK for the message, invisible for `invisible_ms` from now, and a new handle;
        the old handle no longer acks."""
        validate_group(group)
        validate_topic(topic)
        if not 0 <= invisible_ms <= MAX_INVISIBLE_MS:
            raise InvalidArgumentError(f"invisible time must be 0..{MAX_INVISIBLE_MS} ms, got {invisible_ms}")
        batch = self._signer.verify(handle)
        if batch.count != 1:
            raise InvalidArgumentError(f"change_invisible_time takes one receipt handle, got {batch.count}")
        with self._state.lock:
            now = int(time.time() * 1000)
            verdict = self._state.table.judge(batch, group, topic, now)
            outcome = int(verdict.outcomes[0])
            if outcome != AckOutcome.OK:
                raise ReceiptHandleError(f"change_invisible_time refused: {explain(outcome)}")
            ck_id, index = int(batch.ck_ids[0]), int(batch.indices[0])
            old = self._state.table.get(ck_id)
            if old is None:
                raise ReceiptHandleError(f"change_invisible_time refused: {explain(AckOutcome.UNKNOWN)}")
            rec = old.record
            new = replace(
                rec,
                pop_time=now,
                invisible_ms=invisible_ms,
                start_offset=rec.start_offset + index,
                count=1,
                next_begin=-1,
                done_before=b"\x00" if rec.order else b"",
                attempts=rec.attempts[4 * index : 4 * index + 4] if rec.order else b"",
            )
            superseded = AckRecord(np.array([ck_id], dtype=np.int64), np.array([index], dtype=np.int64), True)
            new_id, end = self._state.commit([new, superseded])
        self._state.log.wait_durable(end)
        deadline = now + invisible_ms
        return Reissued(self._signer.sign(new_id, deadline, np.zeros(1, dtype=np.int64)), now, invisible_ms)

    def _after(self, group: str, topic: str, moves: list[OffsetMove]) -> None:
        """Commit moved order-lane offsets and wake pops waiting for a lane to open."""
        for m in moves:
            try:
                self._sources.commit(m.group, m.topic, m.queue_id, m.offset)
            except StaticMQError as exc:
                log.warning("committing the order offset of %s queue %d failed: %s", m.topic, m.queue_id, exc.message)
        if moves:
            self._notifier.notify(*group_wake_key(group, topic))
