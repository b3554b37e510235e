"""One asynchronous batch send made of per-queue parts: its Future resolves when every part has,
to what `Producer.send_batch` would have returned or raised for the same rows (results whose
`rows` name input rows; PartialSendError naming the stored requests and each failed row's error;
the error of the only request unchanged)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from staticmq_spark.backends.types import SendResult
from staticmq_spark.errors import PartialSendError, StaticMQError

Part = tuple[npt.NDArray[np.int64], "Future[list[SendResult]]"]  # input rows of the part, its send


def gather_parts(topic: str, parts: Sequence[Part]) -> Future[list[SendResult]]:
    """The Future of the whole batch (one part: that part's own Future)."""
    if len(parts) == 1:
        return parts[0][1]
    whole: Future[list[SendResult]] = Future()
    whole.set_running_or_notify_cancel()
    left = [len(parts)]
    lock = threading.Lock()

    def one_done(_: Future[list[SendResult]]) -> None:
        with lock:
            left[0] -= 1
            if left[0]:
                return
        try:
            whole.set_result(merged(topic, parts))
        except BaseException as exc:  # the merged outcome's error, or a bug in a part
            whole.set_exception(exc)

    for _, future in parts:
        future.add_done_callback(one_done)
    return whole


def merged(topic: str, parts: Sequence[Part]) -> list[SendResult]:
    """Every part's results with input row indices, or PartialSendError if any row failed."""
    stored: list[SendResult] = []
    failed: dict[int, StaticMQError] = {}
    for rows, future in parts:
        exc = future.exception()
        if exc is None:
            stored.extend(_renamed(r, rows) for r in future.result())
        elif isinstance(exc, PartialSendError):
            stored.extend(_renamed(r, rows) for r in exc.stored)
            failed.update((int(rows[i]), e) for i, e in exc.failed.items())
        elif isinstance(exc, StaticMQError):
            failed.update(dict.fromkeys(rows.tolist(), exc))
        else:
            raise exc  # a bug, not a send outcome
    if failed:
        raise PartialSendError.of(topic, stored, failed)
    return stored


def _renamed(result: SendResult, rows: npt.NDArray[np.int64]) -> SendResult:
    """`result` of a part, its `rows` (part positions; none: the part's only request) as input rows."""
    within = result.rows if result.rows is not None else range(result.count)
    return replace(result, rows=tuple(rows[list(within)].tolist()))
