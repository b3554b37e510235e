"""The queue-selection pipeline: circuit breaker, active reachability detection, fallback."""

from __future__ import annotations

from staticmq_spark.backends.staticmq.rpc import Channels
from staticmq_spark.backends.staticmq.selector import CircuitBreaker, QueueSelector, ReachabilityDetector
from staticmq_spark.protocol.topics.route_view import PLACEHOLDER_BROKER, QueueAddress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def queues(*brokers: str) -> list[QueueAddress]:
    return [QueueAddress("t", i, b, f"{b}:1") for i, b in enumerate(brokers)]


class Reachable:
    def __init__(self, down: set[str]) -> None:
        self.down = down

    def accepts(self, queue: QueueAddress) -> bool:
        return queue.broker not in self.down


def test_breaker_trips_on_failure_and_recovers_after_its_back_off() -> None:
    clock = Clock()
    breaker = CircuitBreaker(base_s=1.0, max_s=10.0, clock=clock)
    breaker.record_failure("b1")
    assert not breaker.available("b1") and breaker.available("b2")
    clock.now = 1.01
    assert breaker.available("b1")


def test_breaker_back_off_doubles_with_consecutive_failures_up_to_a_cap() -> None:
    clock = Clock()
    breaker = CircuitBreaker(base_s=1.0, max_s=3.0, clock=clock)
    for _ in range(5):
        breaker.record_failure("b1")
    clock.now = 2.9
    assert not breaker.available("b1")
    clock.now = 3.01
    assert breaker.available("b1")


def test_a_success_closes_the_breaker_at_once() -> None:
    breaker = CircuitBreaker(clock=Clock())
    breaker.record_failure("b1")
    breaker.record_success("b1")
    assert breaker.available("b1")


def test_tripped_brokers_come_last_but_are_never_dropped() -> None:
    breaker = CircuitBreaker(clock=Clock())
    breaker.record_failure("b1")
    order = QueueSelector([breaker]).order(queues("b1", "b2", "b1", "b3"))
    assert {q.broker for q in order[:2]} == {"b2", "b3"}
    assert len(order) == 4


def test_unreachable_brokers_are_skipped_while_reachable_ones_exist() -> None:
    order = QueueSelector([CircuitBreaker(clock=Clock()), Reachable({"b2"})]).order(queues("b1", "b2", "b3"))
    assert [q.broker for q in order][-1] == "b2"


def test_when_every_broker_is_tripped_reachable_ones_are_preferred() -> None:
    breaker = CircuitBreaker(clock=Clock())
    for b in ("b1", "b2", "b3"):
        breaker.record_failure(b)
    order = QueueSelector([breaker, Reachable({"b1", "b3"})]).order(queues("b1", "b2", "b3"))
    assert order[0].broker == "b2"


def test_fallback_tries_every_queue_when_nothing_passes_any_filter() -> None:
    breaker = CircuitBreaker(clock=Clock())
    for b in ("b1", "b2"):
        breaker.record_failure(b)
    order = QueueSelector([breaker, Reachable({"b1", "b2"})]).order(queues("b1", "b2"))
    assert sorted(q.queue_id for q in order) == [0, 1]


def test_placeholder_queues_are_never_chosen_for_keyless_sends() -> None:
    qs = [*queues("b1"), QueueAddress("t", 1, PLACEHOLDER_BROKER, "")]
    assert [q.broker for q in QueueSelector([]).order(qs)] == ["b1"]


def test_successive_sends_rotate_over_the_preferred_queues() -> None:
    selector = QueueSelector([])
    firsts = {selector.order(queues("b1", "b2", "b3"))[0].broker for _ in range(3)}
    assert firsts == {"b1", "b2", "b3"}


def test_detector_marks_a_broker_that_does_not_answer_unreachable() -> None:
    channels = Channels()
    detector = ReachabilityDetector(channels, enabled=True, interval_s=3600, timeout_s=0.3)
    detector.watch({"gone": "127.0.0.1:1"})
    detector.probe_once()
    assert not detector.reachable("gone")
    detector.stop()
    channels.close()


def test_detection_switched_off_counts_every_broker_reachable() -> None:
    detector = ReachabilityDetector(Channels(), enabled=False)
    detector.watch({"gone": "127.0.0.1:1"})
    assert detector.reachable("gone")
