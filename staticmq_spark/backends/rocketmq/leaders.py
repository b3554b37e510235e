"""Each logic queue's leader of a static topic on Apache RocketMQ: (broker, physical queue, gen),
from the route and the leaders' own mapping copies, cached per route epoch."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from staticmq_spark.backends.rocketmq.wire.remoting import RemotingClient
from staticmq_spark.backends.rocketmq.wire.routes import TopicRoute
from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.mapping import Chain
from staticmq_spark.mapping.rules import leader as chain_leader


@dataclass(frozen=True)
class Leader:
    bname: str
    addr: str
    queue: int  # physical
    gen: int


class Leaders:
    """Each logic queue's leader (broker, physical queue, gen), from the route and the leaders'
    mapping copies; re-read when the route's epochs change. One per client instance, which holds it."""

    def __init__(self, fresh_route: Callable[[str], TopicRoute], remoting: RemotingClient) -> None:
        """`fresh_route(topic)`: the route as the name server has it now (the client instance's)."""
        self.fresh_route = fresh_route
        self.remoting = remoting
        self._cache: dict[str, tuple[tuple[tuple[str, int], ...], int, dict[int, Leader]]] = {}
        self._lock = threading.Lock()

    def of(self, topic: str) -> tuple[int, dict[int, Leader]]:
        """(totalQueues, logic queue -> leader) as the cluster has it now."""
        route = self.fresh_route(topic)
        if not route.is_static:
            raise InvalidArgumentError(f"topic {topic!r} is not a static topic on this RocketMQ cluster")
        epochs = tuple(sorted(route.epochs.items()))
        with self._lock:
            cached = self._cache.get(topic)
        if cached is not None and cached[0] == epochs:
            return cached[1], cached[2]
        leaders: dict[int, Leader] = {}
        for bname in sorted(set(route.leaders.values())):
            addr = route.masters.get(bname)
            found = self.remoting.topic_config(addr, topic) if addr else None
            mapping = found[1] if found else None
            if mapping is None:
                continue
            for logic, chain in mapping.hosted.items():
                item = chain_leader(chain)
                if item.bname == bname and route.leaders.get(logic) == bname:
                    leaders[logic] = Leader(bname, addr or "", item.queue, item.gen)
        with self._lock:
            self._cache[topic] = (epochs, route.total_queues, leaders)
        return route.total_queues, leaders

    def chain(self, topic: str, logic: int) -> Chain:
        """The logic queue's chain of items (oldest first) as its current leader has it (empty when
        no leader is known)."""
        route = self.fresh_route(topic)
        bname = route.leaders.get(logic)
        addr = route.masters.get(bname) if bname else None
        found = self.remoting.topic_config(addr, topic) if addr else None
        mapping = found[1] if found else None
        return mapping.hosted.get(logic, ()) if mapping is not None else ()
