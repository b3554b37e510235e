"""Admin: cluster, topic and static-topic administration and consumer groups, on any backend
(what a backend cannot do raises UnsupportedOperationError naming the tool that can)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from staticmq_spark.backends import open_backend
from staticmq_spark.backends.types import (
    BrokerState,
    BrokerSummary,
    ClientSecurity,
    GroupSummary,
    OperationResult,
    ProgressRow,
    QueueStatus,
    ResetRow,
    TopicSummary,
)
from staticmq_spark.client.groups import reset_offsets
from staticmq_spark.client.pull_consumer import PullConsumer
from staticmq_spark.closing import Closeable
from staticmq_spark.mapping import ConsistencyReport
from staticmq_spark.protocol.security.auth import Credentials
from staticmq_spark.protocol.topics.config import PERM_READ_WRITE, TopicConfig
from staticmq_spark.protocol.topics.route_view import TopicRouteView


class Admin(Closeable):
    def __init__(
        self,
        namesrv: str,
        *,
        timeout_s: float = 10.0,
        wait_for_ready: bool = True,
        credentials: Credentials | tuple[str, str] | None = None,
        tls_ca: str | Path | None = None,
    ) -> None:
        """`wait_for_ready`: wait (up to the timeout) for a broker that is starting, instead of
        failing at once; callers with their own retry loop pass False."""
        self.namesrv = namesrv
        self._security = ClientSecurity.of(credentials, tls_ca)
        self._backend = open_backend(namesrv, self._security)
        self._port = self._backend.admin(timeout_s=timeout_s, wait_for_ready=wait_for_ready)

    # ------------------------------------------------------------------ cluster and plain topics

    def cluster_info(self) -> list[BrokerSummary]:
        return self._port.cluster_info()

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
        return self._port.update_topic(
            topic,
            cluster=cluster,
            brokers=brokers,
            read_queues=read_queues,
            write_queues=write_queues,
            perm=perm,
            order=order,
        )

    def delete_topic(self, topic: str) -> list[str]:
        """Delete a topic from every live broker that has it; a static topic's mappings too."""
        return self._port.delete_topic(topic)

    def topic_route(self, topic: str) -> dict[str, Any]:
        """The topic's route as `topicRoute --json` prints it."""
        return self._port.topic_route(topic)

    def route_view(self, topic: str) -> TopicRouteView:
        """The route as clients use it: each (logic) queue and the broker serving it."""
        return self._port.route_view(topic)

    def topic_status(self, topic: str) -> list[QueueStatus]:
        """Per physical queue min/max offsets of a dynamic topic, asked from each broker."""
        return self._port.topic_status(topic)

    def topic_list(self) -> list[TopicSummary]:
        return self._port.topic_list()

    # ------------------------------------------------------------------ static topics

    def update_static_topic(
        self, topic: str, total_queues: int, *, cluster: str | None = None, brokers: list[str] | None = None
    ) -> OperationResult:
        """Create a static topic of `total_queues` logic queues, or grow it (never shrink)."""
        return self._port.update_static_topic(topic, total_queues, cluster=cluster, brokers=brokers)

    def remapping_static_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        brokers: list[str] | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> OperationResult:
        """Move logic queue leaders so that they are spread over the target brokers. `on_step` is
        called after each step of the remap ("switched", "fenced", "settled", "done")."""
        return self._port.remapping_static_topic(topic, cluster=cluster, brokers=brokers, on_step=on_step)

    def repair_static_topic(self, topic: str) -> OperationResult:
        """Bring a half-finished static-topic operation to a consistent state."""
        return self._port.repair_static_topic(topic)

    def static_topic_status(self, topic: str) -> tuple[ConsistencyReport, dict[str, BrokerState]]:
        """The global epoch check over the live brokers, and each one's state of the topic."""
        return self._port.static_topic_status(topic)

    def broker_states(self, topic: str) -> dict[str, BrokerState]:
        """Each live broker's state of the topic (mapping copy, config, physical bounds)."""
        return self._port.broker_states(topic)

    # ------------------------------------------------------------------ consumer groups

    def consumer_progress(self, group: str, topic: str | None = None) -> list[ProgressRow]:
        """One row per queue (per logic queue of a static topic)."""
        return self._port.consumer_progress(group, topic)

    def group_list(self) -> list[GroupSummary]:
        return self._port.group_list()

    def reset_offsets(self, group: str, topic: str, to: str | int, *, by_time: bool = False) -> list[ResetRow]:
        """Commit `to` (earliest, latest, an offset, or with `by_time` a time in ms) on every queue."""
        with PullConsumer(
            self.namesrv, group=group, credentials=self._security.credentials, tls_ca=self._security.tls_ca
        ) as consumer:
            return reset_offsets(consumer, topic, to, by_time=by_time)

    def close(self) -> None:
        self._port.close()
        self._backend.close()
