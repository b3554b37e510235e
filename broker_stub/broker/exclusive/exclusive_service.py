"""Exclusive consumption on one broker: lock queues of a topic for one client of a group, and the
pulls and offset commits that only the lock holder may make (each pull renews the lease).

A pull's long-poll wait is capped at half the lease, and the lock is checked again before the
answer leaves, so messages are never handed to a client whose lease ended while it waited.
Static topics lock logic queues, at the broker that leads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker_stub.broker.exclusive.pull_locks import LockKey, PullLocks
from broker_stub.broker.message_service import MessageService, PullOutcome, PullQuery
from broker_stub.broker.static_topic_service import StaticTopicService
from broker_stub.broker.topic_service import TopicService
from broker_stub.store.consumer_offsets import ConsumerOffsets
from broker_stub.store.mapping_files import MappingFiles
from staticmq_spark.errors import InvalidArgumentError, InvalidOffsetError, NotLeaderError, QueueNotFoundError
from staticmq_spark.protocol.topics.names import validate_group

MIN_LEASE_MS = 200
MAX_LEASE_MS = 300_000
MAX_CLIENT_ID = 256


@dataclass(frozen=True, slots=True)
class ExclusivePull:
    group: str
    topic: str
    client_id: str
    queue_id: int
    offset: int
    max_messages: int
    max_bytes: int
    wait_ms: int
    lease_ms: int
    commit_offset: int | None = None


class ExclusiveService:
    def __init__(
        self,
        name: str,
        topics: TopicService,
        messages: MessageService,
        static: StaticTopicService,
        offsets: ConsumerOffsets,
        mappings: MappingFiles,
        locks: PullLocks | None = None,
    ) -> None:
        self._name = name
        self._topics = topics
        self._messages = messages
        self._static = static
        self._offsets = offsets
        self._mappings = mappings
        self.locks = locks or PullLocks()

    def lock(self, group: str, topic: str, client_id: str, queue_ids: list[int], lease_ms: int) -> list[int]:
        """Lock (or renew) queues for `client_id`; returns those it now holds."""
        _check_client(group, client_id)
        _check_lease(lease_ms)
        for q in queue_ids:
            self._check_queue(topic, q)
        return [q for q in queue_ids if self.locks.acquire((topic, group, q), client_id, lease_ms / 1000)]

    def unlock(self, group: str, topic: str, client_id: str, queue_ids: list[int]) -> None:
        _check_client(group, client_id)
        for q in queue_ids:
            self.locks.release((topic, group, q), client_id)

    def pull(self, req: ExclusivePull) -> PullOutcome:
        _check_client(req.group, req.client_id)
        _check_lease(req.lease_ms)
        static = self._check_queue(req.topic, req.queue_id)
        key: LockKey = (req.topic, req.group, req.queue_id)
        self.locks.refresh(key, req.client_id, req.lease_ms / 1000)
        if req.commit_offset is not None:
            self._commit(req.group, req.topic, req.queue_id, req.commit_offset, static)
        wait_ms = min(req.wait_ms, req.lease_ms // 2)
        query = PullQuery(
            req.topic, req.queue_id, req.offset, req.max_messages, req.max_bytes, wait_ms, group=req.group
        )
        out = self._static.pull(query) if static else self._messages.pull(query)
        self.locks.check(key, req.client_id)
        return out

    def commit(self, group: str, topic: str, client_id: str, queue_id: int, offset: int) -> None:
        _check_client(group, client_id)
        static = self._check_queue(topic, queue_id)
        self.locks.check((topic, group, queue_id), client_id)
        self._commit(group, topic, queue_id, offset, static)

    def _commit(self, group: str, topic: str, queue_id: int, offset: int, static: bool) -> None:
        if offset < 0:
            raise InvalidOffsetError(f"committed offset must be >= 0, got {offset}")
        if static:
            self._static.commit_offset(group, topic, queue_id, offset)
        else:
            self._offsets.commit(group, topic, queue_id, offset)

    def _check_queue(self, topic: str, queue_id: int) -> bool:
        """Check that the queue may be locked here; True: it is a static topic's logic queue (this
        broker leads it), False: a plain topic's queue."""
        cfg = self._topics.require(topic)
        if cfg.is_static:
            mapping = self._mappings.get(topic)
            if mapping is None or not 0 <= queue_id < mapping.total_queues:
                raise QueueNotFoundError(f"static topic {topic!r} has no logic queue {queue_id} on {self._name}")
            if not mapping.leads(queue_id):
                raise NotLeaderError(
                    f"{self._name} does not lead logic queue {queue_id} of {topic!r}: lock it at its leader"
                )
            return True
        if not 0 <= queue_id < cfg.read_queues:
            raise QueueNotFoundError(
                f"topic {topic!r} has {cfg.read_queues} read queues on {self._name}; queue {queue_id} does not exist"
            )
        return False


def _check_client(group: str, client_id: str) -> None:
    validate_group(group)
    if not client_id or len(client_id) > MAX_CLIENT_ID:
        raise InvalidArgumentError(f"client_id must be 1..{MAX_CLIENT_ID} characters, got {client_id!r}")


def _check_lease(lease_ms: int) -> None:
    if not MIN_LEASE_MS <= lease_ms <= MAX_LEASE_MS:
        raise InvalidArgumentError(f"lease must be {MIN_LEASE_MS}..{MAX_LEASE_MS} ms, got {lease_ms}")
