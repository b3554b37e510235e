"""Order lanes: a queue is blocked while a delivery is in flight and redelivers in order."""

from __future__ import annotations

import numpy as np

from broker_stub.broker.pop.checkpoints import ACKED, CheckpointTable
from broker_stub.broker.pop.order_lanes import OrderLane
from broker_stub.broker.pop.records import CkRecord


def order_ck(table: CheckpointTable, ck_id: int, start: int, lane: OrderLane, deliver: int, now: int) -> list[int]:
    """Plan and record a delivery from the lane's commit; returns the delivered offsets."""
    offsets = np.arange(start, start + 10, dtype=np.int64)
    plan = lane.plan(offsets, deliver, max_reconsume=1)
    rec = CkRecord(
        group="g",
        topic="t",
        origin_topic="t",
        queue_id=0,
        source_bname="",
        source_queue=0,
        gen=0,
        pop_time=now,
        invisible_ms=1_000,
        start_offset=start,
        offset_delta=0,
        count=plan.count,
        next_begin=start + plan.count,
        order=True,
        done_before=plan.done_before.tobytes(),
        attempts=plan.attempts.astype("<i4").tobytes(),
    )
    lane.drop_finished(now)
    lane.apply_ck(table.add(ck_id, rec))
    return (offsets[plan.deliver]).tolist()


def test_a_lane_is_blocked_until_its_delivery_is_acked_or_expires() -> None:
    table, lane = CheckpointTable(), OrderLane(0, 0, 0)
    assert order_ck(table, 1, lane.commit, lane, 3, now=0) == [0, 1, 2]
    assert lane.blocked(500)
    assert not lane.blocked(1_000)
    table.mark(np.array([1, 1, 1]), np.arange(3), ACKED)
    lane.mark_done([0, 1, 2])
    assert not lane.blocked(500) and lane.commit == 3


def test_redelivery_starts_at_the_first_unacked_message_and_skips_acked_ones() -> None:
    table, lane = CheckpointTable(), OrderLane(0, 0, 0)
    order_ck(table, 1, 0, lane, 4, now=0)
    table.mark(np.array([1, 1]), np.array([0, 2]), ACKED)
    assert lane.mark_done([0, 2]) and lane.commit == 1
    again = order_ck(table, 2, lane.commit, lane, 4, now=2_000)
    assert again == [1, 3, 4, 5]  # 2 was acked: not handed out again
    assert lane.attempts[1] == 2 and lane.attempts[3] == 2 and lane.attempts[4] == 1


def test_past_the_max_reconsume_count_a_message_is_planned_for_the_dlq() -> None:
    lane = OrderLane(0, 0, 3)
    lane.attempts = {0: 2, 1: 1, 2: 1}
    plan = lane.plan(np.arange(0, 5, dtype=np.int64), max_deliver=10, max_reconsume=1)
    assert plan.dead.tolist() == [0]
    assert plan.deliver.tolist() == [1, 2, 3, 4]
    assert plan.done_before.tolist() == [1, 0, 0, 0, 0]
    assert plan.attempts.tolist() == [2, 2, 2, 1, 1]


def test_commit_follows_offsets_across_a_segment_jump() -> None:
    lane = OrderLane(0, 8, 8)
    lane.attempts = {8: 1, 9: 1, 10_000: 1}
    lane.read_to = 10_001
    assert not lane.mark_done([9])
    assert lane.mark_done([8]) and lane.commit == 10_000
    assert lane.mark_done([10_000]) and lane.commit == 10_001


def test_a_lane_snapshot_restores_the_same_lane() -> None:
    lane = OrderLane(3, 5, 9, attempts={5: 2, 6: 1}, done={6})
    again = OrderLane.restore(lane.snapshot())
    assert (again.gen, again.commit, again.read_to, again.attempts, again.done) == (3, 5, 9, {5: 2, 6: 1}, {6})
