"""Spark on a staticmq cluster with ACL and TLS: the source and the sink sign every call with
`accessKey`/`secretKey` and reach the servers over TLS with `tlsCaFile`; a query without keys,
or one whose account may not write, fails with the reason, and nothing is written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from staticmq_spark.client import Admin, Producer, PullConsumer
from staticmq_spark.local_clusters import LocalCluster
from staticmq_spark.local_clusters.tls_files import write_tls_files

pytestmark = pytest.mark.spark
ACL = """
accounts:
  - accessKey: admin
    secretKey: admin-secret-123
    admin: true
  - accessKey: spark-job
    secretKey: spark-secret-456
    topicPerms: ["clicks=SUB", "clicks-out=PUB|SUB"]
"""
KEYS = {"accessKey": "spark-job", "secretKey": "spark-secret-456"}


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, dict[str, str]]]:
    root = tmp_path_factory.mktemp("spark-secure")
    tls = write_tls_files(root / "tls")
    acl = root / "acl.yml"
    acl.write_text(ACL)
    cluster = LocalCluster(2, root / "cluster", acl=acl, tls_cert=tls.cert, tls_key=tls.key, tls_ca=tls.ca)
    with cluster:
        with Admin(cluster.namesrv, **cluster.client_options) as admin:
            admin.update_static_topic("clicks", 4, cluster="DefaultCluster")
            admin.update_static_topic("clicks-out", 4, cluster="DefaultCluster")
        with Producer(cluster.namesrv, **cluster.client_options) as producer:
            producer.send_batch("clicks", [f"c{i}" for i in range(200)], keys=[f"u{i % 17}" for i in range(200)])
        yield cluster, {**KEYS, "tlsCaFile": str(tls.ca)}


def _read(spark: SparkSession, cluster: LocalCluster, topic: str, **options: str) -> DataFrame:
    return (
        spark.read.format("staticmq")
        .option("namesrv", cluster.namesrv)
        .option("topic", topic)
        .options(**options)
        .load()
    )


def test_spark_reads_and_writes_with_keys_over_tls(
    spark: SparkSession, secure: tuple[LocalCluster, dict[str, str]]
) -> None:
    cluster, options = secure
    clicks = _read(spark, cluster, "clicks", **options).selectExpr("key", "CAST(value AS STRING) AS value")
    assert clicks.count() == 200
    clicks.write.format("staticmq").option("namesrv", cluster.namesrv).option("topic", "clicks-out").options(
        **options
    ).mode("append").save()
    written = _read(spark, cluster, "clicks-out", **options).selectExpr("key", "CAST(value AS STRING) AS value")
    assert_df_equality(written, clicks, ignore_row_order=True)


def test_a_streaming_query_signs_every_micro_batch(
    spark: SparkSession, secure: tuple[LocalCluster, dict[str, str]], tmp_path: Path
) -> None:
    cluster, options = secure
    query = (
        spark.readStream.format("staticmq")
        .option("namesrv", cluster.namesrv)
        .option("topic", "clicks")
        .option("startingOffsets", "earliest")
        .options(**options)
        .load()
        .writeStream.format("memory")
        .queryName("secure_clicks")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert spark.table("secure_clicks").count() == 200


def test_a_query_without_keys_fails_naming_the_missing_credentials(
    spark: SparkSession, secure: tuple[LocalCluster, dict[str, str]]
) -> None:
    cluster, options = secure
    with pytest.raises(PySparkException, match="carries no credentials"):
        _read(spark, cluster, "clicks", tlsCaFile=options["tlsCaFile"]).collect()
    with pytest.raises(PySparkException, match="go together"):
        _read(spark, cluster, "clicks", accessKey="spark-job", tlsCaFile=options["tlsCaFile"]).collect()


def test_a_sink_whose_account_may_not_write_fails_and_writes_nothing(
    spark: SparkSession, secure: tuple[LocalCluster, dict[str, str]]
) -> None:
    cluster, options = secure
    rows = spark.createDataFrame([("k", "v")], "key string, value string")
    with pytest.raises(PySparkException, match=r"may not .* topic 'clicks'"):
        rows.write.format("staticmq").option("namesrv", cluster.namesrv).option("topic", "clicks").options(
            **options
        ).mode("append").save()
    with PullConsumer(cluster.namesrv, **cluster.client_options) as consumer:
        assert sum(o.max_offset for o in consumer.offsets("clicks")) == 200
