"""One broker's view of a topic, as the driver gathers it (backend-neutral)."""

from __future__ import annotations

from dataclasses import dataclass

from staticmq_spark.mapping import TopicQueueMapping
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.topic import TopicConfig


@dataclass(frozen=True, slots=True)
class BrokerState:
    name: str
    addr: str
    mapping: TopicQueueMapping | None
    foreign_bname: str
    config: TopicConfig | None
    physical: dict[int, pb.QueueOffsets]

    @property
    def physical_count(self) -> int:
        return self.config.write_queues if self.config is not None and self.config.is_static else 0
