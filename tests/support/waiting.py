"""The one way tests wait for something to happen: poll its real condition until it holds or
time runs out, then fail naming what was awaited and the last value seen.

A fixed `time.sleep` in a test is only for time that is itself the behaviour under test (an
invisible time or a lease running out, a producer's pace, load kept on during a fault); such a
sleep says so in a comment next to it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_SHOWN = 500  # characters of the last value quoted in a failure


class WaitTimeout(AssertionError):
    """A condition did not hold in time (an AssertionError, so pytest reports it as a failure)."""


def wait_until(
    predicate: Callable[[], T],
    timeout_s: float,
    *,
    interval_s: float = 0.05,
    message: str | Callable[[], str] = "a condition",
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Call `predicate` every `interval_s` until it returns something truthy, and return that.

    The predicate is always called at least once, and once more at the deadline. `message`
    names what is awaited (a callable is asked only on failure, so it can describe the state
    then). Exceptions of the `ignore` types mean "not yet" (e.g. a route the name server does
    not know yet) and are reported as the last value if time runs out; any other exception
    propagates at once."""
    if timeout_s < 0 or interval_s <= 0:
        raise ValueError(f"timeout_s must be >= 0 and interval_s > 0, got {timeout_s} and {interval_s}")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value: object = predicate()
        except ignore as exc:
            value = exc
        else:
            if value:
                return value  # type: ignore[return-value]
        left = deadline - time.monotonic()
        if left <= 0:
            what = message() if callable(message) else message
            raise WaitTimeout(f"timed out after {timeout_s:g}s waiting for {what}; last value seen: {_show(value)}")
        time.sleep(min(interval_s, left))


def _show(value: object) -> str:
    text = f"{type(value).__name__}: {value}" if isinstance(value, BaseException) else repr(value)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} characters)"
