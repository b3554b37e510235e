"""Topic routes on the wire: the name server's TopicRoute answer -> the clients' TopicRouteView."""

from __future__ import annotations

from collections import Counter

from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.topics.config import PERM_READ, PERM_WRITE
from staticmq_spark.protocol.topics.route_view import PLACEHOLDER_BROKER, QueueAddress, TopicRouteView


def route_from_pb(route: pb.TopicRoute) -> TopicRouteView:
    """The name server's answer as the clients' route view."""
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
