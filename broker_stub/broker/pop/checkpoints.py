"""The pop buffer: checkpoints (CKs) in flight, held in memory with one state per message, where
acks are matched first (buffer merge). Pure bookkeeping, no I/O: the caller persists every
change in the revive log before applying it here, under one lock.

A CK leaves the buffer when no message of it is pending any more (acked, superseded by a newer
CK of change_invisible_time, or revived). Its final states stay in a `retired` memory bounded by
RETIRED_BYTES (oldest forgotten first) so that a late ack is answered precisely ("already acked",
"superseded", "revived"); beyond it the answer is "unknown".
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from broker_stub.broker.pop.receipt_handles import HandleBatch
from broker_stub.broker.pop.records import CkRecord
from staticmq_spark.protocol.consume.ack_outcomes import AckOutcome

# Per-message states of a CK.
PENDING = 0
ACKED = 1
SUPERSEDED = 2  # change_invisible_time moved the message to a newer CK
REVIVED = 3  # sent back through the retry topic
DONE_BEFORE = 4  # order pop: done before this delivery, never handed out
LAPSED = 5  # order pop: its invisible time ended; the lane redelivers it in order

RETIRED_BYTES = 8 << 20  # memory for the final states of retired CKs (one byte per message)
INDEX_BITS = 24  # a CK holds fewer than 2**24 messages


_BY_STATE = np.array(
    [
        AckOutcome.OK,
        AckOutcome.ALREADY_ACKED,
        AckOutcome.SUPERSEDED,
        AckOutcome.REVIVED,
        AckOutcome.ALREADY_ACKED,
        AckOutcome.EXPIRED,
    ],
    dtype=np.uint8,
)


@dataclass(eq=False, slots=True)
class CheckPoint:
    ck_id: int
    record: CkRecord
    states: npt.NDArray[np.uint8]
    pending: int

    @property
    def deadline(self) -> int:
        return self.record.deadline

    def logic_offsets(self, indices: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return self.record.start_offset + self.record.offset_delta + indices

    def pending_indices(self) -> npt.NDArray[np.int64]:
        return np.flatnonzero(self.states == PENDING).astype(np.int64)


@dataclass(frozen=True, slots=True)
class RetiredCk:
    group: str
    origin_topic: str
    states: npt.NDArray[np.uint8]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What an ack request may do: `outcomes` per handle; the OK ones, grouped by CK."""

    outcomes: npt.NDArray[np.uint8]
    ck_ids: npt.NDArray[np.int64]  # the OK handles, in request order
    indices: npt.NDArray[np.int64]

    @property
    def accepted(self) -> int:
        return int(self.ck_ids.shape[0])


