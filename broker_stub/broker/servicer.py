"""The broker's gRPC servicer: decode the request, dispatch to a service, encode the answer.
Requests that address a queue are routed once (queue_requests.QueueRouter): a static topic's
logic queue, or this broker's queue as it is."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import grpc

from broker_stub.broker.app import BrokerApp
from broker_stub.broker.message_service import PullOutcome, PullQuery, QueueOffsetInfo, SendOutcome
from broker_stub.broker.queue_requests import QueueRouter, SendQuery
from broker_stub.rpc_errors import rpc_method
from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.mapping import TopicQueueMapping
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.pb import staticmq_pb2_grpc as pb_grpc
from staticmq_spark.protocol.rows.codec import PackedBatch
from staticmq_spark.protocol.topics.names import validate_group
from staticmq_spark.protocol.wire.pull_response import PULL_METHOD, encode_pull_response
from staticmq_spark.protocol.wire.stage_request import StageChunk, decode_stage_request
from staticmq_spark.protocol.wire.topic_config import config_from_pb, config_to_pb

MAX_IDEMPOTENCY_KEY = 512
if TYPE_CHECKING:
    _ServerInterceptor = grpc.ServerInterceptor[Any, Any]
else:
    _ServerInterceptor = grpc.ServerInterceptor  # not subscriptable at run time
STAGE_ROWS_METHOD = f"/{pb.DESCRIPTOR.services_by_name['Broker'].full_name}/StageRows"


class RawBatches(_ServerInterceptor):
    """The two RPCs that carry message batches skip protobuf for them: StageRows gets its request
    undecoded (BrokerServicer.StageRows reads the rows in place, protocol/wire/stage_request.py) and Pull answers
    with bytes it wrote itself (protocol/wire/pull_response.py), where protobuf would copy the rows twice each way."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        if handler_call_details.method == STAGE_ROWS_METHOD:
            return grpc.unary_unary_rpc_method_handler(
                handler.unary_unary, request_deserializer=None, response_serializer=handler.response_serializer
            )
        if handler_call_details.method == PULL_METHOD:
            return grpc.unary_unary_rpc_method_handler(
                handler.unary_unary, request_deserializer=handler.request_deserializer, response_serializer=None
            )
        return handler


