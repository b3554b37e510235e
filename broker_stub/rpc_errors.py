"""The one place where exceptions become gRPC statuses (servers) - see staticmq_spark.backends.staticmq.rpc
for the reverse."""

from __future__ import annotations

import errno
import functools
import logging
import shutil
import time
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from staticmq_spark.errors import DiskFullError, InternalError, StaticMQError
from staticmq_spark.protocol.transport.grpc_errors import CODE_KEY

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
        except OSError as exc:
            err = disk_full(self, exc) if exc.errno == errno.ENOSPC else _internal(fn.__name__, exc)
        except Exception as exc:
            err = _internal(fn.__name__, exc)
        context.set_trailing_metadata(((CODE_KEY, err.code),))
        context.abort(getattr(grpc.StatusCode, err.grpc_status), err.message)

    return wrapper  # type: ignore[return-value]


def _internal(name: str, exc: BaseException) -> InternalError:
    log.error("%s failed", name, exc_info=exc)
    return InternalError(f"{name} failed inside the server: {exc!r}")


_last_disk_full_log = [0.0]


def disk_full(servicer: Any, exc: OSError) -> DiskFullError:
    """A full disk answers RESOURCE_EXHAUSTED naming the broker and the bytes left; it is logged
    once per minute, not once per request."""
    app = getattr(servicer, "app", None)
    name = str(getattr(app, "name", "this broker"))
    where = getattr(getattr(app, "config", None), "data_dir", None) or exc.filename or "."
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        free = -1
    message = f"disk full on {name} ({free} bytes free): nothing was stored"
    now = time.monotonic()
    if now - _last_disk_full_log[0] >= 60:
        _last_disk_full_log[0] = now
        log.error("%s (%s)", message, exc)
    return DiskFullError(message)
