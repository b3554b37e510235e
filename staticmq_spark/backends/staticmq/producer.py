"""The Producer: columnar batched sends with fixed key sharding, queue selection and retries.

Where a row goes:
- an explicit queue: that queue;
- a key: `hash(key) mod total_queues` (staticmq_spark.hashing) - never another queue;
- neither: the queue-selection pipeline (staticmq_spark.backends.staticmq.selector).

Order strategy (`order=` or the topic's own): `strict` retries a keyed or pinned send on the
same queue until `send_timeout_s`, then fails; `best-tried` gives up after `retries`. Keyless
batches may move to the next queue in either case. A retried batch carries the same idempotency
key, so a broker that stored the first attempt stores it only once.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from staticmq_spark.backends.send_parts import merged
from staticmq_spark.backends.staticmq.client_instance import StaticMQClientInstance
from staticmq_spark.backends.staticmq.delivery import Delivery
from staticmq_spark.backends.staticmq.rpc import invoke
from staticmq_spark.backends.staticmq.selector import CircuitBreaker
from staticmq_spark.backends.targets import group_rows, row_targets
from staticmq_spark.backends.types import DEFAULT_REQUEST_BYTES, SendResult
from staticmq_spark.closing import Closeable
from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.rows.codec import PackedBatch, split_by_bytes
from staticmq_spark.protocol.rows.encode import encode_columns
from staticmq_spark.protocol.topics.config import ORDERS
from staticmq_spark.protocol.topics.route_view import QueueAddress, TopicRouteView


class StaticMQProducer(Closeable):
    def __init__(
        self,
        instance: StaticMQClientInstance,
        *,
        order: str | None = None,
        send_timeout_s: float = 30.0,
        request_timeout_s: float = 10.0,
        retries: int = 2,
        active_detection: bool = True,
        detection_interval_s: float = 2.0,
        max_request_bytes: int = DEFAULT_REQUEST_BYTES,
    ) -> None:
        if order is not None and order not in ORDERS[1:]:
            raise InvalidArgumentError(f"order must be 'strict' or 'best-tried', got {order!r}")
        self._channels = instance.channels
        self.routes = instance.routes
        self._request_timeout_s = request_timeout_s
        self._max_request_bytes = max_request_bytes
        self.breaker = CircuitBreaker()
        self.detector = instance.detector(enabled=active_detection, interval_s=detection_interval_s)
        self.delivery = Delivery(
            self.routes, self.breaker, self.detector, order=order, timeout_s=send_timeout_s, retries=retries
        )
        self.selector = self.delivery.selector
        self._id = uuid.uuid4().hex[:16]
        self._seq = itertools.count()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="staticmq-send")

    # ------------------------------------------------------------------ public API

    def send_batch(
        self,
        topic: str,
        bodies: Sequence[bytes | str] | pa.Array,
        *,
        keys: Sequence[str | None] | pa.Array | None = None,
        tags: Sequence[str | None] | pa.Array | None = None,
        properties: Sequence[dict[str, str] | None] | pa.Array | None = None,
        queue: int | None = None,
        queues: Sequence[int] | npt.NDArray[np.int64] | None = None,
    ) -> list[SendResult]:
        """Send many messages in as few requests as their target queues allow. One result per
        request (each covers `count` consecutive messages of one queue)."""
        packed = encode_columns(bodies, key=keys, tags=tags, properties=properties)
        return self.send_packed(topic, packed, keys=keys, queue=queue, queues=queues)

    def send_packed(
        self,
        topic: str,
        packed: PackedBatch,
        *,
        keys: Any = None,
        queue: int | None = None,
        queues: Any = None,
        idempotency_prefix: str | None = None,
    ) -> list[SendResult]:
        """Route already-packed rows: explicit queues, then keys, then the selector."""
        route = self.routes.get(topic)
        targets = self._targets(route, packed.count, keys, queue, queues)
        groups = group_rows(packed, targets)
        prefix = idempotency_prefix or f"{self._id}-{next(self._seq)}"
        jobs: list[tuple[int, PackedBatch, str]] = []
        row_sets: list[npt.NDArray[np.int64]] = []
        for target, rows, indices in groups:
            start = 0
            for i, piece in enumerate(split_by_bytes(rows, self._max_request_bytes)):
                jobs.append((target, piece, f"{prefix}-{target}-{i}"))
                row_sets.append(indices[start : start + piece.count])
                start += piece.count
        if len(jobs) == 1:
            return [self._send_one(topic, *jobs[0])]  # one request: its error is raised unchanged
        parts = [
            (rows, self._pool.submit(self._send_listed, topic, *job)) for job, rows in zip(jobs, row_sets, strict=True)
        ]
        return merged(topic, parts)  # waits for every request, not up to the first failure: each outcome

    def topic_is_static(self, topic: str) -> bool:
        return self.routes.get(topic, refresh=True).is_static

    def total_queues(self, topic: str) -> int:
        return len(self.routes.get(topic).write_queues)

    def close(self) -> None:
        """Waits for sends under way; the connections and the detection are the backend's."""
        self._pool.shutdown(wait=True)

    # ------------------------------------------------------------------ routing

    def _targets(
        self, route: TopicRouteView, n: int, keys: Any, queue: int | None, queues: Any
    ) -> npt.NDArray[np.int64]:
        if queue is not None:  # one queue for every row: keys do not matter
            return row_targets(route.topic, len(route.write_queues), n, queues=np.full(n, queue))
        return row_targets(route.topic, len(route.write_queues), n, keys, queues)

    # ------------------------------------------------------------------ one request, with retries

    def _send_listed(self, topic: str, target: int, batch: PackedBatch, idem_key: str) -> list[SendResult]:
        return [self._send_one(topic, target, batch, idem_key)]

    def _send_one(self, topic: str, target: int, batch: PackedBatch, idem_key: str) -> SendResult:
        return self.delivery.deliver(topic, target, lambda q: self._request(topic, q, batch, idem_key))

    def _request(self, topic: str, q: QueueAddress, batch: PackedBatch, idem_key: str) -> SendResult:
        request = pb.SendRequest(
            topic=topic,
            queue_id=q.queue_id,
            batch=pb.MessageBatch(data=batch.data_bytes(), sizes=batch.sizes_bytes()),
            idempotency_key=idem_key,
        )
        resp = invoke(
            q.broker, self._channels.broker(q.addr).Send, request, self._request_timeout_s, wait_for_ready=False
        )
        return SendResult(
            topic=topic,
            queue_id=resp.queue_id,
            queue_offset=resp.base_offset,
            count=resp.count,
            broker=resp.bname,
            physical_offset=resp.physical_base_offset,
            store_timestamp=resp.store_timestamp,
            duplicate=resp.duplicate,
        )
