"""The Producer: columnar batched sends with fixed key sharding, on any backend.

Where a row goes: an explicit queue; else a key, to `hash(key) mod total_queues`
(staticmq_spark.hashing) and never another queue; else the backend's queue selection. On
staticmq, the order strategy (`order=` or the topic's own) decides how long a keyed send keeps
trying its queue; a retried request carries the same idempotency key, so it is stored once.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from staticmq_spark.backends import ProducerSettings, open_backend
from staticmq_spark.backends.targets import KEYLESS, group_rows, row_targets
from staticmq_spark.backends.types import (
    DEFAULT_REQUEST_BYTES,
    ClientSecurity,
    SendOutcome,
    SendResult,
    per_message_outcomes,
)
from staticmq_spark.client.async_sends import gather_parts
from staticmq_spark.client.lanes import OrderedLanes
from staticmq_spark.closing import Closeable
from staticmq_spark.errors import InvalidArgumentError, PartialSendError, StaticMQError
from staticmq_spark.protocol.rows.codec import PackedBatch
from staticmq_spark.protocol.rows.encode import encode_columns
from staticmq_spark.protocol.security.auth import Credentials


class Producer(Closeable):
    """`Producer("host:port")` sends to a staticmq cluster, `Producer("rocketmq://host:port")` to
    Apache RocketMQ (where the staticmq-only options order, retries and max_request_bytes are
    refused if set; it never probes brokers, whatever active_detection says)."""

    def __init__(
        self,
        namesrv: str,
        *,
        order: str | None = None,
        send_timeout_s: float = 30.0,
        request_timeout_s: float = 10.0,
        retries: int = 2,
        active_detection: bool = True,
        detection_interval_s: float = 2.0,
        max_request_bytes: int = DEFAULT_REQUEST_BYTES,
        producer_group: str = "staticmq_producer",
        credentials: Credentials | tuple[str, str] | None = None,
        tls_ca: str | Path | None = None,
        max_pending: int = 64,
    ) -> None:
        self._lanes = OrderedLanes(max_pending=max_pending, name="staticmq-async-send")
        self._backend = open_backend(namesrv, ClientSecurity.of(credentials, tls_ca))
        settings = ProducerSettings(
            order,
            send_timeout_s,
            request_timeout_s,
            retries,
            active_detection,
            detection_interval_s,
            max_request_bytes,
            producer_group,
        )
        self._port = self._backend.producer(settings)

    def send(
        self,
        topic: str,
        body: bytes | str,
        *,
        key: str | None = None,
        tags: str | None = None,
        properties: dict[str, str] | None = None,
        queue: int | None = None,
    ) -> SendResult:
        """Send one message; returns where it was stored."""
        results = self.send_batch(
            topic,
            [body],
            keys=None if key is None else [key],
            tags=None if tags is None else [tags],
            properties=None if properties is None else [properties],
            queue=queue,
        )
        return results[0]

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
        request (each covers `count` consecutive messages of one queue; `rows` names its input
        rows when there is more than one request). Requests to different queues do not stop at
        the first failure: if some fail, PartialSendError carries the stored results (`.stored`)
        and each failed row's error (`.failed`), so only those rows need a retry. A batch sent in
        one request raises that request's own error. `send_each` gives one outcome per message."""
        return self._port.send_batch(
            topic, bodies, keys=keys, tags=tags, properties=properties, queue=queue, queues=queues
        )

    def send_batch_async(
        self,
        topic: str,
        bodies: Sequence[bytes | str] | pa.Array,
        *,
        keys: Sequence[str | None] | pa.Array | None = None,
        tags: Sequence[str | None] | pa.Array | None = None,
        properties: Sequence[dict[str, str] | None] | pa.Array | None = None,
        queue: int | None = None,
        queues: Sequence[int] | npt.NDArray[np.int64] | None = None,
    ) -> Future[list[SendResult]]:
        """`send_batch` without waiting for the brokers: the rows are checked, encoded and routed
        now (bad input, an unknown topic or queue raise here), then sent in the background; the
        Future resolves to what `send_batch` would have returned or raised. Each logic queue is a
        lane: its requests go one at a time, in the order of the calls, while other queues' go at
        once; a request waiting behind a failed one to the same queue is not sent (NotSentError,
        retriable), so a queue never stores later rows before earlier ones. Blocks while
        `max_pending` requests wait; `flush()` waits for them all, `close()` too. Not ordered with
        `send_batch`: flush before mixing them on one queue."""
        packed = encode_columns(bodies, key=keys, tags=tags, properties=properties)
        explicit = None if queue is None else np.full(packed.count, queue, dtype=np.int64)
        total = self._port.total_queues(topic)
        targets = row_targets(topic, total, packed.count, keys, queues if explicit is None else explicit)
        parts = []
        for target, rows, indices in group_rows(packed, targets):
            pinned = None if target == KEYLESS else target
            job = partial(self._port.send_packed, topic, rows, queue=pinned)
            parts.append((indices, self._lanes.submit((topic, target), job)))
        return gather_parts(topic, parts)

    def flush(self, timeout_s: float | None = None) -> int:
        """Wait until every `send_batch_async` request has its outcome (or `timeout_s` passed);
        returns how many are still pending (0: all done)."""
        return self._lanes.wait(timeout_s)

    def send_each(
        self,
        topic: str,
        bodies: Sequence[bytes | str] | pa.Array,
        *,
        keys: Sequence[str | None] | pa.Array | None = None,
        tags: Sequence[str | None] | pa.Array | None = None,
        properties: Sequence[dict[str, str] | None] | pa.Array | None = None,
        queues: Sequence[int] | npt.NDArray[np.int64] | None = None,
    ) -> list[SendOutcome]:
        """`send_batch` with one SendOutcome per input message, in input order: where it was stored,
        or the error of its request (`error` is None when stored), so a caller can retry exactly
        the messages whose outcome has an error. PartialSendError never escapes, nor does a
        retriable error of a batch sent in one request (every message gets it); errors that are
        not about delivery (bad input, an unknown topic, refused credentials) still raise."""
        n = len(bodies)
        try:
            results = self.send_batch(topic, bodies, keys=keys, tags=tags, properties=properties, queues=queues)
        except PartialSendError as exc:
            return per_message_outcomes(n, exc.stored, exc.failed)
        except StaticMQError as exc:
            if not exc.retriable:
                raise  # bad input, an unknown topic, a refusal: the batch itself, not a delivery
            return per_message_outcomes(n, (), dict.fromkeys(range(n), exc))  # one request failed
        return per_message_outcomes(n, results, {})

    def send_arrow(self, topic: str, data: pa.RecordBatch | pa.Table) -> list[SendResult]:
        """Send the rows of an Arrow table: columns `body` or `value`, optional `key`, `tags`,
        `properties` (map<string,string>) and `queue_id`."""
        names = set(data.schema.names)
        body = "body" if "body" in names else "value"
        if body not in names:
            raise InvalidArgumentError("an Arrow batch to send needs a 'body' or 'value' column")
        col = data.column
        queues = None
        if "queue_id" in names:
            queues = np.asarray(col("queue_id").fill_null(KEYLESS).to_numpy(zero_copy_only=False), np.int64)
        return self.send_batch(
            topic,
            col(body),
            keys=col("key") if "key" in names else None,
            tags=col("tags") if "tags" in names else None,
            properties=col("properties") if "properties" in names else None,
            queues=queues,
        )

    def send_packed(
        self, topic: str, packed: PackedBatch, *, keys: Any = None, queue: int | None = None, queues: Any = None
    ) -> list[SendResult]:
        """Send already-packed rows (protocol.rows.codec): explicit queues, then keys, then the selector."""
        return self._port.send_packed(topic, packed, keys=keys, queue=queue, queues=queues)

    def topic_is_static(self, topic: str) -> bool:
        """Whether the cluster routes `topic` as a static topic now (the route is asked afresh)."""
        return self._port.topic_is_static(topic)

    def close(self) -> None:
        """Waits for the pending asynchronous sends, then closes the connections."""
        self._lanes.close()
        self._port.close()
        self._backend.close()
