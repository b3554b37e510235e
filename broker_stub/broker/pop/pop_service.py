"""Pop: hand out messages of every queue of a topic this broker serves, each popped batch under a
new checkpoint (CK), and answer them columnar with their receipt handles.

One request walks the queues from a random start (so consumers do not all contend for queue 0),
reading the group's retry topic first in one request of RETRY_FIRST_ONE_IN and after the normal
queues otherwise (order pop never reads it). Each queue is read under its `topic@group@queue`
try-lock, starting at the group's pop offset; all CKs of the request are stored in one revive-log
append, which moves the pop offsets past them. Nothing available: the request waits (long
polling) for an append to any of its queues, or for an order lane to open.

At most MAX_POP_MESSAGES per request: RocketMQ's limit is 32, staticmq allows larger batches
because a batch costs one CK and one answer whatever its size.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from broker_stub.broker.long_poll import ArrivalNotifier
from broker_stub.broker.pop.order_lanes import OrderLane
from broker_stub.broker.pop.pop_state import PopState
from broker_stub.broker.pop.queue_locks import QueueLocks
from broker_stub.broker.pop.receipt_handles import HandleSigner
from broker_stub.broker.pop.records import CkRecord, DoneRecord, Record
from broker_stub.broker.pop.requeue import Requeue
from broker_stub.broker.pop.retry_rows import origin_fields, revived_rows
from broker_stub.broker.pop.sources import RETRY, PopSources, PopTarget, QueueRead, check_init_mode
from staticmq_spark.errors import InvalidArgumentError, InvalidTopicNameError, StaticMQError
from staticmq_spark.protocol.rows.codec import PackedBatch, take_rows
from staticmq_spark.protocol.topics.names import dlq_topic, retry_topic, validate_group, validate_topic

log = logging.getLogger(__name__)

MAX_POP_MESSAGES = 4096
MIN_INVISIBLE_MS = 100
MAX_INVISIBLE_MS = 12 * 3600 * 1000
POP_MAX_BYTES = 8 << 20
RETRY_FIRST_ONE_IN = 5
BUSY_WAIT_S = 0.02

G = TypeVar("G", bound=np.generic)


@dataclass(frozen=True, slots=True)
class PopQuery:
    group: str
    topic: str
    max_messages: int
    invisible_ms: int
    wait_ms: int = 0
    order: bool = False
    init_mode: str = "earliest"


@dataclass(frozen=True, slots=True)
class PopAnswer:
    rows: PackedBatch | None
    queue_ids: npt.NDArray[np.int32]
    queue_offsets: npt.NDArray[np.int64]
    reconsume_times: npt.NDArray[np.int32]
    store_timestamps: npt.NDArray[np.int64]
    retried: npt.NDArray[np.uint8]
    handles: bytes
    pop_time: int
    invisible_ms: int

    @property
    def count(self) -> int:
        return 0 if self.rows is None else self.rows.count


@dataclass(frozen=True, slots=True)
class Draft:
    """One queue's part of a pop, before its CK is stored."""

    read: QueueRead
    record: CkRecord
    deliver: npt.NDArray[np.int64]  # positions in `read` handed out
    queue_ids: npt.NDArray[np.int64]  # per delivered message
    queue_offsets: npt.NDArray[np.int64]
    reconsume_times: npt.NDArray[np.int64]
    retire: list[int] = field(default_factory=list)  # order: CKs the new one replaces


def group_wake_key(group: str, topic: str) -> tuple[str, int]:
    """The long-polling key acks and revives notify (an order lane opened, a retry arrived)."""
    return (f"pop:{group}@{topic}", -1)


