"""gRPC failures -> staticmq errors (the client side of the boundary; the server side is
broker_stub/rpc_errors.py). The error code travels in the trailing metadata "smq-code"."""

from __future__ import annotations

from typing import Any

import grpc

from staticmq_spark.errors import (
    BrokerUnavailableError,
    InvalidArgumentError,
    NotFoundError,
    StaticMQError,
    error_for_code,
)

CODE_KEY = "smq-code"


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
