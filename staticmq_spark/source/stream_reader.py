"""The streaming reader (driver): offsets, admission control, Trigger.AvailableNow, lag, and
planning one partition per topic and logic queue. read() runs on executors from the partition alone.

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

from staticmq_spark.backends import ClusterReader, open_backend
from staticmq_spark.backends.retry import with_retries
from staticmq_spark.errors import StaticMQError
from staticmq_spark.session.features import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from staticmq_spark.source import offsets as offset_json
from staticmq_spark.source.admission import advance, count_rows, share_budget
from staticmq_spark.source.idle import IdleBackoff
from staticmq_spark.source.offsets import Offsets
from staticmq_spark.source.options import SourceOptions
from staticmq_spark.source.partition import QueuePartition
from staticmq_spark.source.planner import check_went_back, plan_partitions, resolve_offsets, settings_of
from staticmq_spark.source.snapshot import take_snapshot
from staticmq_spark.source.subscription import Snapshots, Subscription

log = logging.getLogger(__name__)


class StaticMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    def __init__(self, options: SourceOptions) -> None:
        self.opts = options
        self._subscription = Subscription(options)
        self._access: ClusterReader | None = None
        self._initial: Offsets | None = None
        self._target: Offsets | None = None
        self._latest: Offsets | None = None
        self._lag: Offsets = {}
        self._last_trigger = time.monotonic()
        self._idle = IdleBackoff()
        # The end latestOffset last returned and the snapshots it was planned from: partitions()
        # for that end (Spark's next call of this trigger) plans from them instead of asking every
        # broker again. Any other end, e.g. the replayed batch of a restart, takes new snapshots.
        self._planned: tuple[dict[str, Any], Snapshots] | None = None
        # The end of the last micro-batch planned: where the next one starts, for a runner that
        # asks latestOffset() without a start (pyspark < 4.2). On a restart Spark plans the
        # checkpoint's last end as an empty range first (AcceptsLatestSeenOffset), so it is known.
        self._next_start: dict[str, Any] | None = None
        self._answered = False  # whether latestOffset has answered in this process

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_access"] = None
        state["_planned"] = None
        return state

    # ------------------------------------------------------------------ clients

    def _cluster(self) -> ClusterReader:
        if self._access is None:
            self._access = open_backend(self.opts.namesrv, self.opts.security).reader()
        return self._access

    def _snapshots(self, known: list[str] | None = None) -> Snapshots:
        access = self._cluster()
        return with_retries(
            "reading the topics' state", lambda: self._subscription.snapshots(access, known or []), self._timeout_s
        )

    @property
    def _timeout_s(self) -> float:
        return self.opts.retry_timeout_ms / 1000

    # ------------------------------------------------------------------ offsets

    def initialOffset(self) -> dict[str, Any]:
        if self._initial is None:
            snaps = self._snapshots()
            access = self._cluster()
            self._initial = {t: resolve_offsets(snap, self.opts.starting, access) for t, snap in snaps.items()}
            log.info("staticmq source %s starts at %s", self.opts.subscription, self._initial)
        return offset_json.to_json(self._initial)

    def _begin(self, snaps: Snapshots, offsets: dict[str, Any], carried: Offsets | None = None) -> Offsets:
        """Where each subscribed topic continues from `offsets` (or from `carried`, batch 0's start
        as first planned): a topic they do not name yet (one that matched topicPattern since)
        starts at its earliest offset; offsets that went back are handled per failOnDataLoss."""
        begin: Offsets = {}
        for topic, snap in snaps.items():
            if carried is not None and topic in carried:
                begin[topic] = check_went_back(snap, carried[topic], self.opts.fail_on_data_loss)
            elif topic in offsets:
                given = offset_json.from_json(offsets, topic, snap.total_queues)
                begin[topic] = check_went_back(snap, given, self.opts.fail_on_data_loss)
            else:
                log.info("staticmq source: new topic %s, read from its earliest offsets", topic)
                begin[topic] = snap.earliest()
        return begin

    def latestOffset(self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None) -> dict[str, Any]:
        """The end of the next micro-batch. pyspark 4.2 and later give the start and the limit;
        an older runner gives neither (session/features.py): the start is then the end of the last
        micro-batch planned (or the initial offset), and the limit is the options' from a run's
        second answer on. The first answer of a run reads everything available: it may be
        Trigger.AvailableNow's only micro-batch (Spark's single-batch fallback, which a Python
        source cannot tell from any other trigger there), and that must not stop with messages
        left behind."""
        start, limit = self._start_and_limit(start, limit)
        snaps = self._snapshots(offset_json.topics_of(start))
        begin = self._begin(snaps, start)
        latest = {t: _at_least(per, snaps[t].latest()) for t, per in begin.items()}
        self._latest = latest
        if self._target is not None:
            latest = {
                t: {q: max(o, min(latest[t][q], self._target.get(t, {}).get(q, o))) for q, o in per.items()}
                for t, per in begin.items()
            }
        end = self._admit(snaps, begin, latest, limit)
        self._lag = self._behind(snaps, end)
        same_topics = set(end) == set(offset_json.topics_of(start))  # none appeared or was dropped
        if (
            end == begin
            and same_topics
            and all(begin[t] == offset_json.from_json(start, t, snaps[t].total_queues) for t in end)
        ):
            if self._target is None:  # AvailableNow ends on this answer: no reason to wait
                time.sleep(self._idle.after_poll(found_data=False))
            return start
        self._idle.after_poll(found_data=True)
        initial = self._initial if begin == self._initial else None
        answer = offset_json.to_json(end, initial=initial)
        self._planned = (answer, snaps)
        return answer

    def _start_and_limit(
        self, start: dict[str, Any] | None, limit: ReadLimit | None
    ) -> tuple[dict[str, Any], ReadLimit]:
        """latestOffset's start and limit, also for a runner that gives neither (see there)."""
        first_of_run = not self._answered
        self._answered = True
        if start is None:
            start = self._next_start if self._next_start is not None else self.initialOffset()
            if limit is None and first_of_run:
                limit = ReadAllAvailable()
        if limit is None:
            limit = ReadAllAvailable() if self._target is not None else self.getDefaultReadLimit()
        return start, limit

    def _behind(self, snaps: Snapshots, consumed: Offsets) -> Offsets:
        """Messages between each queue's planned end and its latest offset (remap jumps hold none)."""
        lag: Offsets = {}
        for topic, per_queue in consumed.items():
            segments = snaps[topic].segments(per_queue, _at_least(per_queue, snaps[topic].latest()))
            lag[topic] = {q: count_rows(segments[q]) for q in per_queue}
        return lag

    def _admit(self, snaps: Snapshots, begin: Offsets, latest: Offsets, limit: ReadLimit) -> Offsets:
        if isinstance(limit, ReadAllAvailable):
            return latest
        segments = {t: snaps[t].segments(begin[t], latest[t]) for t in begin}
        keys = [(t, q) for t in sorted(begin) for q in sorted(begin[t])]
        available = [count_rows(segments[t][q]) for t, q in keys]
        if isinstance(limit, ReadMinRows):
            waited_ms = (time.monotonic() - self._last_trigger) * 1000
            enough = sum(available) >= limit.min_rows or self._target is not None
            if not enough and waited_ms < self.opts.max_trigger_delay_ms:
                return begin
            budget = self.opts.max_messages_per_trigger or sum(available)
        elif isinstance(limit, ReadMaxRows):
            budget = limit.max_rows
        elif isinstance(limit, ReadMaxBytes):
            sizes = [snaps[t].bounds[q].avg_message_bytes for t, q in keys if snaps[t].bounds[q].avg_message_bytes]
            average = max(1, sum(sizes) // len(sizes)) if sizes else 1
            budget = max(1, limit.max_bytes // average)
        else:
            return latest
        shares = share_budget(available, budget)
        end: Offsets = {t: {} for t in begin}
        for (t, q), share, avail in zip(keys, shares, available, strict=True):
            end[t][q] = latest[t][q] if share == avail else advance(segments[t][q], begin[t][q], share)
        return end

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.min_messages_per_trigger is not None:
            return ReadMinRows(self.opts.min_messages_per_trigger)
        if self.opts.max_messages_per_trigger is not None:
            return ReadMaxRows(self.opts.max_messages_per_trigger)
        if self.opts.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.opts.max_bytes_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The latest offsets with each logic queue's lag in messages (`staticmq.lag`, and
        `staticmq.lagTotal`): the query progress shows them as the source's latestOffset."""
        return None if self._latest is None else offset_json.with_lag(self._latest, self._lag)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {t: snap.latest() for t, snap in self._snapshots().items()}

    # ------------------------------------------------------------------ planning and reading

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[QueuePartition]:
        self._next_start = end
        planned, self._planned = self._planned, None
        topics = offset_json.topics_of(end)
        # Batch 0's start, carried in its end, is for batch 0 alone: the batch that starts at the
        # initial offset. A later batch's end can carry it too where the end was asked before the
        # start was known (pyspark < 4.2's AvailableNow wrapper asks on a restart first).
        carried = offset_json.initial_of(end, topics)
        if carried is not None and start != self.initialOffset():
            carried = None
        if planned is not None and planned[0] == end and all(t in planned[1] for t in topics):
            known: Snapshots | None = {t: planned[1][t] for t in topics}
        else:
            known = None

        def plan() -> list[QueuePartition]:
            nonlocal known
            access = self._cluster()
            live = self._subscription.live
            snaps = known if known is not None else {t: take_snapshot(access, t, live) for t in topics}
            known = None  # a retry after a failure takes new snapshots
            begin = self._begin(snaps, start, carried=carried)
            parts: list[QueuePartition] = []
            for topic in topics:
                ends = offset_json.from_json(end, topic, snaps[topic].total_queues)
                parts += plan_partitions(snaps[topic], begin[topic], ends, settings_of(self.opts))
            return parts

        parts = with_retries("planning a micro-batch", plan, self._timeout_s)
        self._last_trigger = time.monotonic()
        if self.opts.only_queues_with_messages:
            # Each partition is a Python read task (a worker round trip, ~20-40 ms of a trigger on
            # 2 cores) whether or not its queue has new messages; one is kept so Spark has a task.
            return [p for p in parts if p.end > p.start] or parts[:1]
        return parts

    def read(self, partition: QueuePartition) -> Any:  # type: ignore[override]
        from staticmq_spark.source.executor import (
            read_partition,
            read_task,
        )  # executors only: not in the planning process

        return read_task(read_partition(partition))

    def commit(self, end: dict[str, Any]) -> None:
        if not self.opts.group:
            return
        access = self._cluster()
        for topic in offset_json.topics_of(end):
            for q, offset in offset_json.from_json(end, topic, len(end[topic])).items():
                try:
                    access.commit_offset(self.opts.group, topic, q, offset)
                except StaticMQError as exc:
                    log.warning(
                        "committing group %s offset %d of %s queue %d failed: %s",
                        self.opts.group,
                        offset,
                        topic,
                        q,
                        exc,
                    )

    def stop(self) -> None:
        if self._access is not None:
            self._access.close()
        self._access = None


def _at_least(offsets: dict[int, int], latest: dict[int, int]) -> dict[int, int]:
    """Each queue's latest offset, never below where the query already is."""
    return {q: max(o, latest[q]) for q, o in offsets.items()}
