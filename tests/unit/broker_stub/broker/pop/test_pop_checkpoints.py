"""The CK buffer: acks matched in memory, precise refusals, finishing, revive order."""

from __future__ import annotations

import numpy as np

from broker_stub.broker.pop.checkpoints import ACKED, SUPERSEDED, CheckpointTable
from broker_stub.broker.pop.receipt_handles import HandleBatch
from broker_stub.broker.pop.records import CkRecord
from staticmq_spark.protocol.consume.ack_outcomes import AckOutcome

NOW = 1_000_000


def record(count: int = 4, pop_time: int = NOW, invisible_ms: int = 10_000, **changes: object) -> CkRecord:
    values: dict[str, object] = {
        "group": "g",
        "topic": "t",
        "origin_topic": "t",
        "queue_id": 0,
        "source_bname": "",
        "source_queue": 0,
        "gen": 0,
        "pop_time": pop_time,
        "invisible_ms": invisible_ms,
        "start_offset": 100,
        "offset_delta": 0,
        "count": count,
        "next_begin": 100 + count,
    }
    values.update(changes)
    return CkRecord(**values)  # type: ignore[arg-type]


def handles(ck_ids: list[int], indices: list[int], deadline: int, authentic: list[bool] | None = None) -> HandleBatch:
    n = len(ck_ids)
    return HandleBatch(
        np.array(ck_ids, dtype=np.int64),
        np.array(indices, dtype=np.int64),
        np.full(n, deadline, dtype=np.int64),
        np.array(authentic if authentic is not None else [True] * n, dtype=bool),
    )


def outcomes(
    table: CheckpointTable, batch: HandleBatch, group: str = "g", topic: str = "t", now: int = NOW + 1
) -> list[AckOutcome]:
    return [AckOutcome(int(o)) for o in table.judge(batch, group, topic, now).outcomes]


def test_acks_of_pending_messages_are_accepted_and_finish_the_checkpoint() -> None:
    table = CheckpointTable()
    table.add(7, record())
    verdict = table.judge(handles([7, 7, 7, 7], [0, 1, 2, 3], NOW + 10_000), "g", "t", NOW + 1)
    assert verdict.accepted == 4
    finished = table.mark(verdict.ck_ids, verdict.indices, ACKED)
    assert [ck.ck_id for ck in finished] == [7] and len(table) == 0
    assert outcomes(table, handles([7], [2], NOW + 10_000)) == [AckOutcome.ALREADY_ACKED]


def test_refusals_name_what_was_wrong() -> None:
    table = CheckpointTable()
    table.add(1, record())
    table.mark(np.array([1]), np.array([0]), ACKED)
    table.mark(np.array([1]), np.array([1]), SUPERSEDED)
    batch = handles([1, 1, 1, 1, 2], [0, 1, 2, 3, 0], NOW + 10_000, [True, True, False, True, True])
    assert outcomes(table, batch) == [
        AckOutcome.ALREADY_ACKED,
        AckOutcome.SUPERSEDED,
        AckOutcome.FORGED,
        AckOutcome.OK,
        AckOutcome.UNKNOWN,
    ]
    assert outcomes(table, handles([1], [3], NOW + 10_000), group="other") == [AckOutcome.WRONG_GROUP]


def test_an_expired_handle_is_refused_even_when_the_message_is_pending() -> None:
    table = CheckpointTable()
    table.add(1, record(invisible_ms=5))
    assert outcomes(table, handles([1], [0], NOW + 5), now=NOW + 4) == [AckOutcome.OK]
    assert outcomes(table, handles([1], [0], NOW + 5), now=NOW + 5) == [AckOutcome.EXPIRED]
    assert outcomes(table, handles([99], [0], NOW - 1)) == [AckOutcome.EXPIRED]


def test_the_same_handle_twice_in_one_request_acks_once() -> None:
    table = CheckpointTable()
    table.add(1, record())
    verdict = table.judge(handles([1, 1, 1], [2, 0, 2], NOW + 10_000), "g", "t", NOW + 1)
    assert [AckOutcome(int(o)) for o in verdict.outcomes] == [AckOutcome.OK, AckOutcome.OK, AckOutcome.ALREADY_ACKED]
    assert verdict.indices.tolist() == [2, 0]


def test_an_index_outside_the_checkpoint_is_forged() -> None:
    table = CheckpointTable()
    table.add(1, record(count=2))
    assert outcomes(table, handles([1], [2], NOW + 10_000)) == [AckOutcome.FORGED]


def test_due_checkpoints_come_in_deadline_order_with_their_pending_messages() -> None:
    table = CheckpointTable()
    table.add(1, record(invisible_ms=3_000))
    table.add(2, record(invisible_ms=1_000))
    table.add(3, record(invisible_ms=2_000))
    table.mark(np.array([3, 3, 3, 3]), np.arange(4), ACKED)  # fully acked: never due
    table.mark(np.array([2]), np.array([1]), ACKED)
    assert table.take_due(NOW + 999) == []
    due = table.take_due(NOW + 3_000)
    assert [ck.ck_id for ck in due] == [2, 1]
    assert due[0].pending_indices().tolist() == [0, 2, 3]


def test_revived_checkpoints_leave_the_buffer_and_answer_late_acks_as_revived() -> None:
    table = CheckpointTable()
    table.add(1, record())
    table.add(2, record())
    assert table.min_live() == 1
    table.retire(1)
    assert table.min_live() == 2 and table.get(1) is None
    assert outcomes(table, handles([1], [0], NOW + 10_000)) == [AckOutcome.REVIVED]


def test_retired_memory_is_bounded() -> None:
    table = CheckpointTable(retired_bytes=8)  # two CKs of four messages
    for ck_id in range(4):
        table.add(ck_id, record())
        table.retire(ck_id)
    assert outcomes(table, handles([0, 3], [0, 0], NOW + 10_000)) == [AckOutcome.UNKNOWN, AckOutcome.REVIVED]


def test_an_order_checkpoint_with_everything_done_before_is_finished_at_once() -> None:
    table = CheckpointTable()
    ck = table.add(1, record(count=2, order=True, done_before=b"\x01\x01", attempts=b"\x00" * 8))
    assert ck.pending == 0 and len(table) == 0


def test_a_lapsed_order_checkpoint_answers_late_acks_as_expired() -> None:
    table = CheckpointTable()
    table.add(1, record(count=2, order=True, done_before=b"\x00\x00", attempts=b"\x01\x00\x00\x00" * 2))
    table.retire(1)
    assert outcomes(table, handles([1], [0], NOW + 10_000)) == [AckOutcome.EXPIRED]
