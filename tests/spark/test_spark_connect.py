"""A Spark Connect client (how Databricks serverless and shared clusters run PySpark) reads,
streams and writes `format("staticmq")` through pyspark's own Connect server."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.support.spark import new_topic, produce
from tests.support.spark_cluster import ConnectServer, spark_env

pytestmark = pytest.mark.spark
SCRIPTS = Path(__file__).resolve().parent / "scripts"


def read_topic(spark: SparkSession, namesrv: str, topic: str) -> list:  # type: ignore[type-arg]
    return spark.read.format("staticmq").option("namesrv", namesrv).option("topic", topic).load().collect()


def test_a_spark_connect_client_reads_streams_and_writes_staticmq_after_registering_the_data_source(
    spark: SparkSession, cluster, spark_connect: ConnectServer, tmp_path: Path
) -> None:
    source, streamed, written = (new_topic(cluster.namesrv, 4) for _ in range(3))
    sent = produce(cluster.namesrv, source, 400)
    script = [sys.executable, str(SCRIPTS / "connect_client.py"), spark_connect.url, cluster.namesrv]
    script += [source, streamed, written, str(tmp_path / "ck")]
    done = subprocess.run(script, capture_output=True, text=True, timeout=300, env=spark_env())
    assert done.returncode == 0, done.stderr[-4000:]
    assert "READ 400" in done.stdout.splitlines()
    assert "DONE" in done.stdout.splitlines()

    want = Counter(b for bodies in sent.values() for b in bodies)
    assert Counter(bytes(r["value"]) for r in read_topic(spark, cluster.namesrv, streamed)) == want
    rows = read_topic(spark, cluster.namesrv, written)
    assert sorted((r["key"], bytes(r["value"]).decode()) for r in rows) == sorted(
        (f"k{i % 7}", f"w{i}") for i in range(120)
    )
