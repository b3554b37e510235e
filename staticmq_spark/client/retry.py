"""Retrying an operation while its failures are transient (a broker down or restarting)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from staticmq_spark.errors import StaticMQError

log = logging.getLogger(__name__)
T = TypeVar("T")


def with_retries(what: str, fn: Callable[[], T], timeout_s: float) -> T:
    """Run `fn`, retrying retriable staticmq errors with back-off until `timeout_s` has passed."""
    deadline = time.monotonic() + timeout_s
    attempt = 0
    while True:
        try:
            return fn()
        except StaticMQError as exc:
            if not exc.retriable or time.monotonic() > deadline:
                raise
            attempt += 1
            log.warning("%s failed (%s); retrying", what, exc.message)
            time.sleep(min(2.0, 0.1 * 2**attempt))
