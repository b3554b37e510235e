"""The staged exactly-once sink's pure records (staticmq_spark/backends/rocketmq/sinks/staged_chunks.py):
chunk names, forwarding order, the decision's encoding in parts, and which chunks are missing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from staticmq_spark.backends.rocketmq.sinks import staged_chunks as sc
from staticmq_spark.backends.rocketmq.sinks.staged_chunks import StagedChunk, StagedDecision, Tail
from staticmq_spark.backends.rocketmq.wire.batch_encode import uniq_keys
from staticmq_spark.errors import InternalError


def _chunk(partition: int, seq: int, token: str = "T0", logic: int = 0, first: int = 0, count: int = 5) -> StagedChunk:
    return StagedChunk(partition, seq, token, logic, first, count, "broker-a", partition % 8, 100 + seq)


def test_a_chunk_is_named_by_its_first_rows_uniq_key_as_the_encoder_writes_it() -> None:
    chunk = _chunk(0, 0, token="ABCDEF0123456789", first=0x1F2)
    assert chunk.first_key == uniq_keys("ABCDEF0123456789", np.array([0x1F2], dtype=np.int64)).to_pylist()[0]
    assert chunk.first_key == "ABCDEF0123456789000001F2"


def test_forwarding_order_is_partition_then_the_attempts_send_order() -> None:
    chunks = [_chunk(1, 0), _chunk(0, 2), _chunk(0, 0), _chunk(1, 1), _chunk(0, 1)]
    assert [(c.partition, c.seq) for c in sc.forwarding_order(chunks)] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]


def test_two_attempts_of_one_partition_in_one_commit_are_refused() -> None:
    sc.check_attempts([_chunk(0, 0, "A"), _chunk(0, 1, "A"), _chunk(1, 0, "B")])
    with pytest.raises(InternalError, match="partition 0 has chunks of two task attempts"):
        sc.check_attempts([_chunk(0, 0, "A"), _chunk(0, 1, "B")])


def test_missing_chunks_are_those_whose_first_key_did_not_land() -> None:
    chunks = [_chunk(0, i, first=10 * i) for i in range(4)]
    landed = {chunks[0].first_key, chunks[2].first_key, "stranger"}
    assert sc.missing(chunks, landed) == [chunks[1], chunks[3]]
    assert sc.missing(chunks, set()) == chunks


def test_a_decision_groups_chunks_by_target_queue_in_order() -> None:
    chunks = [_chunk(0, 0, logic=1), _chunk(0, 1, logic=0), _chunk(1, 0, logic=1)]
    decision = StagedDecision("t", "w", 3, chunks)
    assert decision.by_queue() == {1: [chunks[0], chunks[2]], 0: [chunks[1]]}
    assert decision.rows == 15


def test_a_decision_round_trips_through_its_message_bodies() -> None:
    chunks = [_chunk(p, s, token=f"T{p}", logic=(p + s) % 3, first=7 * s) for p in range(3) for s in range(4)]
    tails = {0: Tail(0, "broker-a", 1, 2, 50), 1: Tail(1, "broker-b", 0, 1, 0), 2: Tail(2, "broker-a", 3, 1, 9)}
    decision = StagedDecision("topic", "query", 12, chunks, tails)
    bodies = sc.encode_staged(decision)
    assert len(bodies) == 1
    back = sc.decode_staged("topic", "query", 12, bodies)
    assert back == decision
    assert back is not None and back.key == "staticmq-staged:topic:query:12"


def test_a_large_decision_is_split_in_parts_and_needs_all_of_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sc, "CHUNK_BYTES", 200)
    chunks = [_chunk(p, 0, token=f"TOKEN{p:04d}") for p in range(30)]
    decision = StagedDecision("topic", "q", 1, chunks, {0: Tail(0, "b", 0, 1, 5)})
    bodies = sc.encode_staged(decision)
    assert len(bodies) > 3
    assert all(len(json.loads(b)["chunks"]) >= 1 for b in bodies)
    shuffled = [*reversed(bodies), bodies[0], b"not json", json.dumps({"topic": "other"}).encode()]
    assert sc.decode_staged("topic", "q", 1, shuffled) == decision, "any order, duplicates and strangers"
    assert sc.decode_staged("topic", "q", 1, bodies[1:]) is None, "a part missing: no decision"
    assert sc.decode_staged("topic", "q", 2, bodies) is None, "another batch's decision"


def test_a_decision_of_another_version_is_an_error_not_ignored() -> None:
    body = json.dumps({"v": 1, "topic": "t", "writer": "w", "batch": 0, "part": 0, "parts": 1}).encode()
    with pytest.raises(InternalError, match="version 1"):
        sc.decode_staged("t", "w", 0, [body])


def test_parts_of_a_recording_cut_short_are_never_mixed_with_a_later_recordings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A driver died while recording (some parts stored); the replay records its own decision under
    the same key: only a complete recording counts, and the first complete one wins."""
    monkeypatch.setattr(sc, "CHUNK_BYTES", 200)
    first = StagedDecision("t", "q", 4, [_chunk(p, 0, token=f"OLD{p:05d}") for p in range(12)], {})
    second = StagedDecision("t", "q", 4, [_chunk(p, 0, token=f"NEW{p:05d}") for p in range(30)], {})
    cut = sc.encode_staged(first, "run-1", 1_000)[:1]
    replayed = sc.encode_staged(second, "run-2", 2_000)
    assert len(replayed) > 1
    assert sc.decode_staged("t", "q", 4, cut + replayed) == second
    assert sc.decode_staged("t", "q", 4, cut) is None
    again = sc.encode_staged(first, "run-3", 3_000)
    assert sc.decode_staged("t", "q", 4, again + replayed) == second, "the earliest complete recording"
