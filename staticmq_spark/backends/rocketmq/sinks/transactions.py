"""RocketMQ's transactional messages on the wire (no JVM): half messages, their end, and lookups.

- A *half* is a SEND_MESSAGE (the V1 header, whose decoder reads `lo`) with sysFlag
  TRANSACTION_PREPARED and the properties TRAN_MSG=true and PGROUP=<producer group>. It is sent with
  `lo=false` to one *physical* queue of the broker that leads the row's logic queue, so the answer
  carries the half's own offsets unchanged: `msgId` (offset message id: store host and the half's
  commit-log offset) and `queueOffset` (its offset in RMQ_SYS_TRANS_HALF_TOPIC). The broker keeps
  the target as REAL_TOPIC/REAL_QID (`TransactionalMessageBridge.parseHalfMessageInner`).
- END_TRANSACTION commits or rolls back one half, named by those two offsets and the producer group
  (`EndTransactionProcessor.checkPrepareMessage` compares all three). A commit re-reads the half from
  the commit log and appends it to REAL_TOPIC/REAL_QID: nothing on the broker stops a second commit
  of the same half from appending a second copy, so callers commit each half at most once.
- QUERY_MESSAGE finds stored messages by key through the broker's message index.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from staticmq_spark.backends.retry import retrying
from staticmq_spark.backends.rocketmq.client_instance import RocketMQClientInstance
from staticmq_spark.backends.rocketmq.wire.codes import RETRIABLE, RequestCode, ResponseCode
from staticmq_spark.backends.rocketmq.wire.connection import reserve_opaques
from staticmq_spark.backends.rocketmq.wire.frame_columns import encode_frames
from staticmq_spark.backends.rocketmq.wire.frames import RemotingCommand
from staticmq_spark.backends.rocketmq.wire.remoting import RemotingClient, check_answer
from staticmq_spark.errors import BrokerUnavailableError, InvalidArgumentError, TopicNotFoundError
from staticmq_spark.protocol.rows import arrays

I64 = npt.NDArray[np.int64]
PREPARED = 0x4  # MessageSysFlag.TRANSACTION_PREPARED_TYPE
COMMIT = 0x8  # TRANSACTION_COMMIT_TYPE
ROLLBACK = 0xC  # TRANSACTION_ROLLBACK_TYPE
IN_FLIGHT = 64  # unanswered requests on one connection
WRITE_BATCH = 32  # requests per socket write
DEFAULT_TOPIC = "TBW102"
log = logging.getLogger(__name__)


def half_properties(properties: pa.Array, producer_group: str, extra: str = "") -> pa.Array:
    """Each row's properties string (batch_encode.properties_column) marked as a half of
    `producer_group`, with `extra` (already in `name\x01value\x02` form) after it."""
    mark = f"TRAN_MSG\x01true\x02PGROUP\x01{producer_group}\x02{extra}"
    return pc.binary_join_element_wise(properties.cast(pa.string()), arrays.scalar(mark), arrays.scalar(""))


def commit_log_offset(offset_msg_id: str) -> int:
    """The commit-log offset inside an offset message id (host, port, then 8 bytes of offset, hex)."""
    if len(offset_msg_id) < 16:
        raise InvalidArgumentError(f"{offset_msg_id!r} is not a RocketMQ offset message id")
    return int(offset_msg_id[-16:], 16)


@dataclass(frozen=True)
class PreparedHalves:
    """Where the broker stored a run of halves, one entry per half (arrays, in send order)."""

    commit_log_offsets: I64
    table_offsets: I64  # queue offsets in RMQ_SYS_TRANS_HALF_TOPIC


@dataclass(frozen=True)
class RowRequests:
    """One request per row: the same extFields `fixed`, each row's `varying` values, its body."""

    fixed: dict[str, object]
    varying: dict[str, pa.Array]
    bodies: pa.Array | None = None

    def __len__(self) -> int:
        return len(next(iter(self.varying.values())))

    def take(self, rows: Sequence[int]) -> RowRequests:
        idx = arrays.numbers(np.asarray(rows, dtype=np.int64))
        bodies = None if self.bodies is None else self.bodies.take(idx)
        return RowRequests(self.fixed, {k: v.take(idx) for k, v in self.varying.items()}, bodies)

    def row_ext(self) -> list[dict[str, object]]:
        columns = {k: v.to_pylist() for k, v in self.varying.items()}
        return [{**self.fixed, **{k: col[i] for k, col in columns.items()}} for i in range(len(self))]


