"""Retrying an operation while its failures are transient (a broker down or restarting): the one
back-off policy of the project (`backoff_s`) and its loop, for planning, commits, reads and sends."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from staticmq_spark.errors import BrokerUnavailableError, StaticMQError

log = logging.getLogger(__name__)
T = TypeVar("T")
FIRST_S = 0.05  # the first wait
MAX_S = 1.0  # no wait is longer: a broker that comes back is used within a second


def backoff_s(attempt: int, deadline: float | None = None) -> float:
    """How long to wait before retry number `attempt` (1, 2, ...): doubling from FIRST_S up to
    MAX_S, and never past `deadline` (a time.monotonic() value)."""
    wait: float = min(MAX_S, FIRST_S * 2.0 ** max(0, attempt - 1))
    return wait if deadline is None else max(0.0, min(wait, deadline - time.monotonic()))


def is_retriable(exc: StaticMQError) -> bool:
    """The error tree's own rule (a backend may widen it: RocketMQ's `client_instance.retriable`)."""
    return exc.retriable


def retrying(
    what: str,
    timeout_s: float,
    call: Callable[[int], T],
    *,
    retriable: Callable[[StaticMQError], bool] = is_retriable,
    min_wait_s: float = 0.0,
    log_level: int = logging.WARNING,
) -> T:
    """The one retry loop: `call(attempt)` (0, 1, ...) until it answers; failures `retriable` says
    are transient are tried again after a back-off (at least `min_wait_s`) until `timeout_s` has
    passed, then raised as they are; others at once. A caller refreshes addresses, or checks what
    an unanswered attempt did, when attempt > 0."""
    deadline = time.monotonic() + timeout_s
    attempt = 0
    while True:
        try:
            return call(attempt)
        except StaticMQError as exc:
            if not retriable(exc) or time.monotonic() > deadline:
                raise
            attempt += 1
            log.log(log_level, "%s failed (%s); retrying", what, exc.message)
            time.sleep(max(min_wait_s, backoff_s(attempt, deadline)))


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
