"""tests.support.waiting.wait_until: returns the predicate's value, fails naming what it awaited and the
last value seen, and treats only the exceptions it is told to ignore as "not yet"."""

from __future__ import annotations

import itertools

import pytest

from tests.support.waiting import WaitTimeout, wait_until


def test_returns_the_first_truthy_value_of_the_predicate() -> None:
    values = iter([0, None, [], "ready"])
    assert wait_until(lambda: next(values), 5, interval_s=0.001) == "ready"


def test_a_condition_that_already_holds_is_checked_once_without_waiting() -> None:
    calls = itertools.count()
    assert wait_until(lambda: next(calls) + 1, 0) == 1


def test_timing_out_names_what_was_awaited_and_the_last_value_seen() -> None:
    values = itertools.count()
    with pytest.raises(WaitTimeout, match=r"timed out after 0.05s waiting for the answer; last value seen: 0") as info:
        wait_until(lambda: 0 * next(values), 0.05, interval_s=0.01, message="the answer")
    assert isinstance(info.value, AssertionError), "pytest reports it as a failed assertion"


def test_a_message_callable_describes_the_state_at_the_time_of_failure() -> None:
    seen: list[int] = []
    with pytest.raises(WaitTimeout, match=r"waiting for 3 items; got \[1, 1"):
        wait_until(
            lambda: seen.append(1) or len(seen) >= 1000, 0.05, interval_s=0.01, message=lambda: f"3 items; got {seen}"
        )


def test_ignored_exceptions_mean_not_yet_and_are_reported_as_the_last_value() -> None:
    attempts = itertools.count()

    def flaky() -> str:
        if next(attempts) < 2:
            raise KeyError("no route yet")
        return "route"

    assert wait_until(flaky, 5, interval_s=0.001, ignore=(KeyError,)) == "route"
    with pytest.raises(WaitTimeout, match=r"last value seen: KeyError: 'still none'"):
        wait_until(lambda: {}["still none"], 0.02, interval_s=0.01, ignore=(KeyError,))


def test_other_exceptions_propagate_at_once() -> None:
    calls = itertools.count()

    def broken() -> bool:
        next(calls)
        raise RuntimeError("the process exited")

    with pytest.raises(RuntimeError, match="the process exited"):
        wait_until(broken, 5, ignore=(KeyError,))
    assert next(calls) == 1


class LongFalsy:
    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "x" * 10_000


def test_a_long_last_value_is_cut_in_the_message() -> None:
    with pytest.raises(WaitTimeout, match=r"\.\.\. \(10000 characters\)$") as info:
        wait_until(LongFalsy, 0.01)
    assert len(str(info.value)) < 700
