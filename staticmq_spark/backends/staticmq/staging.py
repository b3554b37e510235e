"""Executor side of the sink: stage a task's placed rows (sink/placement.py) on each logic
queue's leader, in Arrow-encoded chunks - no per-row request. Clients are shared per Python
worker process (the backend's)."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field

import grpc
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from staticmq_spark.backends.staticmq.client_instance import StaticMQClientInstance
from staticmq_spark.backends.staticmq.delivery import Delivery
from staticmq_spark.backends.staticmq.rpc import invoke
from staticmq_spark.backends.staticmq.selector import CircuitBreaker, ReachabilityDetector
from staticmq_spark.backends.targets import target_runs
from staticmq_spark.backends.types import SinkRows, WriteSettings
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.rows.codec import Int32Array, byte_runs
from staticmq_spark.protocol.rows.encode import encode_columns_to_buffer
from staticmq_spark.protocol.topics.route_view import QueueAddress
from staticmq_spark.protocol.wire.stage_request import encode_stage_request

REQUEST_TIMEOUT_S = 30.0
BUFFER_REQUESTS = 4  # encoded rows waiting per task, at most, in requestBytes


@dataclass
class SinkClients:
    """What a process's tasks share to stage rows: the backend's client instance (channels, routes,
    detection) and the selector's own state."""

    instance: StaticMQClientInstance
    breaker: CircuitBreaker
    detector: ReachabilityDetector

    @staticmethod
    def of(instance: StaticMQClientInstance) -> SinkClients:
        """No probing: every row has its logic queue (sink/placement.py), which the detection,
        choosing among queues for keyless sends, never changes."""
        return SinkClients(instance, CircuitBreaker(), instance.detector(enabled=False))


@dataclass
class BrokerPart:
    seqs: list[int] = field(default_factory=list)
    rows: int = 0
    next_seq: int = 0


@dataclass
class _Pending:
    """Encoded rows waiting for one target: slices of encoded Arrow buffers and their row sizes."""

    pieces: list[pa.Buffer] = field(default_factory=list)
    sizes: list[Int32Array] = field(default_factory=list)
    nbytes: int = 0


class Stager:
    """Stages one task's rows. Each input batch is routed and encoded at once, but its rows wait
    per target queue until the queue has requestBytes of them, or all waiting rows together reach
    BUFFER_REQUESTS x requestBytes: each logic queue gets few, large chunks (one request, one
    staged chunk and, at commit, one store append each) instead of one small chunk per Spark
    Arrow batch. A queue's rows keep their input order. `flush()` stages what is left; call it
    before `staged()`."""

    def __init__(self, clients: SinkClients, opts: WriteSettings, writer: str, batch: int) -> None:
        self.opts = opts
        self.writer = writer
        self.batch = batch
        self.staging_id = uuid.uuid4().hex
        self.parts: dict[str, BrokerPart] = {}
        self.rows = 0
        self._channels = clients.instance.channels
        self._delivery = Delivery(
            clients.instance.routes,
            clients.breaker,
            clients.detector,
            order=opts.order,
            timeout_s=opts.send_timeout_ms / 1000,
            retries=2,
        )
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._pending_bytes = 0
        self._raw_stubs: dict[str, grpc.UnaryUnaryMultiCallable[bytes, pb.StageResponse]] = {}
        self._head = pb.StageRequest(writer=writer, batch=batch, staging_id=self.staging_id, topic=opts.topic)

    def stage(self, rows: SinkRows) -> None:
        """Encode placed rows once and queue them per target logic queue."""
        order, runs = target_runs(rows.targets)
        data, sizes = encode_columns_to_buffer(
            rows.value, key=rows.key, tags=rows.tags, properties=rows.properties, order=order
        )
        starts = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=starts[1:])
        full = []
        for target, a, b in runs:
            nbytes = int(starts[b] - starts[a])
            pending = self._pending.setdefault(target, _Pending())
            pending.pieces.append(data.slice(int(starts[a]), nbytes))
            pending.sizes.append(sizes[a:b])
            pending.nbytes += nbytes
            self._pending_bytes += nbytes
            if pending.nbytes >= self.opts.request_bytes:
                full.append(target)
        if self._pending_bytes >= BUFFER_REQUESTS * self.opts.request_bytes:
            self.flush()
        else:
            for target in full:
                self._send(target)

    def flush(self) -> None:
        """Stage every waiting row."""
        for target in sorted(self._pending):
            self._send(target)

    def _send(self, target: int) -> None:
        pending = self._pending.pop(target)
        self._pending_bytes -= pending.nbytes
        sizes = pending.sizes[0] if len(pending.sizes) == 1 else np.concatenate(pending.sizes)
        starts = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=starts[1:])
        piece_starts = np.zeros(len(pending.pieces) + 1, dtype=np.int64)
        np.cumsum([p.size for p in pending.pieces], out=piece_starts[1:])
        for lo, hi in byte_runs(starts, self.opts.request_bytes):
            data = _byte_range(pending.pieces, piece_starts, int(starts[lo]), int(starts[hi]))
            self._deliver(target, data, sizes[lo:hi])

    def _deliver(self, target: int, data: list[pa.Buffer], sizes: Int32Array) -> None:
        def attempt(q: QueueAddress) -> None:
            self._stage(q, data, sizes)

        self._delivery.deliver(self.opts.topic, target, attempt)

    def _stage(self, q: QueueAddress, data: list[pa.Buffer], sizes: Int32Array) -> None:
        with self._lock:
            part = self.parts.setdefault(q.broker, BrokerPart())
            seq = part.next_seq
            part.next_seq += 1  # used up even if this attempt fails: a late arrival is never mistaken
        head = pb.StageRequest()
        head.CopyFrom(self._head)
        head.queue_id = q.queue_id
        head.seq = seq
        request = encode_stage_request(head, data, sizes)
        invoke(q.broker, self._stage_rows(q.addr), request, REQUEST_TIMEOUT_S, wait_for_ready=False)
        with self._lock:
            part.seqs.append(seq)
            part.rows += len(sizes)
            self.rows += len(sizes)

    def _stage_rows(self, addr: str) -> grpc.UnaryUnaryMultiCallable[bytes, pb.StageResponse]:
        """StageRows taking an already serialized StageRequest (see encode_stage_request)."""
        call = self._raw_stubs.get(addr)
        if call is None:
            channel = self._channels.channel(addr)
            call = channel.unary_unary(
                _STAGE_ROWS, request_serializer=None, response_deserializer=pb.StageResponse.FromString
            )
            self._raw_stubs[addr] = call
        return call

    def staged(self) -> dict[str, tuple[list[int], int]]:
        return {b: (list(p.seqs), p.rows) for b, p in self.parts.items() if p.seqs}


_STAGE_ROWS = f"/{pb.DESCRIPTOR.services_by_name['Broker'].full_name}/StageRows"


def _byte_range(pieces: list[pa.Buffer], piece_starts: npt.NDArray[np.int64], lo: int, hi: int) -> list[pa.Buffer]:
    """Bytes [lo, hi) of the pieces' concatenation, as slices of them (no copy)."""
    out = []
    i = int(np.searchsorted(piece_starts, lo, side="right")) - 1
    while lo < hi:
        start = lo - int(piece_starts[i])
        take = min(hi, int(piece_starts[i + 1])) - lo
        out.append(pieces[i].slice(start, take))
        lo += take
        i += 1
    return out
