"""Prometheus metrics of a broker or name server process, served at `/metrics` on `--metrics-port`.

Every RPC is counted and timed by `MetricsInterceptor` (request type = the gRPC method name, so
pull, pop, ack, send, staging and admin calls each have their own series); the message service
counts messages and bytes in and out per topic; the commit log times its fsyncs; the store's size
on disk is read when Prometheus scrapes. One process serves one broker (or name server), so the
process-wide default registry is the broker's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from prometheus_client import REGISTRY, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily

if TYPE_CHECKING:
    _ServerInterceptor = grpc.ServerInterceptor[Any, Any]
else:
    _ServerInterceptor = grpc.ServerInterceptor  # not subscriptable at run time

MaxOffset = Callable[[str, int], int | None]  # (topic, physical queue) -> next offset, None if absent
REQUESTS = Counter("staticmq_requests", "RPCs served, by method and gRPC status", ["method", "code"])
REQUEST_SECONDS = Histogram(
    "staticmq_request_seconds",
    "RPC latency by method",
    ["method"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
MESSAGES_IN = Counter("staticmq_messages_in", "Messages appended, by topic", ["topic"])
BYTES_IN = Counter("staticmq_bytes_in", "Bytes of messages appended (bodies, keys, tags, properties)", ["topic"])
MESSAGES_OUT = Counter("staticmq_messages_out", "Messages read by pulls and pops, by topic", ["topic"])
BYTES_OUT = Counter("staticmq_bytes_out", "Bytes of messages read by pulls and pops", ["topic"])
CORRUPT_RECORDS = Counter("staticmq_corrupt_records", "Commit-log records found damaged on read (never served)")
FLUSH_SECONDS = Histogram(
    "staticmq_flush_seconds",
    "Time of one commit-log fsync",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
)


def record_in(topic: str, messages: int, nbytes: int) -> None:
    MESSAGES_IN.labels(topic).inc(messages)
    BYTES_IN.labels(topic).inc(nbytes)


def record_out(topic: str, messages: int, nbytes: int) -> None:
    if messages:
        MESSAGES_OUT.labels(topic).inc(messages)
        BYTES_OUT.labels(topic).inc(nbytes)


def watch_store_size(store_dir: Path) -> None:
    """`staticmq_store_bytes`: the bytes of the store's files, measured at each scrape."""

    def size() -> float:
        return float(sum(p.stat().st_size for p in store_dir.rglob("*") if p.is_file()))

    Gauge("staticmq_store_bytes", "Bytes of the broker's store on disk").set_function(size)


class ConsumerLagCollector:
    """`staticmq_consumer_lag{group,topic,queue}` at each scrape: messages stored in one of this
    broker's physical queues after a group's committed offset there (for a static topic, the
    segment of the logic queue held here; `staticmq admin consumerProgress` adds the segments up)."""

    def __init__(self, committed: Callable[[], Iterable[tuple[str, str, int, int]]], max_offset: MaxOffset) -> None:
        self._committed = committed
        self._max_offset = max_offset

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "staticmq_consumer_lag",
            "Messages after the group's committed offset, per physical queue of this broker",
            labels=["group", "topic", "queue"],
        )
        for group, topic, queue, offset in self._committed():
            end = self._max_offset(topic, queue)
            if end is not None:
                family.add_metric([group, topic, str(queue)], float(max(0, end - offset)))
        yield family


def watch_consumer_lag(committed: Callable[[], Iterable[tuple[str, str, int, int]]], max_offset: MaxOffset) -> None:
    REGISTRY.register(ConsumerLagCollector(committed, max_offset))  # type: ignore[arg-type]


def serve_metrics(host: str, port: int | None) -> str | None:
    """Serve `/metrics` on `host:port` (0: any free port); returns "host:port" (None: no port)."""
    if port is None:
        return None
    server, _ = start_http_server(port, addr=host)
    return f"{host}:{server.server_port}"


def _method(details: grpc.HandlerCallDetails) -> str:
    return str(details.method).rsplit("/", 1)[-1]  # "/staticmq.Broker/Pull" -> "Pull"


class MetricsInterceptor(_ServerInterceptor):
    """Counts and times every RPC (unary and streaming answers alike), by method and status."""

    def intercept_service(self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(details)
        if handler is None:
            return None
        method = _method(details)
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                _timed(handler.unary_unary, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                _timed_stream(handler.unary_stream, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler  # client-streaming calls: none in staticmq's services


def _finish(method: str, started: float, context: Any, failed: bool) -> None:
    REQUEST_SECONDS.labels(method).observe(time.perf_counter() - started)
    code = context.code()  # set by context.abort / set_code; None when the call just returned
    name = str(getattr(code, "name", code)) if code is not None else ("UNKNOWN" if failed else "OK")
    REQUESTS.labels(method, name).inc()


def _timed(behaviour: Callable[[Any, Any], Any], method: str) -> Callable[[Any, Any], Any]:
    def call(request: Any, context: Any) -> Any:
        started, failed = time.perf_counter(), True
        try:
            answer = behaviour(request, context)
            failed = False
            return answer
        finally:
            _finish(method, started, context, failed)

    return call


def _timed_stream(behaviour: Callable[[Any, Any], Any], method: str) -> Callable[[Any, Any], Any]:
    def call(request: Any, context: Any) -> Any:
        started, failed = time.perf_counter(), True
        try:
            yield from behaviour(request, context)
            failed = False
        finally:
            _finish(method, started, context, failed)

    return call
