"""The batch reader (`spark.read.format("staticmq")`): [startingOffsets, endingOffsets) resolved
once at planning, one partition per logic queue, read like the stream."""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSourceReader

from staticmq_spark.client.retry import with_retries
from staticmq_spark.cluster import open_cluster
from staticmq_spark.errors import InvalidOptionError
from staticmq_spark.source.executor import read_partition
from staticmq_spark.source.options import SourceOptions
from staticmq_spark.source.partition import QueuePartition
from staticmq_spark.source.planner import plan_partitions, resolve_offsets, settings_of
from staticmq_spark.source.snapshot import take_snapshot


class StaticMQBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.opts = options

    def partitions(self) -> list[QueuePartition]:
        def plan() -> list[QueuePartition]:
            access = open_cluster(self.opts.namesrv, self.opts.security)
            try:
                snap = take_snapshot(access, self.opts.topic)
                starts = resolve_offsets(snap, self.opts.starting, access, "startingOffsets")
                ends = resolve_offsets(snap, self.opts.ending, access, "endingOffsets")
            finally:
                access.close()
            backwards = {q: (starts[q], ends[q]) for q in starts if ends[q] < starts[q]}
            if backwards:
                raise InvalidOptionError(
                    f"endingOffsets lie before startingOffsets for logic queue(s) {backwards} (queue: (start, end))"
                )
            return plan_partitions(snap, starts, ends, settings_of(self.opts))

        return with_retries("planning the batch read", plan, self.opts.retry_timeout_ms / 1000)

    def read(self, partition: QueuePartition) -> Any:  # type: ignore[override]
        return read_partition(partition)
