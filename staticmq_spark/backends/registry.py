"""The one place that reads an address's scheme: which backend serves it, and the one per-process
cache of opened backends (Spark's read()/write() get only picklable values, so each Python worker
opens a cluster once and keeps it).

Backends are lazy entry points (module, class), imported on first use: the interfaces never
import their implementations, and a process that reads broker_stub never loads the RocketMQ code.
"""

from __future__ import annotations

import atexit
import importlib
import threading

from staticmq_spark.backends.address import ClusterAddress, parse_address
from staticmq_spark.backends.api import Backend
from staticmq_spark.backends.types import PLAIN, Capabilities, ClientSecurity

# scheme -> "module:Class"; a new backend plugs in here (and in address.SCHEMES).
ENTRY_POINTS: dict[str, str] = {
    "staticmq": "staticmq_spark.backends.staticmq.backend:StaticMQBackend",
    "rocketmq": "staticmq_spark.backends.rocketmq.backend:RocketMQBackend",
    "memory": "staticmq_spark.backends.memory:MemoryBackend",
}

_SHARED: dict[tuple[str, ClientSecurity], Backend] = {}
_LOCK = threading.Lock()


def backend_class(scheme: str) -> type[Backend]:
    module, _, name = ENTRY_POINTS[scheme].partition(":")
    cls: type[Backend] = getattr(importlib.import_module(module), name)
    return cls


def address_of(namesrv: str | ClusterAddress) -> ClusterAddress:
    return namesrv if isinstance(namesrv, ClusterAddress) else parse_address(namesrv)


def scheme_of(namesrv: str | ClusterAddress) -> str:
    """Which backend serves an address: "staticmq", "rocketmq" or "memory"."""
    return address_of(namesrv).scheme


def open_backend(namesrv: str | ClusterAddress, security: ClientSecurity = PLAIN) -> Backend:
    """A new backend for the address (the caller closes it)."""
    address = address_of(namesrv)
    return backend_class(address.scheme)(address, security)  # type: ignore[call-arg]


def shared_backend(namesrv: str | ClusterAddress, security: ClientSecurity = PLAIN) -> Backend:
    """This process's backend for the address and keys, opened once and closed at exit."""
    address = address_of(namesrv)
    key = (str(address), security)
    with _LOCK:
        found = _SHARED.get(key)
        if found is None:
            found = _SHARED[key] = open_backend(address, security)
        return found


def capabilities_of(namesrv: str | ClusterAddress) -> Capabilities:
    """What the backend of an address can do, without connecting to it."""
    caps: Capabilities = backend_class(address_of(namesrv).scheme).capabilities
    return caps


@atexit.register
def _close_shared() -> None:
    with _LOCK:
        opened = list(_SHARED.values())
        _SHARED.clear()
    for backend in opened:
        try:
            backend.close()
        except Exception:
            pass
