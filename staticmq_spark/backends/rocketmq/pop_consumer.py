"""`PopConsumer("rocketmq://…")`: RocketMQ 5's pop consumption of a static topic over remoting
(POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME), as the PopPort
(backends/pop_port.py) behind the one receive/ack loop of client/pop_consumer.py.

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
from collections.abc import Sequence

from staticmq_spark.backends.pop_port import BrokerAddress, PopSettings
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
from staticmq_spark.backends.rocketmq.wire.remoting import check_answer
from staticmq_spark.backends.types import AckResult, PopMessage, RefusedAck, check_init_mode
from staticmq_spark.errors import (
    AccessDeniedError,
    BrokerUnavailableError,
    QueueNotFoundError,
    ReceiptHandleError,
    UnsupportedOperationError,
)
from staticmq_spark.mapping.positions import LogicPosition, PhysicalPositions, freshest_chains
from staticmq_spark.protocol.consume.ack_outcomes import AckOutcome

CONSUME_INIT_MODE = {"earliest": 0, "latest": 1}  # INIT_MODES as RocketMQ's ConsumeInitMode.MIN / MAX
MAX_POP_MESSAGES = 32  # a RocketMQ broker refuses a pop of more (INVALID_PARAMETER)
TIMER_WHEEL = "timerWheelEnable"
ROUTE_CHECK_S = 5.0  # how often receive looks for a new mapping epoch in the route
RELOAD_ON_MISS_S = 1.0  # the least time between two reads of the mapping for unknown positions


class RocketMQPopPort:
    max_per_request = MAX_POP_MESSAGES

    def __init__(self, instance: RocketMQClientInstance, group: str, topic: str, settings: PopSettings) -> None:
        self.group = group
        self.topic = topic
        self.order = settings.order
        self._init_mode = CONSUME_INIT_MODE[check_init_mode(settings.init_mode)]
        self._timeout_s = settings.request_timeout_s
        self.access = RocketMQReader(instance.with_timeout(settings.request_timeout_s))
        self._client = self.access.client
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
        for name, addr in sorted(self._masters().items()):
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

    def _masters(self, refresh: bool = False) -> dict[str, str]:
        masters = self.access.route(self.topic, refresh=refresh).masters
        if not masters:
            raise BrokerUnavailableError(f"topic {self.topic!r} has no live broker")
        return masters

    # ------------------------------------------------------------------ the port

    def brokers(self, refresh: bool = False) -> list[BrokerAddress]:
        self._route_check()
        return sorted(self._masters(refresh).items())

    def address(self, broker: str, refresh: bool = False) -> str:
        """The broker's master address from the topic's route, else from the cluster's brokers."""
        addr = None if refresh else self._masters().get(broker)
        addr = addr or self._masters(refresh=True).get(broker) or self.access.masters(refresh=True).get(broker)
        if addr is None:
            raise BrokerUnavailableError(f"broker {broker!r} that popped the message is not in the cluster")
        return addr

    def pop(self, broker: str, addr: str, max_messages: int, invisible_s: float, wait_s: float) -> list[PopMessage]:
        wait_ms = round(wait_s * 1000)
        ext: dict[str, object] = {
            "consumerGroup": self.group,
            "topic": self.topic,
            "queueId": -1,
            "maxMsgNums": max_messages,
            "invisibleTime": max(1, round(invisible_s * 1000)),
            "pollTime": wait_ms,
            "bornTime": int(time.time() * 1000),
            "initMode": self._init_mode,
            "expType": "TAG",
            "exp": "*",
            "order": self.order,
            "bname": broker,
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
            raise UnsupportedOperationError(self._timer_wheel_off(broker, addr))
        check_answer(resp, f"pop of {self.topic!r} for group {self.group!r} at {broker}")
        return popped_messages(self.topic, broker, resp.ext, resp.body, self._locate, order=self.order)

    # ------------------------------------------------------------------ ack

    def _receipt(self, message: PopMessage) -> Receipt:
        receipt = parse_receipt(message.handle)
        if receipt.broker != message.broker:
            raise ReceiptHandleError(
                f"the receipt handle names broker {receipt.broker!r}, the message {message.broker!r}: altered"
            )
        return receipt

    def _receipt_ext(self, r: Receipt) -> dict[str, object]:
        """The header of an ACK_MESSAGE or CHANGE_MESSAGE_INVISIBLETIME of receipt `r`."""
        return {
            "consumerGroup": self.group,
            "topic": real_topic(self.topic, self.group, r.retry),
            "queueId": r.queue_id,
            "extraInfo": r.text(),
            "offset": r.offset,
            "bname": r.broker,
        }

    def ack(self, broker: str, addr: str, messages: Sequence[PopMessage]) -> AckResult:
        """One message: ACK_MESSAGE; more: one BATCH_ACK_MESSAGE. (A RocketMQ broker accepts a late
        ack: a message whose invisible time ended comes back anyway.)"""
        receipts = [self._receipt(m) for m in messages]
        if len(receipts) == 1:
            r = receipts[0]
            resp = self._client.call(addr, RequestCode.ACK_MESSAGE, self._receipt_ext(r))
            where = f"at {r.broker}/{r.queue_id}/{r.offset}"
        else:
            body = batch_ack_body(self.group, self.topic, receipts)
            resp = self._client.call(addr, RequestCode.BATCH_ACK_MESSAGE, {}, body)
            where = f"{broker} refused the batch ack"
        if resp.code == ResponseCode.SUCCESS:
            return AckResult(len(messages))
        reason = f"{where}: {code_name(resp.code)} ({resp.code}) {resp.remark or ''}".rstrip()
        return AckResult(0, tuple(RefusedAck(m, AckOutcome.UNKNOWN, reason) for m in messages))

    def change_invisible_time(self, addr: str, message: PopMessage, seconds: float) -> PopMessage:
        r = self._receipt(message)
        if r.revive_qid == ORDER_REVIVE_QUEUE:
            raise UnsupportedOperationError(
                "change_invisible_time of an order pop (order=True) is not offered on RocketMQ: its order pops "
                "are acked or come back whole"
            )
        ext = self._receipt_ext(r)
        ext["invisibleTime"] = round(seconds * 1000)
        resp = self._client.call(addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, ext)
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

    def close(self) -> None:
        """Nothing to release: the connections are the backend's (its client instance)."""
        self.access.close()
