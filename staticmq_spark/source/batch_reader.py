"""The batch reader (`spark.read.format("staticmq")`): [startingOffsets, endingOffsets) resolved
once at planning, one partition per topic and logic queue, read like the stream."""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSourceReader

from staticmq_spark.backends import open_backend
from staticmq_spark.backends.retry import with_retries
from staticmq_spark.errors import InvalidOptionError
from staticmq_spark.source.executor import read_partition, read_task
from staticmq_spark.source.options import SourceOptions
from staticmq_spark.source.partition import QueuePartition
from staticmq_spark.source.planner import plan_partitions, resolve_offsets, settings_of
from staticmq_spark.source.subscription import Subscription


class StaticMQBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.opts = options

    def partitions(self) -> list[QueuePartition]:
        def plan() -> list[QueuePartition]:
            access = open_backend(self.opts.namesrv, self.opts.security).reader()
            try:
                snaps = Subscription(self.opts).snapshots(access)
                ranges = {
                    topic: (
                        resolve_offsets(snap, self.opts.starting, access, "startingOffsets"),
                        resolve_offsets(snap, self.opts.ending, access, "endingOffsets"),
                    )
                    for topic, snap in snaps.items()
                }
            finally:
                access.close()
            parts: list[QueuePartition] = []
            for topic, (starts, ends) in ranges.items():
                backwards = {q: (starts[q], ends[q]) for q in starts if ends[q] < starts[q]}
                if backwards:
                    raise InvalidOptionError(
                        f"endingOffsets lie before startingOffsets for topic {topic!r} logic queue(s) {backwards} "
                        "(queue: (start, end))"
                    )
                parts += plan_partitions(snaps[topic], starts, ends, settings_of(self.opts))
            return parts

        return with_retries("planning the batch read", plan, self.opts.retry_timeout_ms / 1000)

    def read(self, partition: QueuePartition) -> Any:  # type: ignore[override]
        return read_task(read_partition(partition))
