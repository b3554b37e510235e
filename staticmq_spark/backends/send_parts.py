"""A batch send made of parts (one per logic queue, or per byte-sized piece): each part's outcome
merged into the batch's, with input row indices. Shared by the staticmq Producer (its parallel
requests) and `Producer.send_batch_async` (its per-queue lanes)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from staticmq_spark.backends.types import SendResult
from staticmq_spark.errors import PartialSendError, StaticMQError

Part = tuple[npt.NDArray[np.int64], "Future[list[SendResult]]"]  # input rows of the part, its send


def merged(topic: str, parts: Sequence[Part]) -> list[SendResult]:
    """Every part's results (waiting for each) with `rows` naming input rows, or PartialSendError
    naming the stored requests and each failed row's error (a part's own PartialSendError included)."""
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
