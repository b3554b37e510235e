"""Small micro-batches read in the query's driver-side process (option `driverReadMaxMessages`).

Each Spark partition of a Python source is a Python read task: a worker round trip that costs
20-40 ms of a trigger on 2 cores, with or without messages to read. pyspark's runner for a query's
source has one more way to hand Spark a micro-batch, made for `SimpleDataSourceStreamReader`: the
source's driver-side process reads the rows itself, sends them with the plan, and Spark keeps them
in its block manager, from where a JVM task reads them (no Python worker). The runner takes that
way only for readers that are instances of its (private) wrapper class, asking them
`getCache(start, end)` right after `partitions(start, end)`. This reader is one: a micro-batch of
at most `driverReadMaxMessages` messages is planned as one partition holding every logic queue's
range, and its read starts as soon as `latestOffset` has chosen the micro-batch's end, in a
thread of the runner, so that it overlaps Spark's offset-log write (`walCommit`, ~30 ms) and
`getCache` mostly finds the rows read; a larger one is planned and read as usual, one partition per
logic queue. If Spark ever runs the one partition as a task instead (no rows were
sent with the plan), the task reads every queue of it: nothing is lost either way.

What changes with it (the option is off by default): a micro-batch read on the driver is one Spark
partition holding the logic queues one after the other, not one partition per logic queue; and
pyspark's runner asks a reader of this kind for no latest offset, so the query progress shows no
lag (`reportLatestOffset`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.datasource_internal import _SimpleStreamReaderWrapper

from staticmq_spark.session.features import ReadLimit
from staticmq_spark.source.options import SourceOptions
from staticmq_spark.source.partition import QueuePartition
from staticmq_spark.source.stream_reader import StaticMQStreamReader

log = logging.getLogger(__name__)


class QueuesPartition(InputPartition):
    """A micro-batch's logic queues as one Spark partition, in planning order."""

    def __init__(self, parts: tuple[QueuePartition, ...]) -> None:
        super().__init__(tuple((p.topic, p.queue) for p in parts))
        self.parts = parts

    @property
    def messages(self) -> int:
        return sum(messages_in(p) for p in self.parts)

    def __repr__(self) -> str:
        return f"QueuesPartition({len(self.parts)} queue(s), {self.messages} message(s))"


def messages_in(p: QueuePartition) -> int:
    """Messages in a partition's physical segments (a remap's jump in logic offsets holds none)."""
    return sum(s.physical_end - s.physical_start for s in p.segments)


class DriverReadStreamReader(StaticMQStreamReader, _SimpleStreamReaderWrapper):
    """StaticMQStreamReader, with micro-batches of at most `driverReadMaxMessages` messages read in
    the driver-side process and sent to Spark with the plan."""

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        # pyspark's runner asks the wrapped reader of a wrapper for Trigger.AvailableNow: this one.
        self.simple_reader = self  # type: ignore[assignment]
        self.cache = []
        self._batch: Planned | None = None
        self._reading: ThreadPoolExecutor | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_batch"] = None
        state["_reading"] = None
        return state

    def latestOffset(self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None) -> dict[str, Any]:
        """The end of the next micro-batch, planned at once; a small one's read starts now (see the
        module doc)."""
        start, limit = self._start_and_limit(start, limit)
        end = super().latestOffset(start, limit)
        self._batch = None
        if end != start:
            self._batch = self._plan(start, end)
        return end

    def _plan(self, start: dict[str, Any], end: dict[str, Any]) -> Planned:
        parts = super().partitions(start, end)
        whole = QueuesPartition(tuple(parts))
        if not parts or whole.messages > self.opts.driver_read_max_messages:
            return Planned(start, end, list(parts), None)
        if self._reading is None:
            self._reading = ThreadPoolExecutor(1, thread_name_prefix="staticmq-driver-read")
        return Planned(start, end, [whole], self._reading.submit(_read_all, whole))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:  # type: ignore[override]
        self._next_start = end
        planned = self._batch
        if planned is None or planned.start != start or planned.end != end:
            planned = self._batch = self._plan(start, end)  # e.g. the replayed batch of a restart
        return planned.parts

    def getCache(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[pa.RecordBatch] | None:
        """The rows of the micro-batch `partitions(start, end)` just planned as one partition; None
        for a micro-batch planned as usual (Spark then runs its read tasks)."""
        planned, self._batch = self._batch, None
        if planned is None or planned.rows is None or planned.start != start or planned.end != end:
            return None
        batches = planned.rows.result()
        log.debug("staticmq source: read %s on the driver", planned.parts[0])
        return iter(batches)

    def read(self, partition: InputPartition) -> Any:  # type: ignore[override]
        if isinstance(partition, QueuesPartition):
            from staticmq_spark.source.executor import read_partitions, read_task

            return read_task(read_partitions(partition.parts))
        assert isinstance(partition, QueuePartition)
        return super().read(partition)

    def stop(self) -> None:
        if self._reading is not None:
            self._reading.shutdown(wait=True, cancel_futures=True)
            self._reading = None
        super().stop()


@dataclass(frozen=True)
class Planned:
    """A micro-batch as planned when its end was chosen: one partition with its read under way
    (`rows`), or one partition per logic queue for Spark's read tasks (`rows` None)."""

    start: dict[str, Any]
    end: dict[str, Any]
    parts: list[InputPartition]
    rows: Future[list[pa.RecordBatch]] | None


def _read_all(whole: QueuesPartition) -> list[pa.RecordBatch]:
    from staticmq_spark.source.executor import read_partitions  # not in the process until a read

    return list(read_partitions(whole.parts))
