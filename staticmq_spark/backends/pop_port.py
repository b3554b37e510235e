"""The port of pop consumption (shared consumption): the calls a backend makes for one consumer
group on one topic, and nothing more. The loops over them - receive's rotation over the brokers
and its long polling, acks grouped by broker, the retry of an ack or a change of invisible time at
a broker's fresh address - are written once, above the seam (client/pop_consumer.py).

Every call that cannot reach its broker raises BrokerUnavailableError; what to do then (ask the
next broker, refresh the route, call again elsewhere) is the loop's decision, not the port's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from staticmq_spark.backends.types import AckResult, PopMessage

BrokerAddress = tuple[str, str]  # (broker name, its address)


@dataclass(frozen=True, slots=True)
class PopSettings:
    """How a group pops (Backend.pop_consumer): `init_mode` one of INIT_MODES, checked by the caller."""

    order: bool = False  # order pop: a queue with messages in flight hands out nothing more
    init_mode: str = "earliest"  # where a group without a committed offset starts on a queue
    request_timeout_s: float = 15.0  # each request's timeout (a pop's: plus its long-poll wait)


DEFAULT_POP = PopSettings()


class PopPort(Protocol):
    """Pop consumption of one group on one topic through one backend's own calls."""

    max_per_request: int  # the most messages one pop request may ask for (the broker's cap)

    def brokers(self, refresh: bool = False) -> list[BrokerAddress]:
        """Every broker to pop the topic from, sorted by name (the order receive rotates in);
        `refresh`: from a route asked now. BrokerUnavailableError when there is none."""
        ...

    def address(self, broker: str, refresh: bool = False) -> str:
        """Where `broker` (one that popped a message) is; `refresh`: from a route asked now.
        BrokerUnavailableError when no route names it."""
        ...

    def pop(self, broker: str, addr: str, max_messages: int, invisible_s: float, wait_s: float) -> list[PopMessage]:
        """One pop request to `broker` at `addr` for at most `max_messages` (<= max_per_request),
        invisible to the group's other consumers for `invisible_s`; the broker holds it up to
        `wait_s` while it has nothing. [] when nothing came."""
        ...

    def ack(self, broker: str, addr: str, messages: Sequence[PopMessage]) -> AckResult:
        """One ack request to `broker` at `addr` for `messages`, all popped there; what the broker
        refused is in the result, in the order of `messages`."""
        ...

    def change_invisible_time(self, addr: str, message: PopMessage, seconds: float) -> PopMessage:
        """Make `message` invisible for `seconds` from now at the broker that popped it (at `addr`);
        the message with its new receipt handle. ReceiptHandleError when the broker refuses."""
        ...

    def close(self) -> None: ...
