"""The two backends the conformance scenarios run on: broker_stub (staticmq) and Apache RocketMQ.

Each is a real cluster started once per test session; a scenario creates its own static topic
and remaps it with the backend's own admin tool (`Admin` for staticmq, RocketMQ's `mqadmin`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from staticmq_spark.client import Admin
from staticmq_spark.local_clusters import LocalCluster
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ


@dataclass
class Backend:
    name: str
    address: str  # what a user passes as namesrv / -n
    brokers: list[str]
    create: Callable[[str, int, list[str]], None]  # (topic, total queues, brokers)
    remap: Callable[[str, list[str]], None]  # (topic, target brokers)

    def __str__(self) -> str:
        return self.name


def staticmq_backend(cluster: LocalCluster) -> Backend:
    def create(topic: str, total: int, brokers: list[str]) -> None:
        with Admin(cluster.namesrv) as admin:
            admin.update_static_topic(topic, total, brokers=brokers)

    def remap(topic: str, brokers: list[str]) -> None:
        with Admin(cluster.namesrv) as admin:
            admin.remapping_static_topic(topic, brokers=brokers)

    return Backend("staticmq", cluster.namesrv, sorted(cluster.broker_names), create, remap)


def rocketmq_backend(cluster: LocalRocketMQ) -> Backend:
    return Backend(
        "rocketmq",
        cluster.address,
        list(cluster.broker_names),
        lambda topic, total, brokers: cluster.update_static_topic(topic, total, brokers) and None,
        lambda topic, brokers: cluster.remap_static_topic(topic, brokers) and None,
    )
