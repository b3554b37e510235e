"""OrderedLanes (client/lanes.py), the machinery of Producer.send_batch_async: one lane's jobs in
submission order, lanes at once, a failure holding back what waits behind it, back-pressure."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from staticmq_spark.client.lanes import OrderedLanes
from staticmq_spark.errors import BrokerUnavailableError, InvalidArgumentError, NotSentError


@pytest.fixture
def lanes() -> Iterator[OrderedLanes]:
    lanes = OrderedLanes(workers=4, max_pending=64)
    yield lanes
    lanes.close()


def gate() -> tuple[threading.Event, Callable[[], str]]:
    """A job that waits for its event: holds its lane until the test opens it."""
    opened = threading.Event()

    def job() -> str:
        assert opened.wait(10)
        return "opened"

    return opened, job


def test_a_lane_runs_its_jobs_one_at_a_time_in_submission_order(lanes: OrderedLanes) -> None:
    ran: list[int] = []
    running = [0]

    def job(i: int) -> int:
        running[0] += 1
        assert running[0] == 1, "two jobs of one lane ran at once"
        time.sleep(0.001)
        ran.append(i)
        running[0] -= 1
        return i

    futures = [lanes.submit("q0", lambda i=i: job(i)) for i in range(50)]
    assert [f.result(10) for f in futures] == list(range(50))
    assert ran == list(range(50))


def test_different_lanes_run_at_once(lanes: OrderedLanes) -> None:
    opened, held = gate()
    first = lanes.submit("q0", held)
    other = lanes.submit("q1", lambda: opened.set() or "q1 ran while q0 was held")
    assert other.result(10) == "q1 ran while q0 was held"
    assert first.result(10) == "opened"


def test_jobs_waiting_behind_a_failed_one_are_not_run(lanes: OrderedLanes) -> None:
    opened, _ = gate()
    ran: list[str] = []

    def fails() -> None:
        assert opened.wait(10)
        raise BrokerUnavailableError("broker-1 is down")

    failing = lanes.submit("q0", fails)
    behind = [lanes.submit("q0", lambda i=i: ran.append(f"behind-{i}")) for i in range(3)]
    elsewhere = lanes.submit("q1", lambda: ran.append("q1"))
    opened.set()
    with pytest.raises(BrokerUnavailableError):
        failing.result(10)
    for future in behind:
        with pytest.raises(NotSentError, match=r"earlier request .* failed \(BROKER_UNAVAILABLE: broker-1 is down\)"):
            future.result(10)
    assert elsewhere.result(10) is None
    assert ran == ["q1"]
    assert NotSentError.retriable


def test_a_job_submitted_after_the_failure_was_reported_runs(lanes: OrderedLanes) -> None:
    def fails() -> None:
        raise BrokerUnavailableError("down")

    with pytest.raises(BrokerUnavailableError):
        lanes.submit("q0", fails).result(10)
    assert lanes.submit("q0", lambda: "sent").result(10) == "sent"


def test_a_job_submitted_from_the_failed_jobs_callback_runs(lanes: OrderedLanes) -> None:
    retried: list[object] = []

    def fails() -> None:
        raise BrokerUnavailableError("down")

    def retry(_: object) -> None:
        retried.append(lanes.submit("q0", lambda: "retried"))

    lanes.submit("q0", fails).add_done_callback(retry)
    assert lanes.wait(10) == 0
    assert retried[0].result(10) == "retried"  # type: ignore[attr-defined]


def test_submit_blocks_while_max_pending_jobs_wait() -> None:
    lanes = OrderedLanes(workers=2, max_pending=2)
    try:
        opened, held = gate()
        futures = [lanes.submit("q0", held), lanes.submit("q0", lambda: "second")]
        submitted = threading.Event()

        def third() -> None:
            futures.append(lanes.submit("q1", lambda: "third"))
            submitted.set()

        threading.Thread(target=third).start()
        assert not submitted.wait(0.3), "a third job was taken while two waited"
        opened.set()
        assert submitted.wait(10)
        assert [f.result(10) for f in futures] == ["opened", "second", "third"]
    finally:
        lanes.close()


def test_wait_returns_the_jobs_still_pending_after_its_timeout(lanes: OrderedLanes) -> None:
    opened, held = gate()
    lanes.submit("q0", held)
    lanes.submit("q0", lambda: None)
    assert lanes.wait(0.05) == 2
    opened.set()
    assert lanes.wait(10) == 0
    assert lanes.wait(0) == 0


def test_a_cancelled_job_is_skipped_and_its_lane_goes_on(lanes: OrderedLanes) -> None:
    opened, held = gate()
    lanes.submit("q0", held)
    cancelled = lanes.submit("q0", lambda: pytest.fail("a cancelled job ran"))
    last = lanes.submit("q0", lambda: "after")
    assert cancelled.cancel()
    opened.set()
    assert last.result(10) == "after"
    assert lanes.wait(10) == 0


def test_close_runs_the_pending_jobs_then_refuses_new_ones() -> None:
    lanes = OrderedLanes(workers=2, max_pending=8)
    futures = [lanes.submit("q0", lambda i=i: (time.sleep(0.01), i)[1]) for i in range(5)]
    lanes.close()
    assert [f.result(0) for f in futures] == list(range(5))
    with pytest.raises(InvalidArgumentError, match="closed"):
        lanes.submit("q0", lambda: None)


def test_max_pending_below_one_is_refused_naming_it() -> None:
    with pytest.raises(InvalidArgumentError, match="max_pending must be at least 1, got 0"):
        OrderedLanes(max_pending=0)
