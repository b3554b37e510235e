"""The memory backend's ports (reader, exactly-once sink, admin) over a registered MemoryCluster."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from staticmq_spark.backends.address import ClusterAddress
from staticmq_spark.backends.api import EXACTLY_ONCE, ProducerSettings, TaskWrite
from staticmq_spark.backends.exclusive_port import ExclusivePort, ExclusiveSettings
from staticmq_spark.backends.memory.cluster import CLUSTERS, MemoryBroker, MemoryCluster, Stored, now_ms
from staticmq_spark.backends.pop_port import DEFAULT_POP, PopPort, PopSettings
from staticmq_spark.backends.types import (
    PLAIN,
    BrokerState,
    BrokerSummary,
    Capabilities,
    ClientSecurity,
    MessageColumns,
    OperationResult,
    PhysicalRead,
    ProgressRow,
    PullStatus,
    SinkRows,
    TopicSummary,
    WriteSettings,
)
from staticmq_spark.errors import BrokerNotFoundError, NotFoundError, UnsupportedOperationError
from staticmq_spark.mapping import ConsistencyReport, chain_lag, check_states, logic_bounds
from staticmq_spark.protocol.consume.tag_expression import parse_tag_expression
from staticmq_spark.protocol.rows.codec import DECODED_SCHEMA
from staticmq_spark.protocol.topics.config import TopicConfig
from staticmq_spark.protocol.topics.route_view import QueueAddress, TopicRouteView


def _cluster(address: ClusterAddress) -> MemoryCluster:
    name = address.hosts[0]
    found = CLUSTERS.get(name)
    if found is None:
        raise BrokerNotFoundError(f"no memory cluster {name!r} in this process (create MemoryCluster({name!r}))")
    return found


def _columns(messages: Sequence[Stored], include_properties: bool) -> pa.RecordBatch:
    props = [list(m.properties) if include_properties else [] for m in messages]
    arrays = [
        pa.array([m.key for m in messages], pa.string()),
        pa.array([m.tags for m in messages], pa.string()),
        pa.array([m.body for m in messages], pa.binary()),
        pa.array(props, DECODED_SCHEMA.field("properties").type),
        pa.array([m.born_timestamp for m in messages], pa.int64()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=DECODED_SCHEMA)


class MemoryReader:
    capabilities = Capabilities(two_phase_staging=True, pop=False, producer=False, pull_consumer=False)

    def __init__(self, address: ClusterAddress, cluster: MemoryCluster) -> None:
        self.address = address
        self.cluster = cluster

    def gather(self, topic: str, brokers: Mapping[str, str] | None = None) -> dict[str, BrokerState]:
        if brokers is None:
            return self.cluster.states(topic)
        with self.cluster.lock:  # a broker no longer in the cluster does not answer
            return self.cluster.states(topic, [n for n in brokers if n in self.cluster.brokers])

    def live_brokers(self) -> dict[str, str]:
        with self.cluster.lock:
            return {n: b.addr for n, b in self.cluster.brokers.items()}

    def topic_names(self) -> set[str]:
        with self.cluster.lock:
            return {t for b in self.cluster.brokers.values() for t in b.configs}

    def pull_physical(
        self,
        topic: str,
        bname: str,
        addr: str,
        queue: int,
        offset: int,
        max_messages: int,
        retry_timeout_s: float,
        include_properties: bool = True,
        until: int | None = None,
        subscription: str = "",
    ) -> PhysicalRead:
        wanted = parse_tag_expression(subscription)
        with self.cluster.lock:
            pq = self.cluster.physical(topic, bname, queue)
            if offset < pq.low:
                return PhysicalRead(PullStatus.OFFSET_MOVED, pq.low, None)
            if offset > pq.high:
                return PhysicalRead(PullStatus.OFFSET_MOVED, pq.high, None)
            if offset == pq.high:
                return PhysicalRead(PullStatus.NO_NEW_MESSAGE, pq.high, None)
            got = pq.messages[offset - pq.low : offset - pq.low + max(1, max_messages)]
        offsets = np.arange(offset, offset + len(got), dtype=np.int64)
        if not wanted.takes_all:  # as a broker filtering by tag: the others are gaps
            keep = [i for i, m in enumerate(got) if m.tags in (wanted.tags or ())]
            if not keep:
                return PhysicalRead(PullStatus.RETRY_AT_NEXT, offset + len(got), None)
            got, offsets = [got[i] for i in keep], offsets[keep]
        stamps = np.array([m.store_timestamp for m in got], dtype=np.int64)
        columns = MessageColumns(_columns(got, include_properties), offsets, stamps)
        return PhysicalRead(PullStatus.FOUND, int(offsets[-1]) + 1, columns)

    def offset_for_timestamp(self, topic: str, queue: int, timestamp_ms: int) -> int:
        with self.cluster.lock:
            _, chains = self.cluster.chains(topic)
            end = 0
            for item in (i for i in chains[queue] if i.decided):
                pq = self.cluster.physical(topic, item.bname, item.queue)
                stop = item.end_offset if item.end_offset >= 0 else pq.high
                for physical in range(max(item.start_offset, pq.low), min(stop, pq.high)):
                    if pq.messages[physical - pq.low].store_timestamp >= timestamp_ms:
                        return item.to_logic(physical)
                end = item.to_logic(stop)
            return end

    def _leader(self, topic: str, queue: int) -> MemoryBroker:
        _, chains = self.cluster.chains(topic)
        return self.cluster.brokers[chains[queue][-1].bname]

    def commit_offset(self, group: str, topic: str, queue: int, offset: int) -> None:
        with self.cluster.lock:
            self._leader(topic, queue).group_offsets[(group, topic, queue)] = offset

    def committed_offset(self, group: str, topic: str, queue: int) -> int | None:
        with self.cluster.lock:
            return self.cluster.group_offset(group, topic, queue)

    def close(self) -> None:
        """Nothing to release: the cluster lives in this process (MemoryCluster.close ends it)."""


class MemorySink:
    """Exactly once: tasks stage rows per (writer, batch, partition), invisible; the first commit
    of a (writer, batch) appends them to the leaders, any later one adds nothing."""

    guarantee = EXACTLY_ONCE

    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster

    def total_queues(self, topic: str) -> int:
        total, _ = self.cluster.chains(topic)
        return total

    def write_task(
        self, settings: WriteSettings, writer: str, batch: int, partition: int, placed: Iterator[SinkRows]
    ) -> TaskWrite:
        rows: list[tuple[int, Stored]] = []
        now = now_ms()
        for part in placed:
            n = part.num_rows
            none: list[Any] = [None] * n
            keys = part.key.to_pylist() if part.key is not None else none
            tags = part.tags.to_pylist() if part.tags is not None else none
            props = part.properties.to_pylist() if part.properties is not None else none
            for i, (target, body) in enumerate(zip(part.targets.tolist(), part.value.to_pylist(), strict=True)):
                rows.append((target, Stored(keys[i], bytes(body), tags[i], tuple(props[i] or ()), now)))
        with self.cluster.lock:
            self.cluster.staged.setdefault((writer, batch), {})[partition] = rows
        return TaskWrite(writer, batch, partition, len(rows))

    def commit(self, settings: WriteSettings, writer: str, batch: int, tasks: Sequence[TaskWrite]) -> int:
        with self.cluster.lock:
            if (writer, batch) in self.cluster.committed:
                return 0
            staged = self.cluster.staged.pop((writer, batch), {})
            rows = [r for t in sorted(tasks, key=lambda t: t.partition) for r in staged.get(t.partition, [])]
            self.cluster.append(settings.topic, rows)
            self.cluster.committed.add((writer, batch))
            return len(rows)

    def aborted(self) -> str:
        return "its staged rows are never made visible"


def _unsupported(operation: str) -> UnsupportedOperationError:
    return UnsupportedOperationError(
        f"{operation} is not supported by the memory:// test backend (use a staticmq cluster)"
    )


class MemoryAdmin:
    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster

    def cluster_info(self) -> list[BrokerSummary]:
        return [BrokerSummary(b.name, self.cluster.name, b.addr, now_ms()) for b in self.cluster.brokers.values()]

    def _brokers(self, cluster: str | None, brokers: list[str] | None) -> list[str] | None:
        if cluster is not None and cluster != self.cluster.name:
            raise BrokerNotFoundError(
                f"cluster {cluster!r} has no live broker (live clusters: [{self.cluster.name!r}])"
            )
        return brokers

    def update_static_topic(
        self, topic: str, total_queues: int, *, cluster: str | None = None, brokers: list[str] | None = None
    ) -> OperationResult:
        return self.cluster.create_static_topic(topic, total_queues, self._brokers(cluster, brokers))

    def remapping_static_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        brokers: list[str] | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> OperationResult:
        return self.cluster.remap(topic, self._brokers(cluster, brokers) or list(self.cluster.brokers), on_step)

    def static_topic_status(self, topic: str) -> tuple[ConsistencyReport, dict[str, BrokerState]]:
        states = self.cluster.states(topic)
        return check_states(topic, states), states

    def broker_states(self, topic: str) -> dict[str, BrokerState]:
        return self.cluster.states(topic)

    def topic_list(self) -> list[TopicSummary]:
        out = []
        with self.cluster.lock:
            names = sorted({t for b in self.cluster.brokers.values() for t in b.configs})
        for topic in names:
            total, chains = self.cluster.chains(topic)
            out.append(TopicSummary(topic, True, total, tuple(sorted({c[-1].bname for c in chains.values()}))))
        return out

    def repair_static_topic(self, topic: str) -> OperationResult:
        raise _unsupported("repairStaticTopic")

    def update_topic(self, topic: str, **options: Any) -> dict[str, TopicConfig]:
        raise _unsupported("updateTopic")

    def delete_topic(self, topic: str) -> list[str]:
        raise _unsupported("deleteTopic")

    def topic_status(self, topic: str) -> list[Any]:
        raise _unsupported("topicStatus")

    def route_view(self, topic: str) -> TopicRouteView:
        total, chains = self.cluster.chains(topic)
        addrs = {name: b.addr for name, b in self.cluster.brokers.items()}
        queues = tuple(QueueAddress(topic, q, chains[q][-1].bname, addrs[chains[q][-1].bname]) for q in range(total))
        return TopicRouteView(topic, True, total, "", queues, queues, addrs)

    def topic_route(self, topic: str) -> dict[str, Any]:
        view = self.route_view(topic)
        return {
            "topic": topic,
            "static": True,
            "totalQueues": view.total_queues,
            "brokers": [{"broker": n, "addr": a} for n, a in sorted(view.brokers.items())],
            "queues": [{"queueId": q.queue_id, "broker": q.broker, "addr": q.addr} for q in view.write_queues],
        }

    def group_list(self) -> list[Any]:
        raise _unsupported("groupList")

    def consumer_progress(self, group: str, topic: str | None = None) -> list[ProgressRow]:
        with self.cluster.lock:
            committed = {t for b in self.cluster.brokers.values() for (g, t, _) in b.group_offsets if g == group}
        if not committed:
            raise NotFoundError(f"consumer group {group!r} is unknown: no broker has a committed offset of it")
        rows = []
        for t in [topic] if topic else sorted(committed):
            report, states = self.static_topic_status(t)
            for q, chain in sorted(report.chains.items()):
                _, high, _ = logic_bounds(chain, states)
                with self.cluster.lock:
                    offset = self.cluster.group_offset(group, t, q)
                lag = None if offset is None else chain_lag(chain, states, offset)
                rows.append(ProgressRow(group, t, q, chain[-1].bname, high, offset, 0, lag))
        return rows

    def close(self) -> None:
        """Nothing to release: the cluster lives in this process (MemoryCluster.close ends it)."""


class MemoryBackend:
    """Its client instance is the in-process cluster object, looked up by name for each port (a
    cluster closed and made again under the same name is the new one)."""

    scheme = "memory"
    capabilities = MemoryReader.capabilities

    def __init__(self, address: ClusterAddress, security: ClientSecurity = PLAIN) -> None:
        self.address = address
        self.security = security

    def reader(self) -> MemoryReader:
        return MemoryReader(self.address, _cluster(self.address))

    def sink(self, delivery: str = EXACTLY_ONCE) -> MemorySink:
        return MemorySink(_cluster(self.address))

    def admin(self, *, timeout_s: float = 10.0, wait_for_ready: bool = True) -> MemoryAdmin:
        return MemoryAdmin(_cluster(self.address))

    def producer(self, settings: ProducerSettings) -> Any:
        raise _unsupported("a producer")

    def pull_consumer(self, *, group: str = "", request_timeout_s: float = 15.0) -> Any:
        raise _unsupported("a pull consumer")

    def pop_consumer(self, group: str, topic: str, settings: PopSettings = DEFAULT_POP) -> PopPort:
        raise _unsupported("POP consumption")

    def exclusive_consumer(self, group: str, topic: str, settings: ExclusiveSettings) -> ExclusivePort:
        raise _unsupported("exclusive consumption")

    def close(self) -> None:
        """Nothing to release: the cluster lives in this process (MemoryCluster.close ends it)."""
