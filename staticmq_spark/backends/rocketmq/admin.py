"""`Admin` on Apache RocketMQ through the remoting protocol, no JVM: clusterList, topicRoute,
topicStatus, topicList, consumerProgress, deleteTopic, and static topics created, grown and
remapped the way RocketMQ's `mqadmin` does it (static_topics.py), so both tools can be mixed."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, NoReturn

from staticmq_spark.backends.retry import retrying
from staticmq_spark.backends.rocketmq.admin_calls import AdminCalls
from staticmq_spark.backends.rocketmq.reader import RocketMQReader
from staticmq_spark.backends.rocketmq.static_topics import (
    BrokerTopic,
    Plan,
    current_topic,
    plan_create,
    plan_remapping,
    settled,
)
from staticmq_spark.backends.rocketmq.wire.remoting import RocketMQError
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
    BrokerUnavailableError,
    InvalidArgumentError,
    InvalidOptionError,
    StaticTopicRefusedError,
    TopicNotFoundError,
    UnsupportedOperationError,
)
from staticmq_spark.mapping import ConsistencyReport, check_consistency
from staticmq_spark.protocol.topics.config import TopicConfig
from staticmq_spark.protocol.topics.route_view import PLACEHOLDER_BROKER, QueueAddress, TopicRouteView

ROUTE_WAIT_S = 90.0  # for a new static topic's route (three periodic registrations of a broker)
# MixAll.PREDEFINE_GROUP_SET of RocketMQ 5.5: the broker's own groups, not users'
ROCKETMQ_GROUPS = frozenset(
    {
        "DEFAULT_CONSUMER",
        "DEFAULT_PRODUCER",
        "TOOLS_CONSUMER",
        "SCHEDULE_CONSUMER",
        "FILTERSRV_CONSUMER",
        "__MONITOR_CONSUMER",
        "CLIENT_INNER_PRODUCER",
        "SELF_TEST_P_GROUP",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_ONSAPI_PULL",
        "CID_SYS_RMQ_TRANS",
    }
)
SYSTEM_TOPIC_PREFIXES = ("%RETRY%", "%DLQ%", "rmq_sys_", "RMQ_SYS_", "SCHEDULE_TOPIC_")

ANSWERED = (
    "clusterList",
    "consumerProgress",
    "deleteTopic",
    "remappingStaticTopic",
    "resetOffsetByTime",
    "topicList",
    "topicRoute",
    "topicStatus",
    "updateStaticTopic",
)

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


def _unsupported(command: str) -> NoReturn:
    raise UnsupportedOperationError(
        f"`staticmq admin {command}` is not available on Apache RocketMQ; use RocketMQ's `mqadmin {command}` "
        f"(staticmq answers {', '.join(ANSWERED)} on RocketMQ)"
    )


class RocketMQAdmin(Closeable):
    def __init__(self, reader: RocketMQReader) -> None:
        self.reader = reader
        self.calls = AdminCalls(reader.client)

    def cluster_info(self) -> list[BrokerSummary]:
        """Every broker's name, cluster and master address. RocketMQ's name server does not report
        when a broker last sent a heartbeat (it drops one silent for 120 s): `last_heartbeat` is 0."""
        masters = self.reader.masters(refresh=True)
        cluster_of = {b: c for c, brokers in self.calls.clusters().items() for b in brokers}
        return [BrokerSummary(n, cluster_of.get(n, ""), a, 0) for n, a in sorted(masters.items())]

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

    # ------------------------------------------------------------------ static topics, as mqadmin writes them

    def _targets(self, cluster: str | None, brokers: list[str] | None) -> list[str]:
        if (cluster is None) == (brokers is None):
            raise InvalidArgumentError("name either a cluster (-c) or brokers (-b), not both or neither")
        masters = self.reader.masters(refresh=True)
        if cluster is not None:
            chosen = [b for b in self.calls.clusters().get(cluster, []) if b in masters]
            if not chosen:
                raise BrokerNotFoundError(
                    f"cluster {cluster!r} has no live broker (live clusters: {sorted(self.calls.clusters())})"
                )
            return chosen
        assert brokers is not None
        missing = [b for b in brokers if b not in masters]
        if missing:
            raise BrokerNotFoundError(f"broker(s) {missing} are not alive (live: {sorted(masters)})")
        return list(brokers)

    def _current(self, topic: str) -> dict[str, BrokerTopic]:
        """Each master's TopicConfigAndQueueMapping of the topic (brokers without it left out)."""
        out = {}
        for name, addr in sorted(self.reader.masters(refresh=True).items()):
            found = self.reader.client.topic_config(addr, topic)
            if found is None:
                continue
            config, mapping = found
            if mapping is None:
                raise StaticTopicRefusedError(f"topic {topic!r} exists as a dynamic topic on {name}: name conflict")
            out[name] = BrokerTopic(config, mapping)
        return out

    def _write(self, plan: Plan, names: list[str]) -> None:
        masters = self.reader.masters()
        for name in names:
            self.calls.update_static_topic(masters[name], plan.brokers[name])

    def update_static_topic(
        self, topic: str, total_queues: int, *, cluster: str | None = None, brokers: list[str] | None = None
    ) -> OperationResult:
        """Create a static topic of `total_queues` logic queues, or grow it, as `mqadmin
        updateStaticTopic` does; the other brokers of the targets' clusters get an empty mapping."""
        targets = self._targets(cluster, brokers)
        current = self._current(topic)
        chains, epoch, _ = current_topic(topic, current)
        clusters = self.calls.clusters()
        same_cluster = sorted({b for members in clusters.values() if set(members) & set(targets) for b in members})
        masters = self.reader.masters()
        plan = plan_create(
            topic, total_queues, targets, current, chains, epoch, [b for b in same_cluster if b in masters], now_ms()
        )
        self._write(plan, sorted(plan.brokers))
        self._await_route(topic, total_queues)
        made = f"{len(plan.created)} logic queue(s) created"
        return OperationResult(topic, plan.epoch, total_queues, {}, dict(plan.created), made)

    def _await_route(self, topic: str, total_queues: int) -> None:
        """Until the name servers route every logic queue to a live leader: a broker registers a
        topic it was just given with the name servers on its own, and a registration that times out
        on a busy machine waits for the next periodic one (30 s), during which sends fail."""
        waiting = (TopicNotFoundError, BrokerUnavailableError, RocketMQError)

        def attempt(_n: int) -> None:
            route = self.reader.route(topic, refresh=True)
            missing = [q for q in range(total_queues) if route.leaders.get(q) not in route.masters]
            if missing:
                raise BrokerUnavailableError(f"logic queue(s) {missing} have no live leader in it")

        try:
            retrying(
                f"the route of {topic!r}",
                ROUTE_WAIT_S,
                attempt,
                retriable=lambda exc: isinstance(exc, waiting),
                log_level=logging.DEBUG,
            )
        except waiting as exc:
            raise BrokerUnavailableError(
                f"static topic {topic!r} was written to its brokers, but the name servers' route "
                f"is not complete after {ROUTE_WAIT_S:g} s: {exc.message}"
            ) from None

    def remapping_static_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        brokers: list[str] | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> OperationResult:
        """Move logic queue leaders onto the target brokers in mqadmin's steps: write the map-in
        brokers (new leaders writable, offsets undecided), the map-out brokers (fenced), read the old
        leaders' max offsets, write the map-in and the map-out brokers with the settled offsets, then
        the others."""
        step = on_step or (lambda _name: None)
        targets = self._targets(cluster, brokers)
        current = self._current(topic)
        chains, epoch, total = current_topic(topic, current)
        if not chains:
            raise TopicNotFoundError(f"static topic {topic!r} does not exist on the RocketMQ cluster")
        plan = plan_remapping(topic, targets, current, chains, total, epoch, now_ms())
        if not plan.moved:
            return OperationResult(topic, epoch, total, {}, {}, "nothing to move")
        self._write(plan, plan.map_in)
        step("switched")
        self._write(plan, plan.map_out)
        step("fenced")
        masters = self.reader.masters()
        olds = sorted({(chains[q][-1].bname, chains[q][-1].queue) for q in plan.moved})
        maxima = {(b, queue): self.reader.client.max_offset(masters[b], topic, queue, logic=False) for b, queue in olds}
        plan = settled(plan, maxima)
        self._write(plan, plan.map_in)
        self._write(plan, plan.map_out)
        step("settled")
        self._write(plan, [n for n in sorted(plan.brokers) if n not in plan.map_in and n not in plan.map_out])
        step("done")
        moved = f"{len(plan.moved)} logic queue(s) moved"
        return OperationResult(topic, plan.epoch, total, dict(plan.moved), {}, moved)

    def delete_topic(self, topic: str) -> list[str]:
        """Delete the topic (its configs and mappings) from every master that has it, then from the
        name servers."""
        masters = self.reader.masters(refresh=True)
        holders = [n for n, addr in sorted(masters.items()) if self.reader.client.topic_config(addr, topic)]
        if not holders:
            raise TopicNotFoundError(f"no RocketMQ broker has topic {topic!r}")
        for name in holders:
            try:
                self.calls.delete_topic_in_broker(masters[name], topic)
            except RocketMQError as exc:
                # RocketMQ 5.5 deletes the topic, then fails on its timer store when timerWheelEnable
                # is false (AdminBrokerProcessor.deleteTopicInBroker): gone is gone.
                if self.reader.client.topic_config(masters[name], topic) is not None:
                    raise
                log.warning("topic %s deleted on %s, which answered with an error: %s", topic, name, exc.message)
        self.calls.delete_topic_in_namesrvs(topic)
        return holders

    def topic_list(self) -> list[TopicSummary]:
        """Every topic the name servers route, static or not (system topics included, as mqadmin's)."""
        out = []
        for topic in sorted(self.reader.client.topic_names()):
            try:
                route = self.reader.route(topic, refresh=True)
            except TopicNotFoundError:
                continue  # deleted meanwhile
            total = route.total_queues if route.is_static else 0
            out.append(TopicSummary(topic, route.is_static, total, tuple(sorted(route.masters))))
        return out

    # ------------------------------------------------------------------ left to RocketMQ's mqadmin

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

    def topic_status(self, topic: str) -> list[QueueStatus]:
        """Per physical queue of every broker holding `topic`: min/max offsets and the store time of
        its newest message (RocketMQ's GET_TOPIC_STATS_INFO, what `mqadmin topicStatus` asks)."""
        out: list[QueueStatus] = []
        for name, addr in sorted(self.reader.masters(refresh=True).items()):
            stats = self.calls.topic_stats(addr, topic)
            for queue, (lo, hi, last) in sorted((stats or {}).items()):
                out.append(QueueStatus(name, queue, lo, hi, last))
        return out

    def group_list(self) -> list[GroupSummary]:
        """Every consumer group the brokers know (RocketMQ's predefined and CID_RMQ_SYS_ groups left
        out), with the topics it committed offsets of; RocketMQ keeps no commit time (0)."""
        groups: dict[str, set[str]] = {}
        for addr in self.reader.masters(refresh=True).values():
            for group in self.calls.subscription_groups(addr):
                groups.setdefault(group, set())
            for group, topics in self.calls.consumer_offsets(addr).items():
                groups.setdefault(group, set()).update(topics)
        return [
            GroupSummary(group, tuple(sorted(t for t in topics if not t.startswith(SYSTEM_TOPIC_PREFIXES))), 0)
            for group, topics in sorted(groups.items())
            if group not in ROCKETMQ_GROUPS and not group.startswith("CID_RMQ_SYS_")
        ]

    def close(self) -> None:
        self.reader.close()
