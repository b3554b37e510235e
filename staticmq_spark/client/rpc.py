"""Calls to staticmq servers: `invoke` (gRPC errors -> staticmq errors) and the per-address
channel cache `Channels` (defined with the channel opener in protocol/channels.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from staticmq_spark.protocol.channels import Channels
from staticmq_spark.protocol.grpc_errors import translate

__all__ = ["Channels", "invoke"]

T = TypeVar("T")


def invoke(target: str, method: Callable[..., T], request: Any, timeout: float, *, wait_for_ready: bool = True) -> T:
    """Call `method`; with wait_for_ready a broker that is (re)starting is waited for up to the
    timeout instead of failing at once (producers pass False to fail over quickly)."""
    try:
        return method(request, timeout=timeout, wait_for_ready=wait_for_ready)
    except grpc.RpcError as exc:
        raise translate(exc, target) from None
