"""The broker's ConsumeService servicer (pop, ack, change_invisible_time, pull locks, exclusive
pulls): decode the request, dispatch to a service, encode the answer."""

from __future__ import annotations

import grpc

from broker_stub.broker.app import BrokerApp
from broker_stub.broker.exclusive.exclusive_service import ExclusivePull
from broker_stub.broker.pop.pop_service import PopQuery
from broker_stub.broker.pop.receipt_handles import HANDLE_SIZE
from broker_stub.broker.servicer import encode_pull
from broker_stub.rpc_errors import rpc_method
from staticmq_spark.protocol.pb import consume_pb2 as cpb
from staticmq_spark.protocol.pb import consume_pb2_grpc as cpb_grpc
from staticmq_spark.protocol.pb import staticmq_pb2 as pb


class ConsumeServicer(cpb_grpc.ConsumeServiceServicer):
    def __init__(self, app: BrokerApp) -> None:
        self.app = app

    @rpc_method
    def Pop(self, request: cpb.PopRequest, context: grpc.ServicerContext) -> cpb.PopResponse:
        query = PopQuery(
            group=request.group,
            topic=request.topic,
            max_messages=request.max_messages,
            invisible_ms=request.invisible_ms,
            wait_ms=request.wait_ms,
            order=request.order,
            init_mode=request.init_mode or "earliest",
        )
        out = self.app.consumption.pop.pop(query)
        rows = out.rows
        return cpb.PopResponse(
            batch=pb.MessageBatch(data=rows.data_bytes(), sizes=rows.sizes_bytes()) if rows is not None else None,
            queue_ids=out.queue_ids.astype("<i4").tobytes(),
            queue_offsets=out.queue_offsets.astype("<i8").tobytes(),
            reconsume_times=out.reconsume_times.astype("<i4").tobytes(),
            store_timestamps=out.store_timestamps.astype("<i8").tobytes(),
            retried=out.retried.astype("u1").tobytes(),
            handles=out.handles,
            handle_size=HANDLE_SIZE,
            bname=self.app.name,
            pop_time=out.pop_time,
            invisible_ms=out.invisible_ms,
        )

    @rpc_method
    def Ack(self, request: cpb.AckRequest, context: grpc.ServicerContext) -> cpb.AckResponse:
        outcomes = self.app.consumption.acks.ack(request.group, request.topic, request.handles)
        return cpb.AckResponse(status=outcomes.tobytes(), acked=int((outcomes == 0).sum()))

    @rpc_method
    def ChangeInvisibleTime(
        self, request: cpb.ChangeInvisibleTimeRequest, context: grpc.ServicerContext
    ) -> cpb.ChangeInvisibleTimeResponse:
        out = self.app.consumption.acks.change_invisible_time(
            request.group, request.topic, request.handle, request.invisible_ms
        )
        return cpb.ChangeInvisibleTimeResponse(handle=out.handle, pop_time=out.pop_time, invisible_ms=out.invisible_ms)

    @rpc_method
    def LockQueues(self, request: cpb.LockRequest, context: grpc.ServicerContext) -> cpb.LockResponse:
        locked = self.app.consumption.exclusive.lock(
            request.group, request.topic, request.client_id, list(request.queue_ids), request.lease_ms
        )
        return cpb.LockResponse(locked=locked, lease_ms=request.lease_ms)

    @rpc_method
    def UnlockQueues(self, request: cpb.UnlockRequest, context: grpc.ServicerContext) -> pb.Empty:
        self.app.consumption.exclusive.unlock(request.group, request.topic, request.client_id, list(request.queue_ids))
        return pb.Empty()

    @rpc_method
    def ExclusivePull(
        self, request: cpb.ExclusivePullRequest, context: grpc.ServicerContext
    ) -> cpb.ExclusivePullResponse:
        pull = ExclusivePull(
            group=request.group,
            topic=request.topic,
            client_id=request.client_id,
            queue_id=request.queue_id,
            offset=request.offset,
            max_messages=request.max_messages,
            max_bytes=request.max_bytes,
            wait_ms=request.wait_ms,
            lease_ms=request.lease_ms,
            commit_offset=request.commit_offset if request.commit else None,
        )
        out = self.app.consumption.exclusive.pull(pull)
        return cpb.ExclusivePullResponse(pull=encode_pull(out), lease_ms=request.lease_ms)

    @rpc_method
    def ExclusiveCommit(self, request: cpb.ExclusiveCommitRequest, context: grpc.ServicerContext) -> pb.Empty:
        self.app.consumption.exclusive.commit(
            request.group, request.topic, request.client_id, request.queue_id, request.offset
        )
        return pb.Empty()
