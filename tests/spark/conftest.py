"""Spark tests share one local[2] session and one real 3-broker cluster per module; the Spark Connect
test shares one Connect server per session, the standalone-cluster tests one Spark standalone
cluster (a master and two workers) per session."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from staticmq_spark import configure_spark
from staticmq_spark.local_clusters import LocalCluster
from tests.support.spark_cluster import ConnectServer, StandaloneCluster

SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.sql.streaming.stopTimeout": "30s",
    "spark.python.worker.reuse": "true",
    "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled": "true",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC",
    "spark.databricks.delta.snapshotPartitions": "2",  # Delta's log replay in 2 tasks, not 50
}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    # One session for every Spark test, with Delta Lake on (its jars must be there at start) where
    # Delta's Python package is installed: the primary environment; the pyspark matrix's runtime
    # environments run the core tests without it (tests/matrix).
    delta = importlib.util.find_spec("delta") is not None
    builder = configure_spark(SparkSession.builder.master("local[2]").appName("staticmq-tests"), delta=delta)
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    path: Path = tmp_path_factory.mktemp("spark-cluster")
    with LocalCluster(brokers=3, data_dir=path / "cluster", heartbeat_ms=300, broker_timeout_ms=3000) as c:
        yield c


@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """pyspark's Spark Connect server (local[2]) on a free loopback port, once per session."""
    server = ConnectServer(tmp_path_factory.mktemp("spark-connect"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A Spark standalone master and two 1-core workers on 127.0.0.1, started once per session
    (a failed start fails the tests that use it); killed with their executors at the end."""
    spark_cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), workers=2).start()
    try:
        yield spark_cluster
    finally:
        spark_cluster.stop()
