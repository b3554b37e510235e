"""Topic lifecycle on one broker: create, update and delete plain (dynamic) topics."""

from __future__ import annotations

from dataclasses import replace

from broker_stub.store.consumer_offsets import ConsumerOffsets
from broker_stub.store.message_store import MessageStore
from broker_stub.store.topic_configs import TopicConfigs
from staticmq_spark.errors import (
    InvalidArgumentError,
    StaticTopicRefusedError,
    TopicNotFoundError,
)
from staticmq_spark.protocol.topics.config import ORDERS, PERM_READ_WRITE, TopicConfig
from staticmq_spark.protocol.topics.names import validate_topic

MAX_QUEUES = 1024


class TopicService:
    def __init__(self, topics: TopicConfigs, store: MessageStore, offsets: ConsumerOffsets) -> None:
        self.topics = topics
        self._store = store
        self._offsets = offsets

    def require(self, name: str) -> TopicConfig:
        cfg = self.topics.get(name)
        if cfg is None:
            raise TopicNotFoundError(f"topic {name!r} does not exist on this broker")
        return cfg

    def update(self, wanted: TopicConfig, *, internal: bool = False) -> TopicConfig:
        """Create or update a plain topic. A static topic is refused: static topics change only
        through their mapping (updateStaticTopic / remappingStaticTopic)."""
        validate_topic(wanted.name, allow_system=internal)
        existing = self.topics.get(wanted.name)
        if existing is not None and existing.is_static and not internal:
            raise StaticTopicRefusedError(
                f"topic {wanted.name!r} is a static topic: updateTopic is refused; "
                "use updateStaticTopic or remappingStaticTopic"
            )
        if wanted.is_static and not internal:
            raise StaticTopicRefusedError(f"topic {wanted.name!r}: static topics are created with updateStaticTopic")
        _check_counts(wanted)
        cfg = replace(wanted, uid=existing.uid if existing else 0)
        cfg = self.topics.put(cfg)
        self._store.register_topic(cfg.name, cfg.uid)
        return cfg

    def delete(self, name: str, *, internal: bool = False) -> None:
        cfg = self.require(name)
        if cfg.is_static and not internal:
            raise StaticTopicRefusedError(
                f"topic {name!r} is a static topic: delete it with deleteTopic through the admin, "
                "which removes its mappings from every broker"
            )
        self.topics.delete(name)
        self._store.delete_topic(name)
        self._offsets.delete_topic(name)


def _check_counts(cfg: TopicConfig) -> None:
    for label, value in (("read queues", cfg.read_queues), ("write queues", cfg.write_queues)):
        if not 1 <= value <= MAX_QUEUES:
            raise InvalidArgumentError(f"topic {cfg.name!r}: {label} must be 1..{MAX_QUEUES}, got {value}")
    if cfg.perm & ~PERM_READ_WRITE or cfg.perm == 0:
        raise InvalidArgumentError(f"topic {cfg.name!r}: perm must be 2 (write), 4 (read) or 6, got {cfg.perm}")
    if cfg.order not in ORDERS:
        raise InvalidArgumentError(f"topic {cfg.name!r}: order must be one of {ORDERS}, got {cfg.order!r}")
