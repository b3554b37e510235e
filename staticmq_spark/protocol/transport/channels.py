"""Opening a gRPC channel to a staticmq server: the one place that sets channel options, TLS and
request signing, for clients, the Spark source and sink, and brokers calling each other."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from staticmq_spark.errors import InvalidOptionError
from staticmq_spark.protocol.pb import consume_pb2_grpc
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.pb import staticmq_pb2_grpc as pb_grpc
from staticmq_spark.protocol.security.auth import PLAIN, ClientSecurity, Credentials
from staticmq_spark.protocol.wire.pull_response import PULL_METHOD

MAX_MESSAGE_BYTES = 64 << 20
CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.enable_retries", 0),
    # a restarted broker must be reachable again quickly: reconnect after 100 ms, not gRPC's 1 s+
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
)


def tls_credentials(security: ClientSecurity) -> grpc.ChannelCredentials | None:
    """The channel credentials of a security with a CA file (None: plain text)."""
    if not security.tls_ca:
        return None
    try:
        root = Path(security.tls_ca).read_bytes()
    except OSError as exc:
        raise InvalidOptionError(f"TLS CA file {security.tls_ca}: {exc.strerror or exc}") from None
    if b"-----BEGIN CERTIFICATE-----" not in root:
        raise InvalidOptionError(f"TLS CA file {security.tls_ca} holds no PEM certificate")
    return grpc.ssl_channel_credentials(root_certificates=root)


def open_channel(
    addr: str, security: ClientSecurity = PLAIN, options: tuple[tuple[str, Any], ...] = CHANNEL_OPTIONS
) -> grpc.Channel:
    """A channel to `addr`: TLS when the security has a CA, every call signed when it has credentials."""
    tls = tls_credentials(security)
    channel = (
        grpc.secure_channel(addr, tls, options=list(options))
        if tls is not None
        else grpc.insecure_channel(addr, options=list(options))
    )
    if security.credentials is not None:
        channel = grpc.intercept_channel(channel, _Signer(security.credentials))
    return channel


class _Signer(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc,type-arg]
    """Adds a fresh signature (authorization + x-mq-date-time) to every call."""

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials

    def intercept_unary_unary(
        self, continuation: Callable[[Any, Any], Any], client_call_details: Any, request: Any
    ) -> Any:
        metadata = [*(client_call_details.metadata or ()), *self._credentials.grpc_metadata()]
        return continuation(client_call_details._replace(metadata=metadata), request)


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
        self._raw_pulls: dict[str, grpc.UnaryUnaryMultiCallable[pb.PullRequest, bytes]] = {}

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

    def raw_pull(self, addr: str) -> grpc.UnaryUnaryMultiCallable[pb.PullRequest, bytes]:
        """The broker's Pull answering serialized bytes (read with wire.pull_response.decode_pull_response,
        which leaves the rows where they arrived)."""
        call = self._raw_pulls.get(addr)
        if call is None:
            call = self._raw_pulls[addr] = self.channel(addr).unary_unary(
                PULL_METHOD, request_serializer=pb.PullRequest.SerializeToString, response_deserializer=None
            )
        return call

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
            self._raw_pulls.clear()
