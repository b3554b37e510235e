"""Executor side of the sink: route a task's rows to logic queues (key hash, explicit queueId,
or the selector for keyless rows) and stage them on each queue's leader, in Arrow-encoded
chunks - no per-row request. Clients are shared per Python worker process."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from staticmq_spark.client.delivery import Delivery
from staticmq_spark.client.route import QueueAddress, RouteCache
from staticmq_spark.client.rpc import Channels, invoke
from staticmq_spark.client.selector import CircuitBreaker, ReachabilityDetector
from staticmq_spark.client.targets import KEYLESS, group_rows, row_targets
from staticmq_spark.errors import InvalidOptionError
from staticmq_spark.protocol.codec import PackedBatch, encode_columns, split_by_bytes
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.sink.options import SinkOptions

REQUEST_TIMEOUT_S = 30.0


@dataclass
class _Clients:
    channels: Channels
    routes: RouteCache
    breaker: CircuitBreaker
    detector: ReachabilityDetector


_CLIENTS: dict[tuple[str, bool], _Clients] = {}
_CLIENTS_LOCK = threading.Lock()


def shared_clients(namesrv: str, active_detection: bool) -> _Clients:
    with _CLIENTS_LOCK:
        found = _CLIENTS.get((namesrv, active_detection))
        if found is None:
            channels = Channels()
            found = _Clients(
                channels,
                RouteCache(namesrv, channels, ttl_s=10.0),
                CircuitBreaker(),
                ReachabilityDetector(channels, enabled=active_detection),
            )
            _CLIENTS[(namesrv, active_detection)] = found
        return found


@dataclass
class BrokerPart:
    seqs: list[int] = field(default_factory=list)
    rows: int = 0
    next_seq: int = 0


class Stager:
    def __init__(self, opts: SinkOptions, writer: str, batch: int) -> None:
        self.opts = opts
        self.writer = writer
        self.batch = batch
        self.staging_id = uuid.uuid4().hex
        self.parts: dict[str, BrokerPart] = {}
        self.rows = 0
        clients = shared_clients(opts.namesrv, opts.active_detection)
        self._channels = clients.channels
        self._routes = clients.routes
        self._delivery = Delivery(
            clients.routes,
            clients.breaker,
            clients.detector,
            order=opts.order,
            timeout_s=opts.send_timeout_ms / 1000,
            retries=2,
        )
        self._lock = threading.Lock()

    def stage_arrow(self, rb: pa.RecordBatch) -> None:
        names = set(rb.schema.names)
        col = rb.column
        keys = col("key") if "key" in names else None
        packed = encode_columns(
            col("value"),
            key=keys,
            tags=col("tags") if "tags" in names else None,
            properties=col("properties") if "properties" in names else None,
        )
        route = self._routes.get(self.opts.topic)
        if not route.is_static:
            raise InvalidOptionError(f"topic {self.opts.topic!r} is not a static topic: the sink writes static topics")
        queues = None
        if "queueId" in names:
            queues = np.asarray(col("queueId").fill_null(KEYLESS).to_numpy(zero_copy_only=False), dtype=np.int64)
        targets = row_targets(self.opts.topic, route.total_queues, packed.count, keys, queues)
        for target, rows, _ in group_rows(packed, targets):
            for piece in split_by_bytes(rows, self.opts.request_bytes):
                self._deliver(target, piece)
        self.rows += packed.count

    def _deliver(self, target: int, rows: PackedBatch) -> None:
        def attempt(q: QueueAddress) -> None:
            self._stage(q, rows)

        self._delivery.deliver(self.opts.topic, target, attempt)

    def _stage(self, q: QueueAddress, rows: PackedBatch) -> None:
        with self._lock:
            part = self.parts.setdefault(q.broker, BrokerPart())
            seq = part.next_seq
            part.next_seq += 1  # used up even if this attempt fails: a late arrival is never mistaken
        request = pb.StageRequest(
            writer=self.writer,
            batch=self.batch,
            staging_id=self.staging_id,
            topic=self.opts.topic,
            queue_id=q.queue_id,
            seq=seq,
            rows=pb.MessageBatch(data=rows.data, sizes=rows.sizes_bytes()),
        )
        invoke(q.broker, self._channels.broker(q.addr).StageRows, request, REQUEST_TIMEOUT_S, wait_for_ready=False)
        with self._lock:
            part.seqs.append(seq)
            part.rows += rows.count

    def staged(self) -> dict[str, tuple[list[int], int]]:
        return {b: (list(p.seqs), p.rows) for b, p in self.parts.items() if p.seqs}
