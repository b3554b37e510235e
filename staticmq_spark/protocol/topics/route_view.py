"""Topic routes as clients see them (pure values built from the name server's answer).

A dynamic topic's queues are (broker, queue id) pairs. A static topic's route lists exactly
`total_queues` logic queues, each addressed to the broker leading it; a logic queue whose broker
is not alive gets a placeholder (broker PLACEHOLDER_BROKER) so the numbering never shifts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from staticmq_spark.errors import TopicNotFoundError

PLACEHOLDER_BROKER = "__logical_queue_broker__"


@dataclass(frozen=True, slots=True)
class QueueAddress:
    topic: str
    queue_id: int  # logic queue on a static topic, the broker's physical queue otherwise
    broker: str
    addr: str
    gen: int = 0

    @property
    def available(self) -> bool:
        return self.broker != PLACEHOLDER_BROKER


@dataclass(frozen=True, slots=True)
class TopicRouteView:
    topic: str
    is_static: bool
    total_queues: int
    order: str
    write_queues: tuple[QueueAddress, ...]
    read_queues: tuple[QueueAddress, ...]
    brokers: dict[str, str] = field(default_factory=dict)

    def logic_queue(self, queue_id: int) -> QueueAddress:
        if not self.is_static:
            raise ValueError(f"topic {self.topic!r} is not static")
        return self.write_queues[queue_id]

    def physical_queue(self, broker: str, queue_id: int) -> QueueAddress:
        for q in self.read_queues:
            if q.broker == broker and q.queue_id == queue_id:
                return q
        raise TopicNotFoundError(f"topic {self.topic!r} has no queue {queue_id} on broker {broker!r}")
