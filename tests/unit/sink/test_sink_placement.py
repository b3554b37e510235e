"""The sink's one placement rule (staticmq_spark/sink/placement.py), computed above the seam."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from staticmq_spark.errors import InvalidBatchError, QueueNotFoundError
from staticmq_spark.hashing import queue_for_key
from staticmq_spark.sink.placement import place, placed_rows


def _batch(n: int, keys: list[str | None] | None = None, queues: list[int | None] | None = None) -> pa.RecordBatch:
    columns: dict[str, pa.Array] = {"value": pa.array([f"v{i}" for i in range(n)], pa.string())}
    if keys is not None:
        columns["key"] = pa.array(keys, pa.string())
    if queues is not None:
        columns["queueId"] = pa.array(queues, pa.int32())
    return pa.RecordBatch.from_pydict(columns)


def test_keyless_rows_go_round_robin_from_the_partition_counting_the_task_rows() -> None:
    asked: list[str] = []
    batches = [_batch(3), _batch(0), _batch(5)]

    def total(topic: str) -> int:
        asked.append(topic)
        return 4

    placed = list(placed_rows("t", total, 3, iter(batches)))
    assert [p.first for p in placed] == [0, 3]  # the empty batch is skipped, numbering goes on
    assert np.concatenate([p.targets for p in placed]).tolist() == [(3 + i) % 4 for i in range(8)]
    assert asked == ["t"]  # the cluster is asked once per task


def test_a_task_without_rows_asks_nothing_of_the_cluster() -> None:
    def total(topic: str) -> int:
        raise AssertionError("asked")

    assert list(placed_rows("t", total, 0, iter([_batch(0)]))) == []


def test_a_key_goes_to_murmur3_and_an_explicit_queue_id_wins() -> None:
    rows = place("t", 8, 5, _batch(4, keys=["a", None, "b", "c"], queues=[None, None, None, 6]), first=10)
    assert rows.targets.tolist() == [queue_for_key("a", 8), (5 + 11) % 8, queue_for_key("b", 8), 6]
    assert rows.numbers.tolist() == [10, 11, 12, 13]


def test_the_same_input_is_placed_the_same_on_a_replay() -> None:
    batches = [_batch(6, keys=[None, "k", None, None, "k", None])]
    first = [p.targets.tolist() for p in placed_rows("t", lambda _: 3, 2, iter(batches))]
    again = [p.targets.tolist() for p in placed_rows("t", lambda _: 3, 2, iter(batches))]
    assert first == again


def test_columns_are_read_once_with_the_value_as_binary() -> None:
    rows = place("t", 2, 0, _batch(2), first=0)
    assert rows.value.type == pa.binary() and rows.value.to_pylist() == [b"v0", b"v1"]
    assert rows.key is None and rows.tags is None and rows.properties is None


def test_a_null_value_is_refused_naming_its_row_in_the_task() -> None:
    rb = pa.RecordBatch.from_pydict({"value": pa.array(["a", None], pa.string())})
    with pytest.raises(InvalidBatchError, match=r"row 7 .* `value` is null"):
        place("t", 2, 0, rb, first=6)


def test_a_queue_id_past_the_topic_is_refused() -> None:
    with pytest.raises(QueueNotFoundError, match="has 4 queues; queue 9"):
        place("t", 4, 0, _batch(1, queues=[9]), first=0)
