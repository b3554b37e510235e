"""Other brokers of the cluster, for what a logic queue needs from segments this broker does
not hold (remote reads, offsets, commits): addresses come from the name server, channels are
long-lived, failures are staticmq errors."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import grpc

from staticmq_spark.errors import BrokerUnavailableError, StaticMQError
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.pb import staticmq_pb2_grpc as pb_grpc
from staticmq_spark.protocol.security.auth import PLAIN, ClientSecurity
from staticmq_spark.protocol.topics.names import split_addresses
from staticmq_spark.protocol.transport.channels import Channels
from staticmq_spark.protocol.transport.grpc_errors import translate
from staticmq_spark.protocol.wire.topic_route import route_from_pb

REFRESH_S = 5.0
T = TypeVar("T")


class Peers:
    def __init__(self, namesrv: str, timeout_s: float = 10.0, security: ClientSecurity = PLAIN) -> None:
        self._namesrv = split_addresses(namesrv)
        self._timeout_s = timeout_s
        self._addrs: dict[str, str] = {}
        self._fetched = 0.0
        self._channels = Channels(security)

    def _stub(self, bname: str) -> pb_grpc.BrokerStub:
        return self._channels.broker(self._addr(bname))

    def _addr(self, bname: str) -> str:
        if bname not in self._addrs or time.monotonic() - self._fetched > REFRESH_S:
            self._refresh()
        try:
            return self._addrs[bname]
        except KeyError:
            raise BrokerUnavailableError(f"broker {bname!r} is not alive (the name server does not list it)") from None

    def _refresh(self) -> None:
        for addr in self._namesrv:
            try:
                info = self._channels.namesrv(addr).GetClusterInfo(pb.Empty(), timeout=self._timeout_s)
            except grpc.RpcError:
                continue
            self._addrs = {b.name: b.addr for b in info.brokers}
            self._fetched = time.monotonic()
            return

    def _call(self, bname: str, fn: Callable[[pb_grpc.BrokerStub], T]) -> T:
        try:
            return fn(self._stub(bname))
        except grpc.RpcError as exc:
            raise translate(exc, f"broker {bname}") from None

    def pull(self, bname: str, request: pb.PullRequest) -> pb.PullResponse:
        timeout = self._timeout_s + request.wait_ms / 1000
        return self._call(bname, lambda s: s.Pull(request, timeout=timeout))

    def pull_future(self, bname: str, request: pb.PullRequest) -> grpc.Future[pb.PullResponse]:
        """Start a pull without waiting for it (read-ahead); errors surface at .result()."""
        future: grpc.Future[pb.PullResponse] = self._stub(bname).Pull.future(request, timeout=self._timeout_s)
        return future

    def queue_offsets(self, bname: str, topic: str, queue_id: int) -> pb.QueueOffsets:
        ref = pb.QueueRef(topic=topic, queue_id=queue_id, physical=True)
        return self._call(bname, lambda s: s.GetQueueOffsets(ref, timeout=self._timeout_s))

    def search(self, bname: str, topic: str, queue_id: int, timestamp: int) -> int:
        req = pb.SearchOffsetRequest(topic=topic, queue_id=queue_id, timestamp=timestamp, physical=True)
        return self._call(bname, lambda s: s.SearchOffset(req, timeout=self._timeout_s)).offset

    def commit(self, bname: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        req = pb.CommitOffsetRequest(group=group, topic=topic, queue_id=queue_id, offset=offset, physical=True)
        self._call(bname, lambda s: s.CommitOffset(req, timeout=self._timeout_s))

    def query(self, bname: str, group: str, topic: str, queue_id: int) -> int | None:
        req = pb.QueryOffsetRequest(group=group, topic=topic, queue_id=queue_id, physical=True)
        resp = self._call(bname, lambda s: s.QueryOffset(req, timeout=self._timeout_s))
        return resp.offset if resp.found else None

    def query_key(self, bname: str, key: str, topic: str) -> pb.IdempotencyAnswer:
        req = pb.IdempotencyQuery(key=key, topic=topic)
        return self._call(bname, lambda s: s.QueryIdempotencyKey(req, timeout=self._timeout_s))

    def send_to_leader(self, topic: str, logic_queue: int, request: pb.SendRequest) -> pb.SendResponse:
        """Send to whichever broker leads the logic queue now (per the name server's route)."""
        last: StaticMQError | None = None
        for attempt in range(5):
            route = self._route(topic)
            leader = route_from_pb(route).logic_queue(logic_queue)
            if not leader.available:
                last = BrokerUnavailableError(f"logic queue {logic_queue} of {topic!r} has no live leader")
            else:
                try:
                    return self._call(leader.broker, lambda s: s.Send(request, timeout=self._timeout_s))
                except StaticMQError as exc:
                    if not exc.retriable:
                        raise
                    last = exc
            time.sleep(0.2 * (attempt + 1))
        assert last is not None
        raise last

    def _route(self, topic: str) -> pb.TopicRoute:
        last: StaticMQError = BrokerUnavailableError("no name server answered")
        for addr in self._namesrv:
            try:
                stub = self._channels.namesrv(addr)
                return stub.GetRoute(pb.TopicName(topic=topic), timeout=self._timeout_s)
            except grpc.RpcError as exc:
                last = translate(exc, f"name server {addr}")
        raise last

    def close(self) -> None:
        self._channels.close()
