"""The key -> logic queue function: Murmur3 x86_32 seed 0, identical scalar and vectorized."""

from __future__ import annotations

import mmh3
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from staticmq_spark.hashing import queue_for_key, queues_for_keys
from staticmq_spark.protocol.rows.murmur3 import murmur3_32, murmur3_32_many

# Reference values of MurmurHash3_x86_32(seed=0) (the SMHasher reference implementation).
KNOWN = {b"": 0, b"hello": 613153351, b"The quick brown fox jumps over the lazy dog": 0x2E4FF723}


@pytest.mark.parametrize(("data", "expected"), sorted(KNOWN.items()))
def test_murmur3_matches_reference_values(data: bytes, expected: int) -> None:
    assert murmur3_32(data) == expected


@given(st.lists(st.text(max_size=40), min_size=1, max_size=50))
def test_vectorized_hash_equals_reference_library(keys: list[str]) -> None:
    got = murmur3_32_many(pa.array(keys)).tolist()
    assert got == [mmh3.hash(k.encode(), 0, signed=False) for k in keys]


@given(st.text(max_size=30), st.integers(min_value=1, max_value=4096))
def test_key_always_maps_to_the_same_queue_in_every_path(key: str, total: int) -> None:
    scalar = queue_for_key(key, total)
    vector = int(queues_for_keys(pa.array([key]), total)[0])
    assert scalar == vector == mmh3.hash(key.encode(), 0, signed=False) % total


def test_null_keys_hash_like_empty_keys() -> None:
    assert queues_for_keys(pa.array([None, ""]), 7).tolist() == [queue_for_key("", 7)] * 2


def test_zero_queues_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        queue_for_key("k", 0)
