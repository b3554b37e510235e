"""The one error tree of staticmq, shared by broker, name server and clients.

    StaticMQError
    ├── InvalidArgumentError             bad input from the caller (never retried)
    │   ├── InvalidTopicNameError
    │   ├── InvalidBatchError
    │   ├── MessageTooLargeError
    │   ├── InvalidOffsetError
    │   ├── InvalidOptionError           a connector or CLI option that is unknown or malformed
    │   └── UnsupportedOperationError    an operation the cluster's backend cannot do (names what can)
    ├── NotFoundError
    │   ├── TopicNotFoundError
    │   ├── QueueNotFoundError
    │   └── BrokerNotFoundError
    ├── ConflictError                    the request contradicts stored state
    │   ├── TopicExistsError
    │   ├── StaticTopicRefusedError      a plain operation on a static topic, or the reverse
    │   ├── MappingRejectedError         a TopicQueueMapping that breaks the mapping rules
    │   ├── InconsistentTopicError       brokers disagree about a static topic: run repair
    │   └── ReceiptHandleError           pop: a forged, expired or superseded receipt handle
    ├── DataDirError                     a data directory that belongs to another broker
    ├── DataLossError                    messages the reader needed were removed by retention
    ├── NotLeaderError (retriable)       the broker does not lead that logic queue (stale route)
    ├── QueueUnavailableError (retriable) a logic queue whose broker is down
    ├── BrokerUnavailableError (retriable) a broker or name server that cannot be reached
    │   └── NameServerUnreachableError   (not retriable) a name server address that never answered
    ├── FirstContactError                an address that never answered closed the connection unanswered
    ├── TlsError                         a TLS connection that cannot be made as configured
    ├── AccessDeniedError                the caller's account lacks the permission (PERMISSION_DENIED)
    │   └── UnauthenticatedError         no credentials, an unknown key, a bad signature or a stale time
    ├── DataCorruptError                 a stored record failed its checksum: never served
    ├── DiskFullError (retriable)        the broker's disk is full (RESOURCE_EXHAUSTED)
    ├── LockHeldError (retriable)        an exclusive-consumption lock held by someone else
    ├── PartialSendError                 a batch send where some requests were stored and others
    │                                    failed: `.stored` and `.failed` say which rows to retry
    ├── NotSentError (retriable)         an asynchronous send held back behind a failed request to
    │                                    the same logic queue (sending it would reorder the queue)
    ├── MissingExtraError                an optional package is not installed: names the pip extra
    └── InternalError                    a fault inside the broker (a bug: reported, never hidden)

Every class names its wire `code`; `error_for_code` is derived from the classes, so adding a
class is enough to make it travel between processes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar


class StaticMQError(Exception):
    """Base of every staticmq error. `code` travels on the wire; `retriable` drives retries."""

    code: ClassVar[str] = "STATICMQ_ERROR"
    grpc_status: ClassVar[str] = "UNKNOWN"
    retriable: ClassVar[bool] = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgumentError(StaticMQError):
    code = "INVALID_ARGUMENT"
    grpc_status = "INVALID_ARGUMENT"


class InvalidTopicNameError(InvalidArgumentError):
    code = "INVALID_TOPIC_NAME"


class InvalidBatchError(InvalidArgumentError):
    code = "INVALID_BATCH"


class MessageTooLargeError(InvalidArgumentError):
    code = "MESSAGE_TOO_LARGE"


class InvalidOffsetError(InvalidArgumentError):
    code = "INVALID_OFFSET"


class InvalidOptionError(InvalidArgumentError):
    code = "INVALID_OPTION"


class UnsupportedOperationError(InvalidArgumentError):
    code = "UNSUPPORTED_OPERATION"


class NotFoundError(StaticMQError):
    code = "NOT_FOUND"
    grpc_status = "NOT_FOUND"


class TopicNotFoundError(NotFoundError):
    code = "TOPIC_NOT_FOUND"


class QueueNotFoundError(NotFoundError):
    code = "QUEUE_NOT_FOUND"


class BrokerNotFoundError(NotFoundError):
    code = "BROKER_NOT_FOUND"


class ConflictError(StaticMQError):
    code = "CONFLICT"
    grpc_status = "FAILED_PRECONDITION"


class TopicExistsError(ConflictError):
    code = "TOPIC_EXISTS"
    grpc_status = "ALREADY_EXISTS"


class StaticTopicRefusedError(ConflictError):
    code = "STATIC_TOPIC_REFUSED"


class MappingRejectedError(ConflictError):
    code = "MAPPING_REJECTED"


class InconsistentTopicError(ConflictError):
    code = "INCONSISTENT_TOPIC"


class ReceiptHandleError(ConflictError):
    code = "INVALID_RECEIPT_HANDLE"


class DataDirError(StaticMQError):
    code = "DATA_DIR"
    grpc_status = "FAILED_PRECONDITION"


class DataLossError(StaticMQError):
    code = "DATA_LOSS"
    grpc_status = "OUT_OF_RANGE"


class NotLeaderError(StaticMQError):
    code = "NOT_LEADER"
    grpc_status = "UNAVAILABLE"
    retriable = True


class QueueUnavailableError(StaticMQError):
    code = "QUEUE_UNAVAILABLE"
    grpc_status = "UNAVAILABLE"
    retriable = True


class BrokerUnavailableError(StaticMQError):
    code = "BROKER_UNAVAILABLE"
    grpc_status = "UNAVAILABLE"
    retriable = True


class NameServerUnreachableError(BrokerUnavailableError):
    """No name server of the address list has ever answered this process: most likely a wrong
    address, so retrying for minutes would only hide the mistake."""

    code = "NAMESRV_UNREACHABLE"
    retriable = False


class FirstContactError(StaticMQError):
    """An address that has never answered this process accepted the connection and closed it
    before answering: it most likely expects TLS or credentials (the message says which options
    give them). Not retried: a server that went away is retried only once it has answered."""

    code = "FIRST_CONTACT_FAILED"
    grpc_status = "UNAVAILABLE"


class TlsError(StaticMQError):
    """A TLS connection that cannot be made as configured: the server's certificate does not verify
    against the CA given, or the server does not speak TLS. Retrying would not change it."""

    code = "TLS_ERROR"
    grpc_status = "UNAVAILABLE"


class AccessDeniedError(StaticMQError):
    """The cluster refused the caller's credentials (none, wrong, or without the permission)."""

    code = "ACCESS_DENIED"
    grpc_status = "PERMISSION_DENIED"


