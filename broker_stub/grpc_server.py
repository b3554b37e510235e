"""Process plumbing shared by the broker and the name server: gRPC server, ready file, signals."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from broker_stub.auth import AuthInterceptor
from broker_stub.security import OPEN, ServerSecurity
from broker_stub.store.atomic_file import atomic_write_json
from staticmq_spark.errors import InvalidOptionError
from staticmq_spark.protocol.transport.channels import MAX_MESSAGE_BYTES

GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
]


def start_server(
    host: str,
    port: int,
    workers: int,
    register: Callable[[grpc.Server], None],
    interceptors: Sequence[grpc.ServerInterceptor[Any, Any]] = (),
    security: ServerSecurity = OPEN,
) -> tuple[grpc.Server, int]:
    """Serve on host:port: TLS when `security` has a certificate; with an ACL, every call is
    checked (after the first interceptor, the metrics, so refused calls are counted)."""
    chain = list(interceptors)
    if security.acl is not None:
        chain.insert(1 if chain else 0, AuthInterceptor(security.acl))
    server = grpc.server(ThreadPoolExecutor(max_workers=workers), options=GRPC_OPTIONS, interceptors=chain)
    register(server)
    tls = security.server_credentials()
    try:
        bound = (
            server.add_secure_port(f"{host}:{port}", tls)
            if tls is not None
            else server.add_insecure_port(f"{host}:{port}")
        )
    except RuntimeError as exc:
        raise InvalidOptionError(f"cannot listen on {host}:{port}: {exc}") from None
    if bound == 0:
        raise InvalidOptionError(f"cannot listen on {host}:{port} (address in use or not available)")
    server.start()
    return server, bound


def write_ready_file(path: Path | None, payload: dict[str, Any]) -> None:
    if path is not None:
        atomic_write_json(path, {**payload, "pid": os.getpid()})


def wait_for_termination() -> None:
    """Block until SIGTERM or SIGINT."""
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    while not stop.wait(1.0):
        pass
