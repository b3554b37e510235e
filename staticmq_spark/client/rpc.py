"""Long-lived gRPC channels to brokers and name servers, and gRPC errors -> staticmq errors."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from staticmq_spark.protocol.channels import PLAIN, ClientSecurity, open_channel
from staticmq_spark.protocol.grpc_errors import translate
from staticmq_spark.protocol.pb import consume_pb2_grpc
from staticmq_spark.protocol.pb import staticmq_pb2_grpc as pb_grpc

T = TypeVar("T")


def invoke(target: str, method: Callable[..., T], request: Any, timeout: float, *, wait_for_ready: bool = True) -> T:
    """Call `method`; with wait_for_ready a broker that is (re)starting is waited for up to the
    timeout instead of failing at once (producers pass False to fail over quickly)."""
    try:
        return method(request, timeout=timeout, wait_for_ready=wait_for_ready)
    except grpc.RpcError as exc:
        raise translate(exc, target) from None


class Channels:
    """One channel per address, shared by every client object of a process component; every
    channel is opened with `security` (TLS and request signing)."""

    def __init__(self, security: ClientSecurity = PLAIN) -> None:
        self.security = security
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._brokers: dict[str, pb_grpc.BrokerStub] = {}
        self._namesrvs: dict[str, pb_grpc.NameServerStub] = {}
        self._consume: dict[str, consume_pb2_grpc.ConsumeServiceStub] = {}

    def channel(self, addr: str) -> grpc.Channel:
        ch = self._channels.get(addr)
        if ch is None:
            with self._lock:
                ch = self._channels.get(addr)
                if ch is None:
                    ch = open_channel(addr, self.security)
                    self._channels[addr] = ch
        return ch

    def broker(self, addr: str) -> pb_grpc.BrokerStub:
        stub = self._brokers.get(addr)
        if stub is None:
            stub = pb_grpc.BrokerStub(self.channel(addr))
            self._brokers[addr] = stub
        return stub

    def consume(self, addr: str) -> consume_pb2_grpc.ConsumeServiceStub:
        """The broker's ConsumeService (pop, ack, pull locks) on the same channel."""
        stub = self._consume.get(addr)
        if stub is None:
            stub = consume_pb2_grpc.ConsumeServiceStub(self.channel(addr))
            self._consume[addr] = stub
        return stub

    def namesrv(self, addr: str) -> pb_grpc.NameServerStub:
        stub = self._namesrvs.get(addr)
        if stub is None:
            stub = pb_grpc.NameServerStub(self.channel(addr))
            self._namesrvs[addr] = stub
        return stub

    def close(self) -> None:
        with self._lock:
            for ch in self._channels.values():
                ch.close()
            self._channels.clear()
            self._brokers.clear()
            self._namesrvs.clear()
            self._consume.clear()