class BrokerServicer(pb_grpc.BrokerServicer):
    def __init__(self, app: BrokerApp) -> None:
        self.app = app
        self.queues = QueueRouter(app.static, app.messages, app.topics, app.offsets)
        self.sink = app.sink

    # ------------------------------------------------------------------ requests that address a queue

    @rpc_method
    def Send(self, request: pb.SendRequest, context: grpc.ServicerContext) -> pb.SendResponse:
        send = decode_send(request)
        out = self.queues.route(request.topic, request.physical).send(send)
        return encode_send(out, self.app.name)

    @rpc_method
    def Pull(self, request: pb.PullRequest, context: grpc.ServicerContext) -> bytes:  # type: ignore[override]
        """Answers serialized bytes (the server has RawBatches): see encode_pull_bytes."""
        query = decode_pull(request)
        return encode_pull_bytes(self.queues.route(request.topic, request.physical).pull(query))

    @rpc_method
    def GetTopicOffsets(self, request: pb.TopicName, context: grpc.ServicerContext) -> pb.TopicOffsetsResponse:
        infos = self.queues.route(request.topic).topic_offsets(request.topic)
        return pb.TopicOffsetsResponse(queues=[encode_offsets(i) for i in infos])

    @rpc_method
    def SearchOffset(self, request: pb.SearchOffsetRequest, context: grpc.ServicerContext) -> pb.OffsetResponse:
        queues = self.queues.route(request.topic, request.physical)
        return pb.OffsetResponse(offset=queues.search(request.topic, request.queue_id, request.timestamp))

    @rpc_method
    def CommitOffset(self, request: pb.CommitOffsetRequest, context: grpc.ServicerContext) -> pb.Empty:
        validate_group(request.group)
        queues = self.queues.route(request.topic, request.physical)
        queues.commit(request.group, request.topic, request.queue_id, request.offset)
        return pb.Empty()

    @rpc_method
    def QueryOffset(self, request: pb.QueryOffsetRequest, context: grpc.ServicerContext) -> pb.QueryOffsetResponse:
        validate_group(request.group)
        offset = self.queues.route(request.topic, request.physical).committed(
            request.group, request.topic, request.queue_id
        )
        return pb.QueryOffsetResponse(found=offset is not None, offset=offset if offset is not None else -1)

    # ------------------------------------------------------------------ other requests

    @rpc_method
    def ListConsumerOffsets(
        self, request: pb.ConsumerOffsetsRequest, context: grpc.ServicerContext
    ) -> pb.ConsumerOffsetsResponse:
        entries = self.app.offsets.list(request.group, request.topic)
        return pb.ConsumerOffsetsResponse(
            entries=[
                pb.ConsumerOffsetEntry(
                    group=e.group,
                    topic=e.topic,
                    queue_id=e.queue_id,
                    offset=e.offset,
                    update_timestamp=e.update_timestamp,
                )
                for e in entries
            ]
        )

    @rpc_method
    def UpdateTopic(self, request: pb.TopicConfig, context: grpc.ServicerContext) -> pb.TopicConfig:
        cfg = self.app.topics.update(config_from_pb(request))
        self.app.topics_changed()
        return config_to_pb(cfg)

    @rpc_method
    def DeleteTopic(self, request: pb.TopicName, context: grpc.ServicerContext) -> pb.Empty:
        self.app.topics.delete(request.topic)
        self.app.topics_changed()
        return pb.Empty()

    @rpc_method
    def GetTopicConfigs(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.TopicConfigList:
        return pb.TopicConfigList(topics=[config_to_pb(c) for c in self.app.topic_configs.all()])

    @rpc_method
    def GetQueueOffsets(self, request: pb.QueueRef, context: grpc.ServicerContext) -> pb.QueueOffsets:
        self.app.topics.require(request.topic)
        info = self.app.messages.physical_offsets(request.topic, request.queue_id)
        return encode_offsets(info)

    @rpc_method
    def GetStaticTopicState(self, request: pb.TopicName, context: grpc.ServicerContext) -> pb.StaticTopicState:
        state = self.app.static.state(request.topic)
        return pb.StaticTopicState(
            has_mapping=state.mapping is not None,
            mapping_json=state.mapping.to_json() if state.mapping is not None else "",
            foreign_bname=state.foreign_bname,
            has_config=state.config is not None,
            config=config_to_pb(state.config) if state.config is not None else None,
            physical_queues=[encode_offsets(i) for i in state.physical],
        )

    @rpc_method
    def WriteMapping(self, request: pb.WriteMappingRequest, context: grpc.ServicerContext) -> pb.Empty:
        self.app.static.write_mapping(TopicQueueMapping.from_json(request.mapping_json))
        self.app.topics_changed()
        return pb.Empty()

    @rpc_method
    def DeleteStaticTopic(self, request: pb.TopicName, context: grpc.ServicerContext) -> pb.Empty:
        self.app.static.delete(request.topic)
        self.app.topics_changed()
        return pb.Empty()

    @rpc_method
    def StageRows(self, request: bytes | pb.StageRequest, context: grpc.ServicerContext) -> pb.StageResponse:
        """`request` arrives undecoded (bytes) when the server has RawBatches."""
        if isinstance(request, bytes):
            self.sink.stage(decode_stage_request(request))
        else:
            self.sink.stage(StageChunk.from_message(request))
        return pb.StageResponse()

    @rpc_method
    def PrepareTxn(self, request: pb.TxnDecision, context: grpc.ServicerContext) -> pb.Empty:
        self.sink.prepare(request)
        return pb.Empty()

    @rpc_method
    def CommitTxn(self, request: pb.TxnRef, context: grpc.ServicerContext) -> pb.TxnState:
        return self.sink.commit(request)

    @rpc_method
    def GetTxn(self, request: pb.TxnRef, context: grpc.ServicerContext) -> pb.TxnState:
        return self.sink.state(request)

    @rpc_method
    def QueryIdempotencyKey(self, request: pb.IdempotencyQuery, context: grpc.ServicerContext) -> pb.IdempotencyAnswer:
        stored = self.app.store.stored_key(request.key.encode())
        if stored is None or stored.topic != request.topic:
            return pb.IdempotencyAnswer(found=False)
        return pb.IdempotencyAnswer(
            found=True, base_offset=stored.base_offset, count=stored.count, queue_id=stored.queue_id
        )

    @rpc_method
    def Ping(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.BrokerInfo:
        return pb.BrokerInfo(
            name=self.app.name,
            cluster=self.app.config.cluster,
            addr=self.app.addr,
            start_timestamp=self.app.start_timestamp,
            flush=self.app.config.store.flush,
        )


def decode_send(request: pb.SendRequest) -> SendQuery:
    batch = PackedBatch.from_wire(request.batch.data, request.batch.sizes)
    key = request.idempotency_key.encode()
    if len(key) > MAX_IDEMPOTENCY_KEY:
        raise InvalidArgumentError(f"idempotency key is {len(key)} bytes; at most {MAX_IDEMPOTENCY_KEY}")
    return SendQuery(request.topic, request.queue_id, batch, key, request.dedup_across_segments)


def encode_send(out: SendOutcome, bname: str) -> pb.SendResponse:
    return pb.SendResponse(
        queue_id=out.queue_id,
        base_offset=out.base_offset,
        count=out.count,
        physical_base_offset=out.physical_base_offset,
        bname=bname,
        store_timestamp=out.store_timestamp,
        duplicate=out.duplicate,
    )


def decode_pull(request: pb.PullRequest) -> PullQuery:
    return PullQuery(
        topic=request.topic,
        queue_id=request.queue_id,
        offset=request.offset,
        max_messages=request.max_messages,
        max_bytes=request.max_bytes,
        wait_ms=request.wait_ms,
        group=request.group,
        physical=request.physical,
        subscription=request.subscription,
    )


def encode_offsets(info: QueueOffsetInfo) -> pb.QueueOffsets:
    return pb.QueueOffsets(
        queue_id=info.queue_id,
        min_offset=info.min_offset,
        max_offset=info.max_offset,
        last_store_timestamp=info.last_store_timestamp,
        avg_message_bytes=info.avg_message_bytes,
    )


def encode_pull(out: PullOutcome) -> pb.PullResponse:
    answer = _pull_head(out)
    answer.batch.data, answer.batch.sizes = out.data, out.sizes
    return answer


def encode_pull_bytes(out: PullOutcome) -> bytes:
    """The serialized answer, its rows copied once (protocol.wire.pull_response.encode_pull_response)."""
    return encode_pull_response(_pull_head(out), out.data, out.sizes)


def _pull_head(out: PullOutcome) -> pb.PullResponse:
    return pb.PullResponse(
        status=pb.PullStatus.ValueType(out.status),  # the wire number is the PullStatus value
        next_offset=out.next_offset,
        min_offset=out.min_offset,
        max_offset=out.max_offset,
        base_offset=out.base_offset,
        offset_delta=out.offset_delta,
        store_timestamps=out.store_timestamps,
        bname=out.bname,
        physical_queue_id=out.physical_queue_id,
        queue_offsets=out.queue_offsets,
    )
