"""Access to one segment's physical queue, wherever it lives: this broker's store, or another
broker's (remote read). Logic-queue code above it never cares which: both answer a PhysicalRead
with the pull status (a local store read's, or the remote answer's as it came)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from broker_stub.broker.message_service import MessageService, PullQuery
from broker_stub.broker.peers import Peers
from broker_stub.broker.read_ahead import ReadAhead
from broker_stub.store.consumer_offsets import ConsumerOffsets
from broker_stub.store.message_store import MessageStore
from broker_stub.store.store_results import ReadResult
from staticmq_spark.errors import StaticMQError
from staticmq_spark.mapping import MappingItem
from staticmq_spark.protocol.consume.pull_status import PullStatus
from staticmq_spark.protocol.pb import staticmq_pb2 as pb

BOUNDS_TTL_S = 1.0


@dataclass(frozen=True, slots=True)
class PhysicalRead:
    """A read of one physical queue; OFFSET_MOVED: the offset is below min_offset or above
    max_offset, and next_offset is where the queue continues."""

    status: PullStatus
    next_offset: int
    min_offset: int
    max_offset: int
    base_offset: int = 0
    data: bytes = b""
    sizes: bytes = b""
    store_timestamps: bytes = b""
    queue_offsets: bytes = b""  # per message (int64 LE) when a tag filter left gaps


@dataclass(frozen=True, slots=True)
class Bounds:
    min_offset: int
    max_offset: int
    last_store_timestamp: int


class SegmentAccess:
    def __init__(
        self, name: str, messages: MessageService, store: MessageStore, offsets: ConsumerOffsets, peers: Peers
    ) -> None:
        self._name = name
        self._messages = messages
        self._store = store
        self._offsets = offsets
        self._peers = peers
        self._cache: dict[tuple[str, str, int], tuple[float, Bounds]] = {}
        self._read_ahead = ReadAhead(peers.pull_future)
        self._lock = threading.Lock()

    def local(self, item: MappingItem) -> bool:
        return item.bname == self._name

    def read(
        self,
        topic: str,
        item: MappingItem,
        offset: int,
        max_messages: int,
        max_bytes: int,
        wait_ms: int,
        subscription: str = "",
    ) -> PhysicalRead:
        """Read a physical queue, within the pull limits already (the logic pull passed them)."""
        if self.local(item):
            query = PullQuery(
                topic, item.queue, offset, max_messages, max_bytes, wait_ms, physical=True, subscription=subscription
            )
            return _from_local(self._messages.read_physical(query))
        key = (item.bname, topic, item.queue, offset, max_messages, max_bytes)
        answer = None if subscription else self._read_ahead.take(key)
        if answer is None:
            request = pb.PullRequest(
                topic=topic,
                queue_id=item.queue,
                offset=offset,
                max_messages=max_messages,
                max_bytes=max_bytes,
                wait_ms=wait_ms,
                physical=True,
                subscription=subscription,
            )
            answer = self._peers.pull(item.bname, request)
        read = _from_remote(answer)
        fenced = item.end_offset >= 0
        if fenced and not subscription and read.status is PullStatus.FOUND and read.next_offset < item.end_offset:
            full = read.next_offset - offset == max_messages
            next_limit = min(max_messages, item.end_offset - read.next_offset)
            if full:
                self._read_ahead.start((item.bname, topic, item.queue, read.next_offset, next_limit, max_bytes))
        return read

    def bounds(self, topic: str, item: MappingItem) -> Bounds:
        if self.local(item):
            lo, hi = self._store.offsets(topic, item.queue)
            return Bounds(lo, hi, self._store.last_store_timestamp(topic, item.queue))
        key = (item.bname, topic, item.queue)
        hit = self._cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < BOUNDS_TTL_S:
            return hit[1]
        qo = self._peers.queue_offsets(item.bname, topic, item.queue)
        bounds = Bounds(qo.min_offset, qo.max_offset, qo.last_store_timestamp)
        with self._lock:
            self._cache[key] = (time.monotonic(), bounds)
        return bounds

    def search(self, topic: str, item: MappingItem, timestamp: int) -> int:
        if self.local(item):
            return self._store.offset_for_timestamp(topic, item.queue, timestamp)
        return self._peers.search(item.bname, topic, item.queue, timestamp)

    def stored_key(self, topic: str, item: MappingItem, key: str) -> pb.IdempotencyAnswer | None:
        """Whether item's broker stored a batch with this idempotency key (None: no, or unknown)."""
        try:
            answer = self._peers.query_key(item.bname, key, topic)
        except StaticMQError:
            return None  # that broker is gone: its copy of the key cannot be checked
        return answer if answer.found else None

    def commit(self, group: str, topic: str, item: MappingItem, offset: int) -> None:
        if self.local(item):
            self._offsets.commit(group, topic, item.queue, offset)
        else:
            self._peers.commit(item.bname, group, topic, item.queue, offset)

    def query(self, group: str, topic: str, item: MappingItem) -> int | None:
        if self.local(item):
            return self._offsets.query(group, topic, item.queue)
        return self._peers.query(item.bname, group, topic, item.queue)


def _from_local(r: ReadResult) -> PhysicalRead:
    sizes = b"" if r.sizes is None else r.sizes.astype("<i4").tobytes()
    stamps = b"" if r.store_timestamps is None else r.store_timestamps.astype("<i8").tobytes()
    offsets = b"" if r.offsets is None else r.offsets.astype("<i8").tobytes()
    return PhysicalRead(
        r.pull_status, r.next_offset, r.min_offset, r.max_offset, r.base_offset, r.data, sizes, stamps, offsets
    )


def _from_remote(resp: pb.PullResponse) -> PhysicalRead:
    return PhysicalRead(
        PullStatus(resp.status),
        resp.next_offset,
        resp.min_offset,
        resp.max_offset,
        resp.base_offset,
        resp.batch.data,
        resp.batch.sizes,
        resp.store_timestamps,
        resp.queue_offsets,
    )
