"""The in-memory cluster: brokers holding topic configs, mapping copies, physical queues and group
offsets. It is a `MappingStore`, so its create/grow and remap are the staticmq backend's own steps
(backends/static_topic_steps.py: switch-new, fence-old, settle-new): logic offsets jump across a remap."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from staticmq_spark.backends import static_topic_steps as steps
from staticmq_spark.backends.targets import row_targets
from staticmq_spark.backends.types import BrokerState, OperationResult, PhysicalBounds
from staticmq_spark.errors import BrokerNotFoundError, TopicNotFoundError
from staticmq_spark.mapping import Chain, TopicQueueMapping, check_states
from staticmq_spark.protocol.topics.config import TopicConfig

CLUSTERS: dict[str, MemoryCluster] = {}


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class Stored:
    key: str | None
    body: bytes
    tags: str | None = None
    properties: tuple[tuple[str, str], ...] = ()
    born_timestamp: int = 0
    store_timestamp: int = 0


@dataclass
class PhysicalQueue:
    low: int = 0  # physical offset of messages[0]
    messages: list[Stored] = field(default_factory=list)

    @property
    def high(self) -> int:
        return self.low + len(self.messages)

    def bounds(self) -> PhysicalBounds:
        last = self.messages[-1].store_timestamp if self.messages else 0
        return PhysicalBounds(self.low, self.high, last, 0)


@dataclass
class MemoryBroker:
    name: str
    configs: dict[str, TopicConfig] = field(default_factory=dict)
    mappings: dict[str, TopicQueueMapping] = field(default_factory=dict)
    queues: dict[tuple[str, int], PhysicalQueue] = field(default_factory=dict)
    group_offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)

    @property
    def addr(self) -> str:
        return f"memory:{self.name}"

    def state(self, topic: str) -> BrokerState:
        physical = {q: pq.bounds() for (t, q), pq in self.queues.items() if t == topic}
        return BrokerState(self.name, self.addr, self.mappings.get(topic), "", self.configs.get(topic), physical)

    def write_mapping(self, mapping: TopicQueueMapping) -> None:
        """The mapping, then the config (physical queues: every queue id an item here names)."""
        topic = mapping.topic
        self.mappings[topic] = mapping
        ids = [i.queue for chain in mapping.hosted.values() for i in chain if i.bname == self.name]
        old = self.configs.get(topic)
        count = max([*ids, -1]) + 1
        count = max(count, old.write_queues if old is not None else 0)
        self.configs[topic] = TopicConfig(topic, count, count, is_static=True, total_queues=mapping.total_queues)
        for q in range(count):
            self.queues.setdefault((topic, q), PhysicalQueue())


class MemoryCluster:
    """Brokers in this process; `memory://NAME` finds it while it is registered."""

    def __init__(self, name: str, brokers: Sequence[str] = ("broker-0", "broker-1")) -> None:
        self.name = name
        self.brokers = {b: MemoryBroker(b) for b in brokers}
        self.staged: dict[tuple[str, int], dict[int, list[tuple[int, Stored]]]] = {}
        self.committed: set[tuple[str, int]] = set()
        self.lock = threading.RLock()
        CLUSTERS[name] = self

    def close(self) -> None:
        CLUSTERS.pop(self.name, None)

    # ------------------------------------------------------------------ views

    def states(self, topic: str, names: Iterable[str] | None = None) -> dict[str, BrokerState]:
        with self.lock:
            return {n: self.brokers[n].state(topic) for n in sorted(names or self.brokers)}

    def chains(self, topic: str) -> tuple[int, dict[int, Chain]]:
        report = check_states(topic, self.states(topic))
        if not report.exists:
            raise TopicNotFoundError(f"static topic {topic!r} does not exist")
        return report.total_queues, dict(report.chains)

    def physical(self, topic: str, bname: str, queue: int) -> PhysicalQueue:
        broker = self.brokers.get(bname)
        if broker is None:
            raise BrokerNotFoundError(f"broker {bname!r} is not in memory cluster {self.name!r}")
        return broker.queues.setdefault((topic, queue), PhysicalQueue())

    # ------------------------------------------------------------------ admin: the MappingStore port

    def gather(self, topic: str, brokers: Sequence[str] | None = None) -> dict[str, BrokerState]:
        return self.states(topic, brokers)

    def write_mapping(self, broker: BrokerState, mapping: TopicQueueMapping) -> None:
        self.brokers[broker.name].write_mapping(mapping)

    def _targets(self, brokers: Sequence[str] | None) -> list[str]:
        targets = list(brokers or self.brokers)
        missing = [b for b in targets if b not in self.brokers]
        if missing:
            raise BrokerNotFoundError(f"broker(s) {missing} are not alive (live: {sorted(self.brokers)})")
        return targets

    def create_static_topic(
        self, topic: str, total_queues: int, brokers: Sequence[str] | None = None
    ) -> OperationResult:
        with self.lock:
            return steps.create_or_grow(self, topic, total_queues, self._targets(brokers), now_ms())

    def remap(
        self, topic: str, brokers: Sequence[str], on_step: Callable[[str], None] | None = None
    ) -> OperationResult:
        with self.lock:
            return steps.remap(self, topic, self._targets(brokers), now_ms(), on_step)

    # ------------------------------------------------------------------ data

    def leader_queue(self, topic: str, logic_queue: int) -> tuple[str, PhysicalQueue]:
        _, chains = self.chains(topic)
        item = chains[logic_queue][-1]
        return item.bname, self.physical(topic, item.bname, item.queue)

    def append(self, topic: str, rows: Sequence[tuple[int, Stored]]) -> list[tuple[int, int]]:
        """Rows (logic queue, message) appended to their leaders: (logic queue, physical offset) each."""
        with self.lock:
            out = []
            for q, msg in rows:
                _, pq = self.leader_queue(topic, q)
                out.append((q, pq.high))
                pq.messages.append(replace(msg, store_timestamp=msg.store_timestamp or now_ms()))
            return out

    def send(
        self, topic: str, keys: Sequence[str], bodies: Sequence[bytes] | None = None, store_timestamp: int = 0
    ) -> list[tuple[int, int]]:
        """One message per key to logic queue murmur3(key) mod totalQueues; (queue, physical offset) each."""
        total, _ = self.chains(topic)
        targets = row_targets(topic, total, len(keys), keys=keys)
        bodies = bodies if bodies is not None else [k.encode() for k in keys]
        now = store_timestamp or now_ms()
        rows = [
            (int(q), Stored(k, b, born_timestamp=now, store_timestamp=now))
            for q, k, b in zip(targets, keys, bodies, strict=True)
        ]
        return self.append(topic, rows)

    def group_offset(self, group: str, topic: str, queue: int) -> int | None:
        """The group's logic offset of a queue: the commit on the newest segment's broker that has
        one (a double-read-check, newest to oldest, as the brokers do). Hold the lock."""
        _, chains = self.chains(topic)
        for item in reversed(chains[queue]):
            found = self.brokers[item.bname].group_offsets.get((group, topic, queue))
            if found is not None:
                return found
        return None

    def expire(self, topic: str, broker: str, queue: int, below: int) -> None:
        """Retention: drop the physical messages below offset `below`."""
        with self.lock:
            pq = self.physical(topic, broker, queue)
            cut = max(0, min(below, pq.high) - pq.low)
            pq.messages = pq.messages[cut:]
            pq.low += cut
