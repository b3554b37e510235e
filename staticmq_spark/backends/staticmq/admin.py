"""The staticmq backend's admin operations. Commands that need many brokers ask each broker directly and combine the
answers here (admin-side adaptation): brokers never fan out to each other for an admin call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from staticmq_spark.backends.staticmq.client_instance import StaticMQClientInstance
from staticmq_spark.backends.staticmq.groups import group_list, topic_list
from staticmq_spark.backends.staticmq.progress import consumer_progress
from staticmq_spark.backends.staticmq.rpc import invoke
from staticmq_spark.backends.staticmq.static_topics import StaticTopicAdmin
from staticmq_spark.backends.types import (
    BrokerState,
    BrokerSummary,
    GroupSummary,
    OperationResult,
    ProgressRow,
    QueueStatus,
    TopicSummary,
)
from staticmq_spark.closing import Closeable
from staticmq_spark.errors import (
    BrokerNotFoundError,
    InvalidArgumentError,
    StaticTopicRefusedError,
    TopicNotFoundError,
)
from staticmq_spark.mapping import ConsistencyReport, is_static_anywhere
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.pb import staticmq_pb2_grpc as pb_grpc
from staticmq_spark.protocol.topics.config import PERM_READ_WRITE, TopicConfig
from staticmq_spark.protocol.topics.route_view import TopicRouteView
from staticmq_spark.protocol.wire.topic_config import config_from_pb, config_to_pb
from staticmq_spark.protocol.wire.topic_route import route_from_pb

T = TypeVar("T")


class StaticMQAdmin(Closeable):
    def __init__(
        self, instance: StaticMQClientInstance, *, timeout_s: float = 10.0, wait_for_ready: bool = True
    ) -> None:
        """`wait_for_ready`: wait (up to the timeout) for a broker that is starting, instead of
        failing at once; callers with their own retry loop pass False. Routes and cluster info are
        always asked of the name server afresh (never the instance's cached routes)."""
        self.wait_for_ready = wait_for_ready
        self.channels = instance.channels
        self.routes = instance.routes
        self.timeout_s = timeout_s
        self.static = StaticTopicAdmin(self)

    # ------------------------------------------------------------------ cluster

    def cluster_info(self) -> list[BrokerSummary]:
        info = self.routes.cluster_info()
        return [BrokerSummary(b.name, b.cluster, b.addr, b.last_heartbeat) for b in info.brokers]

    def target_brokers(self, *, cluster: str | None = None, brokers: list[str] | None = None) -> dict[str, str]:
        """name -> address of the brokers a `-c CLUSTER` or `-b B1,B2` option names."""
        if (cluster is None) == (brokers is None):
            raise InvalidArgumentError("name either a cluster (-c) or brokers (-b), not both or neither")
        live = {b.name: b for b in self.cluster_info()}
        if cluster is not None:
            chosen = {n: b.addr for n, b in live.items() if b.cluster == cluster}
            if not chosen:
                known = sorted({b.cluster for b in live.values()})
                raise BrokerNotFoundError(f"cluster {cluster!r} has no live broker (live clusters: {known})")
            return dict(sorted(chosen.items()))
        assert brokers is not None
        missing = [n for n in brokers if n not in live]
        if missing:
            raise BrokerNotFoundError(f"broker(s) {missing} are not alive (live: {sorted(live)})")
        return {n: live[n].addr for n in brokers}

    def stub(self, addr: str) -> pb_grpc.BrokerStub:
        return self.channels.broker(addr)

    def call(self, target: str, method: Callable[..., T], request: Any) -> T:
        """One broker call with this admin's timeout and readiness policy."""
        return invoke(target, method, request, self.timeout_s, wait_for_ready=self.wait_for_ready)

    # ------------------------------------------------------------------ plain topics

    def update_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        brokers: list[str] | None = None,
        read_queues: int = 8,
        write_queues: int = 8,
        perm: int = PERM_READ_WRITE,
        order: str = "",
    ) -> dict[str, TopicConfig]:
        """Create or update a dynamic topic on the named brokers (refused for a static topic)."""
        statics = sorted(n for n, (_, cfg) in self.brokers_with_topic(topic).items() if cfg.is_static)
        if statics:
            raise StaticTopicRefusedError(
                f"topic {topic!r} is a static topic (on {statics}): updateTopic is refused; "
                "use updateStaticTopic or remappingStaticTopic"
            )
        wanted = config_to_pb(TopicConfig(topic, read_queues, write_queues, perm, order=order))
        out = {}
        for name, addr in self.target_brokers(cluster=cluster, brokers=brokers).items():
            resp = self.call(name, self.stub(addr).UpdateTopic, wanted)
            out[name] = config_from_pb(resp)
        return out

    def topic_configs(self, broker_addr: str) -> list[TopicConfig]:
        resp = self.call(broker_addr, self.stub(broker_addr).GetTopicConfigs, pb.Empty())
        return [config_from_pb(t) for t in resp.topics]

    def brokers_with_topic(self, topic: str) -> dict[str, tuple[str, TopicConfig]]:
        """Every live broker that has `topic`: name -> (address, config)."""
        found = {}
        for b in self.cluster_info():
            for cfg in self.topic_configs(b.addr):
                if cfg.name == topic:
                    found[b.name] = (b.addr, cfg)
        return found

    def delete_topic(self, topic: str) -> list[str]:
        """Delete a topic from every live broker that has it; a static topic's mappings too."""
        if is_static_anywhere(self.static.gather(topic)):
            return self.static.delete(topic)
        holders = self.brokers_with_topic(topic)
        if not holders:
            raise TopicNotFoundError(f"no live broker has topic {topic!r}")
        for name, (addr, _) in holders.items():
            self.call(name, self.stub(addr).DeleteTopic, pb.TopicName(topic=topic))
        return sorted(holders)

    def route_view(self, topic: str) -> TopicRouteView:
        return route_from_pb(self.routes.fetch(topic))

    def topic_route(self, topic: str) -> dict[str, Any]:
        raw = self.routes.fetch(topic)
        view = route_from_pb(raw)
        brokers = [
            {
                "broker": b.broker,
                "addr": b.addr,
                "readQueues": b.config.read_queues,
                "writeQueues": b.config.write_queues,
                "perm": b.config.perm,
                "static": b.config.is_static,
                "totalQueues": b.config.total_queues,
                "leaders": [
                    {
                        "logicQueue": x.logic_queue,
                        "physicalQueue": x.physical_queue,
                        "gen": x.gen,
                        "logicOffset": x.logic_offset,
                    }
                    for x in b.leaders
                ],
            }
            for b in raw.brokers
        ]
        queues = [
            {"topic": q.topic, "queueId": q.queue_id, "broker": q.broker, "addr": q.addr, "gen": q.gen}
            | {"available": q.available}
            for q in view.write_queues
        ]
        return {
            "topic": view.topic,
            "static": view.is_static,
            "totalQueues": view.total_queues,
            "brokers": brokers,
            "queues": queues,
        }

    def topic_status(self, topic: str) -> list[QueueStatus]:
        """Per physical queue min/max offsets of a dynamic topic, asked from each broker."""
        out: list[QueueStatus] = []
        for name, (addr, _) in sorted(self.brokers_with_topic(topic).items()):
            resp = self.call(name, self.stub(addr).GetTopicOffsets, pb.TopicName(topic=topic))
            out.extend(
                QueueStatus(name, q.queue_id, q.min_offset, q.max_offset, q.last_store_timestamp) for q in resp.queues
            )
        return out

    # ------------------------------------------------------------------ static topics

    def update_static_topic(
        self, topic: str, total_queues: int, *, cluster: str | None = None, brokers: list[str] | None = None
    ) -> OperationResult:
        """Create a static topic of `total_queues` logic queues, or grow it (never shrink)."""
        return self.static.update(topic, total_queues, cluster=cluster, brokers=brokers)

    def remapping_static_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        brokers: list[str] | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> OperationResult:
        """Move logic queue leaders so that they are spread over the target brokers (the remap
        protocol: switch-new, fence-old, settle-new; `on_step` is called after each step)."""
        return self.static.remap(topic, cluster=cluster, brokers=brokers, on_step=on_step)

    def static_topic_status(self, topic: str) -> tuple[ConsistencyReport, dict[str, BrokerState]]:
        return self.static.status(topic)

    def broker_states(self, topic: str) -> dict[str, BrokerState]:
        return self.static.gather(topic)

    def repair_static_topic(self, topic: str) -> OperationResult:
        """Bring a half-finished static-topic operation to a consistent state."""
        return self.static.repair(topic)

    # ------------------------------------------------------------------ consumers

    def consumer_progress(self, group: str, topic: str | None = None) -> list[ProgressRow]:
        """One row per queue (per logic queue of a static topic); see progress.py."""
        return consumer_progress(self, self.static, lambda t: self.route_view(t).is_static, group, topic)

    def topic_list(self) -> list[TopicSummary]:
        return topic_list(self)

    def group_list(self) -> list[GroupSummary]:
        return group_list(self)

    def close(self) -> None:
        """Nothing to release: the connections are the backend's (its client instance)."""
