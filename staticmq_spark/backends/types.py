"""The seam's value types, without protobuf: what every backend answers and the layers above use.

Pulled messages travel as columns (`MessageColumns`, then Arrow), never as one object per message.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.mapping.views import BrokerState, PhysicalBounds
from staticmq_spark.protocol.consume.ack_outcomes import AckOutcome
from staticmq_spark.protocol.consume.pull_status import PullStatus
from staticmq_spark.protocol.rows import arrays
from staticmq_spark.protocol.rows.codec import DECODED_SCHEMA
from staticmq_spark.protocol.security.auth import PLAIN, ClientSecurity
from staticmq_spark.protocol.topics.route_view import QueueAddress

if TYPE_CHECKING:
    from staticmq_spark.errors import StaticMQError

__all__ = [
    "NO_LOGIC_POSITION",
    "PLAIN",
    "PULLED_SCHEMA",
    "AckResult",
    "BrokerState",
    "BrokerSummary",
    "Capabilities",
    "ClientSecurity",
    "GroupSummary",
    "MessageColumns",
    "OperationResult",
    "PhysicalBounds",
    "PhysicalRead",
    "PopMessage",
    "ProgressRow",
    "PullResult",
    "PullStatus",
    "QueueAddress",
    "QueueOffsets",
    "QueueStatus",
    "RefusedAck",
    "ResetRow",
    "SendOutcome",
    "SendResult",
    "SinkRows",
    "TopicSummary",
    "WriteSettings",
    "empty_pulled_batch",
    "per_message_outcomes",
    "pulled_columns",
]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """The optional parts of a backend; an operation it lacks raises UnsupportedOperationError
    naming the operation."""

    two_phase_staging: bool  # the sink stages rows and commits them once (exactly-once sink)
    pop: bool  # Backend.pop_consumer: POP consumption (PopConsumer)
    producer: bool = True  # Backend.producer: sending outside Spark (the memory backend has none)
    pull_consumer: bool = True  # Backend.pull_consumer: pulling logic queues outside Spark
    exclusive: bool = False  # Backend.exclusive_consumer: consumption of queues under a lock


# ---------------------------------------------------------------------------- reading


@dataclass(frozen=True, slots=True)
class MessageColumns:
    """`columns` in protocol.rows.codec.DECODED_SCHEMA (key, tags, body, properties, born_timestamp),
    with each message's physical queue offset and store time (ms)."""

    columns: pa.RecordBatch
    queue_offsets: I64
    store_timestamps: I64

    @property
    def count(self) -> int:
        return int(self.columns.num_rows)


@dataclass(frozen=True, slots=True)
class PhysicalRead:
    status: PullStatus
    next_offset: int  # physical
    messages: MessageColumns | None  # FOUND only


PULLED_SCHEMA = pa.schema(
    [
        ("queue_offset", pa.int64()),
        *DECODED_SCHEMA,
        ("store_timestamp", pa.int64()),
        ("physical_offset", pa.int64()),
    ]
)


def empty_pulled_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([arrays.empty(f.type) for f in PULLED_SCHEMA], schema=PULLED_SCHEMA)


def pulled_columns(messages: MessageColumns, offset_delta: int) -> pa.RecordBatch:
    """Decoded messages (any backend) as PULLED_SCHEMA: logic offset first, physical last."""
    physical = messages.queue_offsets
    columns = [
        arrays.numbers(np.asarray(physical + offset_delta, dtype=np.int64)),
        *messages.columns.columns,
        arrays.numbers(np.asarray(messages.store_timestamps, dtype=np.int64)),
        arrays.numbers(np.asarray(physical, dtype=np.int64)),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=PULLED_SCHEMA)


