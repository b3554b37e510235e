"""The RocketMQ backend's one client instance (the role of RocketMQ's own `MQClientInstance`): the
connection state every port of a backend shares. It owns the remoting client (one connection per
address, the ACL keys), the one cache of what the name server says (each topic's route: every
broker's addresses by broker id, its queue data, the static-topic mappings' leaders; the cluster's
broker table), each static topic's logic-queue leaders, and the one rule of which failed answers are
worth another try. Reader, producer, sinks, consumers and admin take the instance and ask it; none
keeps a route of its own (tests/unit/test_connection_ownership.py), so routing by replica has one
place to live."""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from staticmq_spark.backends.address import ClusterAddress
from staticmq_spark.backends.retry import retrying
from staticmq_spark.backends.rocketmq.leaders import Leaders
from staticmq_spark.backends.rocketmq.wire.acl import rocketmq_credentials
from staticmq_spark.backends.rocketmq.wire.codes import ResponseCode
from staticmq_spark.backends.rocketmq.wire.remoting import RemotingClient, RocketMQError
from staticmq_spark.backends.rocketmq.wire.routes import TopicRoute, masters_of
from staticmq_spark.closing import Closeable
from staticmq_spark.errors import BrokerUnavailableError, NotLeaderError, StaticMQError
from staticmq_spark.protocol.security.auth import PLAIN, ClientSecurity

log = logging.getLogger(__name__)
T = TypeVar("T")

# How long a cached route or broker table is used before the name server is asked again (RocketMQ's
# clients poll every 30 s). A stale route costs one refused call: the caller refreshes.
ROUTE_TTL_S = 30.0


def retriable(exc: StaticMQError) -> bool:
    """The one rule of which failures are worth another try on RocketMQ: what staticmq's error tree
    calls retriable (a broker down, busy, a stale route), and SYSTEM_ERROR, which a broker answers
    while it cannot reach another yet (right after it starts, before its first metadata refresh:
    "cannot find addr") - RocketMQ's own producer retries SYSTEM_ERROR too."""
    return exc.retriable or (isinstance(exc, RocketMQError) and exc.response_code == ResponseCode.SYSTEM_ERROR)


class _NameServerView:
    """What the name server said, with when: shared by an instance and its timeout views."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[float, TopicRoute]] = {}
        self.brokers: tuple[float, dict[str, dict[int, str]]] | None = None
        self.lock = threading.Lock()


class RocketMQClientInstance(Closeable):
    def __init__(self, address: ClusterAddress, security: ClientSecurity = PLAIN) -> None:
        self.address = address
        self.security = security
        self.remoting = RemotingClient(
            address.hosts, credentials=rocketmq_credentials(security.credentials), tls_ca=security.tls_ca
        )
        self._known = _NameServerView()
        self.leaders = Leaders(lambda topic: self.route(topic, refresh=True), self.remoting)

    def with_timeout(self, timeout_s: float) -> RocketMQClientInstance:
        """This instance with another default call timeout: the same connections, route cache and
        leaders (each port of a backend has its own timeout)."""
        view = copy.copy(self)
        view.remoting = self.remoting.with_timeout(timeout_s)
        return view

    # ---------------------------------------------------------------- the name server's answers

    def route(self, topic: str, refresh: bool = False) -> TopicRoute:
        """`topic`'s route: the cached one, or the name server's now when `refresh`, when none is
        cached, or when the cached one is older than ROUTE_TTL_S."""
        now = time.monotonic()
        with self._known.lock:
            cached = self._known.routes.get(topic)
        if cached is not None and not refresh and now - cached[0] < ROUTE_TTL_S:
            return cached[1]
        route = self.remoting.fetch_route(topic)
        with self._known.lock:
            self._known.routes[topic] = (now, route)
        return route

    def broker_addresses(self, refresh: bool = False) -> dict[str, dict[int, str]]:
        """Every broker name -> broker id -> address, from the cluster's broker table."""
        now = time.monotonic()
        with self._known.lock:
            cached = self._known.brokers
        if cached is not None and not refresh and now - cached[0] < ROUTE_TTL_S:
            return cached[1]
        table = self.remoting.fetch_brokers()
        with self._known.lock:
            self._known.brokers = (now, table)
        return table

    def brokers(self, refresh: bool = False) -> dict[str, str]:
        """Every broker name -> its master's address (brokers with a registered master)."""
        return masters_of(self.broker_addresses(refresh))

    def known_master(self, bname: str) -> str | None:
        """`bname`'s master address as heard within ROUTE_TTL_S, without asking the name server."""
        with self._known.lock:
            cached = self._known.brokers
        if cached is None or time.monotonic() - cached[0] >= ROUTE_TTL_S:
            return None
        return masters_of(cached[1]).get(bname)

    # ---------------------------------------------------------------- calls on a logic queue's leader

    def on_leader(self, topic: str, queue: int, call: Callable[[str, str], T], timeout_s: float = 10.0) -> T:
        """`call(bname, addr)` on the logic queue's leader. A stale route (NOT_LEADER, a leader not
        reachable) is refreshed; a leader that forwards to another segment's broker can fail for a
        while (right after a broker starts, or while that broker is slow), so every retriable answer
        is asked again with back-off until `timeout_s`."""
        refresh, calling = [False], [False]

        def attempt(n: int) -> T:
            calling[0] = False
            bname, addr = self.route(topic, refresh=refresh[0]).leader_addr(queue)  # no leader: raised as is
            calling[0] = True
            try:
                return call(bname, addr)
            except StaticMQError as exc:
                refresh[0] = isinstance(exc, NotLeaderError | BrokerUnavailableError)
                raise

        return retrying(
            f"{topic}/{queue} on its leader", timeout_s, attempt, retriable=lambda e: calling[0] and retriable(e)
        )

    def close(self) -> None:
        self.remoting.close()
