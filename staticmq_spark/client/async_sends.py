"""One asynchronous batch send made of per-queue parts: its Future resolves when every part has,
to what `Producer.send_batch` would have returned or raised for the same rows (results whose
`rows` name input rows; PartialSendError naming the stored requests and each failed row's error;
the error of the only request unchanged)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future

from staticmq_spark.backends.send_parts import Part, merged
from staticmq_spark.backends.types import SendResult


def gather_parts(topic: str, parts: Sequence[Part]) -> Future[list[SendResult]]:
    """The Future of the whole batch (one part: that part's own Future)."""
    if len(parts) == 1:
        return parts[0][1]
    whole: Future[list[SendResult]] = Future()
    whole.set_running_or_notify_cancel()
    if not parts:  # no rows (a Producer refuses an empty batch before it gets here)
        whole.set_result([])
        return whole
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
