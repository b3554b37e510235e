"""A driver's commit of a staged micro-batch in a process of its own, killed at a kill point.

python -m tests.support.staged_commit_child NAMESRV TASKS_PICKLE STEP N [SLEEP_S]

TASKS_PICKLE holds (WriteSettings, writer, batch, [TaskWrite]). The process commits them with the
RocketMQ backend's exactly-once (staged) sink and dies with os._exit(9) - no clean-up, no answers
read - at the N-th time the sink reaches STEP ("deciding", "decided", "sent", "forwarded"), after
SLEEP_S (so a request just sent reaches the broker first). STEP "none": the commit runs to its end
and the process prints "COMMITTED <rows>"."""

from __future__ import annotations

import os
import pickle
import sys
import threading
import time

from staticmq_spark.backends.registry import open_backend
from staticmq_spark.backends.rocketmq.sinks.staged_sink import RocketMQStagedSink


def main() -> None:
    namesrv, path, step, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    sleep_s = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    with open(path, "rb") as f:
        settings, writer, batch, tasks = pickle.load(f)
    backend = open_backend(namesrv)
    sink = backend.sink()
    assert isinstance(sink, RocketMQStagedSink)
    seen = 0
    lock = threading.Lock()

    def hook(at: str, what: object) -> None:
        nonlocal seen
        if at != step:
            return
        with lock:
            seen += 1
            if seen == n:
                time.sleep(sleep_s)
                os._exit(9)

    sink.hook = hook
    rows = sink.commit(settings, writer, batch, tasks)
    print(f"COMMITTED {rows}", flush=True)
    backend.close()


if __name__ == "__main__":
    main()
