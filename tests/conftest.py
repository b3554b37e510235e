"""Shared fixtures: real clusters in temporary directories."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from staticmq_spark.local_clusters import LocalCluster
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from tests.support.backends import Backend, rocketmq_backend, staticmq_backend
from tests.support.cluster_process import ClusterProcess

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
def staticmq_session_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(brokers=2, data_dir=tmp_path_factory.mktemp("staticmq") / "cluster") as cluster:
        yield cluster


@pytest.fixture(params=["staticmq", "rocketmq"])
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each conformance scenario runs on broker_stub and on a real Apache RocketMQ."""
    if request.param == "rocketmq":
        return rocketmq_backend(request.getfixturevalue("rocketmq_cluster"))
    return staticmq_backend(request.getfixturevalue("staticmq_session_cluster"))