def pipelined(client: RemotingClient, addr: str, code: int, requests: RowRequests, what: str) -> list[RemotingCommand]:
    """Every request on the address's connection, at most IN_FLIGHT unanswered at a time (written
    WRITE_BATCH per socket write): the answers in order. More in flight only queues them on the broker,
    which refuses a request that waited over 200 ms (SYSTEM_BUSY, `waitTimeMillsInSendQueue`).
    Without ACL keys the frames are encoded all at once (frame_columns); with them each request is
    signed on its own."""
    conn = client.pool.get(addr)
    n = len(requests)
    answers: list[RemotingCommand] = []
    pending: deque[tuple[int, Future[RemotingCommand]]] = deque()
    if client.credentials is None:
        opaques = reserve_opaques(n)
        frames = encode_frames(code, opaques, requests.fixed, requests.varying, requests.bodies)

        def submit(lo: int, hi: int) -> list[tuple[int, Future[RemotingCommand]]]:
            return conn.submit_encoded(frames.frames(lo, hi), opaques[lo:hi].tolist())

    else:
        exts = requests.row_ext()
        bodies = requests.bodies.to_pylist() if requests.bodies is not None else [b""] * n

        def submit(lo: int, hi: int) -> list[tuple[int, Future[RemotingCommand]]]:
            batch = [(code, client.signed(exts[i], bodies[i]), bodies[i]) for i in range(lo, hi)]
            return conn.submit_many(batch)

    for lo in range(0, n, WRITE_BATCH):
        while len(pending) >= IN_FLIGHT:
            answers.append(conn.wait(pending.popleft(), code, client.timeout_s))
        pending.extend(submit(lo, min(n, lo + WRITE_BATCH)))
    while pending:
        answers.append(conn.wait(pending.popleft(), code, client.timeout_s))
    if len(answers) != n:
        raise BrokerUnavailableError(f"{what}: {len(answers)} answers for {n} requests")
    return answers


def send_halves(
    client: RemotingClient,
    addr: str,
    bname: str,
    topic: str,
    queue: int,
    bodies: pa.Array,
    properties: pa.Array,
    producer_group: str,
    retry_s: float = 60.0,
) -> PreparedHalves:
    """One half per row to physical queue `queue` of broker `bname` (`properties`: half_properties);
    halves refused as busy are sent again until `retry_s` has passed; any other refusal raises."""
    fixed: dict[str, object] = {
        "producerGroup": producer_group,
        "topic": topic,
        "defaultTopic": DEFAULT_TOPIC,
        "defaultTopicQueueNums": 4,
        "queueId": queue,
        "sysFlag": PREPARED,
        "bornTimestamp": int(time.time() * 1000),
        "flag": 0,
        "reconsumeTimes": 0,
        "unitMode": False,
        "batch": False,
        "lo": False,
        "bname": bname,
    }
    requests = RowRequests(fixed, {"properties": properties.cast(pa.string())}, bodies.cast(pa.binary()))
    answers = send_messages(client, addr, requests, f"half messages for {topic}/{queue} at {bname}", retry_s)
    clo = np.array([commit_log_offset(a.ext.get("msgId", "")) for a in answers], dtype=np.int64)
    tso = np.array([int(a.ext.get("queueOffset", "-1")) for a in answers], dtype=np.int64)
    return PreparedHalves(clo, tso)


def send_messages(
    client: RemotingClient, addr: str, requests: RowRequests, what: str, retry_s: float
) -> list[RemotingCommand]:
    """SEND_MESSAGE for every row (pipelined): each row's answer, in order. Rows refused as busy
    (flow control: refused before they were stored) are sent again until `retry_s` has passed; any
    other refusal raises."""
    n = len(requests)
    answers: list[RemotingCommand | None] = [None] * n
    todo = list(range(n))
    busy = [False]  # the last attempt ended with rows refused as busy (the one failure retried)

    def attempt(_n: int) -> list[RemotingCommand]:
        nonlocal todo
        busy[0] = False
        batch = requests if len(todo) == n else requests.take(todo)
        refused, first = [], None
        for i, resp in zip(todo, pipelined(client, addr, RequestCode.SEND_MESSAGE, batch, what), strict=True):
            if resp.code != ResponseCode.SUCCESS and resp.code in RETRIABLE:
                refused.append(i)
                first = first or resp
                continue
            check_answer(resp, what)
            answers[i] = resp
        todo = refused
        if first is not None:
            busy[0] = True
            log.info("%s: %d refused as busy, sending them again", what, len(refused))
            check_answer(first, what)  # raises the busy refusal
        return [a for a in answers if a is not None]

    return retrying(what, retry_s, attempt, retriable=lambda _exc: busy[0], log_level=logging.INFO)


