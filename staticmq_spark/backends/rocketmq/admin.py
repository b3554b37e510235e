"""`Admin` on Apache RocketMQ through the remoting protocol: the commands that read a cluster
(clusterList, topicRoute, topicStatus, consumerProgress). Creating and remapping static topics
on RocketMQ is RocketMQ's own `mqadmin updateStaticTopic` / `remappingStaticTopic` for now."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from staticmq_spark.backends.rocketmq.reader import RocketMQReader
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
from staticmq_spark.errors import InvalidOptionError, TopicNotFoundError, UnsupportedOperationError
from staticmq_spark.mapping import ConsistencyReport, check_consistency
from staticmq_spark.protocol.route_view import PLACEHOLDER_BROKER, QueueAddress, TopicRouteView
from staticmq_spark.protocol.topic import TopicConfig

ANSWERED = ("clusterList", "consumerProgress", "topicRoute", "topicStatus")


def _unsupported(command: str) -> NoReturn:
    raise UnsupportedOperationError(
        f"`staticmq admin {command}` is not available on Apache RocketMQ; use RocketMQ's `mqadmin {command}` "
        f"(staticmq answers {', '.join(ANSWERED)} on RocketMQ)"
    )


class RocketMQAdmin(Closeable):
    def __init__(self, reader: RocketMQReader) -> None:
        self.reader = reader

    def cluster_info(self) -> list[BrokerSummary]:
        masters = self.reader.masters(refresh=True)
        return [BrokerSummary(n, "", a, 0) for n, a in sorted(masters.items())]

    def topic_route(self, topic: str) -> dict[str, Any]:
        route = self.reader.route(topic, refresh=True)
        queues = [
            {"queueId": q, "broker": route.leaders.get(q), "addr": route.masters.get(route.leaders.get(q, ""), "")}
            for q in range(route.total_queues)
        ]
        brokers = [{"broker": n, "addr": a} for n, a in sorted(route.masters.items())]
        return {
            "topic": topic,
            "static": route.is_static,
            "totalQueues": route.total_queues,
            "brokers": brokers,
            "queues": queues,
        }

    def route_view(self, topic: str) -> TopicRouteView:
        route = self.reader.route(topic, refresh=True)
        queues = tuple(
            QueueAddress(
                topic, q, route.leaders.get(q, PLACEHOLDER_BROKER), route.masters.get(route.leaders.get(q, ""), "")
            )
            for q in range(route.total_queues)
        )
        return TopicRouteView(topic, route.is_static, route.total_queues, "", queues, queues, dict(route.masters))

    def static_topic_status(self, topic: str) -> tuple[ConsistencyReport, dict[str, BrokerState]]:
        states = self.reader.gather(topic)
        copies = {n: s.mapping for n, s in states.items() if s.mapping is not None or s.config is not None}
        if not any(m is not None for m in copies.values()):
            raise TopicNotFoundError(f"static topic {topic!r} does not exist on the RocketMQ cluster")
        return check_consistency(topic, copies, live=states), states

    def broker_states(self, topic: str) -> dict[str, BrokerState]:
        return self.reader.gather(topic)

    def consumer_progress(self, group: str, topic: str | None = None) -> list[ProgressRow]:
        if not topic:
            raise InvalidOptionError("on RocketMQ, consumerProgress needs -t TOPIC (or use RocketMQ's mqadmin)")
        route = self.reader.route(topic, refresh=True)
        rows = []
        for q in range(route.total_queues):
            broker_offset = self.reader.max_offset(topic, q)
            consumed = self.reader.committed_offset(group, topic, q)
            lag = None if consumed is None else max(0, broker_offset - consumed)
            rows.append(ProgressRow(group, topic, q, route.leaders.get(q, ""), broker_offset, consumed, 0, lag))
        return rows

    # ------------------------------------------------------------------ RocketMQ's mqadmin does these

    def update_static_topic(
        self, topic: str, total_queues: int, *, cluster: str | None = None, brokers: list[str] | None = None
    ) -> OperationResult:
        _unsupported("updateStaticTopic")

    def remapping_static_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        brokers: list[str] | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> OperationResult:
        _unsupported("remappingStaticTopic")

    def repair_static_topic(self, topic: str) -> OperationResult:
        _unsupported("repairStaticTopic")

    def update_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        brokers: list[str] | None = None,
        read_queues: int = 8,
        write_queues: int = 8,
        perm: int = 6,
        order: str = "",
    ) -> dict[str, TopicConfig]:
        _unsupported("updateTopic")

    def delete_topic(self, topic: str) -> list[str]:
        _unsupported("deleteTopic")

    def topic_status(self, topic: str) -> list[QueueStatus]:
        _unsupported("topicStatus")

    def topic_list(self) -> list[TopicSummary]:
        _unsupported("topicList")

    def group_list(self) -> list[GroupSummary]:
        _unsupported("groupList")

    def close(self) -> None:
        self.reader.close()
