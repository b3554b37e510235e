"""Retrying an operation while its failures are transient (a broker down or restarting): the one
back-off loop of the project, for planning, commits and reads alike."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from staticmq_spark.errors import BrokerUnavailableError, StaticMQError

log = logging.getLogger(__name__)
T = TypeVar("T")


def retrying(what: str, timeout_s: float, call: Callable[[int], T]) -> T:
    """`call(attempt)` (0, 1, ...) until it answers; retriable staticmq errors are retried with
    back-off until `timeout_s` has passed, then raised as they are; others at once. A caller
    refreshes addresses when attempt > 0."""
    deadline = time.monotonic() + timeout_s
    attempt = 0
    while True:
        try:
            return call(attempt)
        except StaticMQError as exc:
            if not exc.retriable or time.monotonic() > deadline:
                raise
            attempt += 1
            log.warning("%s failed (%s); retrying", what, exc.message)
            time.sleep(min(2.0, 0.1 * 2**attempt))


def retry_read(what: str, timeout_s: float, call: Callable[[int], T]) -> T:
    """`retrying`, and a read that still fails on a transient error at the deadline is reported
    as BrokerUnavailableError naming what was read and how many attempts were made."""
    attempts = [0]

    def counted(attempt: int) -> T:
        attempts[0] = attempt
        return call(attempt)

    try:
        return retrying(what, timeout_s, counted)
    except StaticMQError as exc:
        if not exc.retriable:
            raise
        raise BrokerUnavailableError(f"{what} failed after {attempts[0] + 1} attempt(s): {exc.message}") from None


def with_retries(what: str, fn: Callable[[], T], timeout_s: float) -> T:
    """Run `fn`, retrying retriable staticmq errors with back-off until `timeout_s` has passed."""
    return retrying(what, timeout_s, lambda _attempt: fn())