def end_halves(
    client: RemotingClient,
    addr: str,
    topic: str,
    producer_group: str,
    halves: PreparedHalves,
    uniq_keys: pa.Array,
    *,
    commit: bool,
) -> list[str]:
    """END_TRANSACTION (commit or rollback) for each half; the refusals' texts (empty: all done)."""
    uniq = uniq_keys.cast(pa.string())
    requests = RowRequests(
        {
            "topic": topic,
            "producerGroup": producer_group,
            "commitOrRollback": COMMIT if commit else ROLLBACK,
            "fromTransactionCheck": False,
        },
        {
            "tranStateTableOffset": arrays.numbers(halves.table_offsets).cast(pa.string()),
            "commitLogOffset": arrays.numbers(halves.commit_log_offsets).cast(pa.string()),
            "msgId": uniq,
            "transactionId": uniq,
        },
    )
    what = f"{'commit' if commit else 'rollback'} of halves for {topic} at {addr}"
    refused = []
    for resp in pipelined(client, addr, RequestCode.END_TRANSACTION, requests, what):
        if resp.code != ResponseCode.SUCCESS:
            refused.append(f"{resp.code}: {resp.remark or ''}")
    return refused


def query_by_key(client: RemotingClient, addr: str, topic: str, key: str, max_num: int = 64) -> bytes:
    """Stored messages of `topic` indexed under `key` on one broker (may hold hash collisions)."""
    ext: dict[str, object] = {
        "topic": topic,
        "key": key,
        "maxNum": max_num,
        "beginTimestamp": 0,
        "endTimestamp": int(time.time() * 1000) + 3_600_000,
    }
    resp = client.call(addr, RequestCode.QUERY_MESSAGE, ext)
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return b""
    check_answer(resp, f"query of {topic!r} by key {key!r} at {addr}")
    return resp.body


def create_plain_topic(client: RemotingClient, addr: str, topic: str, queues: int = 1) -> None:
    """UPDATE_AND_CREATE_TOPIC: a plain (not static) topic with `queues` queues on one broker."""
    header: dict[str, object] = {
        "topic": topic,
        "defaultTopic": DEFAULT_TOPIC,
        "readQueueNums": queues,
        "writeQueueNums": queues,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
    }
    check_answer(client.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header), f"creation of {topic!r} at {addr}")


class SinkOwnedTopic:
    """A plain topic the sink keeps for itself (its decisions, its staged rows): `queues` queues on
    every master broker, created where it is missing the first time its hosts are asked."""

    role = "sink"  # said in the log line of a creation

    def __init__(self, instance: RocketMQClientInstance, topic: str, queues: int = 1) -> None:
        self.instance = instance
        self.client = instance.remoting
        self.topic = topic
        self.queues = queues
        self._names: frozenset[str] | None = None  # the masters the topic was checked (or created) on

    def hosts(self, refresh: bool = False) -> dict[str, str]:
        """Broker name -> address of the brokers holding the topic, creating it where it is missing
        (on every master when first asked, or when `refresh`)."""
        if self._names is not None and not refresh:
            masters = self.instance.brokers()
            return {name: masters[name] for name in sorted(self._names) if name in masters}
        masters = self.instance.brokers(refresh=True)
        try:
            held = self.instance.route(self.topic, refresh=True).masters
        except TopicNotFoundError:
            held = {}
        for name in sorted(set(masters) - set(held)):
            create_plain_topic(self.client, masters[name], self.topic, queues=self.queues)
            log.info("created the sink's %s topic %r on %s", self.role, self.topic, name)
        self._names = frozenset(masters)
        return dict(masters)