@dataclass(frozen=True, slots=True)
class PullResult:
    status: PullStatus
    topic: str
    queue_id: int
    next_offset: int
    min_offset: int
    max_offset: int
    broker: str
    offset_delta: int
    batch: pa.RecordBatch  # PULLED_SCHEMA; queue_offset is already in logic space

    @property
    def count(self) -> int:
        return int(self.batch.num_rows)

    def messages(self) -> list[dict[str, Any]]:
        """Rows as dicts (for printing and small tools; the batch is the fast path)."""
        return list(self.batch.to_pylist())


@dataclass(frozen=True, slots=True)
class QueueOffsets:
    queue: QueueAddress
    min_offset: int
    max_offset: int
    last_store_timestamp: int


# ---------------------------------------------------------------------------- writing


@dataclass(frozen=True, slots=True)
class SendResult:
    topic: str
    queue_id: int
    queue_offset: int  # offset of the first message; -1 while a static leader's offset is undecided
    count: int
    broker: str
    physical_offset: int
    store_timestamp: int
    duplicate: bool = False
    rows: tuple[int, ...] | None = None  # which input rows this request carried, when grouped


@dataclass(frozen=True, slots=True)
class SendOutcome:
    """What became of one input message of a batch send (`Producer.send_each`): stored at
    (`queue_id`, `queue_offset`) on `broker` when `error` is None, else not stored by this send
    (`queue_id` is then the logic queue it was meant for when known, else -1; offset -1)."""

    index: int  # the input row
    queue_id: int
    queue_offset: int  # -1 when not stored, or while a static leader's offset is undecided
    broker: str  # "" when not stored
    error: StaticMQError | None = None

    @property
    def stored(self) -> bool:
        return self.error is None


def per_message_outcomes(
    n: int, stored: Sequence[SendResult], failed: Mapping[int, StaticMQError]
) -> list[SendOutcome]:
    """One outcome per input row 0..n-1: a stored request's rows get its base offset plus their
    position within it (a result without `rows` covers rows 0..count-1: the only request); a
    failed row gets its error. Every row must be named exactly once."""
    out: list[SendOutcome | None] = [None] * n
    for r in stored:
        rows = r.rows if r.rows is not None else tuple(range(r.count))
        for position, row in enumerate(rows):
            offset = -1 if r.queue_offset < 0 else r.queue_offset + position
            if out[row] is not None:
                raise ValueError(f"row {row} is named by more than one request")
            out[row] = SendOutcome(row, r.queue_id, offset, r.broker)
    for row, error in failed.items():
        if out[row] is not None:
            raise ValueError(f"row {row} is both stored and failed")
        out[row] = SendOutcome(row, -1, -1, "", error)
    missing = [i for i, o in enumerate(out) if o is None]
    if missing:
        raise ValueError(f"rows {missing[:10]} are named by no request")
    return [o for o in out if o is not None]


# The most bytes of rows one request to a broker carries unless configured otherwise: a producer's
# send (ProducerSettings.max_request_bytes) and a sink task's staging request (WriteSettings.request_bytes,
# the sink's requestBytes). Larger batches go as several requests (a broker takes up to max_batch_bytes).
DEFAULT_REQUEST_BYTES = 8 << 20


@dataclass(frozen=True, slots=True)
class WriteSettings:
    """How the sink writes (parsed once from the sink's options)."""

    namesrv: str
    topic: str
    order: str | None = None
    send_timeout_ms: int = 60_000
    active_detection: bool = True
    request_bytes: int = DEFAULT_REQUEST_BYTES
    security: ClientSecurity = PLAIN
    delivery: str = "exactly-once"  # EXACTLY_ONCE or AT_LEAST_ONCE (backends.api)
    decision_topic: str = "staticmq_sink_decisions"  # RocketMQ's exactly-once sink: its decisions
    staging_topic: str = "staticmq_sink_staging"  # RocketMQ's exactly-once sink: its staged rows


