"""Broker -> name server registration: a heartbeat carrying the broker's topics (and, for static
topics, totalQueues and the logic queues it leads - never whole mappings)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import grpc

from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.security.auth import PLAIN, ClientSecurity
from staticmq_spark.protocol.topics.names import split_addresses
from staticmq_spark.protocol.transport.channels import Channels

log = logging.getLogger(__name__)


class Registration:
    def __init__(
        self,
        namesrv: str,
        interval_s: float,
        build_request: Callable[[], pb.RegisterBrokerRequest],
        security: ClientSecurity = PLAIN,
    ) -> None:
        self._addrs = split_addresses(namesrv)
        self._interval_s = interval_s
        self._build = build_request
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._channels = Channels(security)
        self._thread = threading.Thread(target=self._run, name="namesrv-heartbeat", daemon=True)
        self._failing: set[str] = set()

    def start(self) -> None:
        self.heartbeat_once()
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._interval_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            self.heartbeat_once()

    def heartbeat_once(self) -> None:
        request = self._build()
        for addr in self._addrs:
            try:
                self._channels.namesrv(addr).RegisterBroker(request, timeout=5)
                if addr in self._failing:
                    log.info("name server %s reachable again", addr)
                    self._failing.discard(addr)
            except grpc.RpcError as exc:
                if addr not in self._failing:
                    log.warning("heartbeat to name server %s failed: %s %s", addr, exc.code(), exc.details())
                    self._failing.add(addr)

    def stop(self, unregister_name: str | None) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for addr in self._addrs:
            if not unregister_name:
                break
            try:
                self._channels.namesrv(addr).UnregisterBroker(pb.BrokerName(name=unregister_name), timeout=2)
            except grpc.RpcError:
                pass  # the name server expires a broker that stops heartbeating anyway
        self._channels.close()
