"""Calls to staticmq servers: `invoke` (gRPC errors -> staticmq errors) and the per-address
channel cache `Channels` (defined with the channel opener in protocol/transport/channels.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import grpc

from staticmq_spark.backends.first_contact import NoAnswer, first_contact_error
from staticmq_spark.backends.types import BrokerSummary
from staticmq_spark.protocol.pb import staticmq_pb2_grpc as pb_grpc
from staticmq_spark.protocol.topics.config import TopicConfig
from staticmq_spark.protocol.transport.channels import Channels
from staticmq_spark.protocol.transport.grpc_errors import CODE_KEY, translate

__all__ = ["BrokerCalls", "Channels", "first_call", "grpc_no_answer", "invoke"]

T = TypeVar("T")


def invoke(target: str, method: Callable[..., T], request: Any, timeout: float, *, wait_for_ready: bool = True) -> T:
    """Call `method`; with wait_for_ready a broker that is (re)starting is waited for up to the
    timeout instead of failing at once (producers pass False to fail over quickly)."""
    try:
        return method(request, timeout=timeout, wait_for_ready=wait_for_ready)
    except grpc.RpcError as exc:
        raise translate(exc, target) from None


def first_call(addr: str, method: Callable[..., T], request: Any, timeout: float, *, tls: bool) -> T:
    """A call to `addr`, which has never answered this process: it is not waited for (gRPC's
    wait_for_ready would hide the cause behind DEADLINE_EXCEEDED), and a channel that cannot connect
    fails at once with the likely cause (first_contact: refused, closed unanswered, TLS)."""
    try:
        return method(request, timeout=timeout, wait_for_ready=False)
    except grpc.RpcError as exc:
        call: Any = exc
        status = call.code() if hasattr(call, "code") else None
        trailing = call.trailing_metadata() if hasattr(call, "trailing_metadata") else None
        no_answer = status in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        if not no_answer or any(key == CODE_KEY for key, _ in trailing or ()):
            raise translate(exc, addr) from None  # the server answered (e.g. UNAUTHENTICATED)
        details = str(call.details() if hasattr(call, "details") else exc)
        kind = grpc_no_answer(details)
        raise first_contact_error(kind, addr, tls=tls, detail=grpc_last_error(details)) from None


# Status details of a call that failed fast (wait_for_ready=False) because the channel could not
# connect, by what gRPC core says happened (checked in this order):
_NO_ANSWER_DETAILS: tuple[tuple[NoAnswer, tuple[str, ...]], ...] = (
    (NoAnswer.TLS, ("tls handshake", "ssl_error", "handshake failed")),
    (NoAnswer.REFUSED, ("connection refused",)),
    (NoAnswer.CLOSED, ("socket closed", "connection reset", "broken pipe", "end of file", "goaway")),
    (NoAnswer.UNRESOLVED, ("errors resolving", "dns resolution failed", "domain name not found", "name or service")),
    (NoAnswer.TIMEOUT, ("timed out", "timeout", "deadline exceeded")),
)


def grpc_no_answer(details: str) -> NoAnswer:
    """How a channel that never connected failed, from a failed call's status details, e.g.
    "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:9876: Socket closed"
    (a plain client at a TLS server) or "...: Failed to connect to remote host: Connection refused"."""
    text = details.lower()
    for kind, marks in _NO_ANSWER_DETAILS:
        if any(mark in text for mark in marks):
            return kind
    return NoAnswer.OTHER


def grpc_last_error(details: str) -> str:
    """The useful end of gRPC's "failed to connect to all addresses; last error: ..." details (of a
    TLS failure, OpenSSL's reason, e.g. "BAD_SIGNATURE: certificate signature failure")."""
    last = details.rpartition("last error: ")[2]
    last = last.rpartition("OPENSSL_internal:")[2].removesuffix(": OK")
    return last.strip() or details


class BrokerCalls(Protocol):
    """The narrow port that the admin-side operations (remap, progress, listings) call brokers
    through: the live brokers, one call with the admin's timeout, and a broker's stub."""

    def cluster_info(self) -> list[BrokerSummary]: ...

    def target_brokers(self, *, cluster: str | None = None, brokers: list[str] | None = None) -> dict[str, str]: ...

    def stub(self, addr: str) -> pb_grpc.BrokerStub: ...

    def call(self, target: str, method: Callable[..., T], request: Any) -> T: ...

    def topic_configs(self, broker_addr: str) -> list[TopicConfig]: ...

    def brokers_with_topic(self, topic: str) -> dict[str, tuple[str, TopicConfig]]: ...