class PopService:
    def __init__(
        self,
        state: PopState,
        sources: PopSources,
        signer: HandleSigner,
        notifier: ArrivalNotifier,
        requeue: Requeue,
        *,
        max_reconsume_times: int,
        max_long_poll_ms: int,
    ) -> None:
        self._state = state
        self._sources = sources
        self._signer = signer
        self._notifier = notifier
        self._requeue = requeue
        self._max_reconsume = max_reconsume_times
        self._max_long_poll_ms = max_long_poll_ms
        self._locks = QueueLocks()
        self._random = random.Random()

    def pop(self, query: PopQuery) -> PopAnswer:
        _check(query)
        deadline = time.monotonic() + min(query.wait_ms, self._max_long_poll_ms) / 1000
        while True:
            targets, retry = self._sources.targets(query.group, query.topic, query.order)
            answer = self._pop_once(query, targets, retry)
            remaining = deadline - time.monotonic()
            if answer.count or remaining <= 0:
                return answer
            keys = [t.wake for t in targets] + ([retry.wake] if retry else [])
            keys.append(group_wake_key(query.group, query.topic))
            started = time.monotonic()
            self._notifier.wait_any(keys, remaining, functools.partial(self._nothing, query, targets, retry))
            if time.monotonic() - started < BUSY_WAIT_S:  # something is there but busy (another pop holds it)
                time.sleep(min(BUSY_WAIT_S, max(0.0, deadline - time.monotonic())))

    # ------------------------------------------------------------------ one pass over the queues

    def _pop_once(self, query: PopQuery, targets: list[PopTarget], retry: PopTarget | None) -> PopAnswer:
        now = int(time.time() * 1000)
        ordered = _rotate(targets, self._random.randrange(max(1, len(targets))))
        if retry is not None:
            first = self._random.randrange(RETRY_FIRST_ONE_IN) == 0
            ordered = [retry, *ordered] if first else [*ordered, retry]
        remaining = query.max_messages
        drafts: list[Draft] = []
        held: list[threading.Lock] = []
        try:
            for target in ordered:
                if remaining <= 0:
                    break
                lock = self._locks.try_acquire(QueueLocks.key(target.topic, query.group, target.queue_id))
                if lock is None:
                    continue
                held.append(lock)
                try:
                    draft = self._draft(query, target, remaining, now)
                except StaticMQError as exc:
                    log.warning("pop of %s queue %d skipped: %s", target.topic, target.queue_id, exc.message)
                    continue
                if draft is not None:
                    drafts.append(draft)
                    remaining -= len(draft.deliver)
            ck_ids = self._store(drafts)
        finally:
            for lock in held:
                lock.release()
        return self._answer(query, drafts, ck_ids, now)

    def _store(self, drafts: list[Draft]) -> list[int]:
        if not drafts:
            return []
        records: list[Record] = []
        positions = []
        for d in drafts:
            if d.retire:
                records.append(DoneRecord(np.array(d.retire, dtype=np.int64)))
            positions.append(len(records))
            records.append(d.record)
        with self._state.lock:
            base, end = self._state.commit(records)
            moves = self._state.take_offset_moves()
        self._state.log.wait_durable(end)
        for m in moves:
            try:
                self._sources.commit(m.group, m.topic, m.queue_id, m.offset)
            except StaticMQError as exc:
                log.warning("committing pop offset of %s queue %d failed: %s", m.topic, m.queue_id, exc.message)
        return [base + p for p in positions]

    def _draft(self, query: PopQuery, target: PopTarget, limit: int, now: int) -> Draft | None:
        if query.order:
            return self._draft_order(query, target, limit, now)
        key = (query.group, target.topic, target.queue_id)
        current = self._state.offsets.get(key)
        start = current[1] if current is not None and current[0] == target.gen else None
        offset = start if start is not None else self._sources.initial_offset(query.group, target, query.init_mode)
        got = self._read(target, offset, limit)
        if not isinstance(got, QueueRead):
            if got != start:
                with self._state.lock:
                    self._state.offsets[key] = (target.gen, got)
            return None
        n = got.rows.count
        if target.kind == RETRY:
            queue_ids, offsets, reconsume = origin_fields(got.rows)
        else:
            queue_ids = np.full(n, target.queue_id, dtype=np.int64)
            offsets, reconsume = got.logic_offsets(), np.zeros(n, dtype=np.int64)
        record = self._record(query, target, got, now, n, got.next_offset)
        return Draft(got, record, np.arange(n, dtype=np.int64), queue_ids, offsets, reconsume)

    def _read(self, target: PopTarget, offset: int, limit: int) -> QueueRead | int:
        """Read from `offset`, following a moved offset once; an int: nothing, continue there."""
        for _ in range(3):
            got = self._sources.read(target, offset, limit, POP_MAX_BYTES)
            if got is None:
                return offset
            if isinstance(got, QueueRead):
                return got
            offset = got
        return offset

    def _draft_order(self, query: PopQuery, target: PopTarget, limit: int, now: int) -> Draft | None:
        key = (query.group, target.topic, target.queue_id)
        lane = self._state.lanes.get(key)
        stale: list[int] = []  # CKs of a lane built for an older leader generation (a remap)
        if lane is None or lane.gen != target.gen:
            stale = list(lane.inflight) if lane is not None else []
            start = self._sources.initial_offset(query.group, target, query.init_mode)
            lane = OrderLane(target.gen, start, start)
            with self._state.lock:
                self._state.lanes[key] = lane
        with self._state.lock:
            if lane.blocked(now):
                return None
            backlog = len(lane.done)
        got = self._read(target, lane.commit, limit + backlog)
        if not isinstance(got, QueueRead):
            if got != lane.commit:
                with self._state.lock:
                    lane.commit = lane.read_to = got
                    lane.attempts.clear()
                    lane.done.clear()
            return None
        offsets = got.logic_offsets()
        with self._state.lock:
            plan = lane.plan(offsets, limit, self._max_reconsume)
            retire = stale + lane.drop_finished(now)
        if plan.dead.size:
            self._dead_letter(query, target, got, plan.dead)
        nxt = got.next_offset if plan.count == got.rows.count else int(offsets[plan.count])
        record = self._record(query, target, got, now, plan.count, nxt, plan.done_before, plan.attempts)
        deliver = plan.deliver
        reconsume = plan.attempts[deliver].astype(np.int64) - 1
        queue_ids = np.full(len(deliver), target.queue_id, dtype=np.int64)
        return Draft(got, record, deliver, queue_ids, offsets[deliver], reconsume, retire)

    def _dead_letter(self, query: PopQuery, target: PopTarget, got: QueueRead, dead: npt.NDArray[np.int64]) -> None:
        offsets = got.logic_offsets()
        for i in dead.tolist():
            rows = revived_rows(
                take_rows(got.rows, np.array([i], dtype=np.int64)),
                query.topic,
                np.array([target.queue_id]),
                offsets[i : i + 1],
                np.array([self._max_reconsume + 1]),
            )
            key = f"order-dlq-{query.group}-{query.topic}-{target.queue_id}-{int(offsets[i])}"
            self._requeue.to_dlq(query.group, rows, key)

    def _record(
        self,
        query: PopQuery,
        target: PopTarget,
        got: QueueRead,
        now: int,
        count: int,
        next_begin: int,
        done_before: npt.NDArray[np.uint8] | None = None,
        attempts: npt.NDArray[np.int32] | None = None,
    ) -> CkRecord:
        return CkRecord(
            group=query.group,
            topic=target.topic,
            origin_topic=query.topic,
            queue_id=target.queue_id,
            source_bname=got.source_bname,
            source_queue=got.source_queue,
            gen=target.gen,
            pop_time=now,
            invisible_ms=query.invisible_ms,
            start_offset=got.start_offset,
            offset_delta=got.offset_delta,
            count=count,
            next_begin=next_begin,
            retry=target.kind == RETRY,
            order=query.order,
            done_before=b"" if done_before is None else done_before.tobytes(),
            attempts=b"" if attempts is None else attempts.astype("<i4").tobytes(),
        )

    # ------------------------------------------------------------------ answer and long polling

    def _answer(self, query: PopQuery, drafts: list[Draft], ck_ids: list[int], now: int) -> PopAnswer:
        deadline = now + query.invisible_ms
        rows, handles = [], []
        for d, ck_id in zip(drafts, ck_ids, strict=True):
            if len(d.deliver):
                full = len(d.deliver) == d.read.rows.count
                rows.append(d.read.rows if full else take_rows(d.read.rows, d.deliver))
                handles.append(self._signer.sign(ck_id, deadline, d.deliver))
        delivered = [d for d in drafts if len(d.deliver)]
        return PopAnswer(
            rows=PackedBatch.concat(rows) if rows else None,
            queue_ids=_cat([d.queue_ids for d in delivered], np.int32),
            queue_offsets=_cat([d.queue_offsets for d in delivered], np.int64),
            reconsume_times=_cat([d.reconsume_times for d in delivered], np.int32),
            store_timestamps=_cat([d.read.store_timestamps[d.deliver] for d in delivered], np.int64),
            retried=_cat([np.full(len(d.deliver), d.record.retry) for d in delivered], np.uint8),
            handles=b"".join(handles),
            pop_time=now,
            invisible_ms=query.invisible_ms,
        )

    def _nothing(self, query: PopQuery, targets: list[PopTarget], retry: PopTarget | None) -> bool:
        """Whether a pop would find nothing now (checked before a long poll sleeps)."""
        return not self._anything(query, targets, retry)

    def _anything(self, query: PopQuery, targets: list[PopTarget], retry: PopTarget | None) -> bool:
        now = int(time.time() * 1000)
        for target in [*targets, *([retry] if retry else [])]:
            key = (query.group, target.topic, target.queue_id)
            try:
                if query.order:
                    lane = self._state.lanes.get(key)
                    if lane is None or (not lane.blocked(now) and (lane.attempts or self._more(target, lane.commit))):
                        return True
                    continue
                current = self._state.offsets.get(key)
                if current is None or current[0] != target.gen or self._more(target, current[1]):
                    return True
            except StaticMQError:
                continue
        return False

    def _more(self, target: PopTarget, offset: int) -> bool:
        return self._sources.has_more(target, offset)


