"""The pop state is rebuilt from the revive log exactly as it was applied live (real store)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from broker_stub.broker.pop.checkpoints import PENDING
from broker_stub.broker.pop.pop_state import PopState
from broker_stub.broker.pop.records import AckRecord, CkRecord, DoneRecord
from broker_stub.broker.pop.revive_log import ReviveLog
from broker_stub.broker.topic_service import TopicService
from broker_stub.config import StoreConfig
from broker_stub.store.consumer_offsets import ConsumerOffsets
from broker_stub.store.message_store import MessageStore
from broker_stub.store.topic_configs import TopicConfigs


class Broker:
    """The real store, topic configs and revive log of a broker data directory."""

    def __init__(self, root: Path) -> None:
        self.configs = TopicConfigs(root / "topics.json")
        self.configs.load()
        self.store = MessageStore(root / "store", StoreConfig(flush="async"))
        self.store.open(self.configs.uids())
        topics = TopicService(self.configs, self.store, ConsumerOffsets(root / "offsets.json"))
        self.log = ReviveLog(self.store, topics, root / "pop")
        self.log.open()
        self.state = PopState(self.log)

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


def ck(queue_id: int, start: int, count: int, **changes: object) -> CkRecord:
    values: dict[str, object] = {
        "group": "g",
        "topic": "t",
        "origin_topic": "t",
        "queue_id": queue_id,
        "source_bname": "",
        "source_queue": queue_id,
        "gen": 0,
        "pop_time": 1_000,
        "invisible_ms": 60_000,
        "start_offset": start,
        "offset_delta": 0,
        "count": count,
        "next_begin": start + count,
    }
    values.update(changes)
    return CkRecord(**values)  # type: ignore[arg-type]


def test_recovery_replays_checkpoints_acks_and_revives(root: Path) -> None:
    broker = Broker(root)
    with broker.state.lock:
        a, _ = broker.state.commit([ck(0, 0, 4)])
        b, _ = broker.state.commit([ck(1, 0, 2), ck(0, 4, 3)])
        broker.state.commit([AckRecord(np.array([a, a]), np.array([0, 3]))])
        broker.state.commit([AckRecord(np.array([b, b]), np.array([0, 1]))])  # finishes b
        broker.state.commit([DoneRecord(np.array([b + 1]))])
        moves = broker.state.take_offset_moves()
    assert {(m.queue_id, m.offset) for m in moves} == {(0, 7), (1, 2)}
    broker.close()

    again = Broker(root)
    with again.state.lock:
        again.state.recover()
    assert [ck.ck_id for ck in again.state.table.live()] == [a]
    live = again.state.table.get(a)
    assert live is not None and live.pending_indices().tolist() == [1, 2]
    assert again.state.offsets == {("g", "t", 0): (0, 7), ("g", "t", 1): (0, 2)}
    again.close()


def test_a_checkpoint_file_lets_recovery_skip_finished_rows(root: Path) -> None:
    broker = Broker(root)
    with broker.state.lock:
        first, _ = broker.state.commit([ck(0, 0, 2)])
        broker.state.commit([AckRecord(np.array([first, first]), np.array([0, 1]))])
        second, _ = broker.state.commit([ck(0, 2, 2)])
        snapshot = broker.state.snapshot()
    assert snapshot.revive_offset == second
    broker.log.save_checkpoint(snapshot)
    broker.close()

    again = Broker(root)
    with again.state.lock:
        again.state.recover()
    assert again.state.table.get(first) is None
    recovered = again.state.table.get(second)
    assert recovered is not None and (recovered.states == PENDING).all()
    assert again.state.offsets[("g", "t", 0)] == (0, 4)
    again.close()


def test_order_lanes_recover_their_commit_and_blocking_delivery(root: Path) -> None:
    broker = Broker(root)
    order = {"order": True, "done_before": bytes(3), "attempts": np.ones(3, dtype="<i4").tobytes()}
    with broker.state.lock:
        ck_id, _ = broker.state.commit([ck(0, 0, 3, **order)])
        broker.state.commit([AckRecord(np.array([ck_id]), np.array([0]))])
    broker.close()

    again = Broker(root)
    with again.state.lock:
        again.state.recover()
    lane = again.state.lanes[("g", "t", 0)]
    assert lane.commit == 1 and lane.read_to == 3
    assert lane.blocked(2_000) and not lane.blocked(61_000)
    again.close()
