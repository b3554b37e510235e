"""What the backend conformance scenarios share (tests/integration/test_backend_conformance*.py):
which clusters under test a scenario runs on, by the capabilities it uses, fresh topic names, and
a topic remapped twice with messages in each of its three segments."""

from __future__ import annotations

import itertools

import pytest

from staticmq_spark.client import Producer, PullConsumer
from tests.support.clusters_under_test import ClusterUnderTest, kinds_with
from tests.support.static_helpers import read_queue

_n = itertools.count()


def on(kinds: list[str]) -> pytest.MarkDecorator:
    """Run a scenario on these clusters under test (the `backend` fixture, indirectly)."""
    return pytest.mark.parametrize("backend", kinds, indirect=True)


EVERY = on(kinds_with())
SENDS_AND_PULLS = on(kinds_with("producer", "pull_consumer"))
POPS = on(kinds_with("producer", "pull_consumer", "pop"))
EXCLUSIVE = on(kinds_with("producer", "pull_consumer", "exclusive"))


def unique() -> int:
    """A number no other scenario of this run got (for topic and group names)."""
    return next(_n)


def topic_name(backend: ClusterUnderTest, what: str) -> str:
    return f"conf-{what}-{backend.name}-{unique()}"


def send_numbered(backend: ClusterUnderTest, topic: str, queue: int, prefix: str, n: int) -> list[int]:
    """Send `prefix`-0 .. `prefix`-(n-1) to one logic queue; their logic offsets."""
    with Producer(backend.address) as producer:
        results = producer.send_batch(topic, [f"{prefix}-{i}" for i in range(n)], queue=queue)
    offsets = []
    for r in results:
        offsets.extend(r.queue_offset + i for i in range(r.count))
    return offsets


def remapped(backend: ClusterUnderTest, topic: str, queues: int) -> dict[int, list[tuple[int, bytes]]]:
    """Topic on broker 0, 5 messages per queue; remap to broker 1, 3 more; back to broker 0, 2 more."""
    first, second = backend.brokers[0], backend.brokers[1]
    backend.create(topic, queues, [first])
    for q in range(queues):
        send_numbered(backend, topic, q, "g0", 5)
    backend.remap(topic, [second])
    for q in range(queues):
        send_numbered(backend, topic, q, "g1", 3)
    backend.remap(topic, [first])
    for q in range(queues):
        send_numbered(backend, topic, q, "g2", 2)
    with PullConsumer(backend.address) as consumer:
        return {q: read_queue(consumer, topic, q) for q in range(queues)}
