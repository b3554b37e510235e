"""A keyed producer for RocketMQ static topics: rows go to logic queue murmur3(key) mod totalQueues,
in SEND_BATCH_MESSAGE requests to each queue's leader (`Producer("rocketmq://…")` returns one)."""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from staticmq_spark.backends.retry import retrying
from staticmq_spark.backends.rocketmq.client_instance import RocketMQClientInstance, retriable
from staticmq_spark.backends.rocketmq.wire.batch_encode import encode_rows, properties_column
from staticmq_spark.backends.rocketmq.wire.batch_encode import uniq_keys as make_uniq_keys
from staticmq_spark.backends.rocketmq.wire.routes import TopicRoute
from staticmq_spark.backends.targets import KEYLESS, row_targets, target_runs
from staticmq_spark.backends.types import SendResult
from staticmq_spark.closing import Closeable
from staticmq_spark.errors import InvalidArgumentError, PartialSendError, StaticMQError
from staticmq_spark.protocol.rows import arrays
from staticmq_spark.protocol.rows.codec import PackedBatch
from staticmq_spark.protocol.rows.decode import decode_batch

log = logging.getLogger(__name__)
_PROPS = pa.map_(pa.string(), pa.string())


def _column(values: Any, kind: pa.DataType, n: int) -> pa.Array | None:
    if values is None:
        return None
    arr = values if isinstance(values, pa.Array | pa.ChunkedArray) else pa.array(list(values), kind)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if len(arr) != n:
        raise InvalidArgumentError(f"{len(arr)} values for {n} messages")
    return arr


def _bodies(values: Any) -> pa.Array:
    if isinstance(values, pa.Array | pa.ChunkedArray):
        arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        return arr.cast(pa.binary())
    return pa.array([v.encode() if isinstance(v, str) else v for v in values], pa.binary())


