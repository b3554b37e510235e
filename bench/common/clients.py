"""Clients of the brokers under test: create a topic and wait for its route, produce and consume the
same keyed rows with staticmq's client and with confluent-kafka, random bodies."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from staticmq_spark.client import Admin, Producer, PullConsumer
from staticmq_spark.errors import TopicNotFoundError

BATCH = 1000  # rows per staticmq produce request; Kafka's producer batches by itself (linger.ms, batch.size)
PULL = 10_000


@dataclass
class Rows:
    """The rows every figure uses: string keys and values of `size` bytes, in batches of BATCH."""

    count: int
    size: int

    def batches(self) -> list[tuple[list[str], list[bytes]]]:
        out = []
        for start in range(0, self.count, BATCH):
            ids = range(start, min(start + BATCH, self.count))
            keys = [f"user-{i % 100_000}" for i in ids]
            out.append((keys, [(f"{i:020d}" * (self.size // 20 + 1)).encode()[: self.size] for i in ids]))
        return out


def wait_static_route(producer: Producer, topic: str) -> None:
    """Wait until the name server routes `topic` as a static topic."""
    deadline = time.monotonic() + 30
    while not producer.topic_is_static(topic):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no route for {topic}")
        time.sleep(0.05)


def staticmq_topic(namesrv: str, topic: str, queues: int) -> None:
    """A static topic of `queues` logic queues on the cluster, once the name server routes it."""
    with Admin(namesrv) as admin, Producer(namesrv, active_detection=False) as producer:
        admin.update_static_topic(topic, queues, cluster="DefaultCluster")
        wait_static_route(producer, topic)


def kafka_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while topic not in admin.list_topics(timeout=5).topics:
        if time.monotonic() > deadline:
            raise TimeoutError(f"Kafka topic {topic} not visible")
        time.sleep(0.05)


def staticmq_produce(namesrv: str, topic: str, batches: list[tuple[list[str], list[bytes]]], queues: int) -> None:
    """Asynchronous sends, as Kafka's producer makes them: each queue's requests in order, one at a
    time, the queues' at once; every outcome is checked."""
    with Producer(namesrv, active_detection=False) as producer:
        sends = [
            producer.send_batch_async(topic, values, keys=keys, queue=n % queues)
            for n, (keys, values) in enumerate(batches)
        ]
        for send in sends:
            send.result()


KAFKA_PRODUCER = {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "batch.size": 1 << 20}


def kafka_produce(bootstrap: str, topic: str, batches: list[tuple[list[str], list[bytes]]]) -> None:
    from confluent_kafka import Producer as KafkaProducer

    producer = KafkaProducer(
        {"bootstrap.servers": bootstrap, **KAFKA_PRODUCER, "queue.buffering.max.messages": 1_000_000}
    )
    errors: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for keys, values in batches:
        for key, value in zip(keys, values, strict=True):
            producer.produce(topic, value, key, on_delivery=delivered)
        producer.poll(0)
    if producer.flush(60) or errors:
        raise RuntimeError(f"Kafka produce failed: {errors[:3]}")


def staticmq_consume(namesrv: str, topic: str, expected: int) -> None:
    seen = 0
    with PullConsumer(namesrv) as consumer:
        for q in consumer.offsets(topic):
            offset = q.min_offset
            while offset < q.max_offset:
                result = consumer.pull(topic, q.queue.queue_id, offset, max_messages=PULL)
                seen += result.batch.num_rows
                offset = result.next_offset
    if seen != expected:
        raise RuntimeError(f"staticmq consume read {seen:,} rows, expected {expected:,}")


def kafka_consume(bootstrap: str, topic: str, partitions: int, expected: int) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{topic}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 64 << 20,
            "max.partition.fetch.bytes": 16 << 20,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    seen, deadline = 0, time.monotonic() + 300
    try:
        while seen < expected and time.monotonic() < deadline:
            seen += sum(1 for m in consumer.consume(num_messages=PULL, timeout=1.0) if m.error() is None)
    finally:
        consumer.close()
    if seen != expected:
        raise RuntimeError(f"Kafka consume read {seen:,} rows, expected {expected:,}")


def wait_route(client: Any, topic: str) -> None:
    """Wait until the name server routes a new topic (`client`: a Producer or PullConsumer)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            client.topic_is_static(topic)
            return
        except TopicNotFoundError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def random_bodies(messages: int, size: int) -> list[bytes]:
    """`messages` random bodies of `size` bytes (slices of one random blob)."""
    blob = os.urandom(messages * size)
    return [blob[i : i + size] for i in range(0, len(blob), size)]
