"""Long-lived gRPC channels to brokers and name servers, and gRPC errors -> staticmq errors."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from staticmq_spark.errors import (
    BrokerUnavailableError,
    InvalidArgumentError,
    NotFoundError,
    StaticMQError,
    error_for_code,
)
from staticmq_spark.protocol.pb import staticmq_pb2_grpc as pb_grpc

CODE_KEY = "smq-code"
MAX_MESSAGE_BYTES = 64 << 20
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.enable_retries", 0),
]

T = TypeVar("T")


def translate(exc: grpc.RpcError, target: str) -> StaticMQError:
    """The staticmq error a failed call stands for."""
    call: Any = exc
    details = call.details() if hasattr(call, "details") else str(exc)
    code_name = ""
    for key, value in (call.trailing_metadata() or ()) if hasattr(call, "trailing_metadata") else ():
        if key == CODE_KEY:
            code_name = value
    if code_name:
        return error_for_code(code_name)(details or code_name)
    status = call.code() if hasattr(call, "code") else None
    if status in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
        return BrokerUnavailableError(f"{target} is unavailable ({status.name}): {details}")
    if status == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return InvalidArgumentError(f"request to {target} is too large: {details}")
    if status == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidArgumentError(details)
    if status == grpc.StatusCode.NOT_FOUND:
        return NotFoundError(details)
    return StaticMQError(f"{target}: {status.name if status else 'error'}: {details}")


def invoke(target: str, method: Callable[..., T], request: Any, timeout: float) -> T:
    try:
        return method(request, timeout=timeout)
    except grpc.RpcError as exc:
        raise translate(exc, target) from None


class Channels:
    """One channel per address, shared by every client object of a process component."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._brokers: dict[str, pb_grpc.BrokerStub] = {}
        self._namesrvs: dict[str, pb_grpc.NameServerStub] = {}

    def channel(self, addr: str) -> grpc.Channel:
        ch = self._channels.get(addr)
        if ch is None:
            with self._lock:
                ch = self._channels.get(addr)
                if ch is None:
                    ch = grpc.insecure_channel(addr, options=CHANNEL_OPTIONS)
                    self._channels[addr] = ch
        return ch

    def broker(self, addr: str) -> pb_grpc.BrokerStub:
        stub = self._brokers.get(addr)
        if stub is None:
            stub = pb_grpc.BrokerStub(self.channel(addr))
            self._brokers[addr] = stub
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
