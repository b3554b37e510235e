"""Reads that outlive a broker restart: retriable failures are retried with back-off until a
deadline, then reported naming what was read; other failures are raised as they are."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from staticmq_spark.errors import BrokerUnavailableError, StaticMQError

log = logging.getLogger(__name__)
T = TypeVar("T")


def retry_read(what: str, timeout_s: float, call: Callable[[int], T]) -> T:
    """`call(attempt)` (0, 1, ...) until it answers; a caller refreshes addresses when attempt > 0."""
    deadline = time.monotonic() + timeout_s
    attempt = 0
    while True:
        try:
            return call(attempt)
        except StaticMQError as exc:
            if not exc.retriable:
                raise
            if time.monotonic() > deadline:
                raise BrokerUnavailableError(f"{what} failed after {attempt + 1} attempt(s): {exc.message}") from None
            attempt += 1
            log.warning("%s failed (%s); retrying", what, exc.message)
            time.sleep(min(2.0, 0.1 * 2**attempt))
