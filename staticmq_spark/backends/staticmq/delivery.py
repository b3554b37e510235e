"""Delivering one request to a queue, with the order strategy's retry rules (shared by the
Producer and the Spark sink).

- keyed or pinned rows (a fixed queue): `strict` retries the same queue until `timeout_s`, then
  fails clearly - never another queue; `best-tried` gives up after `retries`;
- keyless rows: the selector's order, moving to the next queue on each failure.
A retriable failure opens the broker's circuit breaker and refreshes the route (a remapped
logic queue is found at its new leader).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from staticmq_spark.backends.retry import backoff_s
from staticmq_spark.backends.staticmq.route import RouteCache
from staticmq_spark.backends.staticmq.selector import CircuitBreaker, QueueSelector, ReachabilityDetector
from staticmq_spark.backends.targets import KEYLESS
from staticmq_spark.errors import BrokerUnavailableError, QueueUnavailableError, StaticMQError
from staticmq_spark.protocol.topics.route_view import QueueAddress, TopicRouteView

T = TypeVar("T")


class Delivery:
    def __init__(
        self,
        routes: RouteCache,
        breaker: CircuitBreaker,
        detector: ReachabilityDetector,
        *,
        order: str | None,
        timeout_s: float,
        retries: int,
    ) -> None:
        self.routes = routes
        self.breaker = breaker
        self.detector = detector
        self.selector = QueueSelector([breaker, detector])
        self._order = order
        self._timeout_s = timeout_s
        self._retries = retries

    def order_of(self, route: TopicRouteView) -> str:
        return self._order or route.order or "best-tried"

    def deliver(self, topic: str, target: int, attempt_on: Callable[[QueueAddress], T]) -> T:
        """Call `attempt_on(queue)` until it succeeds or the strategy gives up."""
        deadline = time.monotonic() + self._timeout_s
        attempt = 0
        tried: list[str] = []
        while True:
            route = self.routes.get(topic)
            fixed_strict = self.order_of(route) == "strict" and target != KEYLESS
            candidates = self.candidates(route, target)
            if not candidates:
                error: StaticMQError = QueueUnavailableError(f"{describe(topic, target)} has no available broker")
            else:
                q = candidates[min(attempt, len(candidates) - 1)] if target == KEYLESS else candidates[0]
                tried.append(q.broker)
                try:
                    result = attempt_on(q)
                except StaticMQError as exc:
                    if not exc.retriable:
                        raise
                    error = exc
                    self.breaker.record_failure(q.broker)
                else:
                    self.breaker.record_success(q.broker)
                    return result
            self.routes.invalidate(topic)
            attempt += 1
            if time.monotonic() >= deadline or (not fixed_strict and attempt > self._retries):
                raise BrokerUnavailableError(
                    f"delivery to {describe(topic, target)} failed after {attempt} attempt(s) "
                    f"({'strict order: not moved to another queue; ' if fixed_strict else ''}"
                    f"brokers tried: {', '.join(tried) or 'none'}): {error.message}"
                )
            time.sleep(backoff_s(attempt, deadline))

    def candidates(self, route: TopicRouteView, target: int) -> list[QueueAddress]:
        if target == KEYLESS:
            self.detector.watch(route.brokers)
            return self.selector.order(route.write_queues)
        q = route.write_queues[target]
        return [q] if q.available else []


def describe(topic: str, target: int) -> str:
    return f"topic {topic!r}" if target == KEYLESS else f"queue {target} of topic {topic!r}"
