"""The one place a broker checks and caps a pull's request limits (any queue: plain, physical or
a static topic's logic queue)."""

from __future__ import annotations

import pytest

from broker_stub.broker.pull_limits import (
    DEFAULT_PULL_BYTES,
    MAX_PULL_BYTES,
    MAX_PULL_MESSAGES,
    PullLimits,
    pull_limits,
)
from staticmq_spark.errors import InvalidArgumentError, InvalidOffsetError

LONG_POLL_MS = 30_000


def test_a_pull_within_the_limits_keeps_them() -> None:
    assert pull_limits(5, 10, 1 << 20, 500, LONG_POLL_MS) == PullLimits(10, 1 << 20, 500)


def test_max_bytes_zero_means_the_default() -> None:
    assert pull_limits(0, 1, 0, 0, LONG_POLL_MS).max_bytes == DEFAULT_PULL_BYTES


def test_max_messages_max_bytes_and_the_wait_are_capped() -> None:
    limits = pull_limits(0, MAX_PULL_MESSAGES + 1, MAX_PULL_BYTES + 1, LONG_POLL_MS + 1, LONG_POLL_MS)
    assert limits == PullLimits(MAX_PULL_MESSAGES, MAX_PULL_BYTES, LONG_POLL_MS)


def test_a_negative_offset_is_refused_as_an_invalid_offset() -> None:
    with pytest.raises(InvalidOffsetError, match=r"pull offset must be >= 0, got -1"):
        pull_limits(-1, 10, 0, 0, LONG_POLL_MS)


@pytest.mark.parametrize("max_messages", [0, -3])
def test_max_messages_below_one_is_refused(max_messages: int) -> None:
    with pytest.raises(InvalidArgumentError, match=rf"max_messages must be positive, got {max_messages}"):
        pull_limits(0, max_messages, 0, 0, LONG_POLL_MS)


@pytest.mark.parametrize(("max_bytes", "wait_ms"), [(-1, 0), (0, -1)])
def test_negative_max_bytes_or_wait_is_refused(max_bytes: int, wait_ms: int) -> None:
    with pytest.raises(InvalidArgumentError, match=r"max_bytes and wait_ms must be >= 0"):
        pull_limits(0, 1, max_bytes, wait_ms, LONG_POLL_MS)


def test_the_offset_is_checked_first() -> None:
    with pytest.raises(InvalidOffsetError):
        pull_limits(-1, 0, -1, -1, LONG_POLL_MS)
