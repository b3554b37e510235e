"""One broker's services in-process, for unit tests at the broker's service seam: a `BrokerApp` on
a temporary data directory, opened (store recovered, pop state and revive thread running) but
never served over gRPC and never registered with a name server. Topics are created the way the
servicer creates them (plain: TopicService.update; static: a mapping copy through
StaticTopicService.write_mapping) and read back from the store, below any pull logic."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from broker_stub.broker.app import BrokerApp
from broker_stub.config import BrokerConfig, StoreConfig
from staticmq_spark.mapping import MappingItem, TopicQueueMapping
from staticmq_spark.protocol.rows.codec import PackedBatch
from staticmq_spark.protocol.rows.decode import decode_batch
from staticmq_spark.protocol.rows.encode import encode_messages
from staticmq_spark.protocol.topics.config import TopicConfig

BROKER = "broker-a"
NO_NAMESRV = "127.0.0.1:1"  # never called: nothing here reads another broker's segments
SMALL_STORE = StoreConfig(segment_bytes=4 << 20, max_batch_bytes=1 << 20, checkpoint_interval_ms=200)


@contextmanager
def running_broker(data_dir: Path, *, store: StoreConfig = SMALL_STORE, **settings: Any) -> Iterator[BrokerApp]:
    """An opened broker on `data_dir` (`settings`: BrokerConfig fields), closed afterwards."""
    config = BrokerConfig(name=BROKER, namesrv=NO_NAMESRV, data_dir=data_dir, store=store, **settings)
    app = BrokerApp(config)
    app.open()
    try:
        yield app
    finally:
        app.close()


def plain_topic(app: BrokerApp, name: str, queues: int = 1) -> None:
    app.topics.update(TopicConfig(name, queues, queues))


def static_topic(app: BrokerApp, name: str, queues: int) -> TopicQueueMapping:
    """A static topic whose logic queues all lead here, logic queue q on physical queue q from
    logic offset 0 (so logic and physical offsets agree)."""
    hosted = {q: (MappingItem(queue=q, bname=BROKER, gen=0, logic_offset=0),) for q in range(queues)}
    mapping = TopicQueueMapping(name, BROKER, epoch=1, total_queues=queues, hosted=hosted)
    app.static.write_mapping(mapping)
    return mapping


def send(app: BrokerApp, topic: str, bodies: list[bytes], queue: int = 0) -> None:
    batch = encode_messages(bodies)
    if app.static.is_static(topic):
        app.static.send(topic, queue, batch, b"")
    else:
        app.messages.send(topic, queue, batch)


def stored_bodies(app: BrokerApp, topic: str, queue: int) -> list[bytes]:
    """Every visible message body of a physical queue of this broker, in offset order."""
    lo, hi = app.store.offsets(topic, queue) if queue in app.store.queues_of(topic) else (0, 0)
    out: list[bytes] = []
    offset = lo
    while offset < hi:
        result = app.store.read(topic, queue, offset, hi - offset, 64 << 20)
        assert result.sizes is not None and result.count, f"{topic}/{queue} at {offset} of [{lo}, {hi}): {result}"
        out += decode_batch(PackedBatch(result.data, result.sizes)).column("body").to_pylist()
        offset += result.count
    return out
