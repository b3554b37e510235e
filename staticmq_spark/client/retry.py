"""Retrying an operation while its failures are transient (a broker down or restarting)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from staticmq_spark.cluster.retry import retrying

T = TypeVar("T")


def with_retries(what: str, fn: Callable[[], T], timeout_s: float) -> T:
    """Run `fn`, retrying retriable staticmq errors with back-off until `timeout_s` has passed."""
    return retrying(what, timeout_s, lambda _attempt: fn())