@dataclass(frozen=True, slots=True)
class SinkRows:
    """One Arrow batch of a sink task's rows, its Spark columns read once above the seam, with each
    row's target logic queue already decided (staticmq_spark/sink/placement.py): a sink writer only
    sends rows to the logic queues it is given. `first` is the task's number of its first row (a
    task numbers its rows from 0, in input order)."""

    value: pa.Array  # binary, no nulls
    key: pa.Array | None  # string
    tags: pa.Array | None  # string
    properties: pa.Array | None  # map<string, string>
    targets: npt.NDArray[np.int64]  # each row's logic queue, 0 <= target < totalQueues
    first: int

    @property
    def num_rows(self) -> int:
        return len(self.value)

    @property
    def numbers(self) -> npt.NDArray[np.int64]:
        """The task's number of each row."""
        return np.arange(self.first, self.first + len(self.value), dtype=np.int64)


# ---------------------------------------------------------------------------- administration


@dataclass(frozen=True, slots=True)
class BrokerSummary:
    name: str
    cluster: str
    addr: str
    last_heartbeat: int


@dataclass(frozen=True, slots=True)
class QueueStatus:
    broker: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_store_timestamp: int


@dataclass(frozen=True, slots=True)
class OperationResult:
    topic: str
    epoch: int
    total_queues: int
    moved: dict[int, tuple[str, str]]  # logic queue -> (from broker, to broker)
    created: dict[int, str]  # logic queue -> broker
    message: str


@dataclass(frozen=True, slots=True)
class ProgressRow:
    group: str
    topic: str
    queue_id: int  # the logic queue of a static topic, else the physical queue
    broker: str  # the leader broker of a static topic's logic queue
    broker_offset: int
    consumer_offset: int | None  # None: the group never committed on this queue
    last_commit: int  # ms since epoch, 0 without a commit
    lag: int | None  # messages stored after the consumer offset (logic jumps not counted)


@dataclass(frozen=True, slots=True)
class TopicSummary:
    topic: str
    static: bool
    total_queues: int  # logic queues of a static topic, else the sum of write queues
    brokers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group: str
    topics: tuple[str, ...]
    last_commit: int


@dataclass(frozen=True, slots=True)
class ResetRow:
    topic: str
    queue_id: int
    broker: str
    before: int | None
    after: int


# ---------------------------------------------------------------------------- pop consumption


# queue_id and queue_offset of a popped message whose logic position is unknown: on Apache RocketMQ,
# a message revived into the group's retry topic (RocketMQ keeps neither its origin queue nor offset).
# Where a consumer group without a committed offset starts on a queue (pop and exclusive consumers).
INIT_MODES = ("earliest", "latest")


def check_init_mode(init_mode: str) -> str:
    """`init_mode` when it is one of INIT_MODES, else InvalidArgumentError naming them."""
    if init_mode not in INIT_MODES:
        raise InvalidArgumentError(f"init_mode must be one of {INIT_MODES}, got {init_mode!r}")
    return init_mode


NO_LOGIC_POSITION = -1


class PopMessage(NamedTuple):
    """One popped message (immutable). `handle` is the opaque receipt handle that acks it."""

    topic: str
    body: bytes
    key: str | None
    tags: str | None
    properties: Mapping[str, str]
    queue_id: int  # logic queue on a static topic; a retried one: its origin queue (staticmq) or -1 (RocketMQ)
    queue_offset: int  # logic offset on a static topic; a retried one: origin offset (staticmq) or -1 (RocketMQ)
    reconsume_times: int  # deliveries before this one
    handle: bytes
    broker: str  # the broker that popped it: its ack goes there
    born_timestamp: int
    store_timestamp: int
    invisible_until: int  # ms since epoch (broker clock): acks after it are refused
    retried: bool  # came back through the retry topic

    @property
    def receipt_handle(self) -> str:
        """The receipt handle as text (URL-safe base64)."""
        return base64.urlsafe_b64encode(self.handle).decode()


@dataclass(frozen=True, slots=True)
class RefusedAck:
    message: PopMessage
    outcome: AckOutcome
    reason: str


@dataclass(frozen=True, slots=True)
class AckResult:
    acked: int
    refused: tuple[RefusedAck, ...] = ()
