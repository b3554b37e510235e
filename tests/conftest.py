"""Shared fixtures: real clusters in temporary directories."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from staticmq_spark.backends.memory import MemoryCluster
from staticmq_spark.local_clusters import LocalCluster
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from tests.support.cluster_process import ClusterProcess
from tests.support.clusters_under_test import (
    REAL,
    ClusterUnderTest,
    admin_cluster_under_test,
    rocketmq_under_test,
    staticmq_under_test,
)
from tests.support.rocketmq_tools import compile_client
from tests.support.staged_sink_checks import JAVA_CONSUMER

_names = itertools.count()


@pytest.fixture
def cluster_process(tmp_path: Path) -> Iterator[Callable[..., ClusterProcess]]:
    """Start `staticmq cluster` processes; all are stopped after the test."""
    started: list[ClusterProcess] = []

    def start(brokers: int = 2, settings: dict[str, Any] | None = None, data_dir: Path | None = None) -> ClusterProcess:
        c = ClusterProcess(data_dir or tmp_path / f"cluster{len(started)}", brokers, settings)
        started.append(c)
        return c

    yield start
    for c in started:
        c.stop()


@pytest.fixture
def local_cluster(tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    """LocalCluster (the same processes), for tests that kill and restart single brokers."""
    started: list[LocalCluster] = []

    def start(brokers: int = 2, **kwargs: Any) -> LocalCluster:
        c = LocalCluster(brokers, tmp_path / f"local{len(started)}", **kwargs).start()
        started.append(c)
        return c

    yield start
    for c in started:
        c.stop()


@pytest.fixture
def unique_topic() -> Callable[[str], str]:
    return lambda prefix="topic": f"{prefix}-{next(_names)}"


@pytest.fixture(scope="session")
def rocketmq_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRocketMQ]:
    """A real Apache RocketMQ (name server + 2 brokers), started once per session; its logs stay
    in the session's temp dir. A failed fetch or start fails the tests that use it."""
    cluster = LocalRocketMQ(tmp_path_factory.mktemp("rocketmq"), brokers=2)
    try:
        yield cluster.start()
    finally:
        cluster.close()


@pytest.fixture(scope="session")
def java_consumer(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The classpath of tests/support/java/PropertiesConsumer.java (RocketMQ's own push consumer,
    read by `staged_sink_checks.java_read`), compiled once per session."""
    return compile_client(JAVA_CONSUMER, tmp_path_factory.mktemp("java-consumer"))


@pytest.fixture(scope="session")
def staticmq_session_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(brokers=2, data_dir=tmp_path_factory.mktemp("staticmq") / "cluster") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def memory_session_cluster() -> Iterator[MemoryCluster]:
    cluster = MemoryCluster("conformance", ["broker-0", "broker-1"])
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(params=REAL)
def backend(request: pytest.FixtureRequest) -> ClusterUnderTest:
    """A cluster under test, by backend: broker_stub and a real Apache RocketMQ unless a test names
    others (`pytest.mark.parametrize("backend", kinds_with(...), indirect=True)`; the memory
    backend lives in this process, so only tests that stay in it can use it)."""
    if request.param == "rocketmq":
        return rocketmq_under_test(request.getfixturevalue("rocketmq_cluster"))
    if request.param == "memory":
        memory: MemoryCluster = request.getfixturevalue("memory_session_cluster")
        return admin_cluster_under_test("memory", f"memory://{memory.name}", sorted(memory.brokers))
    return staticmq_under_test(request.getfixturevalue("staticmq_session_cluster"))
