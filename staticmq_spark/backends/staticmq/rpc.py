"""Calls to staticmq servers: `invoke` (gRPC errors -> staticmq errors) and the per-address
channel cache `Channels` (defined with the channel opener in protocol/channels.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import grpc

from staticmq_spark.backends.types import BrokerSummary
from staticmq_spark.protocol.channels import Channels
from staticmq_spark.protocol.grpc_errors import translate
from staticmq_spark.protocol.pb import staticmq_pb2_grpc as pb_grpc
from staticmq_spark.protocol.topic import TopicConfig

__all__ = ["BrokerCalls", "Channels", "invoke"]

T = TypeVar("T")


def invoke(target: str, method: Callable[..., T], request: Any, timeout: float, *, wait_for_ready: bool = True) -> T:
    """Call `method`; with wait_for_ready a broker that is (re)starting is waited for up to the
    timeout instead of failing at once (producers pass False to fail over quickly)."""
    try:
        return method(request, timeout=timeout, wait_for_ready=wait_for_ready)
    except grpc.RpcError as exc:
        raise translate(exc, target) from None


class BrokerCalls(Protocol):
    """The narrow port that the admin-side operations (remap, progress, listings) call brokers
    through: the live brokers, one call with the admin's timeout, and a broker's stub."""

    def cluster_info(self) -> list[BrokerSummary]: ...

    def target_brokers(self, *, cluster: str | None = None, brokers: list[str] | None = None) -> dict[str, str]: ...

    def broker_addr(self, name: str) -> str: ...

    def stub(self, addr: str) -> pb_grpc.BrokerStub: ...

    def call(self, target: str, method: Callable[..., T], request: Any) -> T: ...

    def topic_configs(self, broker_addr: str) -> list[TopicConfig]: ...

    def brokers_with_topic(self, topic: str) -> dict[str, tuple[str, TopicConfig]]: ...
