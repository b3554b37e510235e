"""The seam of exclusive consumption: what the one consumer loop above it (client/exclusive_consumer.py)
asks a backend for, each answered with the backend's own calls only.

The loop owns the leases (counted from before the request that granted or renewed them), the
positions and commits, the hand-over and the "lapsed lease" rule; a port owns what its protocol
says about queues and locks: staticmq's broker-enforced pull locks over gRPC, RocketMQ's rebalance
locks (LOCK_BATCH_MQ at every broker of a remapped queue), heartbeats and averaged allocation.

Every call that can fail without a verdict raises StaticMQError; a verdict (granted, refused, the
lock is someone else's) is an answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from staticmq_spark.backends.types import PullResult, QueueAddress

QueueKey = tuple[str, int]  # what identifies a held queue to the loop (ExclusivePort.key)


@dataclass(frozen=True, slots=True)
class ExclusiveSettings:
    """What a backend's exclusive_consumer() is given to make its port."""

    queues: tuple[int, ...] | None = None  # only these queues (else every one, or the group's share)
    lease_s: float = 10.0  # checked by the backend against what its brokers keep
    client_id: str | None = None  # None: the backend makes one
    init_mode: str = "earliest"  # where a queue without a committed offset starts (INIT_MODES)
    request_timeout_s: float = 15.0


@dataclass(frozen=True, slots=True)
class LockAnswer:
    """What a lock request got: queues this client holds now (with their current address, which
    a remap may have moved), and queues another client holds. A queue in neither had no answer
    (its broker did not reply): a lease it had runs on until it ends."""

    granted: list[QueueAddress] = field(default_factory=list)
    refused: list[QueueAddress] = field(default_factory=list)


class ExclusivePort(Protocol):
    """One exclusive consumer's calls to its cluster (one group, one topic, one client id).

    `lease_s` is the lock's lease, checked by the backend against what its brokers keep.
    `pull_renews_lease`: whether a pull renews the lock it reads under (staticmq's ExclusivePull
    does; RocketMQ's pulls do not check locks at all)."""

    group: str
    topic: str
    client_id: str
    lease_s: float
    pull_renews_lease: bool

    def key(self, queue: QueueAddress) -> QueueKey:
        """What makes two addresses the same held queue: (broker, queue) on staticmq, whose locks
        are per broker; ("", logic queue) on RocketMQ, whose lock follows a queue across a remap."""
        ...

    def wanted(self) -> list[QueueAddress] | None:
        """The queues this client should hold now (staticmq: every available queue, or the pinned
        ones; RocketMQ: its share of the group's averaged allocation after its heartbeat, or the
        pinned ones). None when that cannot be told now: the loop then keeps what it holds."""
        ...

    def lock(self, queues: Sequence[QueueAddress]) -> LockAnswer:
        """Lock or renew these queues for `lease_s` (the lease counts from before this call)."""
        ...

    def committed(self, queue: QueueAddress) -> int | None:
        """The group's committed offset to start `queue` from, None when it has none."""
        ...

    def min_offset(self, queue: QueueAddress) -> int: ...

    def max_offset(self, queue: QueueAddress) -> int: ...

    def pull(
        self, queue: QueueAddress, offset: int, *, max_messages: int, wait_ms: int, commit: int | None
    ) -> PullResult | None:
        """Messages of a held queue from `offset`, long-polling up to `wait_ms`; `commit`: the
        offset to commit first (with the pull where the protocol carries it). None: the broker
        says this client does not hold the queue (any more), nothing was committed."""
        ...

    def commit(self, queue: QueueAddress, offset: int) -> bool:
        """Commit the group's offset of a held queue; False when the broker says this client does
        not hold it (any more)."""
        ...

    def unlock(self, queues: Sequence[QueueAddress]) -> None:
        """Release these queues' locks at once (best effort: a lock not released ends by itself)."""
        ...

    def leave(self) -> None:
        """Leave the group on close (RocketMQ: UNREGISTER_CLIENT; staticmq: nothing to do)."""
        ...

    def close(self) -> None:
        """Release what the port holds of the backend (not the backend's connections)."""
        ...
