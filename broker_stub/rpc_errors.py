"""The one place where exceptions become gRPC statuses (servers) - see staticmq_spark.client.rpc
for the reverse."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from staticmq_spark.errors import InternalError, StaticMQError
from staticmq_spark.protocol.grpc_errors import CODE_KEY

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


def rpc_method(fn: F) -> F:
    """Wrap a servicer method: staticmq errors keep their code; anything else is INTERNAL."""

    @functools.wraps(fn)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return fn(self, request, context)
        except StaticMQError as exc:
            err = exc
        except Exception as exc:
            log.exception("%s failed", fn.__name__)
            err = InternalError(f"{fn.__name__} failed inside the server: {exc!r}")
        context.set_trailing_metadata(((CODE_KEY, err.code),))
        context.abort(getattr(grpc.StatusCode, err.grpc_status), err.message)

    return wrapper  # type: ignore[return-value]
