"""Writes messages back for later: to a group's retry topic `%RETRY%{group}_{topic}` or its
dead-letter queue `%DLQ%{group}`. Both are plain one-queue topics the broker creates on first
use (a DLQ is routable, so it can be pulled like any topic). Every append carries an
idempotency key, so writing the same messages again after a crash stores them once."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from broker_stub.broker.topic_service import TopicService
from broker_stub.store.message_store import MessageStore
from staticmq_spark.protocol.rows.codec import PackedBatch
from staticmq_spark.protocol.topics.config import TopicConfig
from staticmq_spark.protocol.topics.names import dlq_topic, retry_topic

log = logging.getLogger(__name__)


class Requeue:
    def __init__(self, topics: TopicService, store: MessageStore, on_new_topic: Callable[[], None]) -> None:
        self._topics = topics
        self._store = store
        self._on_new_topic = on_new_topic
        self._lock = threading.Lock()

    def to_retry(self, group: str, topic: str, rows: PackedBatch, key: str) -> None:
        self._append(retry_topic(group, topic), rows, key)

    def to_dlq(self, group: str, rows: PackedBatch, key: str) -> None:
        self._append(dlq_topic(group), rows, key)

    def _append(self, name: str, rows: PackedBatch, key: str) -> None:
        if rows.count == 0:
            return
        self._ensure(name)
        self._store.append(name, 0, rows, key.encode())

    def _ensure(self, name: str) -> None:
        if self._topics.topics.get(name) is not None:
            return
        with self._lock:
            if self._topics.topics.get(name) is not None:
                return
            self._topics.update(TopicConfig(name, 1, 1), internal=True)
            log.info("created %s", name)
        try:
            self._on_new_topic()
        except Exception:
            log.exception("telling the name server about %s failed (the next heartbeat will)", name)
