"""The streaming reader (driver): offsets, admission control, Trigger.AvailableNow, lag, and
planning one partition per logic queue. read() runs on executors from the partition alone.

Facts of pyspark's Python streaming API it lives with: initialOffset() is called more than once
per run (so the start is resolved once and kept, and carried in batch 0's end offset for a
restart); commit(end) arrives one batch late and stop() may never be called (committing group
offsets is a convenience, never what exactly-once relies on: Spark's checkpoint is); read() runs
on a pickled copy of the reader (clients are created lazily and never pickled).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from staticmq_spark.client.retry import with_retries
from staticmq_spark.cluster import ClusterAccess, open_cluster
from staticmq_spark.errors import StaticMQError
from staticmq_spark.source import offsets as offset_json
from staticmq_spark.source.admission import advance, count_rows, share_budget
from staticmq_spark.source.executor import read_partition
from staticmq_spark.source.idle import IdleBackoff
from staticmq_spark.source.options import SourceOptions
from staticmq_spark.source.partition import QueuePartition
from staticmq_spark.source.planner import check_went_back, plan_partitions, resolve_offsets, settings_of
from staticmq_spark.source.snapshot import TopicSnapshot, take_snapshot

log = logging.getLogger(__name__)


class StaticMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.opts = options
        self._access: ClusterAccess | None = None
        self._initial: dict[int, int] | None = None
        self._target: dict[int, int] | None = None
        self._latest: dict[int, int] | None = None
        self._last_trigger = time.monotonic()
        self._idle = IdleBackoff()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_access"] = None
        return state

    # ------------------------------------------------------------------ clients

    def _cluster(self) -> ClusterAccess:
        if self._access is None:
            self._access = open_cluster(self.opts.namesrv, self.opts.security)
        return self._access

    def _snapshot(self) -> TopicSnapshot:
        access = self._cluster()
        return with_retries(
            "reading the topic's state", lambda: take_snapshot(access, self.opts.topic), self._timeout_s
        )

    @property
    def _timeout_s(self) -> float:
        return self.opts.retry_timeout_ms / 1000

    # ------------------------------------------------------------------ offsets

    def initialOffset(self) -> dict[str, Any]:
        if self._initial is None:
            snap = self._snapshot()
            self._initial = resolve_offsets(snap, self.opts.starting, self._cluster())
            log.info("staticmq source %s starts at %s", self.opts.topic, self._initial)
        return offset_json.to_json(self.opts.topic, self._initial)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        snap = self._snapshot()
        given = offset_json.from_json(start, self.opts.topic, snap.total_queues)
        begin = check_went_back(snap, given, self.opts.fail_on_data_loss)
        latest = {q: max(begin[q], snap.latest()[q]) for q in begin}
        self._latest = latest
        if self._target is not None:
            latest = {q: max(begin[q], min(latest[q], self._target[q])) for q in begin}
        end = self._admit(snap, begin, latest, limit)
        if end == begin and begin == given:
            if self._target is None:  # AvailableNow ends on this answer: no reason to wait
                time.sleep(self._idle.after_poll(found_data=False))
            return start
        self._idle.after_poll(found_data=True)
        initial = self._initial if begin == self._initial else None
        return offset_json.to_json(self.opts.topic, end, initial=initial)

    def _admit(
        self, snap: TopicSnapshot, begin: dict[int, int], latest: dict[int, int], limit: ReadLimit
    ) -> dict[int, int]:
        if isinstance(limit, ReadAllAvailable):
            return latest
        segments = snap.segments(begin, latest)
        queues = sorted(begin)
        available = [count_rows(segments[q]) for q in queues]
        if isinstance(limit, ReadMinRows):
            waited_ms = (time.monotonic() - self._last_trigger) * 1000
            enough = sum(available) >= limit.min_rows or self._target is not None
            if not enough and waited_ms < self.opts.max_trigger_delay_ms:
                return begin
            budget = self.opts.max_messages_per_trigger or sum(available)
        elif isinstance(limit, ReadMaxRows):
            budget = limit.max_rows
        elif isinstance(limit, ReadMaxBytes):
            sizes = [snap.bounds[q].avg_message_bytes for q in queues if snap.bounds[q].avg_message_bytes]
            average = max(1, sum(sizes) // len(sizes)) if sizes else 1
            budget = max(1, limit.max_bytes // average)
        else:
            return latest
        shares = share_budget(available, budget)
        return {
            q: latest[q] if s == a else advance(segments[q], begin[q], s)
            for q, s, a in zip(queues, shares, available, strict=True)
        }

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.min_messages_per_trigger is not None:
            return ReadMinRows(self.opts.min_messages_per_trigger)
        if self.opts.max_messages_per_trigger is not None:
            return ReadMaxRows(self.opts.max_messages_per_trigger)
        if self.opts.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.opts.max_bytes_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self._latest is None else offset_json.to_json(self.opts.topic, self._latest)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._snapshot().latest()

    # ------------------------------------------------------------------ planning and reading

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[QueuePartition]:
        def plan() -> list[QueuePartition]:
            snap = take_snapshot(self._cluster(), self.opts.topic)
            ends = offset_json.from_json(end, self.opts.topic, snap.total_queues)
            carried = offset_json.initial_of(end)
            begin = carried if carried is not None else offset_json.from_json(start, self.opts.topic, snap.total_queues)
            begin = check_went_back(snap, begin, self.opts.fail_on_data_loss)
            return plan_partitions(snap, begin, ends, settings_of(self.opts))

        parts = with_retries("planning a micro-batch", plan, self._timeout_s)
        self._last_trigger = time.monotonic()
        return parts

    def read(self, partition: QueuePartition) -> Any:  # type: ignore[override]
        return read_partition(partition)

    def commit(self, end: dict[str, Any]) -> None:
        if not self.opts.group:
            return
        access = self._cluster()
        for q, offset in offset_json.from_json(end, self.opts.topic, len(end[self.opts.topic])).items():
            try:
                access.commit_offset(self.opts.group, self.opts.topic, q, offset)
            except StaticMQError as exc:
                log.warning("committing group %s offset %d of queue %d failed: %s", self.opts.group, offset, q, exc)

    def stop(self) -> None:
        if self._access is not None:
            self._access.close()
        self._access = None
