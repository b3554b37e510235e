"""The RocketMQ client API: one method per request code, over pooled connections (MQClientAPIImpl's role).

Every id and offset here is what travels on the wire: `logic=True` sends a logic queue id to its
leader (the broker resolves the static mapping); `logic=False` sets `lo=false` for a physical read.
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from staticmq_spark.backends.rocketmq.wire import fastjson
from staticmq_spark.backends.rocketmq.wire.acl import ACCESS_KEY_ENV, SECRET_KEY_ENV, credentials_from, sign_request
from staticmq_spark.backends.rocketmq.wire.codes import STORED_DEGRADED, RequestCode, ResponseCode, code_name, error_for
from staticmq_spark.backends.rocketmq.wire.connection import ConnectionPool, tls_context
from staticmq_spark.backends.rocketmq.wire.frames import RemotingCommand
from staticmq_spark.backends.rocketmq.wire.routes import TopicRoute, parse_cluster, parse_mapping_detail, parse_route
from staticmq_spark.errors import (
    AccessDeniedError,
    BrokerUnavailableError,
    FirstContactError,
    InvalidArgumentError,
    NameServerUnreachableError,
    StaticMQError,
    TopicNotFoundError,
)
from staticmq_spark.mapping import TopicQueueMapping
from staticmq_spark.protocol.consume.pull_status import PullStatus
from staticmq_spark.protocol.security.auth import Credentials
from staticmq_spark.protocol.topics.config import TopicConfig

MOCK_BROKER_PREFIX = "__syslo__"
DEFAULT_PULL_GROUP = "staticmq_reader"


class RocketMQError(StaticMQError):
    """RocketMQ answered a request with an error code; `response_code` is RocketMQ's number."""

    code = "ROCKETMQ_ERROR"

    def __init__(self, message: str, response_code: int = -1) -> None:
        super().__init__(message)
        self.response_code = response_code


@dataclass(frozen=True, slots=True)
class PullAnswer:
    status: PullStatus
    next_offset: int
    min_offset: int
    max_offset: int
    offset_delta: int
    body: bytes
    remark: str


@dataclass(frozen=True, slots=True)
class SendAnswer:
    queue: int
    queue_offset: int  # -1 while a remapped queue's new logic offset is undecided
    msg_id: str
    degraded: str  # "" or the name of a stored-but-late code (FLUSH_DISK_TIMEOUT, ...)


def encode_properties(props: dict[str, str]) -> str:
    """RocketMQ's properties string: `name \\x01 value \\x02` per entry."""
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items() if k and v != "")


