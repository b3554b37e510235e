"""A Spark Connect client (how Databricks serverless and shared clusters run PySpark) reads,
streams and writes `format("staticmq")` through pyspark's own Connect server."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from staticmq_spark.local_clusters import LocalCluster
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


def run_client(*args: str) -> list[str]:
    """tests/spark/scripts/connect_configure.py with `args`; its output lines (it must end well;
    a Spark that Delta Lake has no release for skips the test)."""
    script = [sys.executable, str(SCRIPTS / "connect_configure.py"), *args]
    done = subprocess.run(script, capture_output=True, text=True, timeout=600, env=spark_env())
    if done.returncode != 0 and "NoDeltaForThisSpark" in done.stderr:
        pytest.skip(done.stderr.strip().splitlines()[-1])
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    lines = done.stdout.splitlines()
    assert "DONE" in lines, done.stdout
    return lines


def keyed_rows(spark: SparkSession, namesrv: str, topic: str) -> Counter[tuple[str, str]]:
    return Counter((r["key"], bytes(r["value"]).decode()) for r in read_topic(spark, namesrv, topic))


def thread_rows(tag: str) -> Counter[tuple[str, str]]:
    return Counter((f"k{i % 7}", f"{tag}{i}") for i in range(120))


def test_configure_spark_on_a_spark_connect_builder_registers_staticmq_over_connect(
    spark: SparkSession, cluster: LocalCluster, spark_connect: ConnectServer
) -> None:
    source, written = new_topic(cluster.namesrv, 4), new_topic(cluster.namesrv, 4)
    produce(cluster.namesrv, source, 200)
    lines = run_client("configure", spark_connect.url, cluster.namesrv, source, written)
    assert "READ 200" in lines
    assert keyed_rows(spark, cluster.namesrv, written) == thread_rows("c")


def test_configure_spark_with_delta_on_a_running_connect_server_fails_at_once_saying_what_to_do(
    spark_connect: ConnectServer,
) -> None:
    lines = run_client("delta-remote", spark_connect.url)
    refused = next(line for line in lines if line.startswith("REFUSED "))
    assert spark_connect.url in refused
    assert "Start the Connect server with Delta Lake" in refused and "without delta=True" in refused
    seconds = float(next(line for line in lines if line.startswith("SECONDS ")).split()[1])
    assert seconds < 1.0  # refused before any jar is fetched or any session made


def test_a_connect_client_writes_staticmq_from_any_thread_and_activate_in_thread_does_nothing_there(
    spark: SparkSession, cluster: LocalCluster, spark_connect: ConnectServer
) -> None:
    """Over Spark Connect the server runs each request in the client's session, whichever client
    thread sent it: no DATA_SOURCE_NOT_FOUND from a thread (unlike a classic session, see
    test_threads.py), and activate_in_thread, a no-op there, is safe to call in code for both."""
    written = new_topic(cluster.namesrv, 4)
    run_client("threads", spark_connect.url, cluster.namesrv, written)
    assert keyed_rows(spark, cluster.namesrv, written) == thread_rows("a") + thread_rows("b")


@pytest.mark.slow  # starts a Spark Connect server with Delta Lake in the client process: about 2 minutes
def test_configure_spark_with_delta_on_a_local_connect_builder_starts_its_server_with_delta(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    source = new_topic(cluster.namesrv, 4)
    produce(cluster.namesrv, source, 200)
    lines = run_client("delta-local", cluster.namesrv, source, str(tmp_path / "lake"))
    assert "DELTA 200" in lines
