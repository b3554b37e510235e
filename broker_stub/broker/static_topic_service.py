"""Static topics on one broker: storing mapping copies (rules checked, mapping written before the
topic config), sends to the logic queues it leads, logic reads and offsets, consumer offsets
with double-read-check, and what it tells the name server.

A send and a mapping write for the same topic are serialised, so once a write that fences this
broker returns, no further message lands in the old leader's queue: its final max is stable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from broker_stub.broker.message_service import MessageService, PullOutcome, PullQuery, QueueOffsetInfo, SendOutcome
from broker_stub.broker.segment_access import SegmentAccess
from broker_stub.broker.static_reads import StaticReads
from broker_stub.store.consumer_offsets import ConsumerOffsets
from broker_stub.store.mapping_files import MappingFiles
from broker_stub.store.message_store import MessageStore
from broker_stub.store.store_results import StagedRecord
from broker_stub.store.topic_configs import TopicConfigs
from staticmq_spark.errors import (
    InvalidOffsetError,
    MappingRejectedError,
    NotLeaderError,
    QueueNotFoundError,
    StaticTopicRefusedError,
    TopicNotFoundError,
)
from staticmq_spark.mapping import Chain, MappingItem, TopicQueueMapping, check_transition, first_decided, locate
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.rows.codec import PackedBatch
from staticmq_spark.protocol.topics.config import PERM_READ_WRITE, TopicConfig
from staticmq_spark.protocol.topics.names import validate_topic
from staticmq_spark.protocol.wire.topic_config import config_to_pb


@dataclass(frozen=True, slots=True)
class StaticState:
    mapping: TopicQueueMapping | None
    foreign_bname: str
    config: TopicConfig | None
    physical: list[QueueOffsetInfo]


class StaticTopicService:
    def __init__(
        self,
        name: str,
        files: MappingFiles,
        topics: TopicConfigs,
        store: MessageStore,
        offsets: ConsumerOffsets,
        messages: MessageService,
        access: SegmentAccess,
    ) -> None:
        self._name = name
        self._files = files
        self._topics = topics
        self._store = store
        self._offsets = offsets
        self._messages = messages
        self.access = access
        self.reads = StaticReads(access)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def _lock(self, topic: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(topic, threading.Lock())

    # ------------------------------------------------------------------ mapping copies

    def is_static(self, topic: str) -> bool:
        cfg = self._topics.get(topic)
        return cfg is not None and cfg.is_static

    def write_mapping(self, mapping: TopicQueueMapping) -> TopicConfig:
        """Store a copy after checking the mapping rules; then create physical queues and mark
        the topic static in its config (the mapping is always written first)."""
        validate_topic(mapping.topic)
        with self._lock(mapping.topic):
            old = self._files.get(mapping.topic)
            check_transition(old, mapping, self._name)
            cfg = self._topics.get(mapping.topic)
            if cfg is not None and not cfg.is_static:
                raise StaticTopicRefusedError(
                    f"topic {mapping.topic!r} exists as a dynamic topic on {self._name}; delete it first"
                )
            count = self._physical_count(mapping, old, cfg.write_queues if cfg else 0)
            self._files.save(mapping)
            new_cfg = TopicConfig(
                name=mapping.topic,
                read_queues=count,
                write_queues=count,
                perm=PERM_READ_WRITE,
                is_static=True,
                uid=cfg.uid if cfg else 0,
                order=cfg.order if cfg else "",
                total_queues=mapping.total_queues,
            )
            stored = self._topics.put(new_cfg)
            self._store.register_topic(stored.name, stored.uid)
            return stored

    def _physical_count(self, new: TopicQueueMapping, old: TopicQueueMapping | None, used: int) -> int:
        """Physical queues the topic needs here; a new leader must take a never-used queue (one
        at or above the `used` count the topic had before this mapping, whatever the order in
        which the logic queues are walked)."""
        count = used
        for q, chain in sorted(new.hosted.items()):
            for item in chain:
                if item.bname != self._name:
                    continue
                is_new_leader = item is chain[-1] and not _has_gen(old, q, item.gen)
                if is_new_leader and item.queue < used:
                    raise MappingRejectedError(
                        f"topic {new.topic!r} logic queue {q}: physical queue {item.queue} of {self._name} was "
                        f"used before (the topic has {used}); a physical queue is never reused"
                    )
                count = max(count, item.queue + 1)
        return count

    def delete(self, topic: str) -> None:
        with self._lock(topic):
            cfg = self._topics.get(topic)
            if cfg is None and self._files.get(topic) is None and topic not in self._files.foreign:
                raise TopicNotFoundError(f"topic {topic!r} does not exist on {self._name}")
            if cfg is not None and not cfg.is_static:
                raise StaticTopicRefusedError(f"topic {topic!r} is not static on {self._name}")
            self._files.delete(topic)
            self._topics.delete(topic)
            self._store.delete_topic(topic)
            self._offsets.delete_topic(topic)

    def state(self, topic: str) -> StaticState:
        cfg = self._topics.get(topic)
        physical = []
        if cfg is not None:
            physical = [self._messages.physical_offsets(topic, q) for q in range(cfg.write_queues)]
        return StaticState(self._files.get(topic), self._files.foreign.get(topic, ""), cfg, physical)

    def _chain(self, topic: str, logic_queue: int) -> tuple[TopicQueueMapping, Chain]:
        mapping = self._files.get(topic)
        if mapping is None:
            raise TopicNotFoundError(f"static topic {topic!r} has no mapping on {self._name}")
        if not 0 <= logic_queue < mapping.total_queues:
            raise QueueNotFoundError(
                f"static topic {topic!r} has {mapping.total_queues} logic queues; {logic_queue} does not exist"
            )
        chain = mapping.hosted.get(logic_queue)
        if not chain:
            raise NotLeaderError(
                f"{self._name} does not host logic queue {logic_queue} of {topic!r}: refresh the route"
            )
        return mapping, chain

    def _leader_here(self, topic: str, logic_queue: int, chain: Chain) -> MappingItem:
        """The chain's leader item, which must be on this broker: only the leader appends."""
        item = chain[-1]
        if item.bname != self._name:
            raise NotLeaderError(
                f"{self._name} is not the leader of logic queue {logic_queue} of {topic!r} "
                f"(the leader is {item.bname}, gen {item.gen}): refresh the route"
            )
        return item

    # ------------------------------------------------------------------ send

    def send(
        self,
        topic: str,
        logic_queue: int,
        batch: PackedBatch,
        idempotency_key: bytes,
        *,
        dedup_across_segments: bool = False,
        validated: bool = False,
    ) -> SendOutcome:
        """Append to the leader item's physical queue; only the leader's broker accepts.
        With `dedup_across_segments`, a key already stored on one of the logic queue's earlier
        segments (before a remap) makes this a duplicate too."""
        if dedup_across_segments and idempotency_key and self._store.stored_key(idempotency_key) is None:
            _, chain = self._chain(topic, logic_queue)
            earlier = self._stored_earlier(topic, chain, idempotency_key.decode())
            if earlier is not None:
                return SendOutcome(logic_queue, *_rest(earlier))
        with self._lock(topic):
            _, chain = self._chain(topic, logic_queue)
            item = self._leader_here(topic, logic_queue, chain)
            delta = item.offset_delta if item.decided else None
            out = self._messages.append_physical(
                topic, item.queue, batch, idempotency_key, delta, durable=False, validated=validated
            )
        self._store.wait_durable(out.end_pos)
        return SendOutcome(logic_queue, *_rest(out))

    def link(
        self,
        topic: str,
        key: bytes,
        files: Sequence[Path | int],
        groups: Sequence[tuple[int, Sequence[StagedRecord]]],
        before_adopt: Callable[[list[int]], None] | None = None,
    ) -> int:
        """The sink's write-once commit (MessageStore.link) for logic queues: each group's logic
        queue is appended to through the physical queue of its leader item, which must be here
        (checked for every group before anything moves)."""
        with self._lock(topic):
            physical = []
            for logic_queue, records in groups:
                _, chain = self._chain(topic, logic_queue)
                item = self._leader_here(topic, logic_queue, chain)
                physical.append((item.queue, records))
            return self._store.link(topic, key, files, physical, before_adopt)

    def key_stored(self, topic: str, logic_queue: int, key: bytes) -> bool:
        """Whether an append keyed `key` is already in the logic queue: in this broker's store,
        or on one of the queue's earlier segments (double-read-check)."""
        if self._store.stored_key(key) is not None:
            return True
        _, chain = self._chain(topic, logic_queue)
        return self._stored_earlier(topic, chain, key.decode()) is not None

    def _stored_earlier(self, topic: str, chain: Chain, key: str) -> SendOutcome | None:
        """Double-read-check of an idempotency key over the chain's earlier segments."""
        for item in reversed(chain[:-1]):
            if item.bname == self._name:
                continue
            answer = self.access.stored_key(topic, item, key)
            if answer is not None and answer.queue_id == item.queue and item.decided:
                logic = item.to_logic(answer.base_offset)
                return SendOutcome(-1, logic, answer.count, answer.base_offset, 0, True, 0)
        return None

    # ------------------------------------------------------------------ reads and offsets

    def pull(self, query: PullQuery) -> PullOutcome:
        """Pull a logic queue (query.queue_id) at a logic offset, within the pull limits."""
        q = self._messages.limit(query)
        _, chain = self._chain(q.topic, q.queue_id)
        return self.reads.pull(q.topic, chain, q.offset, q.max_messages, q.max_bytes, q.wait_ms, q.subscription)

    def logic_offsets(self, topic: str) -> list[QueueOffsetInfo]:
        """min/max of the logic queues this broker leads (each logic queue has one leader)."""
        mapping = self._files.get(topic)
        if mapping is None:
            raise TopicNotFoundError(f"static topic {topic!r} has no mapping on {self._name}")
        out = []
        for q in mapping.led_queues():
            chain = mapping.hosted[q]
            out.append(
                QueueOffsetInfo(
                    q,
                    self.reads.min_logic(topic, chain),
                    self.reads._max_for_answer(topic, chain),
                    self.reads.last_store_timestamp(topic, chain),
                )
            )
        return out

    def search(self, topic: str, logic_queue: int, timestamp: int) -> int:
        _, chain = self._chain(topic, logic_queue)
        return self.reads.search(topic, chain, timestamp)

    def commit_offset(self, group: str, topic: str, logic_queue: int, offset: int) -> None:
        """Stored converted, on the broker of the segment that holds the offset."""
        _, chain = self._chain(topic, logic_queue)
        idx: int | None = locate(chain, offset)
        if idx is not None and idx < 0:
            idx = first_decided(chain)
        if idx is None:
            raise InvalidOffsetError(f"logic queue {logic_queue} of {topic!r} has no decided segment yet")
        item = chain[idx]
        self.access.commit(group, topic, item, item.to_physical(offset))

    def query_offset(self, group: str, topic: str, logic_queue: int) -> int | None:
        """Double-read-check: segments newest to oldest; the first that has an offset wins."""
        _, chain = self._chain(topic, logic_queue)
        for item in reversed(chain):
            if not item.decided:
                continue
            found = self.access.query(group, topic, item)
            if found is not None:
                return item.to_logic(found)
        return None

    # ------------------------------------------------------------------ name server

    def route_entries(self) -> list[pb.TopicRouteEntry]:
        entries = []
        for mapping in self._files.all():
            cfg = self._topics.get(mapping.topic)
            if cfg is None:
                continue
            leaders = [
                pb.LogicQueueLeader(
                    logic_queue=q,
                    physical_queue=mapping.hosted[q][-1].queue,
                    gen=mapping.hosted[q][-1].gen,
                    logic_offset=mapping.hosted[q][-1].logic_offset,
                )
                for q in mapping.led_queues()
            ]
            entries.append(pb.TopicRouteEntry(config=config_to_pb(cfg), leaders=leaders))
        return entries


def _has_gen(mapping: TopicQueueMapping | None, q: int, gen: int) -> bool:
    return mapping is not None and any(i.gen == gen for i in mapping.hosted.get(q, ()))


def _rest(out: SendOutcome) -> tuple[int, int, int, int, bool, int]:
    return (out.base_offset, out.count, out.physical_base_offset, out.store_timestamp, out.duplicate, out.end_pos)
