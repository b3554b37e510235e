"""The one retry loop (`backends/retry.py`): what it retries, for how long, how long it waits, and
what it raises when it gives up. Waits are recorded, not slept: no test here depends on timing."""

from __future__ import annotations

import pytest

from staticmq_spark.backends import retry
from staticmq_spark.backends.retry import retry_read, retrying
from staticmq_spark.errors import BrokerUnavailableError, InvalidArgumentError, StaticMQError


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(retry.time, "sleep", slept.append)
    return slept


def failing(times: int, error: StaticMQError, answer: str = "ok") -> tuple[list[int], object]:
    attempts: list[int] = []

    def call(attempt: int) -> str:
        attempts.append(attempt)
        if len(attempts) <= times:
            raise error
        return answer

    return attempts, call


def test_retrying_retries_a_transient_failure_until_the_call_answers(waits: list[float]) -> None:
    attempts, call = failing(3, BrokerUnavailableError("down"))
    assert retrying("read", 60.0, call) == "ok"  # type: ignore[arg-type]
    assert attempts == [0, 1, 2, 3]  # the attempt number lets a caller refresh addresses
    assert waits == [retry.backoff_s(1), retry.backoff_s(2), retry.backoff_s(3)]


def test_retrying_raises_a_failure_its_rule_does_not_retry_at_once(waits: list[float]) -> None:
    attempts, call = failing(1, InvalidArgumentError("bad"))
    with pytest.raises(InvalidArgumentError):
        retrying("read", 60.0, call)  # type: ignore[arg-type]
    assert attempts == [0] and waits == []


def test_retrying_takes_the_callers_rule_of_what_is_transient(waits: list[float]) -> None:
    attempts, call = failing(2, InvalidArgumentError("not yet"))
    assert retrying("read", 60.0, call, retriable=lambda exc: "not yet" in exc.message) == "ok"  # type: ignore[arg-type]
    attempts, call = failing(1, BrokerUnavailableError("down"))
    with pytest.raises(BrokerUnavailableError):
        retrying("read", 60.0, call, retriable=lambda exc: False)  # type: ignore[arg-type]
    assert attempts == [0]


def test_retrying_waits_at_least_the_least_wait_it_is_given(waits: list[float]) -> None:
    _, call = failing(2, BrokerUnavailableError("down"))
    retrying("forward", 60.0, call, min_wait_s=1.0)  # type: ignore[arg-type]
    assert waits == [1.0, 1.0]


def test_retrying_gives_up_after_its_timeout_with_the_last_failure(waits: list[float]) -> None:
    attempts, call = failing(10**6, BrokerUnavailableError("still down"))
    with pytest.raises(BrokerUnavailableError, match="still down"):
        retrying("read", 0.0, call)  # type: ignore[arg-type]
    assert len(attempts) <= 2


def test_retry_read_names_what_was_read_and_the_attempts_when_it_gives_up(waits: list[float]) -> None:
    _, call = failing(10**6, BrokerUnavailableError("still down"))
    with pytest.raises(BrokerUnavailableError, match=r"reading t queue 0 failed after \d+ attempt\(s\): still down"):
        retry_read("reading t queue 0", 0.0, call)  # type: ignore[arg-type]
