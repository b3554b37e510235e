"""The clusters the backend conformance scenarios run on, one per backend: broker_stub (staticmq),
Apache RocketMQ and the in-process memory backend.

staticmq and RocketMQ are real clusters started once per test session, memory a MemoryCluster of
this process; a scenario creates its own static topic and remaps it with the backend's own admin
tool (`Admin` for staticmq and memory, RocketMQ's `mqadmin`). What a backend offers is what its
class declares in `Capabilities`: `kinds_with` picks the clusters a scenario applies to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from staticmq_spark.backends.registry import backend_class
from staticmq_spark.backends.types import Capabilities
from staticmq_spark.client import Admin
from staticmq_spark.local_clusters import LocalCluster
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ

KINDS = ("staticmq", "rocketmq", "memory")  # each one a backend scheme
REAL = ("staticmq", "rocketmq")  # clusters of their own processes (what a Spark executor can reach)


@dataclass
class ClusterUnderTest:
    name: str  # the backend's scheme
    address: str  # what a user passes as namesrv / -n
    brokers: list[str]
    create: Callable[[str, int, list[str]], None]  # (topic, total queues, brokers)
    remap: Callable[[str, list[str]], None]  # (topic, target brokers)

    def __str__(self) -> str:
        return self.name

    @property
    def capabilities(self) -> Capabilities:
        caps: Capabilities = backend_class(self.name).capabilities
        return caps


def kinds_with(*capabilities: str) -> list[str]:
    """The clusters under test whose backend declares every one of `capabilities`."""
    return [k for k in KINDS if all(getattr(backend_class(k).capabilities, c) for c in capabilities)]


def kinds_without(capability: str) -> list[str]:
    return [k for k in KINDS if not getattr(backend_class(k).capabilities, capability)]


def admin_cluster_under_test(name: str, address: str, brokers: list[str]) -> ClusterUnderTest:
    """A cluster whose static topics are made with this package's `Admin` (staticmq, memory)."""

    def create(topic: str, total: int, brokers: list[str]) -> None:
        with Admin(address) as admin:
            admin.update_static_topic(topic, total, brokers=brokers)

    def remap(topic: str, brokers: list[str]) -> None:
        with Admin(address) as admin:
            admin.remapping_static_topic(topic, brokers=brokers)

    return ClusterUnderTest(name, address, brokers, create, remap)


def staticmq_under_test(cluster: LocalCluster) -> ClusterUnderTest:
    return admin_cluster_under_test("staticmq", cluster.namesrv, sorted(cluster.broker_names))


def rocketmq_under_test(cluster: LocalRocketMQ) -> ClusterUnderTest:
    return ClusterUnderTest(
        "rocketmq",
        cluster.address,
        list(cluster.broker_names),
        lambda topic, total, brokers: cluster.update_static_topic(topic, total, brokers) and None,
        lambda topic, brokers: cluster.remap_static_topic(topic, brokers) and None,
    )