class CheckpointTable:
    def __init__(self, retired_bytes: int = RETIRED_BYTES) -> None:
        self._live: dict[int, CheckPoint] = {}  # insertion order = ck_id order
        self._due: list[tuple[int, int]] = []  # heap of (due ms, ck_id)
        self._retired: OrderedDict[int, RetiredCk] = OrderedDict()
        self._retired_budget = retired_bytes
        self._retired_used = 0

    def __len__(self) -> int:
        return len(self._live)

    def add(self, ck_id: int, record: CkRecord) -> CheckPoint:
        states = np.zeros(record.count, dtype=np.uint8)
        if record.order and record.done_before:
            states[np.frombuffer(record.done_before, dtype=np.uint8) != 0] = DONE_BEFORE
        ck = CheckPoint(ck_id, record, states, int(np.count_nonzero(states == PENDING)))
        if ck.pending == 0:
            self._retire(ck)
            return ck
        self._live[ck_id] = ck
        heapq.heappush(self._due, (record.deadline, ck_id))
        return ck

    def get(self, ck_id: int) -> CheckPoint | None:
        return self._live.get(ck_id)

    def live(self) -> list[CheckPoint]:
        return list(self._live.values())

    def min_live(self) -> int | None:
        return next(iter(self._live), None)

    # ------------------------------------------------------------------ acks

    def judge(self, handles: HandleBatch, group: str, topic: str, now_ms: int) -> Verdict:
        """Decide every handle of an ack request without changing anything."""
        n = handles.count
        out = np.full(n, AckOutcome.FORGED, dtype=np.uint8)
        expired = handles.deadlines <= now_ms
        authentic = np.flatnonzero(handles.authentic)
        for ck_id, sel in _by_ck(handles.ck_ids, authentic):
            out[sel] = self._judge_ck(ck_id, handles.indices[sel], expired[sel], group, topic)
        ok = np.flatnonzero(out == AckOutcome.OK)
        keys = (handles.ck_ids[ok] << INDEX_BITS) | handles.indices[ok]
        if not bool(np.all(keys[1:] > keys[:-1])):  # not strictly ascending: look for repeats
            _, first = np.unique(keys, return_index=True)
            if len(first) < len(ok):  # the same handle twice in one request: the repeats were already acked
                repeat = np.setdiff1d(np.arange(len(ok)), first)
                out[ok[repeat]] = AckOutcome.ALREADY_ACKED
                ok = np.sort(ok[first])
        return Verdict(out, handles.ck_ids[ok], handles.indices[ok])

    def _judge_ck(
        self, ck_id: int, idx: npt.NDArray[np.int64], expired: npt.NDArray[np.bool_], group: str, topic: str
    ) -> npt.NDArray[np.uint8]:
        ck = self._live.get(ck_id)
        if ck is not None:
            owner, states = (ck.record.group, ck.record.origin_topic), ck.states
        elif (gone := self._retired.get(ck_id)) is not None:
            owner, states = (gone.group, gone.origin_topic), gone.states
        else:
            return np.where(expired, AckOutcome.EXPIRED, AckOutcome.UNKNOWN).astype(np.uint8)
        if owner != (group, topic):
            return np.full(len(idx), AckOutcome.WRONG_GROUP, dtype=np.uint8)
        out = np.full(len(idx), AckOutcome.FORGED, dtype=np.uint8)
        valid = idx < len(states)
        verdict = _BY_STATE[states[idx[valid]]]
        verdict[(verdict == AckOutcome.OK) & expired[valid]] = AckOutcome.EXPIRED
        out[valid] = verdict
        return out

    def mark(self, ck_ids: npt.NDArray[np.int64], indices: npt.NDArray[np.int64], state: int) -> list[CheckPoint]:
        """Set pending messages to `state` (ACKED or SUPERSEDED); returns the CKs that finished.
        Unknown CKs and messages no longer pending are ignored (replays apply acks again)."""
        finished: list[CheckPoint] = []
        for ck_id, sel in _by_ck(ck_ids, np.arange(len(ck_ids))):
            ck = self._live.get(ck_id)
            if ck is None:
                continue
            idx = indices[sel]
            idx = idx[idx < len(ck.states)]
            hit = idx[ck.states[idx] == PENDING]
            ck.states[hit] = state
            ck.pending = int(np.count_nonzero(ck.states == PENDING))
            if ck.pending == 0:
                self._retire(ck)
                finished.append(ck)
        return finished

    # ------------------------------------------------------------------ revive

    def take_due(self, now_ms: int) -> list[CheckPoint]:
        """CKs whose due time has come and which still have pending messages."""
        out: list[CheckPoint] = []
        seen: set[int] = set()
        while self._due and self._due[0][0] <= now_ms:
            _, ck_id = heapq.heappop(self._due)
            ck = self._live.get(ck_id)
            if ck is not None and ck.pending > 0 and ck_id not in seen:
                seen.add(ck_id)
                out.append(ck)
        return out

    def reschedule(self, ck: CheckPoint, due_ms: int) -> None:
        heapq.heappush(self._due, (due_ms, ck.ck_id))

    def retire(self, ck_id: int, state: int | None = None) -> CheckPoint | None:
        """End a CK: its pending messages get `state` (default: REVIVED, LAPSED for order pop)."""
        ck = self._live.get(ck_id)
        if ck is not None:
            if state is None:
                state = LAPSED if ck.record.order else REVIVED
            ck.states[ck.states == PENDING] = state
            ck.pending = 0
            self._retire(ck)
        return ck

    def _retire(self, ck: CheckPoint) -> None:
        self._live.pop(ck.ck_id, None)
        self._retired[ck.ck_id] = RetiredCk(ck.record.group, ck.record.origin_topic, ck.states)
        self._retired_used += len(ck.states)
        while self._retired_used > self._retired_budget:
            _, gone = self._retired.popitem(last=False)
            self._retired_used -= len(gone.states)


def _by_ck(ck_ids: npt.NDArray[np.int64], positions: npt.NDArray[np.int64]) -> list[tuple[int, npt.NDArray[np.int64]]]:
    """`positions` grouped by their CK id (one group in the usual case: a whole batch acked)."""
    if len(positions) == 0:
        return []
    ids = ck_ids[positions]
    if bool((ids == ids[0]).all()):
        return [(int(ids[0]), positions)]
    return [(int(c), positions[ids == c]) for c in np.unique(ids).tolist()]
