"""The sink's writers: streaming (one transaction per micro-batch, identified by the query id,
which survives restarts from the checkpoint) and batch (one transaction per write). What a write
guarantees is the backend's (backends.api.SinkWriter.guarantee): staged and committed once, or
sent directly (at least once)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from staticmq_spark.backends import SinkWriter, TaskWrite, shared_backend
from staticmq_spark.errors import InternalError
from staticmq_spark.session.features import StreamArrowWriter
from staticmq_spark.sink.options import SinkOptions
from staticmq_spark.sink.placement import placed_rows
from staticmq_spark.workers.heap import freeze_long_lived_heap, gc_paused

log = logging.getLogger(__name__)


class SinkCommitMessage(WriterCommitMessage):
    """One task's write, as Spark carries it from the executor to the driver's commit."""

    def __init__(self, task: TaskWrite) -> None:
        self.task = task


def _sink(opts: SinkOptions) -> SinkWriter:
    """This process's sink of the cluster (executors keep it across tasks)."""
    return shared_backend(opts.namesrv, opts.security).sink(opts.delivery)


def _write(
    opts: SinkOptions, writer: str, batch: int, partition: int, rows: Iterator[pa.RecordBatch]
) -> SinkCommitMessage:
    freeze_long_lived_heap()
    with gc_paused():
        sink = _sink(opts)
        placed = placed_rows(opts.topic, sink.total_queues, partition, rows)
        return SinkCommitMessage(sink.write_task(opts, writer, batch, partition, placed))


def _commit(opts: SinkOptions, writer: str, batch: int, messages: Sequence[WriterCommitMessage | None]) -> None:
    tasks = [m.task for m in messages if isinstance(m, SinkCommitMessage)]
    sink = _sink(opts)
    rows = sink.commit(opts, writer, batch, tasks)
    log.info(
        "staticmq sink (%s): batch %d of %s: %d row(s) written, %d made visible by the commit",
        sink.guarantee,
        batch,
        writer,
        sum(t.rows for t in tasks),
        rows,
    )


class StaticMQStreamWriter(StreamArrowWriter):  # type: ignore[misc]
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        ctx = TaskContext.get()
        query_id = ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None
        batch_id = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
        if ctx is None or not query_id or batch_id is None:
            raise InternalError("the staticmq stream writer runs outside a streaming micro-batch task")
        return _write(self.opts, query_id, int(batch_id), ctx.partitionId(), iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        writers = {m.task.writer for m in messages if isinstance(m, SinkCommitMessage)}
        if len(writers) > 1:
            raise InternalError(f"one micro-batch written under several query ids: {sorted(writers)}")
        if writers:
            _commit(self.opts, writers.pop(), batchId, messages)

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("staticmq sink: micro-batch %d aborted; %s", batchId, _sink(self.opts).aborted())


class StaticMQBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.writer = f"batch-{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        ctx = TaskContext.get()
        return _write(self.opts, self.writer, 0, ctx.partitionId() if ctx else 0, iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        _commit(self.opts, self.writer, 0, messages)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        log.warning("staticmq sink: write %s aborted; %s", self.writer, _sink(self.opts).aborted())
