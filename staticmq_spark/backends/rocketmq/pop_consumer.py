"""`PopConsumer("rocketmq://…")`: RocketMQ 5's pop consumption of a static topic over remoting
(POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME).

RocketMQ's brokers never resolve static-topic mappings for pop: a pop with `queueId=-1` reads
every physical queue of the topic on the broker asked. So this consumer pops every broker of the
topic's route - the brokers of old segments too, whose data stays where it was written - and
names each first delivery by its logic queue and logic offset through the mapping
(staticmq_spark/mapping/positions.py). Acks and changes of invisible time go to the broker that
popped the message, with the receipt handle RocketMQ's Java client builds (pop_receipts.py), so a
handle is the POP_CK a Java consumer of the group would see. A message RocketMQ revived into the
group's retry topic carries no logic position (queue_id = queue_offset = -1, `retried`).

Pop and pull of one group share RocketMQ's offset table (`ConsumerOffsetManager`, per physical
queue): a pop moves the group's committed offset past what it delivered, and a pull consumer's
commit moves where pop goes on. Use a group for one of the two (docs/rocketmq.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from staticmq_spark.backends.rocketmq.client_instance import RocketMQClientInstance
from staticmq_spark.backends.rocketmq.pop_messages import popped_messages
from staticmq_spark.backends.rocketmq.pop_receipts import (
    ORDER_REVIVE_QUEUE,
    Receipt,
    batch_ack_body,
    parse_receipt,
    real_topic,
)
from staticmq_spark.backends.rocketmq.reader import RocketMQReader
from staticmq_spark.backends.rocketmq.wire.codes import RequestCode, ResponseCode, code_name
from staticmq_spark.backends.rocketmq.wire.frames import RemotingCommand
from staticmq_spark.backends.rocketmq.wire.remoting import check_answer
from staticmq_spark.backends.types import AckResult, PopMessage, RefusedAck
from staticmq_spark.closing import Closeable
from staticmq_spark.errors import (
    AccessDeniedError,
    BrokerUnavailableError,
    InvalidArgumentError,
    QueueNotFoundError,
    ReceiptHandleError,
    StaticMQError,
    UnsupportedOperationError,
)
from staticmq_spark.mapping.positions import LogicPosition, PhysicalPositions, freshest_chains
from staticmq_spark.protocol.consume.ack_outcomes import AckOutcome
from staticmq_spark.protocol.topics.names import validate_group, validate_topic

INIT_MODES = {"earliest": 0, "latest": 1}  # ConsumeInitMode.MIN / MAX
MAX_POP_MESSAGES = 32  # a RocketMQ broker refuses a pop of more (INVALID_PARAMETER)
TIMER_WHEEL = "timerWheelEnable"
ROUTE_CHECK_S = 5.0  # how often receive looks for a new mapping epoch in the route
RELOAD_ON_MISS_S = 1.0  # the least time between two reads of the mapping for unknown positions


class RocketMQPopConsumer(Closeable):
    def __init__(
        self,
        instance: RocketMQClientInstance,
        group: str,
        topic: str,
        *,
        order: bool = False,
        init_mode: str = "earliest",
        wait_s: float = 5.0,
        request_timeout_s: float = 15.0,
    ) -> None:
        validate_group(group)
        validate_topic(topic)
        if init_mode not in INIT_MODES:
            raise InvalidArgumentError(f"init_mode must be one of {tuple(INIT_MODES)}, got {init_mode!r}")
        self.group = group
        self.topic = topic
        self.order = order
        self._init_mode = INIT_MODES[init_mode]
        self._wait_s = wait_s
        self._timeout_s = request_timeout_s
        self.access = RocketMQReader(instance.with_timeout(request_timeout_s))
        self._client = self.access.client
        self._turn = int(time.monotonic_ns() // 1000) % 1024
        self._epochs: dict[str, int] = {}
        self._checked_at = 0.0
        self._positions = PhysicalPositions({})
        self._loaded_at = 0.0
        self._route_check(force=True)
        self._check_timer_wheel()

    # ------------------------------------------------------------------ the mapping

    def _route_check(self, force: bool = False) -> None:
        """Read the mapping again when the route shows another epoch (a remap or a grow)."""
        if not force and time.monotonic() - self._checked_at < ROUTE_CHECK_S:
            return
        route = self.access.route(self.topic, refresh=True)
        self._checked_at = time.monotonic()
        if not route.is_static:
            raise QueueNotFoundError(
                f"topic {self.topic!r} is not a static topic: the staticmq PopConsumer pops static topics"
            )
        if force or route.epochs != self._epochs:
            self._epochs = dict(route.epochs)
            self._load_positions()

    def _load_positions(self) -> None:
        states = self.access.gather(self.topic)
        self._loaded_at = time.monotonic()
        chains = freshest_chains((s.mapping.epoch, s.mapping.hosted) for s in states.values() if s.mapping)
        self._positions = PhysicalPositions(chains)
        if self.order:
            spread = self._positions.multi_segment_queues()
            if spread:
                raise UnsupportedOperationError(
                    f"order=True on {self.topic!r}: logic queue(s) {spread} span more than one segment (remapped), "
                    "and RocketMQ keeps pop order only within one physical queue - each segment is popped on its "
                    "own broker with its own offsets, so order across the segments cannot hold; pop without "
                    "order, or pull the logic queue (PullConsumer) to read it in order"
                )

    def _locate(self, bname: str, queue: int, offset: int) -> LogicPosition | None:
        found = self._positions.logic(bname, queue, offset)
        if found is None and time.monotonic() - self._loaded_at >= RELOAD_ON_MISS_S:
            self._load_positions()  # a segment newer than what was read: read the mapping again
            found = self._positions.logic(bname, queue, offset)
        return found

    def _check_timer_wheel(self) -> None:
        for name, addr in sorted(self._brokers().items()):
            try:
                config = self._client.broker_config(addr)
            except AccessDeniedError:  # keys without admin rights: the broker's pop answer says it
                continue
            if config.get(TIMER_WHEEL, "true").lower() != "true":
                raise UnsupportedOperationError(self._timer_wheel_off(name, addr))

    @staticmethod
    def _timer_wheel_off(name: str, addr: str) -> str:
        return (
            f"RocketMQ broker {name} ({addr}) runs with {TIMER_WHEEL}=false, and RocketMQ pops only with its timer "
            f"wheel on (PopMessageProcessor refuses every pop): set {TIMER_WHEEL}=true in the broker's configuration "
            "and restart it"
        )

    def _brokers(self, refresh: bool = False) -> dict[str, str]:
        masters = self.access.route(self.topic, refresh=refresh).masters
        if not masters:
            raise BrokerUnavailableError(f"topic {self.topic!r} has no live broker")
        return masters

    # ------------------------------------------------------------------ receive

    def receive(
        self, max_messages: int = 32, invisible_time: float = 60.0, *, wait_s: float | None = None
    ) -> list[PopMessage]:
        """Pop up to `max_messages`, invisible to other consumers for `invisible_time` seconds:
        first every broker without waiting (each at most 32, RocketMQ's cap), then, when none had
        anything, long-polls them in turn until `wait_s` is over."""
        if max_messages <= 0:
            raise InvalidArgumentError(f"max_messages must be positive, got {max_messages}")
        if invisible_time <= 0:
            raise InvalidArgumentError(f"invisible_time must be positive seconds, got {invisible_time}")
        wait = self._wait_s if wait_s is None else wait_s
        deadline = time.monotonic() + wait
        self._route_check()
        brokers = sorted(self._brokers().items())
        slice_s = max(0.5, wait / len(brokers))
        found: list[PopMessage] = []
        asked = 0
        answered = False
        last_error: StaticMQError | None = None
        while True:
            name, addr = brokers[self._turn % len(brokers)]
            self._turn += 1
            first_pass = asked < len(brokers)
            wait_here = 0.0 if first_pass else max(0.0, min(deadline - time.monotonic(), slice_s))
            asked += 1
            try:
                count = min(MAX_POP_MESSAGES, max_messages - len(found))
                found += self._pop(name, addr, count, invisible_time, wait_here)
                answered = True
            except BrokerUnavailableError as exc:
                last_error = exc
            if len(found) >= max_messages or (found and asked >= len(brokers)):
                return found
            if asked >= len(brokers) and time.monotonic() >= deadline:
                if answered or last_error is None:
                    return found
                raise last_error
            if asked % len(brokers) == 0 and not answered:
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
                brokers = sorted(self._brokers(refresh=True).items())

    def _pop(self, name: str, addr: str, count: int, invisible_s: float, wait_s: float) -> list[PopMessage]:
        wait_ms = round(wait_s * 1000)
        ext: dict[str, object] = {
            "consumerGroup": self.group,
            "topic": self.topic,
            "queueId": -1,
            "maxMsgNums": count,
            "invisibleTime": max(1, round(invisible_s * 1000)),
            "pollTime": wait_ms,
            "bornTime": int(time.time() * 1000),
            "initMode": self._init_mode,
            "expType": "TAG",
            "exp": "*",
            "order": self.order,
            "bname": name,
        }
        resp = self._client.call(addr, RequestCode.POP_MESSAGE, ext, timeout_s=self._timeout_s + wait_s)
        if resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
            self.access.create_group(self.group)
            ext["bornTime"] = int(time.time() * 1000)
            resp = self._client.call(addr, RequestCode.POP_MESSAGE, ext, timeout_s=self._timeout_s + wait_s)
        if resp.code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND, ResponseCode.NO_MESSAGE):
            return []
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:  # a broker the route still names dropped the topic
            return []
        if resp.code == ResponseCode.SYSTEM_ERROR and TIMER_WHEEL in (resp.remark or ""):
            raise UnsupportedOperationError(self._timer_wheel_off(name, addr))
        check_answer(resp, f"pop of {self.topic!r} for group {self.group!r} at {name}")
        return popped_messages(self.topic, name, resp.ext, resp.body, self._locate, order=self.order)

    # ------------------------------------------------------------------ ack

    def _receipt(self, message: PopMessage) -> Receipt:
        receipt = parse_receipt(message.handle)
        if receipt.broker != message.broker:
            raise ReceiptHandleError(
                f"the receipt handle names broker {receipt.broker!r}, the message {message.broker!r}: altered"
            )
        return receipt

    def ack(self, message: PopMessage) -> None:
        """Ack one message at the broker that popped it; ReceiptHandleError when it refuses. (A
        RocketMQ broker accepts a late ack: a message whose invisible time ended comes back anyway.)"""
        r = self._receipt(message)
        ext: dict[str, object] = {
            "consumerGroup": self.group,
            "topic": real_topic(self.topic, self.group, r.retry),
            "queueId": r.queue_id,
            "extraInfo": r.text(),
            "offset": r.offset,
            "bname": r.broker,
        }
        resp = self._call(r.broker, RequestCode.ACK_MESSAGE, ext)
        if resp.code != ResponseCode.SUCCESS:
            raise ReceiptHandleError(
                f"ack of {self.topic!r} message at {r.broker}/{r.queue_id}/{r.offset} refused: "
                f"{code_name(resp.code)} ({resp.code}) {resp.remark or ''}".rstrip()
            )

    def ack_batch(self, messages: Iterable[PopMessage]) -> AckResult:
        """Ack many messages, one BATCH_ACK_MESSAGE per broker; what a broker refused is returned,
        not raised."""
        every = list(messages)
        by_broker: dict[str, list[tuple[PopMessage, Receipt]]] = {}
        for m in every:
            by_broker.setdefault(m.broker, []).append((m, self._receipt(m)))
        acked = 0
        refused: list[RefusedAck] = []
        for broker, part in by_broker.items():
            body = batch_ack_body(self.group, self.topic, [r for _, r in part])
            resp = self._call(broker, RequestCode.BATCH_ACK_MESSAGE, {}, body)
            if resp.code == ResponseCode.SUCCESS:
                acked += len(part)
                continue
            reason = f"{broker} refused the batch ack: {code_name(resp.code)} ({resp.code}) {resp.remark or ''}"
            refused.extend(RefusedAck(m, AckOutcome.UNKNOWN, reason.rstrip()) for m, _ in part)
        return AckResult(acked, tuple(refused))

    def change_invisible_time(self, message: PopMessage, seconds: float) -> PopMessage:
        """Make `message` invisible for `seconds` from now (0: let it come back at once). Returns
        the message with its new receipt handle; ack with that one."""
        if seconds < 0:
            raise InvalidArgumentError(f"invisible time must be >= 0 seconds, got {seconds}")
        r = self._receipt(message)
        if r.revive_qid == ORDER_REVIVE_QUEUE:
            raise UnsupportedOperationError(
                "change_invisible_time of an order pop (order=True) is not offered on RocketMQ: its order pops "
                "are acked or come back whole"
            )
        topic = real_topic(self.topic, self.group, r.retry)
        ext: dict[str, object] = {
            "consumerGroup": self.group,
            "topic": topic,
            "queueId": r.queue_id,
            "extraInfo": r.text(),
            "offset": r.offset,
            "invisibleTime": round(seconds * 1000),
            "bname": r.broker,
        }
        resp = self._call(r.broker, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, ext)
        if resp.code != ResponseCode.SUCCESS:
            raise ReceiptHandleError(
                f"change of invisible time of {self.topic!r} message at {r.broker}/{r.queue_id}/{r.offset} refused: "
                f"{code_name(resp.code)} ({resp.code}) {resp.remark or ''}".rstrip()
            )
        h = resp.ext
        new = Receipt(
            r.offset,
            int(h["popTime"]),
            int(h["invisibleTime"]),
            int(h["reviveQid"]),
            r.retry,
            r.broker,
            r.queue_id,
            r.offset,
        )
        return message._replace(handle=new.handle(), invisible_until=new.invisible_until)

    # ------------------------------------------------------------------ plumbing

    def _call(self, broker: str, code: int, ext: dict[str, object], body: bytes = b"") -> RemotingCommand:
        """Call the broker that popped a message (its master address from the route)."""
        addr = self._brokers().get(broker) or self._brokers(refresh=True).get(broker)
        if addr is None:
            addr = self.access.masters(refresh=True).get(broker)
        if addr is None:
            raise BrokerUnavailableError(f"broker {broker!r} that popped the message is not in the cluster")
        return self._client.call(addr, code, ext, body)

    def close(self) -> None:
        """Nothing to release: the connections are the backend's (its client instance)."""
        self.access.close()
