"""The name server process: a gRPC servicer over the route registry, with broker expiry."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import grpc

from broker_stub.grpc_server import start_server, wait_for_termination, write_ready_file
from broker_stub.metrics import MetricsInterceptor, serve_metrics
from broker_stub.namesrv.route_registry import RouteRegistry
from broker_stub.rpc_errors import rpc_method
from broker_stub.security import OPEN, ServerSecurity
from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.pb import staticmq_pb2_grpc as pb_grpc
from staticmq_spark.protocol.topics.names import validate_broker_name

log = logging.getLogger(__name__)


class NameServerServicer(pb_grpc.NameServerServicer):
    def __init__(self, registry: RouteRegistry) -> None:
        self.registry = registry

    @rpc_method
    def RegisterBroker(
        self, request: pb.RegisterBrokerRequest, context: grpc.ServicerContext
    ) -> pb.RegisterBrokerResponse:
        validate_broker_name(request.name)
        if not request.addr:
            raise InvalidArgumentError(f"broker {request.name!r} registered without an address")
        self.registry.register(request)
        return pb.RegisterBrokerResponse(broker_timeout_ms=int(self.registry.broker_timeout_s * 1000))

    @rpc_method
    def UnregisterBroker(self, request: pb.BrokerName, context: grpc.ServicerContext) -> pb.Empty:
        self.registry.unregister(request.name)
        return pb.Empty()

    @rpc_method
    def GetRoute(self, request: pb.TopicName, context: grpc.ServicerContext) -> pb.TopicRoute:
        return self.registry.route(request.topic)

    @rpc_method
    def GetClusterInfo(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.ClusterInfo:
        return self.registry.cluster_info()


def run_namesrv(
    host: str,
    port: int,
    broker_timeout_ms: int,
    ready_file: Path | None = None,
    metrics_port: int | None = None,
    security: ServerSecurity = OPEN,
) -> None:
    registry = RouteRegistry(broker_timeout_ms / 1000)
    servicer = NameServerServicer(registry)
    register = lambda s: pb_grpc.add_NameServerServicer_to_server(servicer, s)  # noqa: E731
    server, bound = start_server(host, port, 16, register, [MetricsInterceptor()], security)
    metrics_addr = serve_metrics(host, metrics_port)
    stop = threading.Event()

    def expire_loop() -> None:
        while not stop.wait(min(1.0, registry.broker_timeout_s / 4)):
            registry.expire()

    threading.Thread(target=expire_loop, name="broker-expiry", daemon=True).start()
    addr = f"{host}:{bound}"
    log.info(
        "name server serving at %s (broker timeout %d ms, %s, %s)",
        addr,
        broker_timeout_ms,
        "ACL on" if security.acl else "no ACL",
        "TLS" if security.tls_cert else "plain text",
    )
    write_ready_file(ready_file, {"addr": addr, "metrics": metrics_addr})
    try:
        wait_for_termination()
    finally:
        stop.set()
        server.stop(grace=1).wait(3)