class RemotingClient:
    """Name-server lookups and broker calls; thread-safe, one connection per address."""

    def __init__(
        self,
        namesrv: tuple[str, ...],
        credentials: Credentials | None = None,
        timeout_s: float = 5.0,
        tls_ca: str | None = None,
    ):
        """`tls_ca`: PEM file of the CA that signed the cluster's certificates: every connection (name
        servers and brokers) is TLS, for a RocketMQ started with tls.server.mode=enforcing."""
        if not namesrv:
            raise InvalidArgumentError("a RocketMQ client needs at least one name server address")
        self.namesrv = namesrv
        self.credentials = credentials if credentials is not None else credentials_from()
        self.timeout_s = timeout_s
        self.pool = ConnectionPool(tls_context(tls_ca) if tls_ca else None)

    def with_timeout(self, timeout_s: float) -> RemotingClient:
        """This client's connections and keys with another default call timeout: the ports of one
        backend share one pool of connections, each with its own timeout."""
        view = copy.copy(self)
        view.timeout_s = timeout_s
        return view

    def close(self) -> None:
        self.pool.close()

    def _fields(self, ext: dict[str, object], body: bytes) -> dict[str, str]:
        """extFields as strings, signed when the cluster has ACL credentials."""
        fields = {
            k: ("true" if v is True else "false" if v is False else str(v)) for k, v in ext.items() if v is not None
        }
        if self.credentials is not None:
            sign_request(self.credentials, fields, body)
        return fields

    def signed(self, ext: dict[str, object], body: bytes = b"") -> dict[str, object]:
        """A request's extFields as they travel (strings, signed when the cluster has ACL keys)."""
        return dict(self._fields(ext, body))

    def call(
        self, addr: str, code: int, ext: dict[str, object], body: bytes = b"", timeout_s: float | None = None
    ) -> RemotingCommand:
        fields = self._fields(ext, body)
        return self.pool.get(addr).request(code, dict(fields), body, timeout_s or self.timeout_s)

    def namesrv_call(self, code: int, ext: dict[str, object]) -> RemotingCommand:
        """The request on the name servers in random order, until one answers. When none of them
        ever answered this process (a wrong address, port or security setting, far likelier than
        every name server gone) it fails at once: NameServerUnreachableError, not retried."""
        order = list(self.namesrv)
        random.shuffle(order)
        errors = []
        for addr in order:
            try:
                return self.call(addr, code, ext)
            except (BrokerUnavailableError, FirstContactError) as exc:
                errors.append(exc.message)
        if not any(self.pool.answered(addr) for addr in self.namesrv):
            raise NameServerUnreachableError(
                f"no RocketMQ name server at {';'.join(self.namesrv)} has answered: " + "; ".join(errors)
            )
        raise BrokerUnavailableError("no RocketMQ name server answered: " + "; ".join(errors))

    # ---------------------------------------------------------------- name server

    def fetch_route(self, topic: str) -> TopicRoute:
        """The name server's route of `topic` now (RocketMQClientInstance caches it: ask it instead)."""
        resp = self.namesrv_call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, "acceptStandardJsonOnly": True})
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            raise TopicNotFoundError(f"topic {topic!r} does not exist on the RocketMQ cluster ({resp.remark})")
        check_answer(resp, f"route of {topic!r}")
        return parse_route(topic, resp.body)

    def fetch_brokers(self) -> dict[str, dict[int, str]]:
        """Every broker name -> broker id -> address, from the name server's cluster info now
        (RocketMQClientInstance caches it: ask it instead)."""
        resp = self.namesrv_call(RequestCode.GET_BROKER_CLUSTER_INFO, {})
        check_answer(resp, "cluster info")
        return parse_cluster(resp.body)

    def topic_names(self) -> set[str]:
        """Every topic the name servers know (RocketMQ's TopicList body: {"topicList": [...]})."""
        resp = self.namesrv_call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {})
        check_answer(resp, "topic list")
        return {str(t) for t in fastjson.loads(resp.body).get("topicList", [])}

    # ---------------------------------------------------------------- topic metadata on one broker

    def topic_config(self, addr: str, topic: str) -> tuple[TopicConfig, TopicQueueMapping | None] | None:
        resp = self.call(addr, RequestCode.GET_TOPIC_CONFIG, {"topic": topic, "lo": True})
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        check_answer(resp, f"topic config of {topic!r} at {addr}")
        raw = fastjson.loads(resp.body)
        mapping = parse_mapping_detail(topic, raw["mappingDetail"]) if raw.get("mappingDetail") else None
        config = TopicConfig(
            name=topic,
            read_queues=int(raw.get("readQueueNums", 0)),
            write_queues=int(raw.get("writeQueueNums", 0)),
            perm=int(raw.get("perm", 6)),
            is_static=mapping is not None,
            order="strict" if raw.get("order") else "",
            total_queues=mapping.total_queues if mapping else 0,
        )
        return config, mapping

    # ---------------------------------------------------------------- offsets

    def _offset(self, code: int, addr: str, topic: str, queue: int, logic: bool, **extra: object) -> int:
        ext: dict[str, object] = {"topic": topic, "queueId": queue, **extra}
        if not logic:
            ext["lo"] = False
        resp = self.call(addr, code, ext)
        check_answer(resp, f"{RequestCode(code).name} of {topic}/{queue} at {addr}")
        return int(resp.ext.get("offset", resp.ext.get("timestamp", "-1")))

    def physical_bounds(self, addr: str, topic: str, queues: list[int]) -> dict[int, tuple[int, int]]:
        """(min, max) of several physical queues of one broker: every request is sent before the
        first answer is awaited (one round trip instead of two per queue)."""
        conn = self.pool.get(addr)
        sent = []
        for q in queues:
            for code in (RequestCode.GET_MIN_OFFSET, RequestCode.GET_MAX_OFFSET):
                fields = self._fields({"topic": topic, "queueId": q, "lo": False}, b"")
                sent.append((q, code, conn.submit(code, dict(fields))))
        found: dict[int, list[int]] = {}
        for q, code, pending in sent:
            resp = conn.wait(pending, code, self.timeout_s)
            check_answer(resp, f"{RequestCode(code).name} of {topic}/{q} at {addr}")
            found.setdefault(q, []).append(int(resp.ext.get("offset", "-1")))
        return {q: (v[0], v[1]) for q, v in found.items()}

    def broker_config(self, addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: one broker's running configuration (BrokerConfig, MessageStoreConfig, ...)
        as the `key=value` lines of a Java properties text."""
        resp = self.call(addr, RequestCode.GET_BROKER_CONFIG, {})
        check_answer(resp, f"broker configuration at {addr}")
        found = {}
        for line in resp.body.decode("utf-8", errors="replace").splitlines():
            key, sep, value = line.partition("=")
            if sep and not key.lstrip().startswith("#"):
                found[key.strip()] = value.strip()
        return found

    def max_offset(self, addr: str, topic: str, queue: int, logic: bool = True) -> int:
        return self._offset(RequestCode.GET_MAX_OFFSET, addr, topic, queue, logic)

    def min_offset(self, addr: str, topic: str, queue: int, logic: bool = True) -> int:
        return self._offset(RequestCode.GET_MIN_OFFSET, addr, topic, queue, logic)

    def search_offset(self, addr: str, topic: str, queue: int, timestamp_ms: int, logic: bool = True) -> int:
        return self._offset(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, addr, topic, queue, logic, timestamp=timestamp_ms)

    def earliest_store_time(self, addr: str, topic: str, queue: int, logic: bool = True) -> int:
        return self._offset(RequestCode.GET_EARLIEST_MSG_STORETIME, addr, topic, queue, logic)

    def query_consumer_offset(self, addr: str, group: str, topic: str, queue: int) -> int | None:
        ext = {"consumerGroup": group, "topic": topic, "queueId": queue, "setZeroIfNotFound": False}
        resp = self.call(addr, RequestCode.QUERY_CONSUMER_OFFSET, ext)
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        check_answer(resp, f"offset of group {group!r} on {topic}/{queue}")
        return int(resp.ext["offset"])

    def update_consumer_offset(self, addr: str, group: str, topic: str, queue: int, offset: int) -> None:
        ext = {"consumerGroup": group, "topic": topic, "queueId": queue, "commitOffset": offset}
        check_answer(
            self.call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, ext), f"commit of group {group!r} on {topic}/{queue}"
        )

    # ---------------------------------------------------------------- pull and send

    def pull(
        self,
        addr: str,
        topic: str,
        queue: int,
        offset: int,
        max_messages: int,
        *,
        logic: bool,
        group: str = DEFAULT_PULL_GROUP,
        bname: str | None = None,
        suspend_ms: int = 0,
        subscription: str = "",
    ) -> PullAnswer:
        return self.submit_pull(
            addr,
            topic,
            queue,
            offset,
            max_messages,
            logic=logic,
            group=group,
            bname=bname,
            suspend_ms=suspend_ms,
            subscription=subscription,
        )()

    def submit_pull(
        self,
        addr: str,
        topic: str,
        queue: int,
        offset: int,
        max_messages: int,
        *,
        logic: bool,
        group: str = DEFAULT_PULL_GROUP,
        bname: str | None = None,
        suspend_ms: int = 0,
        subscription: str = "",
    ) -> Callable[[], PullAnswer]:
        """Send a pull now; the returned function waits for its answer (pulls can be pipelined).
        `subscription`: a TAG expression the broker applies by tag code ("" or "*": everything)."""
        sys_flag = 0x4 | (0x2 if suspend_ms > 0 else 0)  # SUBSCRIPTION (stateless, in the header), SUSPEND
        ext: dict[str, object] = {
            "consumerGroup": group,
            "topic": topic,
            "queueId": queue,
            "queueOffset": offset,
            "maxMsgNums": max_messages,
            "sysFlag": sys_flag,
            "commitOffset": 0,
            "suspendTimeoutMillis": suspend_ms,
            "subscription": subscription.strip() or "*",
            "subVersion": 0,
            "expressionType": "TAG",
            "bname": bname,
        }
        if not logic:
            ext["lo"] = False
        fields = self._fields(ext, b"")
        conn = self.pool.get(addr)
        sent = conn.submit(RequestCode.PULL_MESSAGE, dict(fields))
        timeout = self.timeout_s + suspend_ms / 1000

        def answer() -> PullAnswer:
            resp = conn.wait(sent, RequestCode.PULL_MESSAGE, timeout)
            return _pull_answer(resp, f"pull of {topic}/{queue}@{offset} at {addr}", offset)

        return answer

    def send(
        self,
        addr: str,
        bname: str,
        topic: str,
        queue: int,
        body: bytes,
        properties: str,
        *,
        batch: bool = False,
        producer_group: str = "staticmq_producer",
    ) -> SendAnswer:
        return self.submit_send(
            addr, bname, topic, queue, body, properties, batch=batch, producer_group=producer_group
        )()

    def submit_send(
        self,
        addr: str,
        bname: str,
        topic: str,
        queue: int,
        body: bytes,
        properties: str,
        *,
        batch: bool = False,
        producer_group: str = "staticmq_producer",
    ) -> Callable[[], SendAnswer]:
        """Send now; the returned function waits for the answer (a refusal raises there)."""
        ext: dict[str, object] = {
            "a": producer_group,
            "b": topic,
            "c": "TBW102",
            "d": 4,
            "e": queue,
            "f": 0,
            "g": int(time.time() * 1000),
            "h": 0,
            "i": properties,
            "j": 0,
            "k": False,
            "m": batch,
            "n": bname,
        }
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
        conn = self.pool.get(addr)
        sent = conn.submit(code, dict(self._fields(ext, body)), body)
        timeout = self.timeout_s

        def answer() -> SendAnswer:
            resp = conn.wait(sent, code, timeout)
            degraded = ""
            if resp.code in STORED_DEGRADED:
                degraded = code_name(resp.code)
            else:
                check_answer(resp, f"send to {topic}/{queue} at {bname}")
            return SendAnswer(
                queue=int(resp.ext.get("queueId", queue)),
                queue_offset=int(resp.ext.get("queueOffset", -1)),
                msg_id=resp.ext.get("msgId", ""),
                degraded=degraded,
            )

        return answer


_PULL_STATUS: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MESSAGE,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.RETRY_AT_NEXT,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_MOVED,
}


def _pull_answer(resp: RemotingCommand, what: str, offset: int) -> PullAnswer:
    status = _PULL_STATUS.get(resp.code)
    if status is None:
        check_answer(resp, what)
        raise AssertionError("unreachable")
    h = resp.ext
    return PullAnswer(
        status=status,
        next_offset=int(h.get("nextBeginOffset", offset)),
        min_offset=int(h.get("minOffset", 0)),
        max_offset=int(h.get("maxOffset", 0)),
        offset_delta=int(h.get("offsetDelta", 0) or 0),
        body=resp.body if status is PullStatus.FOUND else b"",
        remark=resp.remark or "",
    )


def check_answer(resp: RemotingCommand, what: str) -> None:
    """Raise the error a refused answer stands for (codes.error_for), else RocketMQError."""
    if resp.code == ResponseCode.SUCCESS:
        return
    text = f"RocketMQ refused the {what}: {code_name(resp.code)} ({resp.code}): {resp.remark or ''}".rstrip(": ")
    error = error_for(resp.code)
    if error is None:
        raise RocketMQError(text, resp.code)
    if error is AccessDeniedError:
        text += (
            f" (give the cluster's keys: the accessKey/secretKey options, or {ACCESS_KEY_ENV} and "
            f"{SECRET_KEY_ENV} in the environment)"
        )
    raise error(text)
