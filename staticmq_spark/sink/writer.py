"""The sink's writers: streaming (one transaction per micro-batch, identified by the query id,
which survives restarts from the checkpoint) and batch (one transaction per write)."""

from __future__ import annotations

import gc
import logging
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from staticmq_spark.cluster import capabilities_of
from staticmq_spark.errors import InternalError
from staticmq_spark.sink.committer import SinkCommitMessage, commit_batch
from staticmq_spark.sink.direct import DirectCommitMessage, write_direct
from staticmq_spark.sink.options import SinkOptions
from staticmq_spark.sink.stager import Stager

log = logging.getLogger(__name__)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the block. A task's staging loop makes no
    reference cycles, but the objects it allocates (per Arrow batch, per request) set off
    collections that walk the whole long-lived heap of the Python worker (pyspark, pyarrow,
    grpc): 15-20% of the worker's CPU time in the sink benchmark. Cycles made meanwhile
    are collected when the collector runs again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_HEAP_FROZEN = False


def freeze_long_lived_heap() -> None:
    """Once per Python worker process: collect, then move every object alive (the modules of
    pyspark, pyarrow, grpc, ... and their data) out of the collector's sight (gc.freeze). A
    reused pyspark worker runs a full collection after every task; over the whole heap that
    took 40-50 ms per task in the sink benchmark, over what a task leaves it 10-15 ms. Objects
    alive now are never freed by the cyclic collector, even if they become garbage later: the
    heap of a worker that has imported everything is long-lived by nature."""
    global _HEAP_FROZEN
    if not _HEAP_FROZEN:
        gc.collect()
        gc.freeze()
        _HEAP_FROZEN = True


def _stage_all(opts: SinkOptions, writer: str, batch: int, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
    freeze_long_lived_heap()
    with gc_paused():
        stager = Stager(opts, writer, batch)
        for rb in iterator:
            stager.stage_arrow(rb)
        stager.flush()
    return SinkCommitMessage(writer, batch, stager.staging_id, stager.staged(), stager.rows)


def _direct(messages: Sequence[WriterCommitMessage | None], batch: int) -> bool:
    """Rows sent directly (a backend without staging) are visible already: nothing to commit."""
    direct = [m for m in messages if isinstance(m, DirectCommitMessage)]
    if direct:
        log.info("staticmq sink: batch %d sent %d row(s) directly", batch, sum(m.rows for m in direct))
    return bool(direct)


class StaticMQStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        ctx = TaskContext.get()
        query_id = ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None
        batch_id = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
        if ctx is None or not query_id or batch_id is None:
            raise InternalError("the staticmq stream writer runs outside a streaming micro-batch task")
        if not capabilities_of(self.opts.namesrv).two_phase_staging:
            return write_direct(self.opts, query_id, int(batch_id), ctx.partitionId(), iterator)
        return _stage_all(self.opts, query_id, int(batch_id), iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        if _direct(messages, batchId):
            return
        writers = {m.writer for m in messages if isinstance(m, SinkCommitMessage)}
        if len(writers) > 1:
            raise InternalError(f"one micro-batch staged under several query ids: {sorted(writers)}")
        if writers:
            commit_batch(self.opts, writers.pop(), batchId, messages)

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        if not capabilities_of(self.opts.namesrv).two_phase_staging:
            log.warning(
                "staticmq sink: micro-batch %d aborted; rows its tasks sent stay visible (at least once)", batchId
            )
            return
        log.warning("staticmq sink: micro-batch %d aborted; its staged rows are never made visible", batchId)


class StaticMQBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.writer = f"batch-{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if not capabilities_of(self.opts.namesrv).two_phase_staging:
            ctx = TaskContext.get()
            return write_direct(self.opts, self.writer, 0, ctx.partitionId() if ctx else 0, iterator)
        return _stage_all(self.opts, self.writer, 0, iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        if _direct(messages, 0):
            return
        commit_batch(self.opts, self.writer, 0, messages)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        log.warning("staticmq sink: write %s aborted; its staged rows are never made visible", self.writer)
