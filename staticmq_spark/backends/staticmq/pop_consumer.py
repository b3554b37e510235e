"""Pop consumption on a broker_stub cluster: the PopPort (backends/pop_port.py) over staticmq's
ConsumeService (Pop, Ack, ChangeInvisibleTime), behind the one receive/ack loop of
client/pop_consumer.py.

Any number of consumers of a group pop from every queue of a topic on every broker; a popped
message stays invisible to the others for its invisible time and comes back (through the group's
retry topic, its reconsume count raised) unless it is acked in time. Answers travel columnar
(packed rows plus per-message arrays) and become PopMessage tuples only in pop_messages.py. An ack
request carries the receipt handles of one broker's messages; the broker answers one outcome per
handle. `order=True` is order pop: a queue with messages in flight for the group hands out nothing
more until they are acked or their invisible time ends, and then redelivers them first, in order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from staticmq_spark.backends.pop_port import BrokerAddress, PopSettings
from staticmq_spark.backends.staticmq.client_instance import StaticMQClientInstance
from staticmq_spark.backends.staticmq.pop_messages import popped_messages
from staticmq_spark.backends.staticmq.rpc import invoke
from staticmq_spark.backends.types import AckResult, PopMessage, RefusedAck
from staticmq_spark.errors import BrokerUnavailableError
from staticmq_spark.protocol.consume.ack_outcomes import AckOutcome, explain
from staticmq_spark.protocol.pb import consume_pb2 as cpb

MAX_POP_MESSAGES = 4096  # a broker_stub broker refuses a pop of more (broker_stub/broker/pop/pop_service.py)


class StaticMQPopPort:
    max_per_request = MAX_POP_MESSAGES

    def __init__(self, instance: StaticMQClientInstance, group: str, topic: str, settings: PopSettings) -> None:
        self.group = group
        self.topic = topic
        self.order = settings.order
        self._init_mode = settings.init_mode  # checked by the broker too (one of INIT_MODES)
        self._timeout_s = settings.request_timeout_s
        self._channels = instance.channels
        self.routes = instance.routes
        self._addrs: dict[str, str] = {}

    def brokers(self, refresh: bool = False) -> list[BrokerAddress]:
        route = self.routes.get(self.topic, refresh)
        if not route.brokers:
            raise BrokerUnavailableError(f"topic {self.topic!r} has no live broker")
        self._addrs.update(route.brokers)
        return sorted(route.brokers.items())

    def address(self, broker: str, refresh: bool = False) -> str:
        addr = None if refresh else self._addrs.get(broker)
        if addr is None:
            self.brokers(refresh)
            addr = self._addrs.get(broker)
        if addr is None:
            raise BrokerUnavailableError(
                f"broker {broker!r} that popped the message is not in the route of {self.topic!r}"
            )
        return addr

    def pop(self, broker: str, addr: str, max_messages: int, invisible_s: float, wait_s: float) -> list[PopMessage]:
        request = cpb.PopRequest(
            group=self.group,
            topic=self.topic,
            max_messages=max_messages,
            invisible_ms=max(1, round(invisible_s * 1000)),
            wait_ms=round(wait_s * 1000),
            order=self.order,
            init_mode=self._init_mode,
        )
        stub = self._channels.consume(addr)
        try:
            resp = invoke(broker, stub.Pop, request, self._timeout_s + wait_s, wait_for_ready=False)
        except BrokerUnavailableError:
            self.routes.invalidate(self.topic)  # the next look at the route asks the name server
            raise
        return popped_messages(self.topic, resp)

    def ack(self, broker: str, addr: str, messages: Sequence[PopMessage]) -> AckResult:
        request = cpb.AckRequest(group=self.group, topic=self.topic, handles=b"".join([m.handle for m in messages]))
        resp = invoke(broker, self._channels.consume(addr).Ack, request, self._timeout_s)
        if resp.acked == len(messages):
            return AckResult(resp.acked)
        status = np.frombuffer(resp.status, dtype=np.uint8)
        refused = []
        for i in np.flatnonzero(status != AckOutcome.OK).tolist():
            outcome = AckOutcome(int(status[i]))
            refused.append(RefusedAck(messages[i], outcome, explain(outcome)))
        return AckResult(resp.acked, tuple(refused))

    def change_invisible_time(self, addr: str, message: PopMessage, seconds: float) -> PopMessage:
        request = cpb.ChangeInvisibleTimeRequest(
            group=self.group, topic=self.topic, handle=message.handle, invisible_ms=round(seconds * 1000)
        )
        resp = invoke(message.broker, self._channels.consume(addr).ChangeInvisibleTime, request, self._timeout_s)
        return message._replace(handle=resp.handle, invisible_until=resp.pop_time + resp.invisible_ms)

    def close(self) -> None:
        """Nothing to release: the connections are the backend's (its client instance)."""
