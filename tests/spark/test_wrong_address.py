"""A name-server address that never answered fails in seconds, naming it and the likely cause: a
wrong port, or a cluster that serves TLS read or written without `tlsCaFile` (the long read retry,
retryTimeoutMs, is only for a broker that was up and went away)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from staticmq_spark.client import Admin
from staticmq_spark.local_clusters import LocalCluster
from staticmq_spark.local_clusters.ports import free_port
from staticmq_spark.local_clusters.tls_files import write_tls_files

pytestmark = pytest.mark.spark
FAST_S = 20.0  # well under the default retryTimeoutMs (120 s) that a broker that went away gets
NO_TLS = "closed the connection before answering: does it expect TLS"


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp("tls-first-contact")
    tls = write_tls_files(root / "tls")
    with LocalCluster(1, root / "cluster", tls_cert=tls.cert, tls_key=tls.key, tls_ca=tls.ca) as cluster:
        with Admin(cluster.namesrv, **cluster.client_options) as admin:
            admin.update_static_topic("orders", 2, cluster="DefaultCluster")
        yield cluster


def test_cli_with_a_wrong_name_server_fails_fast_naming_it() -> None:
    wrong = f"127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "staticmq_spark.cli", "pull", "-n", wrong, "-t", "orders"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    assert f"no name server at {wrong} has answered: connection refused: nothing listens at {wrong}" in out.stderr
    assert time.monotonic() - started < FAST_S, "not the two-minute retry of a broker that went away"


def test_spark_read_with_a_wrong_name_server_fails_fast_naming_it(spark: SparkSession) -> None:
    wrong = f"127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    with pytest.raises(PySparkException, match=f"no name server at {wrong} has answered: connection refused"):
        spark.read.format("staticmq").option("namesrv", wrong).option("topic", "orders").load().collect()
    assert time.monotonic() - started < FAST_S, "not the two-minute retry of a broker that went away"


def test_spark_read_of_a_tls_cluster_without_the_ca_fails_fast_naming_tls(
    spark: SparkSession, tls_cluster: LocalCluster
) -> None:
    started = time.monotonic()
    with pytest.raises(PySparkException, match=f"no name server at {tls_cluster.namesrv} has answered: .*{NO_TLS}"):
        spark.read.format("staticmq").option("namesrv", tls_cluster.namesrv).option("topic", "orders").load().collect()
    assert time.monotonic() - started < FAST_S, "not the two-minute retry of a broker that went away"


def test_spark_write_to_a_tls_cluster_without_the_ca_fails_fast_naming_tls(
    spark: SparkSession, tls_cluster: LocalCluster
) -> None:
    rows = spark.createDataFrame([("k", "v")], "key string, value string")

    def write(**options: str) -> None:
        writer = rows.write.format("staticmq").option("namesrv", tls_cluster.namesrv).option("topic", "orders")
        writer.options(**options).mode("append").save()

    write(tlsCaFile=str(tls_cluster.client_options["tls_ca"]))  # with the CA it works (and the workers are up)
    started = time.monotonic()
    with pytest.raises(PySparkException, match=NO_TLS):
        write()
    assert time.monotonic() - started < FAST_S, "not the minute-long retry (sendTimeoutMs) of a broker that went away"
