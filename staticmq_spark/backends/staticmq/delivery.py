"""Delivering one request to a queue, with the order strategy's retry rules (shared by the
Producer and the Spark sink).

- keyed or pinned rows (a fixed queue): `strict` retries the same queue until `timeout_s`, then
  fails clearly - never another queue; `best-tried` gives up after `retries`;
- keyless rows: the selector's order, moving to the next queue on each failure.
A retriable failure opens the broker's circuit breaker and refreshes the route (a remapped
logic queue is found at its new leader).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from staticmq_spark.backends.retry import retrying
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
        tried: list[str] = []
        failed = [0]  # attempts that failed
        fixed_strict = [False]  # the route's order is strict and the queue fixed: retried until the timeout

        def attempt(n: int) -> T:
            if n > 0:
                self.routes.invalidate(topic)  # a remapped logic queue is found at its new leader
            route = self.routes.get(topic)
            fixed_strict[0] = self.order_of(route) == "strict" and target != KEYLESS
            candidates = self.candidates(route, target)
            failed[0] = n + 1
            if not candidates:
                raise QueueUnavailableError(f"{describe(topic, target)} has no available broker")
            q = candidates[min(n, len(candidates) - 1)] if target == KEYLESS else candidates[0]
            tried.append(q.broker)
            try:
                result = attempt_on(q)
            except StaticMQError as exc:
                if exc.retriable:
                    self.breaker.record_failure(q.broker)
                raise
            self.breaker.record_success(q.broker)
            return result

        def again(exc: StaticMQError) -> bool:
            return exc.retriable and (fixed_strict[0] or failed[0] <= self._retries)

        try:
            return retrying(describe(topic, target), self._timeout_s, attempt, retriable=again, log_level=logging.INFO)
        except StaticMQError as exc:
            if not exc.retriable:
                raise
            raise BrokerUnavailableError(
                f"delivery to {describe(topic, target)} failed after {failed[0]} attempt(s) "
                f"({'strict order: not moved to another queue; ' if fixed_strict[0] else ''}"
                f"brokers tried: {', '.join(tried) or 'none'}): {exc.message}"
            ) from None

    def candidates(self, route: TopicRouteView, target: int) -> list[QueueAddress]:
        if target == KEYLESS:
            self.detector.watch(route.brokers)
            return self.selector.order(route.write_queues)
        q = route.write_queues[target]
        return [q] if q.available else []


def describe(topic: str, target: int) -> str:
    return f"topic {topic!r}" if target == KEYLESS else f"queue {target} of topic {topic!r}"
