"""The name server's registry: registration, expiry and routes."""

from __future__ import annotations

import pytest

from broker_stub.namesrv.route_registry import RouteRegistry
from staticmq_spark.errors import TopicNotFoundError
from staticmq_spark.protocol.pb import staticmq_pb2 as pb


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def register(reg: RouteRegistry, name: str, topics: list[str]) -> None:
    reg.register(
        pb.RegisterBrokerRequest(
            name=name,
            cluster="C",
            addr=f"127.0.0.1:{hash(name) % 1000 + 1000}",
            topics=[
                pb.TopicRouteEntry(config=pb.TopicConfig(name=t, read_queues=2, write_queues=2, perm=6)) for t in topics
            ],
        )
    )


def test_route_lists_every_live_broker_with_the_topic() -> None:
    reg = RouteRegistry(10.0, Clock())
    register(reg, "b1", ["t"])
    register(reg, "b2", ["t", "u"])
    assert [b.broker for b in reg.route("t").brokers] == ["b1", "b2"]
    assert [b.broker for b in reg.route("u").brokers] == ["b2"]


def test_broker_that_stops_heartbeating_leaves_routes_after_the_timeout() -> None:
    clock = Clock()
    reg = RouteRegistry(10.0, clock)
    register(reg, "b1", ["t"])
    register(reg, "b2", ["t"])
    clock.now += 6
    register(reg, "b2", ["t"])
    clock.now += 6
    assert reg.expire() == ["b1"]
    assert [b.broker for b in reg.route("t").brokers] == ["b2"]


def test_unknown_topic_is_not_found() -> None:
    reg = RouteRegistry(10.0, Clock())
    with pytest.raises(TopicNotFoundError):
        reg.route("nope")


def test_unregister_removes_the_broker_at_once() -> None:
    reg = RouteRegistry(10.0, Clock())
    register(reg, "b1", ["t"])
    reg.unregister("b1")
    assert reg.cluster_info().brokers == []
