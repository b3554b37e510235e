"""The one place a pull's request limits are checked and enforced, for every pull a broker serves
(a plain queue, one physical queue, or a static topic's logic queue): the offset and max_messages
are checked, then max_messages, max_bytes (0: the default) and the long-poll wait are capped."""

from __future__ import annotations

from dataclasses import dataclass

from staticmq_spark.errors import InvalidArgumentError, InvalidOffsetError

MAX_PULL_MESSAGES = 100_000
DEFAULT_PULL_BYTES = 16 << 20
MAX_PULL_BYTES = 48 << 20


@dataclass(frozen=True, slots=True)
class PullLimits:
    max_messages: int
    max_bytes: int
    wait_ms: int


def pull_limits(offset: int, max_messages: int, max_bytes: int, wait_ms: int, max_wait_ms: int) -> PullLimits:
    """The limits a pull is served with; a request outside them is refused (InvalidOffsetError,
    InvalidArgumentError) before anything is read."""
    if offset < 0:
        raise InvalidOffsetError(f"pull offset must be >= 0, got {offset}")
    if max_messages <= 0:
        raise InvalidArgumentError(f"max_messages must be positive, got {max_messages}")
    if max_bytes < 0 or wait_ms < 0:
        raise InvalidArgumentError("max_bytes and wait_ms must be >= 0")
    return PullLimits(
        max_messages=min(max_messages, MAX_PULL_MESSAGES),
        max_bytes=min(max_bytes or DEFAULT_PULL_BYTES, MAX_PULL_BYTES),
        wait_ms=min(wait_ms, max_wait_ms),
    )
