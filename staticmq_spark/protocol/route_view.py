"""Topic routes as clients see them (pure values built from the name server's answer).

A dynamic topic's queues are (broker, queue id) pairs. A static topic's route lists exactly
`total_queues` logic queues, each addressed to the broker leading it; a logic queue whose broker
is not alive gets a placeholder (broker PLACEHOLDER_BROKER) so the numbering never shifts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from staticmq_spark.errors import TopicNotFoundError
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.topic import PERM_READ, PERM_WRITE

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

    @staticmethod
    def from_pb(route: pb.TopicRoute) -> TopicRouteView:
        brokers = {b.broker: b.addr for b in route.brokers}
        orders = [b.config.order for b in route.brokers if b.config.order]
        order = orders[0] if orders else ""
        if any(b.config.is_static for b in route.brokers):
            return _static_view(route, brokers, order)
        writes: list[QueueAddress] = []
        reads: list[QueueAddress] = []
        for b in sorted(route.brokers, key=lambda x: x.broker):
            if b.config.perm & PERM_WRITE:
                writes.extend(QueueAddress(route.topic, q, b.broker, b.addr) for q in range(b.config.write_queues))
            if b.config.perm & PERM_READ:
                reads.extend(QueueAddress(route.topic, q, b.broker, b.addr) for q in range(b.config.read_queues))
        return TopicRouteView(route.topic, False, len(writes), order, tuple(writes), tuple(reads), brokers)


def _static_view(route: pb.TopicRoute, brokers: dict[str, str], order: str) -> TopicRouteView:
    totals = Counter(b.config.total_queues for b in route.brokers if b.config.is_static)
    total = totals.most_common(1)[0][0]
    best: dict[int, tuple[int, str]] = {}
    for b in route.brokers:
        for leader in b.leaders:
            if 0 <= leader.logic_queue < total:
                current = best.get(leader.logic_queue)
                if current is None or leader.gen > current[0]:
                    best[leader.logic_queue] = (leader.gen, b.broker)
    queues = []
    for q in range(total):
        if q in best:
            gen, name = best[q]
            queues.append(QueueAddress(route.topic, q, name, brokers[name], gen))
        else:
            queues.append(QueueAddress(route.topic, q, PLACEHOLDER_BROKER, ""))
    as_tuple = tuple(queues)
    return TopicRouteView(route.topic, True, total, order, as_tuple, as_tuple, brokers)
