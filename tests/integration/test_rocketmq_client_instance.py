"""One client instance per RocketMQ backend, on a real Apache RocketMQ: every port (reader, producer,
pull consumer, sinks, admin) reads routes from the instance's one cache, a refresh by any of them is
what the others see next, and the route names every broker by id with its queues."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from staticmq_spark.backends import open_backend
from staticmq_spark.backends.api import ProducerSettings
from staticmq_spark.backends.rocketmq import client_instance
from staticmq_spark.backends.rocketmq.backend import RocketMQBackend
from staticmq_spark.backends.rocketmq.wire.codes import RequestCode
from staticmq_spark.client import Admin
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ


@pytest.fixture
def static_topic(rocketmq_cluster: LocalRocketMQ, unique_topic: Callable[[str], str]) -> str:
    topic = unique_topic("instance")
    with Admin(rocketmq_cluster.address) as admin:
        admin.update_static_topic(topic, 4, cluster="DefaultCluster")
    return topic


@pytest.fixture
def backend(rocketmq_cluster: LocalRocketMQ) -> Iterator[RocketMQBackend]:
    opened = open_backend(rocketmq_cluster.address)
    assert isinstance(opened, RocketMQBackend)
    try:
        yield opened
    finally:
        opened.close()


def _counting_fetches(backend: RocketMQBackend, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The topics the instance asks the name server for (the real calls, counted)."""
    fetched: list[str] = []
    remoting = backend.instance.remoting
    real = remoting.fetch_route

    def counted(topic: str) -> object:
        fetched.append(topic)
        return real(topic)

    monkeypatch.setattr(remoting, "fetch_route", counted)
    return fetched


def test_every_port_of_a_rocketmq_backend_reads_routes_from_one_cache(
    backend: RocketMQBackend, static_topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetched = _counting_fetches(backend, monkeypatch)
    reader = backend.reader()
    first = reader.route(static_topic)
    producer = backend.producer(ProducerSettings())
    consumer = backend.pull_consumer()
    try:
        assert producer.route(static_topic) is first
        assert len(consumer.queues(static_topic)) == 4
        assert backend.admin().reader.route(static_topic) is first  # a view with its own timeout
        assert fetched == [static_topic]
        fresh = producer.route(static_topic, refresh=True)  # a refresh by one port ...
        assert fresh is not first and reader.route(static_topic) is fresh  # ... is what the others see
        assert backend.sink().total_queues(static_topic) == 4  # the sink's leaders read the route anew
        assert reader.route(static_topic) is not fresh
        assert fetched == [static_topic] * 3
    finally:
        producer.close()
        consumer.close()


def test_a_cached_route_older_than_its_ttl_is_read_again(
    backend: RocketMQBackend, static_topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetched = _counting_fetches(backend, monkeypatch)
    backend.reader().route(static_topic)
    monkeypatch.setattr(client_instance, "ROUTE_TTL_S", 0.0)
    backend.reader().route(static_topic)
    assert fetched == [static_topic, static_topic]


def test_the_route_names_every_broker_by_id_with_its_queues(
    backend: RocketMQBackend, rocketmq_cluster: LocalRocketMQ, static_topic: str
) -> None:
    route = backend.instance.route(static_topic)
    leaders = set(route.leaders.values())
    assert leaders and leaders <= set(route.addresses)
    for name in leaders:
        assert route.addresses[name] == {0: rocketmq_cluster.broker_addr(name)}  # one replica: the master
        assert route.queues[name].write_queues > 0
    assert backend.instance.brokers() == {n: rocketmq_cluster.broker_addr(n) for n in rocketmq_cluster.broker_names}


def test_a_reader_makes_a_committing_group_known_once_not_at_every_commit(
    backend: RocketMQBackend, static_topic: str, unique_topic: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    creations: list[int] = []
    remoting = backend.instance.remoting
    real = remoting.call

    def counted(
        addr: str, code: int, ext: dict[str, object], body: bytes = b"", timeout_s: float | None = None
    ) -> object:
        if code in (RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.UPDATE_AND_CREATE_TOPIC):
            creations.append(code)
        return real(addr, code, ext, body, timeout_s)

    monkeypatch.setattr(remoting, "call", counted)
    reader, group = backend.reader(), unique_topic("group")
    reader.commit_offset(group, static_topic, 0, 0)
    made = len(creations)
    assert made > 0  # the group and its %RETRY% topic, on every master
    for queue in range(4):
        reader.commit_offset(group, static_topic, queue, 0)
    assert len(creations) == made
    assert reader.committed_offset(group, static_topic, 3) == 0
