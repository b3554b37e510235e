"""What the driver sends each Spark task: one logic queue's range of one topic, already resolved
into the physical segments to read (plain picklable values: executors need no mapping of their own)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from staticmq_spark.protocol.security.auth import PLAIN, ClientSecurity


@dataclass(frozen=True, slots=True)
class SegmentRef:
    bname: str
    addr: str  # the broker's address when planned; re-resolved through the name server on failure
    queue: int  # physical queue
    physical_start: int
    physical_end: int  # exclusive
    offset_delta: int


@dataclass(frozen=True, slots=True)
class ReadSettings:
    namesrv: str
    include_properties: bool
    fail_on_data_loss: bool
    pull_batch_size: int
    retry_timeout_ms: int
    security: ClientSecurity = PLAIN
    tags: str = ""  # a tag expression the brokers apply ("" for every message)


class QueuePartition(InputPartition):
    """Logic queue `queue` of `topic`, offsets [start, end): always the same Spark partition index
    (partitions are planned in topic order, then queue order)."""

    def __init__(
        self, topic: str, queue: int, start: int, end: int, segments: tuple[SegmentRef, ...], settings: ReadSettings
    ) -> None:
        super().__init__((topic, queue))
        self.topic = topic
        self.queue = queue
        self.start = start
        self.end = end
        self.segments = segments
        self.settings = settings

    def __repr__(self) -> str:
        return (
            f"QueuePartition({self.topic!r}, queue={self.queue}, [{self.start}, {self.end}), "
            f"{len(self.segments)} segment(s))"
        )
