"""client/async_sends.py: an asynchronous batch send's per-queue parts merged into what
send_batch returns or raises, with input row indices."""

from __future__ import annotations

from concurrent.futures import Future

import numpy as np
import pytest

from staticmq_spark.backends.types import SendResult
from staticmq_spark.client.async_sends import gather_parts
from staticmq_spark.errors import BrokerUnavailableError, NotSentError, PartialSendError


def done(value: list[SendResult] | BaseException) -> Future[list[SendResult]]:
    future: Future[list[SendResult]] = Future()
    if isinstance(value, BaseException):
        future.set_exception(value)
    else:
        future.set_result(value)
    return future


def result(queue: int, offset: int, count: int, rows: tuple[int, ...] | None = None) -> SendResult:
    return SendResult("t", queue, offset, count, "broker-0", -1, 0, rows=rows)


def test_parts_results_name_the_input_rows_they_carried() -> None:
    pending: Future[list[SendResult]] = Future()
    parts = [
        (np.array([0, 2, 4]), done([result(0, 10, 3)])),
        (np.array([1, 3]), pending),
    ]
    whole = gather_parts("t", parts)
    assert not whole.done()
    pending.set_result([result(1, 7, 1, rows=(0,)), result(1, 8, 1, rows=(1,))])
    assert [(r.queue_id, r.queue_offset, r.rows) for r in whole.result(0)] == [
        (0, 10, (0, 2, 4)),
        (1, 7, (1,)),
        (1, 8, (3,)),
    ]


def test_a_failed_part_makes_a_partial_send_error_naming_input_rows() -> None:
    down = BrokerUnavailableError("broker-1 is down")
    held = NotSentError("not sent")
    parts = [
        (np.array([1, 3]), done([result(0, 5, 2)])),
        (np.array([0, 4]), done(down)),
        (np.array([2, 5]), done(PartialSendError("p", [result(2, 9, 1, rows=(1,))], {0: held}))),
    ]
    with pytest.raises(PartialSendError) as caught:
        gather_parts("t", parts).result(0)
    assert [r.rows for r in caught.value.stored] == [(1, 3), (5,)]
    assert caught.value.failed == {0: down, 4: down, 2: held}
    assert "3 rows stored in 2 requests, 3 rows failed" in caught.value.message


def test_one_part_is_the_batch_itself_and_its_error_is_raised_unchanged() -> None:
    down = BrokerUnavailableError("broker-1 is down")
    only = done(down)
    assert gather_parts("t", [(np.array([0, 1]), only)]) is only


def test_a_batch_of_no_rows_is_done_at_once_with_no_results() -> None:
    assert gather_parts("t", []).result(0) == []
