"""The seam: what the layers above (client, source, sink, CLI, demo) need from a cluster, as
interfaces. A backend implements them for one protocol; `registry.py` picks it by address.

A backend answers for a whole cluster. It makes one client instance (its connection state:
staticmq's channels, route cache and broker detection; RocketMQ's remoting client; the memory
cluster object) and hands it to every port it makes (reader, sink, admin, producer, consumers),
which never open connections of their own (tests/unit/test_connection_ownership.py); closing the
backend closes them. It retries brokers that restart, and says which optional capabilities it
has. An operation a backend cannot do raises UnsupportedOperationError naming the operation and
the backend that can.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from staticmq_spark.backends.address import ClusterAddress
from staticmq_spark.backends.exclusive_port import ExclusivePort, ExclusiveSettings
from staticmq_spark.backends.pop_port import DEFAULT_POP, PopPort, PopSettings
from staticmq_spark.backends.types import (
    DEFAULT_REQUEST_BYTES,
    BrokerState,
    BrokerSummary,
    Capabilities,
    ClientSecurity,
    GroupSummary,
    OperationResult,
    PhysicalRead,
    ProgressRow,
    PullResult,
    QueueAddress,
    QueueOffsets,
    QueueStatus,
    SendResult,
    SinkRows,
    TopicSummary,
    WriteSettings,
)
from staticmq_spark.mapping import ConsistencyReport
from staticmq_spark.protocol.rows.codec import PackedBatch
from staticmq_spark.protocol.topics.config import TopicConfig
from staticmq_spark.protocol.topics.route_view import TopicRouteView


class ClusterReader(Protocol):
    """Reading a static topic: snapshots (driver), physical pulls (executors), group offsets."""

    address: ClusterAddress
    capabilities: Capabilities

    def gather(self, topic: str, brokers: Mapping[str, str] | None = None) -> dict[str, BrokerState]:
        """Every live broker's mapping copy, topic config and physical queue bounds; with `brokers`
        (name -> address, as `live_brokers` gave), those brokers' without asking the name server.
        A broker of `brokers` that does not answer is left out or raises StaticMQError."""
        ...

    def live_brokers(self) -> dict[str, str]:
        """name -> address of every live broker, as the name server says now."""
        ...

    def topic_names(self) -> set[str]:
        """Names of the cluster's topics (at least every static one; `gather` tells which are)."""
        ...

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
        """Messages of physical queue `bname/queue` from physical `offset` on. `until` (the planned
        end) lets a backend pull the next range ahead while the caller decodes this one.
        `subscription` (a tag expression, protocol.consume.tag_filter): the broker skips messages whose tag
        code does not match (their offsets are gaps; a read that matched nothing answers
        RETRY_AT_NEXT); the caller still checks each message's tag."""
        ...

    def offset_for_timestamp(self, topic: str, queue: int, timestamp_ms: int) -> int:
        """The first logic offset of `queue` stored at or after `timestamp_ms`."""
        ...

    def commit_offset(self, group: str, topic: str, queue: int, offset: int) -> None: ...

    def committed_offset(self, group: str, topic: str, queue: int) -> int | None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class TaskWrite:
    """What one sink task wrote: picklable, sent from the executor to the driver's commit.
    `detail` is the backend's own record (e.g. the chunks a task staged on each broker)."""

    writer: str
    batch: int
    partition: int
    rows: int
    detail: Any = None


EXACTLY_ONCE = "exactly-once"  # rows staged by the tasks, made visible once by the driver's commit
AT_LEAST_ONCE = "at-least-once"  # rows sent by the tasks directly: visible at once, again on a replay
# Apache RocketMQ only: exactly once with RocketMQ's transactional half messages, one per row (slow;
# kept for clusters that must not hold a staging topic). Its guarantee is EXACTLY_ONCE.
EXACTLY_ONCE_TRANSACTIONAL = "exactly-once-transactional"


class SinkWriter(Protocol):
    guarantee: str  # EXACTLY_ONCE or AT_LEAST_ONCE

    def total_queues(self, topic: str) -> int:
        """The number of logic queues of `topic` (a static topic, or the write is refused)."""
        ...

    def write_task(
        self, settings: WriteSettings, writer: str, batch: int, partition: int, rows: Iterator[SinkRows]
    ) -> TaskWrite:
        """Executor side: write one task's rows, each to the logic queue it was placed on above the
        seam (sink/placement.py); a writer never chooses a queue."""
        ...

    def commit(self, settings: WriteSettings, writer: str, batch: int, tasks: Sequence[TaskWrite]) -> int:
        """Driver side: make the batch's rows visible exactly once; the rows made visible now."""
        ...

    def aborted(self) -> str:
        """What became of the rows of an aborted batch, said to the user."""
        ...


