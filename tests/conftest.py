"""Shared fixtures: real clusters in temporary directories."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from staticmq_spark.client import Admin
from staticmq_spark.testing import LocalCluster
from tests.cluster_process import ClusterProcess

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


def create_topic(namesrv: str, topic: str, queues: int = 4) -> None:
    with Admin(namesrv) as admin:
        admin.update_topic(topic, cluster="DefaultCluster", read_queues=queues, write_queues=queues)
