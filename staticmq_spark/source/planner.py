"""Driver-side planning shared by the streaming and batch readers: resolving where a query starts
or ends, and turning per-queue logic ranges into one Spark partition per logic queue."""

from __future__ import annotations

import logging

from staticmq_spark.backends import ClusterReader
from staticmq_spark.errors import DataLossError, InvalidOptionError, NotFoundError, QueueUnavailableError
from staticmq_spark.source.options import EARLIEST, LATEST, SourceOptions, StartSpec
from staticmq_spark.source.partition import QueuePartition, ReadSettings, SegmentRef
from staticmq_spark.source.snapshot import TopicSnapshot

log = logging.getLogger(__name__)


def resolve_offsets(
    snap: TopicSnapshot, spec: StartSpec, access: ClusterReader, option: str = "startingOffsets"
) -> dict[int, int]:
    """Concrete logic offsets for every queue from earliest / latest / JSON / timestamps / a group;
    `option` names the option they came from in errors."""
    queues = range(snap.total_queues)
    if spec.kind == "earliest":
        return snap.earliest()
    if spec.kind == "latest":
        return snap.latest()
    if spec.kind == "timestamp":
        return {q: access.offset_for_timestamp(snap.topic, q, spec.timestamp) for q in queues}
    if spec.kind == "group":
        return group_offsets(snap, spec, access)
    given = spec.offsets_for(snap.topic)
    if given is None:  # a topicPattern topic the JSON does not name: from its earliest
        return snap.earliest()
    missing = sorted(set(queues) - set(given))
    extra = sorted(set(given) - set(queues))
    if missing or extra:
        raise InvalidOptionError(
            f"option {option!r}: offsets for topic {snap.topic!r} must name each of its {snap.total_queues} "
            f"logic queues (missing {missing}, unknown {extra})"
        )
    if spec.kind == "timestamps":
        return {q: access.offset_for_timestamp(snap.topic, q, ts) for q, ts in given.items()}
    out = {}
    for q, offset in given.items():
        bounds = snap.bounds[q]
        out[q] = bounds.min_offset if offset == EARLIEST else bounds.max_offset if offset == LATEST else offset
    return out


def group_offsets(snap: TopicSnapshot, spec: StartSpec, access: ClusterReader) -> dict[int, int]:
    """The group's committed logic offset of every queue. A queue without one starts as
    `spec.missing` says; one past the queue's end starts at its end (the topic was re-created or
    cut short); one below its start is left for plan_partitions to report as data loss."""
    out, missing = {}, []
    for q in range(snap.total_queues):
        committed = access.committed_offset(spec.group, snap.topic, q)
        bounds = snap.bounds[q]
        if committed is None:
            missing.append(q)
            out[q] = bounds.max_offset if spec.missing == "latest" else bounds.min_offset
        elif committed > bounds.max_offset:
            log.warning(
                "group %s: offset %d of %s queue %d is past its end %d; starting there",
                spec.group,
                committed,
                snap.topic,
                q,
                bounds.max_offset,
            )
            out[q] = bounds.max_offset
        else:
            out[q] = committed
    if missing and spec.missing == "fail":
        raise NotFoundError(
            f"consumer group {spec.group!r} has no committed offset for topic {snap.topic!r} logic queue(s) "
            f"{missing} (groupMissingOffsets=fail; earliest or latest start them there)"
        )
    if missing:
        log.info("group %s: %s queue(s) %s start at %s", spec.group, snap.topic, missing, spec.missing)
    return out


def settings_of(opts: SourceOptions) -> ReadSettings:
    return ReadSettings(
        namesrv=opts.namesrv,
        include_properties=opts.include_properties,
        fail_on_data_loss=opts.fail_on_data_loss,
        pull_batch_size=opts.pull_batch_size,
        retry_timeout_ms=opts.retry_timeout_ms,
        security=opts.security,
        tags=opts.tags,
    )


def plan_partitions(
    snap: TopicSnapshot, starts: dict[int, int], ends: dict[int, int], settings: ReadSettings
) -> list[QueuePartition]:
    """One partition per logic queue, in queue order, each with the segments of its range."""
    starts = dict(starts)
    ends = {q: max(ends[q], starts[q]) for q in starts}
    for q in range(snap.total_queues):
        low = snap.bounds[q].min_offset
        if starts[q] < low and starts[q] < ends[q]:
            lost_to = min(low, ends[q])
            message = (
                f"topic {snap.topic!r} logic queue {q}: messages at logic offsets [{starts[q]}, {lost_to}) were "
                "removed by retention before they were read"
            )
            if settings.fail_on_data_loss:
                raise DataLossError(message + " (failOnDataLoss=true; set failOnDataLoss=false to skip lost messages)")
            log.warning("%s; skipped (failOnDataLoss=false)", message)
            starts[q] = lost_to
        if not snap.covers(q, ends[q]):
            raise QueueUnavailableError(
                f"topic {snap.topic!r} logic queue {q}: the live brokers' mappings do not yet cover offset {ends[q]}"
            )
    segments = snap.segments(starts, ends)
    return [
        QueuePartition(
            snap.topic,
            q,
            starts[q],
            ends[q],
            tuple(
                SegmentRef(
                    s.bname, snap.addrs.get(s.bname, ""), s.queue, s.physical_start, s.physical_end, s.offset_delta
                )
                for s in segments[q]
            ),
            settings,
        )
        for q in range(snap.total_queues)
    ]


def went_back(snap: TopicSnapshot, offsets: dict[int, int]) -> dict[int, str]:
    """Queues whose max offset is now below `offsets` (the topic was deleted and re-created, or
    its data was lost), each with a message naming the queue and both offsets."""
    latest = snap.latest()
    return {
        q: (
            f"topic {snap.topic!r} logic queue {q}: the query is at logic offset {offset} but the queue's "
            f"max offset is now {latest[q]} (offsets went back: the topic was deleted and re-created, "
            "or its data was lost)"
        )
        for q, offset in offsets.items()
        if q in latest and latest[q] < offset
    }


def check_went_back(snap: TopicSnapshot, offsets: dict[int, int], fail_on_data_loss: bool) -> dict[int, int]:
    """`offsets` with every queue that went back moved to its earliest offset; with
    failOnDataLoss=true a queue that went back fails the query instead."""
    gone = went_back(snap, offsets)
    if gone and fail_on_data_loss:
        first = gone[min(gone)]
        raise DataLossError(
            first
            + (f" (and {len(gone) - 1} more queue(s))" if len(gone) > 1 else "")
            + "; failOnDataLoss=true: set failOnDataLoss=false to go on from the earliest offsets"
        )
    for message in gone.values():
        log.warning("%s; going on from its earliest offset (failOnDataLoss=false)", message)
    return {q: snap.bounds[q].min_offset if q in gone else offset for q, offset in offsets.items()}
