"""The PopConsumer: shared consumption. Any number of consumers of a group pop from every queue of
a topic on every broker; a popped message stays invisible to the others for `invisible_time`
seconds and comes back (through the group's retry topic, its reconsume count raised) unless it
is acked in time.

    with PopConsumer(namesrv, "group", "topic") as consumer:
        messages = consumer.receive(max_messages=32, invisible_time=30.0)
        consumer.ack_batch(messages)                            # or consumer.ack(m) one by one

`receive` asks one broker at a time, starting from the next one in turn, first without waiting;
when none has anything it long-polls them in turn until `wait_s` is over. Answers travel
columnar (packed rows plus per-message arrays) and become PopMessage tuples only here. Acks go
to the broker that popped the message (`PopMessage.broker`), one request per broker for a batch.

`order=True` is order pop: a queue with messages in flight for the group hands out nothing more
until they are acked or their invisible time ends, and then redelivers them first, in order.
A consumer object is for one thread; create one per thread (they may share `channels`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import numpy as np

from staticmq_spark.backends.staticmq.client_instance import StaticMQClientInstance
from staticmq_spark.backends.staticmq.pop_messages import popped_messages
from staticmq_spark.backends.staticmq.rpc import invoke
from staticmq_spark.backends.types import AckResult, PopMessage, RefusedAck
from staticmq_spark.closing import Closeable
from staticmq_spark.errors import BrokerUnavailableError, InvalidArgumentError, ReceiptHandleError, StaticMQError
from staticmq_spark.protocol.consume.ack_outcomes import AckOutcome, explain
from staticmq_spark.protocol.pb import consume_pb2 as cpb
from staticmq_spark.protocol.pb import consume_pb2_grpc as cpb_grpc
from staticmq_spark.protocol.topics.names import validate_group, validate_topic

INIT_MODES = ("earliest", "latest")
T = TypeVar("T")


class StaticMQPopConsumer(Closeable):
    def __init__(
        self,
        instance: StaticMQClientInstance,
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
            raise InvalidArgumentError(f"init_mode must be one of {INIT_MODES}, got {init_mode!r}")
        self.group = group
        self.topic = topic
        self.order = order
        self._init_mode = init_mode
        self._wait_s = wait_s
        self._timeout_s = request_timeout_s
        self._channels = instance.channels
        self.routes = instance.routes
        self._turn = int(time.monotonic_ns() // 1000) % 1024
        self._addrs: dict[str, str] = {}

    # ------------------------------------------------------------------ receive

    def receive(
        self, max_messages: int = 32, invisible_time: float = 60.0, *, wait_s: float | None = None
    ) -> list[PopMessage]:
        """Pop up to `max_messages`, invisible to other consumers for `invisible_time` seconds."""
        if max_messages <= 0:
            raise InvalidArgumentError(f"max_messages must be positive, got {max_messages}")
        if invisible_time <= 0:
            raise InvalidArgumentError(f"invisible_time must be positive seconds, got {invisible_time}")
        wait = self._wait_s if wait_s is None else wait_s
        deadline = time.monotonic() + wait
        brokers = self._brokers()
        slice_s = max(0.5, wait / len(brokers))
        asked = 0
        answered = False
        failures = 0
        last_error: StaticMQError | None = None
        while True:
            name, addr = brokers[self._turn % len(brokers)]
            self._turn += 1
            first_pass = asked < len(brokers) and len(brokers) > 1
            wait_here = 0.0 if first_pass else max(0.0, min(deadline - time.monotonic(), slice_s))
            asked += 1
            try:
                messages = self._pop(name, addr, max_messages, invisible_time, wait_here)
            except BrokerUnavailableError as exc:
                last_error, failures = exc, failures + 1
                self.routes.invalidate(self.topic)
            else:
                answered, failures = True, 0
                if messages:
                    return messages
            if asked >= len(brokers) and time.monotonic() >= deadline:
                if answered or last_error is None:
                    return []
                raise last_error
            if failures >= len(brokers):
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
                brokers, failures = self._brokers(refresh=True), 0

    def _brokers(self, refresh: bool = False) -> list[tuple[str, str]]:
        route = self.routes.get(self.topic, refresh)
        if not route.brokers:
            raise BrokerUnavailableError(f"topic {self.topic!r} has no live broker")
        self._addrs.update(route.brokers)
        return sorted(route.brokers.items())

    def _pop(self, name: str, addr: str, max_messages: int, invisible_s: float, wait_s: float) -> list[PopMessage]:
        request = cpb.PopRequest(
            group=self.group,
            topic=self.topic,
            max_messages=max_messages,
            invisible_ms=max(1, round(invisible_s * 1000)),
            wait_ms=round(wait_s * 1000),
            order=self.order,
            init_mode=self._init_mode,
        )
        resp = invoke(name, self._stub(addr).Pop, request, self._timeout_s + wait_s, wait_for_ready=False)
        return popped_messages(self.topic, resp)

    # ------------------------------------------------------------------ ack

    def ack(self, message: PopMessage) -> None:
        """Ack one message; ReceiptHandleError when its handle is refused (expired, superseded,
        already acked, forged)."""
        result = self.ack_batch([message])
        if result.refused:
            refused = result.refused[0]
            raise ReceiptHandleError(
                f"ack of {self.topic!r} queue {message.queue_id} offset {message.queue_offset} refused: "
                f"{refused.reason}"
            )

    def ack_batch(self, messages: Iterable[PopMessage]) -> AckResult:
        """Ack many messages, one request per broker; what was refused is returned, not raised."""
        every = messages if isinstance(messages, list) else list(messages)
        if not every:
            return AckResult(0)
        brokers = {m.broker for m in every}
        by_broker = {every[0].broker: every} if len(brokers) == 1 else _by_broker(every)
        acked = 0
        refused: list[RefusedAck] = []
        for broker, part in by_broker.items():
            request = cpb.AckRequest(group=self.group, topic=self.topic, handles=b"".join([m.handle for m in part]))
            resp = self._call(broker, lambda stub: stub.Ack, request)
            acked += resp.acked
            if resp.acked < len(part):
                status = np.frombuffer(resp.status, dtype=np.uint8)
                for i in np.flatnonzero(status != AckOutcome.OK).tolist():
                    outcome = AckOutcome(int(status[i]))
                    refused.append(RefusedAck(part[i], outcome, explain(outcome)))
        return AckResult(acked, tuple(refused))

    def change_invisible_time(self, message: PopMessage, seconds: float) -> PopMessage:
        """Make `message` invisible for `seconds` from now (0: let it come back at once). Returns
        the message with its new receipt handle; the old handle no longer acks."""
        if seconds < 0:
            raise InvalidArgumentError(f"invisible time must be >= 0 seconds, got {seconds}")
        request = cpb.ChangeInvisibleTimeRequest(
            group=self.group, topic=self.topic, handle=message.handle, invisible_ms=round(seconds * 1000)
        )
        resp = self._call(message.broker, lambda stub: stub.ChangeInvisibleTime, request)
        return message._replace(handle=resp.handle, invisible_until=resp.pop_time + resp.invisible_ms)

    # ------------------------------------------------------------------ plumbing

    def _stub(self, addr: str) -> cpb_grpc.ConsumeServiceStub:
        return self._channels.consume(addr)

    def _call(self, broker: str, method: Callable[[cpb_grpc.ConsumeServiceStub], Callable[..., T]], request: Any) -> T:
        """Call the broker that popped a message; once more if the route moved it elsewhere."""
        addr = self._addrs.get(broker) or self._brokers_addr(broker)
        try:
            return invoke(broker, method(self._stub(addr)), request, self._timeout_s)
        except BrokerUnavailableError:
            fresh = self._brokers_addr(broker, refresh=True)
            if fresh == addr:
                raise
            return invoke(broker, method(self._stub(fresh)), request, self._timeout_s)

    def _brokers_addr(self, broker: str, refresh: bool = False) -> str:
        self._brokers(refresh)
        addr = self._addrs.get(broker)
        if addr is None:
            raise BrokerUnavailableError(
                f"broker {broker!r} that popped the message is not in the route of {self.topic!r}"
            )
        return addr

    def close(self) -> None:
        """Nothing to release: the connections are the backend's (its client instance)."""


def _by_broker(messages: list[PopMessage]) -> dict[str, list[PopMessage]]:
    out: dict[str, list[PopMessage]] = {}
    for m in messages:
        out.setdefault(m.broker, []).append(m)
    return out