class RocketMQProducer(Closeable):
    def __init__(
        self,
        instance: RocketMQClientInstance,
        *,
        send_timeout_s: float = 30.0,
        request_timeout_s: float = 10.0,
        producer_group: str = "staticmq_producer",
    ) -> None:
        """`instance`: the backend's client instance (connections, ACL keys, routes)."""
        self.instance = instance.with_timeout(request_timeout_s)
        self.client = self.instance.remoting
        self.send_timeout_s = send_timeout_s
        self.producer_group = producer_group
        self._id = uuid.uuid4().hex[:12].upper()
        self._seq = itertools.count()
        self._round_robin = itertools.count()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="rocketmq-send")

    def route(self, topic: str, refresh: bool = False) -> TopicRoute:
        route = self.instance.route(topic, refresh)
        if not route.is_static:
            raise InvalidArgumentError(
                f"topic {topic!r} is not a static topic on this RocketMQ cluster (create it with "
                "`mqadmin updateStaticTopic`)"
            )
        return route

    def send_packed(
        self, topic: str, packed: PackedBatch, *, keys: Any = None, queue: int | None = None, queues: Any = None
    ) -> list[SendResult]:
        """Rows packed in staticmq's row format (protocol.codec), decoded to columns and sent."""
        rows = decode_batch(packed, properties=True)
        col = rows.column
        return self.send_batch(
            topic,
            col("body"),
            keys=col("key") if keys is None else keys,
            tags=col("tags"),
            properties=col("properties"),
            queue=queue,
            queues=queues,
        )

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
        uniq_keys: pa.Array | None = None,
    ) -> list[SendResult]:
        """Rows grouped by logic queue (key hash, or `queue`/`queues`, else round robin); one
        result per request, `rows` naming the input rows it carried. A failed request does not
        stop the other queues' requests: when some fail, PartialSendError names the stored
        requests and each failed row's error (one request only: its own error is raised)."""
        body_arr = _bodies(bodies)
        n = len(body_arr)
        key_arr = _column(keys, pa.string(), n)
        tag_arr = _column(tags, pa.string(), n)
        prop_arr = _column(
            None
            if properties is None
            else (
                [list(p.items()) if p else None for p in properties]
                if not isinstance(properties, pa.Array | pa.ChunkedArray)
                else properties
            ),
            _PROPS,
            n,
        )
        route = self.route(topic)
        explicit = None if queues is None else np.asarray(queues, dtype=np.int64)
        if queue is not None:
            explicit = np.full(n, queue, dtype=np.int64)
        targets = row_targets(topic, route.total_queues, n, key_arr, explicit)
        keyless = targets == KEYLESS
        if keyless.any():
            targets[keyless] = next(self._round_robin) % route.total_queues
        if uniq_keys is None:
            prefix = f"{self._id}{next(self._seq):08X}"
            uniq_keys = make_uniq_keys(prefix, np.arange(n, dtype=np.int64))
        props = properties_column(key_arr, tag_arr, prop_arr, uniq_keys)
        order, runs = target_runs(targets)
        if order is None:
            order = np.arange(n, dtype=np.int64)
        jobs = [(target, order[a:b]) for target, a, b in runs]
        if len(jobs) == 1:
            outcomes = [self._send_rows(topic, jobs[0][0], jobs[0][1], body_arr, props)]
        else:  # the queues at once, as broker_stub's producer sends them: each waits for its flush
            outcomes = list(self._pool.map(lambda job: self._send_rows(topic, job[0], job[1], body_arr, props), jobs))
        results = [r for stored, _, _ in outcomes for r in stored]
        failed = {row: exc for _, lost, _ in outcomes for row, exc in lost.items()}
        if failed:
            if sum(requests for _, _, requests in outcomes) == 1:
                raise next(iter(failed.values()))  # one request: its error unchanged
            raise PartialSendError.of(topic, results, failed)
        return results

    def _send_rows(
        self, topic: str, target: int, rows: npt.NDArray[np.int64], body_arr: pa.Array, props: pa.Array
    ) -> tuple[list[SendResult], dict[int, StaticMQError], int]:
        """One logic queue's rows in as many requests as their size needs, in order: (results,
        failed rows and their error, requests made). After a failed request this queue's later
        ones are not sent (a retry of the failed rows keeps the queue's order)."""
        take = arrays.numbers(rows)
        encoded = encode_rows(body_arr.take(take), props.take(take))
        results: list[SendResult] = []
        requests = 0
        for lo, hi in encoded.chunks():
            requests += 1
            try:
                answer = self._send_to_queue(topic, target, encoded.body(lo, hi))
            except StaticMQError as exc:
                return results, dict.fromkeys((int(r) for r in rows[lo:]), exc), requests
            results.append(
                SendResult(
                    topic=topic,
                    queue_id=answer[0],
                    queue_offset=answer[1],
                    count=hi - lo,
                    broker=answer[2],
                    physical_offset=-1,
                    store_timestamp=0,
                    rows=tuple(int(r) for r in rows[lo:hi]),
                )
            )
        return results, {}, requests

    def _send_to_queue(self, topic: str, queue: int, body: bytes) -> tuple[int, int, str]:
        def attempt(n: int) -> tuple[int, int, str]:
            # a route cached while the leader was down names no live leader: a retry reads it again
            bname, addr = self.route(topic, refresh=n > 0).leader_addr(queue)
            answer = self.client.send(
                addr, bname, topic, queue, body, "WAIT\x01true\x02", batch=True, producer_group=self.producer_group
            )
            if answer.degraded:
                log.warning("send to %s/%d stored but %s", topic, queue, answer.degraded)
            return answer.queue, answer.queue_offset, bname

        return retrying(f"send to {topic}/{queue}", self.send_timeout_s, attempt, retriable=retriable)

    def topic_is_static(self, topic: str) -> bool:
        return self.route(topic, refresh=True).is_static

    def total_queues(self, topic: str) -> int:
        return self.route(topic).total_queues

    def close(self) -> None:
        """Waits for sends under way; the connections are the backend's (its remoting client)."""
        self._pool.shutdown(wait=True)