class UnauthenticatedError(AccessDeniedError):
    """The request carried no credentials, an unknown access key, a wrong signature or a stale
    timestamp: the server could not tell who sent it."""

    code = "UNAUTHENTICATED"
    grpc_status = "UNAUTHENTICATED"


class DataCorruptError(StaticMQError):
    """A stored record failed its checksum: it is never served (the read names file and offset)."""

    code = "DATA_CORRUPT"
    grpc_status = "DATA_LOSS"


class DiskFullError(StaticMQError):
    """The broker's disk is full: nothing was stored; another broker (keyless rows) or a later
    retry may succeed."""

    code = "DISK_FULL"
    grpc_status = "RESOURCE_EXHAUSTED"
    retriable = True


class LockHeldError(StaticMQError):
    code = "LOCK_HELD"
    grpc_status = "FAILED_PRECONDITION"
    retriable = True


class PartialSendError(StaticMQError):
    """Some requests of a batch send were stored and others failed (each request is one logic
    queue's rows, or a byte-sized piece of them). `stored`: the stored requests' results, each
    with `rows` (input row indices; backends.types.SendResult, not named here: this module is
    below every other); `failed`: input row index -> the error of its request. Retry
    exactly the failed rows (their errors say whether that can help); the stored ones are stored
    once. Not retriable itself: retrying the whole batch would duplicate the stored rows."""

    code = "PARTIAL_SEND"

    def __init__(
        self,
        message: str,
        stored: Sequence[Any] = (),
        failed: Mapping[int, StaticMQError] | None = None,
    ) -> None:
        super().__init__(message)
        self.stored: list[Any] = list(stored)
        self.failed: dict[int, StaticMQError] = dict(failed or {})

    @classmethod
    def of(cls, topic: str, stored: Sequence[Any], failed: Mapping[int, StaticMQError]) -> PartialSendError:
        """The error of a batch send to `topic`, its message naming the first distinct causes."""
        causes: list[str] = []
        for exc in failed.values():
            cause = f"{exc.code}: {exc.message}"
            if cause not in causes:
                causes.append(cause)
        rows_stored = sum(r.count for r in stored)
        message = (
            f"send to {topic!r}: {rows_stored} rows stored in {len(stored)} requests, {len(failed)} rows "
            f"failed ({'; '.join(causes[:3])}{'; ...' if len(causes) > 3 else ''})"
        )
        return cls(message, stored, failed)


class NotSentError(StaticMQError):
    """A `Producer.send_batch_async` request that waited behind a failed request to the same logic
    queue and was not sent, so the queue keeps its order: send its rows again after the failed ones."""

    code = "NOT_SENT"
    grpc_status = "ABORTED"
    retriable = True


class MissingExtraError(StaticMQError):
    """An optional package this code path needs is not installed (see `missing_extra`)."""

    code = "MISSING_EXTRA"
    grpc_status = "FAILED_PRECONDITION"


# Optional packages (top-level module -> pip distribution, staticmq extra that installs it); the
# connector's own requirements (pyarrow, numpy, grpcio, protobuf) are never missing.
EXTRAS: dict[str, tuple[str, str]] = {
    "pyspark": ("pyspark", "spark"),
    "pandas": ("pandas", "spark"),
    "delta": ("delta-spark", "delta"),
    "yaml": ("pyyaml", "broker"),
    "prometheus_client": ("prometheus_client", "broker"),
    "cryptography": ("cryptography", "broker"),
    "tqdm": ("tqdm", "broker"),
}


def missing_extra(exc: ModuleNotFoundError, needed_for: str) -> MissingExtraError | None:
    """The error to raise for an optional package that is not installed (None: not one of them)."""
    top = (exc.name or "").partition(".")[0]
    if top not in EXTRAS:
        return None
    package, extra = EXTRAS[top]
    return MissingExtraError(
        f"{needed_for} needs {package}, which is not installed: pip install 'staticmq[{extra}]' "
        f"(or pip install {package})"
    )


class InternalError(StaticMQError):
    code = "INTERNAL"
    grpc_status = "INTERNAL"


def _all_subclasses(cls: type[StaticMQError]) -> list[type[StaticMQError]]:
    found: list[type[StaticMQError]] = [cls]
    for sub in cls.__subclasses__():
        found.extend(_all_subclasses(sub))
    return found


def error_for_code(code: str) -> type[StaticMQError]:
    """The error class a wire code names; unknown codes map to the base class."""
    table = {cls.code: cls for cls in _all_subclasses(StaticMQError)}
    return table.get(code, StaticMQError)
