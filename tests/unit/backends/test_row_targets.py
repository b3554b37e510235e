"""`backends.targets.row_targets`: an explicit queue wins over a key, a key maps to
murmur3(key) mod total, a row with neither is KEYLESS; keys every row's explicit queue overrides
are not hashed (the producers' `queue=` and the sink's `queueId` on every row)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from staticmq_spark.backends import targets
from staticmq_spark.backends.targets import KEYLESS, row_targets
from staticmq_spark.errors import QueueNotFoundError
from staticmq_spark.hashing import queues_for_keys


def test_a_key_goes_to_its_hash_an_explicit_queue_wins_and_a_row_with_neither_is_keyless() -> None:
    keys = pa.array(["a", "b", None, "c"])
    hashed = queues_for_keys(pa.array(["a", "b", "c"]), 8).tolist()
    got = row_targets("t", 8, 4, keys, [-1, 5, -1, -1]).tolist()
    assert got == [hashed[0], 5, KEYLESS, hashed[2]]


def test_keys_that_every_rows_explicit_queue_overrides_are_not_hashed(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def counted(keys: pa.Array, total: int) -> np.ndarray:
        calls.append(len(keys))
        return queues_for_keys(keys, total)

    monkeypatch.setattr(targets, "queues_for_keys", counted)
    keys = pa.array([f"user-{i}" for i in range(1000)])
    assert row_targets("t", 2, 1000, keys, np.full(1000, 1)).tolist() == [1] * 1000
    assert calls == []
    row_targets("t", 2, 1000, keys, np.r_[np.full(999, 1), -1])  # one row left to its key
    assert calls == [1000]


def test_a_queue_the_topic_does_not_have_is_refused_naming_it() -> None:
    with pytest.raises(QueueNotFoundError, match="topic 't' has 2 queues; queue 7 does not exist"):
        row_targets("t", 2, 3, pa.array(["a", "b", "c"]), [0, 7, -1])
