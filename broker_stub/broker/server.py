"""The broker process: recover the store, serve gRPC, heartbeat, stop cleanly on a signal."""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path

import grpc

from broker_stub.broker.app import BrokerApp
from broker_stub.broker.consume_servicer import ConsumeServicer
from broker_stub.broker.servicer import BrokerServicer, RawBatches
from broker_stub.config import BrokerConfig
from broker_stub.grpc_server import start_server, wait_for_termination, write_ready_file
from broker_stub.metrics import MetricsInterceptor, serve_metrics, watch_consumer_lag, watch_store_size
from broker_stub.security import server_security
from staticmq_spark.protocol.pb import consume_pb2_grpc
from staticmq_spark.protocol.pb import staticmq_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)


def tune_allocator() -> None:
    """Keep large freed buffers in the heap: pull answers of megabytes otherwise land in fresh
    pages every time (page faults cost more than the copies). Linux glibc only."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3
    libc.mallopt(m_mmap_threshold, 32 << 20)
    libc.mallopt(m_trim_threshold, 128 << 20)
    libc.mallopt(m_top_pad, 64 << 20)


def run_broker(config: BrokerConfig, ready_file: Path | None = None) -> None:
    tune_allocator()
    security = server_security(
        config.acl_file, config.tls_cert, config.tls_key, config.tls_ca, config.access_key, config.secret_key
    )
    app = BrokerApp(config, security.client)
    app.open()
    servicer = BrokerServicer(app)
    consume = ConsumeServicer(app)

    def register(s: grpc.Server) -> None:
        pb_grpc.add_BrokerServicer_to_server(servicer, s)
        consume_pb2_grpc.add_ConsumeServiceServicer_to_server(consume, s)

    interceptors = [MetricsInterceptor(), RawBatches()]
    server, port = start_server(config.host, config.port, config.grpc_workers, register, interceptors, security)
    addr = f"{config.host}:{port}"
    app.serve_at(addr)
    watch_store_size(config.data_dir / "store")
    watch_consumer_lag(app.committed_offsets, app.physical_max_offset)
    metrics_addr = serve_metrics(config.host, config.metrics_port)
    log.info(
        "broker %s serving at %s (flush=%s, metrics %s, %s, %s)",
        config.name,
        addr,
        config.store.flush,
        metrics_addr,
        "ACL on" if security.acl else "no ACL",
        "TLS" if security.tls_cert else "plain text",
    )
    write_ready_file(ready_file, {"name": config.name, "addr": addr, "metrics": metrics_addr})
    try:
        wait_for_termination()
    finally:
        log.info("broker %s stopping", config.name)
        server.stop(grace=2).wait(5)
        app.close()
