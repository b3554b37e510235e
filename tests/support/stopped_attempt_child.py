"""A sink task attempt in a process of its own that stops itself half-way (SIGSTOP).

python -m tests.support.stopped_attempt_child NAMESRV SETTINGS_PICKLE OUT_PICKLE

SETTINGS_PICKLE holds (WriteSettings, writer, batch, partition, [pa.RecordBatch]). The process
writes the batches with the RocketMQ backend's exactly-once (staged) sink as a Spark task would; once
the first batch is staged (the sink asks for the second) it prints "STAGED" and stops itself with
SIGSTOP. After SIGCONT it stages the rest and pickles its TaskWrite to OUT_PICKLE."""

from __future__ import annotations

import os
import pickle
import signal
import sys
from collections.abc import Iterator

import pyarrow as pa

from staticmq_spark.backends.registry import open_backend
from staticmq_spark.backends.rocketmq.sinks.staged_sink import RocketMQStagedSink
from staticmq_spark.sink.placement import placed_rows


def main() -> None:
    namesrv, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(path, "rb") as f:
        settings, writer, batch, partition, batches = pickle.load(f)
    backend = open_backend(namesrv)
    sink = backend.sink()
    assert isinstance(sink, RocketMQStagedSink)

    def stopping(items: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for i, rb in enumerate(items):
            if i == 1:  # the first batch is staged: the sink asks for the next
                print("STAGED", flush=True)
                os.kill(os.getpid(), signal.SIGSTOP)
            yield rb

    task = sink.write_task(
        settings, writer, batch, partition, placed_rows(settings.topic, sink.total_queues, partition, stopping(batches))
    )
    with open(out, "wb") as dump:
        pickle.dump(task, dump)
    backend.close()


if __name__ == "__main__":
    main()