def _check(query: PopQuery) -> None:
    validate_group(query.group)
    validate_topic(query.topic)
    if not 1 <= query.max_messages <= MAX_POP_MESSAGES:
        raise InvalidArgumentError(f"max_messages must be 1..{MAX_POP_MESSAGES}, got {query.max_messages}")
    if not MIN_INVISIBLE_MS <= query.invisible_ms <= MAX_INVISIBLE_MS:
        raise InvalidArgumentError(
            f"invisible time must be {MIN_INVISIBLE_MS} ms..{MAX_INVISIBLE_MS // 3_600_000} h, "
            f"got {query.invisible_ms} ms"
        )
    if query.wait_ms < 0:
        raise InvalidArgumentError(f"wait_ms must be >= 0, got {query.wait_ms}")
    check_init_mode(query.init_mode)
    try:
        validate_topic(retry_topic(query.group, query.topic), allow_system=True)
        validate_topic(dlq_topic(query.group), allow_system=True)
    except InvalidTopicNameError as exc:
        raise InvalidArgumentError(
            f"group {query.group!r} cannot pop {query.topic!r}: its retry or dead-letter topic name is invalid "
            f"({exc.message}); use a shorter group name"
        ) from None


def _rotate(items: list[PopTarget], start: int) -> list[PopTarget]:
    return items[start:] + items[:start]


def _cat(parts: list[npt.NDArray[Any]], dtype: type[G]) -> npt.NDArray[G]:
    if not parts:
        return np.zeros(0, dtype=dtype)
    return np.concatenate(parts).astype(dtype, copy=False)