@dataclass(frozen=True, slots=True)
class ProducerSettings:
    order: str | None = None  # strict | best-tried | None (the topic's own)
    send_timeout_s: float = 30.0
    request_timeout_s: float = 10.0
    retries: int = 2
    active_detection: bool = True
    detection_interval_s: float = 2.0
    max_request_bytes: int = DEFAULT_REQUEST_BYTES
    producer_group: str = field(default="staticmq_producer")


class ProducerPort(Protocol):
    def send_batch(
        self,
        topic: str,
        bodies: Any,
        *,
        keys: Any = None,
        tags: Any = None,
        properties: Any = None,
        queue: int | None = None,
        queues: Any = None,
    ) -> list[SendResult]: ...

    def send_packed(
        self, topic: str, packed: PackedBatch, *, keys: Any = None, queue: int | None = None, queues: Any = None
    ) -> list[SendResult]: ...

    def topic_is_static(self, topic: str) -> bool:
        """Whether the cluster's route of `topic` (asked now, not cached) is a static topic's."""
        ...

    def total_queues(self, topic: str) -> int:
        """How many logic queues `topic` has (its cached route): the modulus of the key hash."""
        ...

    def close(self) -> None: ...


class PullPort(Protocol):
    group: str

    def queues(self, topic: str, refresh: bool = False) -> list[QueueAddress]: ...

    def pull(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_messages: int = 1024,
        max_bytes: int = 0,
        wait_ms: int = 0,
        broker: str | None = None,
        subscription: str = "",
    ) -> PullResult: ...

    def offsets(self, topic: str) -> list[QueueOffsets]: ...

    def min_offset(self, topic: str, queue_id: int, broker: str | None = None) -> int: ...

    def max_offset(self, topic: str, queue_id: int, broker: str | None = None) -> int: ...

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int, broker: str | None = None) -> int: ...

    def commit(self, topic: str, queue_id: int, offset: int, broker: str | None = None) -> None: ...

    def committed(self, topic: str, queue_id: int, broker: str | None = None) -> int | None: ...

    def topic_is_static(self, topic: str) -> bool: ...

    def close(self) -> None: ...


class ClusterAdmin(Protocol):
    """Static-topic administration (and the plain-topic commands where the backend has them)."""

    def cluster_info(self) -> list[BrokerSummary]: ...

    def update_static_topic(
        self, topic: str, total_queues: int, *, cluster: str | None = None, brokers: list[str] | None = None
    ) -> OperationResult: ...

    def remapping_static_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        brokers: list[str] | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> OperationResult: ...

    def repair_static_topic(self, topic: str) -> OperationResult: ...

    def static_topic_status(self, topic: str) -> tuple[ConsistencyReport, dict[str, BrokerState]]:
        """The global epoch check's report and every live broker's state of the topic."""
        ...

    def broker_states(self, topic: str) -> dict[str, BrokerState]:
        """Every live broker's state of the topic (no check)."""
        ...

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
    ) -> dict[str, TopicConfig]: ...

    def delete_topic(self, topic: str) -> list[str]: ...

    def topic_status(self, topic: str) -> list[QueueStatus]:
        """Per physical queue min/max offsets of a dynamic topic."""
        ...

    def topic_route(self, topic: str) -> dict[str, Any]:
        """The route as `staticmq admin topicRoute --json` prints it."""
        ...

    def route_view(self, topic: str) -> TopicRouteView:
        """The route as clients use it: each (logic) queue and the broker serving it."""
        ...

    def topic_list(self) -> list[TopicSummary]: ...

    def group_list(self) -> list[GroupSummary]: ...

    def consumer_progress(self, group: str, topic: str | None = None) -> list[ProgressRow]: ...

    def close(self) -> None: ...


class Backend(Protocol):
    """One cluster, reached through one protocol: the factory of everything above."""

    scheme: str
    address: ClusterAddress
    security: ClientSecurity
    capabilities: Capabilities

    def reader(self) -> ClusterReader: ...

    def sink(self, delivery: str = EXACTLY_ONCE) -> SinkWriter:
        """The sink writing with `delivery` (EXACTLY_ONCE or AT_LEAST_ONCE); a backend whose sink is
        exactly once returns it for either."""
        ...

    def admin(self, *, timeout_s: float = 10.0, wait_for_ready: bool = True) -> ClusterAdmin: ...

    def producer(self, settings: ProducerSettings) -> ProducerPort: ...

    def pull_consumer(self, *, group: str = "", request_timeout_s: float = 15.0) -> PullPort: ...

    def pop_consumer(self, group: str, topic: str, settings: PopSettings = DEFAULT_POP) -> PopPort:
        """POP consumption (Capabilities.pop): the port the PopConsumer's loops run over (group,
        topic and settings checked by the caller)."""
        ...

    def exclusive_consumer(self, group: str, topic: str, settings: ExclusiveSettings) -> ExclusivePort:
        """Exclusive, lock-held consumption (Capabilities.exclusive): the port the one loop above
        the seam (client/exclusive_loop.py) runs over."""
        ...

    def close(self) -> None: ...
