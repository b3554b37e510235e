"""The error tree: every class has a unique code, and codes map back to classes."""

from __future__ import annotations

from staticmq_spark import errors


def _classes() -> list[type[errors.StaticMQError]]:
    found = []
    todo = [errors.StaticMQError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_error_class_has_a_unique_code() -> None:
    codes = [c.code for c in _classes()]
    assert len(codes) == len(set(codes))


def test_error_for_code_returns_the_class_that_names_it() -> None:
    for cls in _classes():
        assert errors.error_for_code(cls.code) is cls


def test_unknown_code_maps_to_the_base_class() -> None:
    assert errors.error_for_code("NO_SUCH_CODE") is errors.StaticMQError


def test_retriable_errors_are_the_transient_ones() -> None:
    retriable = {c.__name__ for c in _classes() if c.retriable}
    assert retriable == {
        "NotLeaderError",
        "QueueUnavailableError",
        "BrokerUnavailableError",
        "LockHeldError",
        "DiskFullError",
        "NotSentError",
    }
