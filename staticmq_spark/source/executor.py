"""Executor side of the source: read a partition's segments from their brokers with physical
pulls and yield Arrow batches. Clients live per Python worker process (read() runs on a pickled
reader: nothing but the partition reaches it)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from staticmq_spark.backends import ClusterReader, PullStatus, shared_backend
from staticmq_spark.backends.types import MessageColumns
from staticmq_spark.errors import DataLossError
from staticmq_spark.protocol.consume.tag_expression import TagFilter, parse_tag_expression
from staticmq_spark.protocol.consume.tag_filter import tag_matches
from staticmq_spark.protocol.rows import arrays
from staticmq_spark.protocol.security.auth import PLAIN, ClientSecurity
from staticmq_spark.source.partition import QueuePartition, SegmentRef
from staticmq_spark.source.schema import arrow_schema, to_spark_batch
from staticmq_spark.workers.heap import frozen_after

log = logging.getLogger(__name__)


def cluster_for(namesrv: str, security: ClientSecurity = PLAIN) -> ClusterReader:
    """One reader per Python worker, address and keys (read() gets only the partition)."""
    return shared_backend(namesrv, security).reader()


def read_partition(p: QueuePartition) -> Iterator[pa.RecordBatch]:
    """The partition's rows in batches of about pullBatchSize rows: a backend that answers with
    fewer rows per pull (one that caps a pull answer) still hands Spark few, large batches."""
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in _pulled_batches(p):
        pending.append(batch)
        rows += batch.num_rows
        if rows >= p.settings.pull_batch_size:
            yield _combined(pending)
            pending, rows = [], 0
    if pending:
        yield _combined(pending)


def read_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A read task's rows on a Python worker (`read()` of the readers): once the worker's first
    read has handed Spark its rows, its long-lived heap is frozen, so pyspark's daemon does not
    walk it again after every task: 11-15 ms per read task of a running query with small
    triggers on a busy 2-core machine, 0.3-0.4 ms frozen
    (docs/investigations/2026-11-27-source-worker-gc.md)."""
    return frozen_after(batches)


def read_partitions(parts: tuple[QueuePartition, ...]) -> Iterator[pa.RecordBatch]:
    """Several logic queues' partitions, one after the other (a micro-batch read as one partition)."""
    for p in parts:
        yield from read_partition(p)


def _combined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


def _pulled_batches(p: QueuePartition) -> Iterator[pa.RecordBatch]:
    s = p.settings
    access = cluster_for(s.namesrv, s.security)
    schema = arrow_schema(s.include_properties)
    wanted = parse_tag_expression(s.tags)
    for seg in p.segments:
        offset = seg.physical_start
        while offset < seg.physical_end:
            want = min(s.pull_batch_size, seg.physical_end - offset)
            got = access.pull_physical(
                p.topic,
                seg.bname,
                seg.addr,
                seg.queue,
                offset,
                want,
                s.retry_timeout_ms / 1000,
                s.include_properties,
                until=seg.physical_end,
                subscription=s.tags,
            )
            if got.status is PullStatus.FOUND and got.messages is not None:
                messages = got.messages
                first = int(messages.queue_offsets[0])
                if first > offset and wanted.takes_all:  # with a tag filter, gaps are skipped messages
                    _data_loss(p, seg, offset, first)
                keep = int(np.searchsorted(messages.queue_offsets, seg.physical_end))
                past_end = keep < messages.count
                if not wanted.takes_all:
                    messages = _matching(messages, wanted, keep)
                    keep = messages.count
                if keep:
                    yield to_spark_batch(
                        messages,
                        topic=p.topic,
                        logic_queue=p.queue,
                        offset_delta=seg.offset_delta,
                        bname=seg.bname,
                        schema=schema,
                        include_properties=s.include_properties,
                        limit=keep,
                    )
                offset = seg.physical_end if past_end else max(got.next_offset, offset + 1)
            elif got.status is PullStatus.RETRY_AT_NEXT:  # a message being removed, or a hole: go on
                if got.next_offset <= offset:
                    time.sleep(0.05)
                offset = max(offset, got.next_offset)
            elif got.status is PullStatus.OFFSET_MOVED and got.next_offset > offset:
                _data_loss(p, seg, offset, min(got.next_offset, seg.physical_end))
                offset = got.next_offset
            else:  # the planned messages are not there (the broker lost unflushed data)
                _data_loss(p, seg, offset, seg.physical_end)
                break


def _matching(messages: MessageColumns, wanted: TagFilter, limit: int) -> MessageColumns:
    """The first `limit` messages whose tag passes the filter (a broker filters by tag code, which
    two tags can share, and keeps messages stored before tag codes existed)."""
    head = messages.columns.slice(0, limit)
    mask = tag_matches(wanted, head.column("tags"))
    keep = arrays.flag_values(mask)
    return MessageColumns(
        head.filter(mask), messages.queue_offsets[:limit][keep], messages.store_timestamps[:limit][keep]
    )


def _data_loss(p: QueuePartition, seg: SegmentRef, physical_from: int, physical_to: int) -> None:
    lo, hi = physical_from + seg.offset_delta, physical_to + seg.offset_delta
    message = (
        f"topic {p.topic!r} logic queue {p.queue}: messages at logic offsets [{lo}, {hi}) "
        f"(physical {seg.bname}/{seg.queue} [{physical_from}, {physical_to})) were removed before they were read"
    )
    if p.settings.fail_on_data_loss:
        raise DataLossError(message + " (failOnDataLoss=true; set failOnDataLoss=false to skip lost messages)")
    log.warning("%s; skipped (failOnDataLoss=false)", message)
