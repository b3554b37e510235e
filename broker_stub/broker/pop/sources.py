"""Where pop reads: the queues of a topic on this broker (its plain queues, or the logic queues it
leads on a static topic, read through the mapping across segments), the group's retry topic,
their offsets, and reading back the messages of a checkpoint when it is revived - from this
broker's store or from the broker that holds the segment."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from broker_stub import metrics
from broker_stub.broker.message_service import PullQuery
from broker_stub.broker.peers import Peers
from broker_stub.broker.static_topic_service import StaticTopicService
from broker_stub.broker.topic_service import TopicService
from broker_stub.store.consumer_offsets import ConsumerOffsets
from broker_stub.store.mapping_files import MappingFiles
from broker_stub.store.message_store import MessageStore
from staticmq_spark.errors import InvalidArgumentError, TopicNotFoundError
from staticmq_spark.mapping import Chain
from staticmq_spark.protocol.consume.pull_status import PullStatus
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.rows.codec import PackedBatch, take_rows
from staticmq_spark.protocol.topics.names import retry_topic

PLAIN = "plain"
STATIC = "static"
RETRY = "retry"
INIT_MODES = ("earliest", "latest")
READ_BACK_BYTES = 32 << 20


@dataclass(frozen=True, slots=True)
class PopTarget:
    kind: str  # PLAIN, STATIC or RETRY
    topic: str  # the topic read: the group's retry topic for RETRY
    queue_id: int  # logic queue on a static topic
    gen: int  # generation of the leader item (static), else 0
    wake: tuple[str, int]  # the (topic, physical queue) whose appends wake a waiting pop


@dataclass(frozen=True, slots=True)
class QueueRead:
    rows: PackedBatch
    store_timestamps: npt.NDArray[np.int64]
    start_offset: int  # physical offset of the first row
    offset_delta: int  # logic = physical + offset_delta
    source_bname: str  # "" = this broker
    source_queue: int
    next_offset: int  # logic offset after the rows (jumps to the next segment at a boundary)

    def logic_offsets(self) -> npt.NDArray[np.int64]:
        return self.start_offset + self.offset_delta + np.arange(self.rows.count, dtype=np.int64)


class PopSources:
    def __init__(
        self,
        name: str,
        topics: TopicService,
        store: MessageStore,
        mappings: MappingFiles,
        static: StaticTopicService,
        offsets: ConsumerOffsets,
        peers: Peers,
    ) -> None:
        self._name = name
        self._topics = topics
        self._store = store
        self._mappings = mappings
        self._static = static
        self._offsets = offsets
        self._peers = peers

    # ------------------------------------------------------------------ queues

    def targets(self, group: str, topic: str, order: bool) -> tuple[list[PopTarget], PopTarget | None]:
        """The topic's queues this broker serves to pop, and the group's retry queue (if any)."""
        cfg = self._topics.require(topic)
        if not cfg.readable:
            raise InvalidArgumentError(f"topic {topic!r} is not readable on {self._name} (perm {cfg.perm})")
        queues: list[PopTarget] = []
        if cfg.is_static:
            mapping = self._mappings.get(topic)
            if mapping is not None:
                for q in mapping.led_queues():
                    lead = mapping.hosted[q][-1]
                    queues.append(PopTarget(STATIC, topic, q, lead.gen, (topic, lead.queue)))
        else:
            queues = [PopTarget(PLAIN, topic, q, 0, (topic, q)) for q in range(cfg.read_queues)]
        name = retry_topic(group, topic)
        retry = None if order or self._topics.topics.get(name) is None else PopTarget(RETRY, name, 0, 0, (name, 0))
        return queues, retry

    def read(self, target: PopTarget, offset: int, max_messages: int, max_bytes: int) -> QueueRead | int | None:
        """Messages from `offset` on; an int is where the queue really continues (the offset
        moved: retention, or a segment jump); None when there is nothing new."""
        if target.kind == STATIC:
            out = self._static.pull(PullQuery(target.topic, target.queue_id, offset, max_messages, max_bytes))
            if out.status is PullStatus.FOUND:
                rows = PackedBatch.from_wire(out.data, out.sizes)
                stamps = np.frombuffer(out.store_timestamps, dtype="<i8").astype(np.int64)
                bname = "" if out.bname == self._name else out.bname
                return QueueRead(
                    rows, stamps, out.base_offset, out.offset_delta, bname, out.physical_queue_id, out.next_offset
                )
            if out.status is PullStatus.OFFSET_MOVED and out.next_offset != offset:
                return out.next_offset
            return None
        r = self._store.read(target.topic, target.queue_id, offset, max_messages, max_bytes)
        metrics.record_out(target.topic, r.count, len(r.data))
        if r.pull_status is PullStatus.FOUND and r.sizes is not None and r.store_timestamps is not None:
            return QueueRead(
                PackedBatch(r.data, r.sizes), r.store_timestamps, r.base_offset, 0, "", target.queue_id, r.next_offset
            )
        if r.pull_status is PullStatus.OFFSET_MOVED and r.next_offset != offset:
            return r.next_offset  # its min (retention), or its max
        return None

    def initial_offset(self, group: str, target: PopTarget, init_mode: str) -> int:
        """Where a group that never popped a queue starts: its committed offset, else the
        queue's min ("earliest") or max ("latest")."""
        if target.kind == STATIC:
            committed = self._static.query_offset(group, target.topic, target.queue_id)
        else:
            committed = self._offsets.query(group, target.topic, target.queue_id)
        if committed is not None:
            return committed
        if target.kind == STATIC:
            chain = self._chain(target)
            reads = self._static.reads
            return (
                reads.min_logic(target.topic, chain)
                if init_mode == "earliest"
                else reads.max_logic(target.topic, chain)
            )
        lo, hi = self._store.offsets(target.topic, target.queue_id)
        return lo if init_mode == "earliest" else hi

    def has_more(self, target: PopTarget, offset: int) -> bool:
        if target.kind == STATIC:
            return self._static.reads.max_logic(target.topic, self._chain(target)) > offset
        return self._store.offsets(target.topic, target.queue_id)[1] > offset

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Commit a consumer offset (converted and on the segment's broker for a static topic)."""
        if self._static.is_static(topic):
            self._static.commit_offset(group, topic, queue_id, offset)
        else:
            self._offsets.commit(group, topic, queue_id, offset)

    def _chain(self, target: PopTarget) -> Chain:
        mapping = self._mappings.get(target.topic)
        if mapping is None or target.queue_id not in mapping.hosted:
            raise TopicNotFoundError(f"{self._name} no longer hosts logic queue {target.queue_id} of {target.topic!r}")
        return mapping.hosted[target.queue_id]

    # ------------------------------------------------------------------ revive

    def read_back(
        self, bname: str, topic: str, queue_id: int, start: int, indices: npt.NDArray[np.int64]
    ) -> PackedBatch | None:
        """The rows at physical offsets `start + indices` of `bname/topic/queue_id` (bname ""
        = this broker); None when they are gone (retention). Remote failures raise."""
        lo = int(indices.min())
        count = int(indices.max()) - lo + 1
        pieces: list[PackedBatch] = []
        got = 0
        while got < count:
            piece = self._read_physical(bname, topic, queue_id, start + lo + got, count - got)
            if piece is None:
                return None
            pieces.append(piece)
            got += piece.count
        return take_rows(PackedBatch.concat(pieces), indices - lo)

    def _read_physical(self, bname: str, topic: str, queue_id: int, offset: int, count: int) -> PackedBatch | None:
        if not bname or bname == self._name:
            r = self._store.read(topic, queue_id, offset, count, READ_BACK_BYTES)
            if r.pull_status is not PullStatus.FOUND or r.sizes is None or r.base_offset != offset:
                return None
            return PackedBatch(r.data, r.sizes)
        request = pb.PullRequest(
            topic=topic, queue_id=queue_id, offset=offset, max_messages=count, max_bytes=READ_BACK_BYTES, physical=True
        )
        resp = self._peers.pull(bname, request)
        if PullStatus(resp.status) is not PullStatus.FOUND or resp.base_offset != offset:
            return None
        return PackedBatch.from_wire(resp.batch.data, resp.batch.sizes)


def check_init_mode(init_mode: str) -> str:
    mode = init_mode or "earliest"
    if mode not in INIT_MODES:
        raise InvalidArgumentError(f"init_mode must be one of {INIT_MODES}, got {init_mode!r}")
    return mode
