"""The PopConsumer: shared consumption, the same loops on every backend over its PopPort
(backends/pop_port.py): staticmq clusters (backends/staticmq/pop_consumer.py, gRPC) and Apache
RocketMQ static topics (backends/rocketmq/pop_consumer.py, remoting; docs/rocketmq-consumers.md).

with PopConsumer(namesrv, "group", "topic") as consumer:
    messages = consumer.receive(max_messages=32, invisible_time=30.0)
    consumer.ack_batch(messages)                            # or consumer.ack(m) one by one
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from staticmq_spark.backends import open_backend
from staticmq_spark.backends.pop_port import BrokerAddress, PopPort, PopSettings
from staticmq_spark.backends.types import AckResult, ClientSecurity, PopMessage, RefusedAck, check_init_mode
from staticmq_spark.closing import Closeable
from staticmq_spark.errors import BrokerUnavailableError, InvalidArgumentError, ReceiptHandleError, StaticMQError
from staticmq_spark.protocol.security.auth import Credentials
from staticmq_spark.protocol.topics.names import validate_group, validate_topic

T = TypeVar("T")


class PopConsumer(Closeable):
    """Any number of consumers of a group pop from every queue of a topic on every broker; a
    popped message stays invisible to the others for `invisible_time` seconds and comes back
    (through the group's retry topic, its reconsume count raised) unless it is acked in time.
    `order=True` is order pop: a queue with messages in flight for the group hands out nothing
    more until they are acked or their invisible time ends, and then redelivers them first.

    How many messages one `receive` returns, on every backend: it asks every broker of the topic
    once, in turn (from the broker after the one last asked), without waiting, gathering up to
    `max_messages` (each request asks for what is still missing, at most the backend's cap per
    request: 32 on RocketMQ, 4096 on broker_stub). It returns once `max_messages` are gathered,
    or after that pass when it found any. When the pass found none, it long-polls the brokers in
    turn until `wait_s` is over and returns the first answer that has messages (up to
    `max_messages`, the cap per request again), else []. A pass in which no broker answered
    refreshes the topic's route; the last broker's error is raised only when none answered at all.

    Acks and changes of invisible time go to the broker that popped the message
    (`PopMessage.broker`), one request per broker for a batch; one that cannot reach the broker at
    the address known is sent once more to the broker's address in a fresh route (it moved).
    A consumer object is for one thread; create one per thread.
    """

    def __init__(
        self,
        namesrv: str,
        group: str,
        topic: str,
        *,
        order: bool = False,
        init_mode: str = "earliest",
        wait_s: float = 5.0,
        request_timeout_s: float = 15.0,
        credentials: Credentials | tuple[str, str] | None = None,
        tls_ca: str | Path | None = None,
    ) -> None:
        self.group = validate_group(group)
        self.topic = validate_topic(topic)
        self.order = order
        check_init_mode(init_mode)
        self._wait_s = wait_s
        self._turn = int(time.monotonic_ns() // 1000) % 1024  # consumers start at different brokers
        self._backend = open_backend(namesrv, ClientSecurity.of(credentials, tls_ca))
        try:
            self._port = self._backend.pop_consumer(group, topic, PopSettings(order, init_mode, request_timeout_s))
        except BaseException:
            self._backend.close()
            raise

    # ------------------------------------------------------------------ receive

    def receive(
        self, max_messages: int = 32, invisible_time: float = 60.0, *, wait_s: float | None = None
    ) -> list[PopMessage]:
        """Pop up to `max_messages`, invisible to other consumers for `invisible_time` seconds
        (how many: the class docstring's rule); `wait_s` (default: the consumer's) bounds the wait."""
        if max_messages <= 0:
            raise InvalidArgumentError(f"max_messages must be positive, got {max_messages}")
        if invisible_time <= 0:
            raise InvalidArgumentError(f"invisible_time must be positive seconds, got {invisible_time}")
        wait = self._wait_s if wait_s is None else wait_s
        deadline = time.monotonic() + wait
        brokers = self._port.brokers()
        slice_s = max(0.5, wait / len(brokers))
        got = _Gathering(self._port, max_messages, invisible_time)
        while True:
            for broker in self._in_turn(brokers):
                wait_here = 0.0 if got.first_pass else max(0.0, min(deadline - time.monotonic(), slice_s))
                got.pop(broker, wait_here)
                if got.full() or (got.found and not got.first_pass):
                    return got.found
                if not got.first_pass and time.monotonic() >= deadline:
                    break
            if got.found or time.monotonic() >= deadline:
                return got.result()
            if not got.answered_in_pass:
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
                brokers = self._port.brokers(refresh=True)
            got.next_pass()

    def _in_turn(self, brokers: list[BrokerAddress]) -> Iterable[BrokerAddress]:
        """Every broker once, starting at the next one in turn."""
        for _ in range(len(brokers)):
            broker = brokers[self._turn % len(brokers)]
            self._turn += 1
            yield broker

    # ------------------------------------------------------------------ ack

    def ack(self, message: PopMessage) -> None:
        """Ack one message at the broker that popped it; ReceiptHandleError when its handle is
        refused (on broker_stub: expired, superseded, already acked, forged; RocketMQ accepts late
        acks, docs/rocketmq-consumers.md)."""
        result = self._ack_at(message.broker, [message])
        if result.refused:
            raise ReceiptHandleError(
                f"ack of {self.topic!r} queue {message.queue_id} offset {message.queue_offset} refused: "
                f"{result.refused[0].reason}"
            )

    def ack_batch(self, messages: Iterable[PopMessage]) -> AckResult:
        """Ack many messages, one request per broker; what was refused is returned, not raised."""
        every = messages if isinstance(messages, list) else list(messages)
        if not every:
            return AckResult(0)
        acked = 0
        refused: list[RefusedAck] = []
        for broker, part in _by_broker(every).items():
            result = self._ack_at(broker, part)
            acked += result.acked
            refused.extend(result.refused)
        return AckResult(acked, tuple(refused))

    def change_invisible_time(self, message: PopMessage, seconds: float) -> PopMessage:
        """Make `message` invisible for `seconds` from now (0: let it come back at once). Returns
        the message with its new receipt handle; ack with that one."""
        if seconds < 0:
            raise InvalidArgumentError(f"invisible time must be >= 0 seconds, got {seconds}")
        return self._at_broker(message.broker, lambda addr: self._port.change_invisible_time(addr, message, seconds))

    def _ack_at(self, broker: str, part: list[PopMessage]) -> AckResult:
        return self._at_broker(broker, lambda addr: self._port.ack(broker, addr, part))

    def _at_broker(self, broker: str, call: Callable[[str], T]) -> T:
        """`call` at the address of the broker that popped a message; when that address does not
        answer, once more at the broker's address in a fresh route, if the broker moved there."""
        addr = self._port.address(broker)
        try:
            return call(addr)
        except BrokerUnavailableError:
            fresh = self._port.address(broker, refresh=True)
            if fresh == addr:
                raise
            return call(fresh)

    def close(self) -> None:
        self._port.close()
        self._backend.close()


class _Gathering:
    """What one receive gathered, and which brokers answered: in this pass over them and at all."""

    def __init__(self, port: PopPort, max_messages: int, invisible_s: float) -> None:
        self._port = port
        self._max = max_messages
        self._invisible_s = invisible_s
        self.found: list[PopMessage] = []
        self.first_pass = True
        self.answered = False
        self.answered_in_pass = False
        self.last_error: StaticMQError | None = None

    def pop(self, broker: BrokerAddress, wait_s: float) -> None:
        """One pop request for what is still missing, at most the backend's cap per request."""
        name, addr = broker
        count = min(self._port.max_per_request, self._max - len(self.found))
        try:
            self.found += self._port.pop(name, addr, count, self._invisible_s, wait_s)
        except BrokerUnavailableError as exc:
            self.last_error = exc
        else:
            self.answered = self.answered_in_pass = True

    def full(self) -> bool:
        return len(self.found) >= self._max

    def next_pass(self) -> None:
        self.first_pass = self.answered_in_pass = False

    def result(self) -> list[PopMessage]:
        """What was gathered; when nothing was and no broker ever answered, the last error."""
        if self.found or self.answered or self.last_error is None:
            return self.found
        raise self.last_error


def _by_broker(messages: list[PopMessage]) -> dict[str, list[PopMessage]]:
    first = messages[0].broker
    if all(m.broker == first for m in messages):
        return {first: messages}
    out: dict[str, list[PopMessage]] = {}
    for m in messages:
        out.setdefault(m.broker, []).append(m)
    return out
