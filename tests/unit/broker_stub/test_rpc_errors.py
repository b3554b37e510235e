"""Server-side error mapping: staticmq errors keep their code, a full disk is RESOURCE_EXHAUSTED
naming the broker and the bytes left (logged once a minute), anything else INTERNAL."""

from __future__ import annotations

import errno
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from broker_stub import rpc_errors
from broker_stub.rpc_errors import rpc_method
from staticmq_spark.errors import DiskFullError, QueueNotFoundError, error_for_code
from staticmq_spark.protocol.transport.grpc_errors import CODE_KEY


class Aborted(Exception):
    pass


class Context:
    def __init__(self) -> None:
        self.trailing: Any = None
        self.status: grpc.StatusCode | None = None
        self.details = ""

    def set_trailing_metadata(self, metadata: Any) -> None:
        self.trailing = metadata

    def abort(self, status: grpc.StatusCode, details: str) -> None:
        self.status, self.details = status, details
        raise Aborted


def call(error: BaseException, tmp_path: Path) -> Context:
    class Servicer:
        app = SimpleNamespace(name="broker-7", config=SimpleNamespace(data_dir=tmp_path))

        @rpc_method
        def Send(self, request: Any, context: Any) -> Any:
            raise error

    context = Context()
    with pytest.raises(Aborted):
        Servicer().Send(None, context)
    return context


def test_a_full_disk_is_resource_exhausted_naming_the_broker_and_free_bytes(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    rpc_errors._last_disk_full_log[0] = 0.0
    with caplog.at_level(logging.ERROR, logger="broker_stub.rpc_errors"):
        first = call(OSError(errno.ENOSPC, "No space left on device"), tmp_path)
        call(OSError(errno.ENOSPC, "No space left on device"), tmp_path)
    assert first.status is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert first.details.startswith("disk full on broker-7 (") and "bytes free" in first.details
    assert first.trailing == ((CODE_KEY, "DISK_FULL"),)
    assert error_for_code("DISK_FULL") is DiskFullError and DiskFullError.retriable
    assert len([r for r in caplog.records if "disk full" in r.getMessage()]) == 1, "logged once a minute"
    assert not any(r.exc_text and "Traceback" in r.exc_text for r in caplog.records)


def test_staticmq_errors_keep_their_code_and_other_failures_are_internal(tmp_path: Path) -> None:
    found = call(QueueNotFoundError("no queue 9"), tmp_path)
    assert (found.status, found.details) == (grpc.StatusCode.NOT_FOUND, "no queue 9")
    other = call(OSError(errno.EIO, "I/O error"), tmp_path)
    assert other.status is grpc.StatusCode.INTERNAL and "failed inside the server" in other.details
