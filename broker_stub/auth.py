"""Authentication and authorization of every RPC (servers started with `--acl FILE`).

`AuthInterceptor` checks the signature of each call (protocol/security/auth.py), then what the call needs
(`NEEDS`: one row per RPC, read from the decoded request) against the caller's account
(protocol/security/acl.py). A refused call never reaches its servicer, so it changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import grpc

from staticmq_spark.errors import AccessDeniedError, StaticMQError
from staticmq_spark.protocol.security.acl import Acl, Need, Perm
from staticmq_spark.protocol.security.auth import check_signature, signed_call
from staticmq_spark.protocol.transport.grpc_errors import CODE_KEY
from staticmq_spark.protocol.wire.stage_request import decode_stage_request

log = logging.getLogger(__name__)

ANY = Perm.PUB | Perm.SUB  # reading a topic's metadata: producers and consumers alike


def _admin(action: str) -> Callable[[Any], Need]:
    return lambda r: Need(action, admin=True)


def _signed_in(action: str) -> Callable[[Any], Need]:
    return lambda r: Need(action)


def _topic(action: str, perm: Perm, field: str = "topic") -> Callable[[Any], Need]:
    return lambda r: Need(action, topic=getattr(r, field), topic_perm=perm)


def _consume(action: str) -> Callable[[Any], Need]:
    """Reading as a group: SUB on the topic and on the group (a pull without a group: the topic only)."""
    return lambda r: Need(action, topic=r.topic, topic_perm=Perm.SUB, group=getattr(r, "group", ""))


def _stage(request: Any) -> Need:
    head = decode_stage_request(request).head if isinstance(request, bytes) else request
    return Need("write to", topic=head.topic, topic_perm=Perm.PUB)


# method name -> what a call of it needs. Every RPC of Broker, ConsumeService and NameServer is
# listed (tests/unit/protocol/security/test_auth.py checks it against the service descriptors).
NEEDS: dict[str, Callable[[Any], Need]] = {
    # Broker: data
    "Send": _topic("send to", Perm.PUB),
    "QueryIdempotencyKey": _topic("send to", Perm.PUB),
    "Pull": _consume("pull from"),
    "GetTopicOffsets": _topic("read offsets of", ANY),
    "GetQueueOffsets": _topic("read offsets of", ANY),
    "SearchOffset": _topic("search offsets of", ANY),
    "GetStaticTopicState": _topic("read the mapping of", ANY),
    "CommitOffset": _consume("commit offsets on"),
    "QueryOffset": _consume("read committed offsets of"),
    "ListConsumerOffsets": lambda r: Need(
        "list offsets of", topic=r.topic, topic_perm=Perm.SUB if r.topic else Perm.DENY, group=r.group
    ),
    # Broker: the exactly-once sink (a transaction is named by writer and batch only)
    "StageRows": _stage,
    "PrepareTxn": _topic("commit sink rows to", Perm.PUB),
    "CommitTxn": _signed_in("commit a sink transaction"),
    "GetTxn": _signed_in("read a sink transaction"),
    # Broker: administration
    "UpdateTopic": _admin("create or update topics"),
    "DeleteTopic": _admin("delete topics"),
    "GetTopicConfigs": _signed_in("list topics"),
    "Ping": _signed_in("ping"),
    "WriteMapping": _admin("write static-topic mappings (create, grow or remap)"),
    "DeleteStaticTopic": _admin("delete topics"),
    # ConsumeService
    "Pop": _consume("pop from"),
    "Ack": _consume("ack"),
    "ChangeInvisibleTime": _consume("change the invisible time on"),
    "LockQueues": _consume("lock queues of"),
    "UnlockQueues": _consume("unlock queues of"),
    "ExclusivePull": _consume("pull from"),
    "ExclusiveCommit": _consume("commit offsets on"),
    # NameServer
    "RegisterBroker": _admin("register a broker"),
    "UnregisterBroker": _admin("unregister a broker"),
    "GetRoute": _topic("read the route of", ANY),
    "GetClusterInfo": _signed_in("read the cluster's brokers"),
}


_last_logged: dict[tuple[str, str], float] = {}


def _log_refusal(method: str, message: str) -> None:
    """One log line per (method, reason) a minute: a flood of refused calls must not flood the log."""
    now = time.monotonic()
    key = (method, message[:80])
    if now - _last_logged.get(key, -60.0) >= 60.0:
        if len(_last_logged) > 10_000:
            _last_logged.clear()
        _last_logged[key] = now
        log.warning("refused %s: %s", method, message)


class AuthInterceptor(grpc.ServerInterceptor):  # type: ignore[misc,type-arg]
    """Refuses (UNAUTHENTICATED / PERMISSION_DENIED, with staticmq's error code) every call that
    is not signed by an account of `acl`, or that its account may not make."""

    def __init__(self, acl: Acl, clock: Callable[[], float] = time.time) -> None:
        self._acl = acl
        self._clock = clock

    def intercept_service(self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = details.method.rsplit("/", 1)[-1]
        need_of = NEEDS.get(method)
        behaviour = handler.unary_unary
        metadata = tuple(details.invocation_metadata or ())

        def checked(request: Any, context: grpc.ServicerContext) -> Any:
            try:
                call = signed_call(metadata)
                account = self._acl.account(call.access_key)
                check_signature(call, account.secret_key, self._clock())
                if need_of is None:
                    raise AccessDeniedError(f"{method} is not open to any account")
                self._acl.authorize(account, need_of(request))
            except StaticMQError as exc:
                _log_refusal(method, exc.message)
                context.set_trailing_metadata(((CODE_KEY, exc.code),))
                context.abort(getattr(grpc.StatusCode, exc.grpc_status), exc.message)
            return behaviour(request, context)

        return grpc.unary_unary_rpc_method_handler(
            checked, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )
