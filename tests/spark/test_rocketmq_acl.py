"""A RocketMQ cluster with ACL on (RocketMQ's ACL 2.0): requests are signed with the cluster's keys,
from the CLI (environment), the Python client (`credentials=`) and Spark (`accessKey`/`secretKey`);
no keys or a wrong secret is refused with a clear error."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from staticmq_spark.client import Producer, PullConsumer
from staticmq_spark.errors import AccessDeniedError
from staticmq_spark.protocol.auth import Credentials
from staticmq_spark.testing.rocketmq_cluster import LocalRocketMQ
from tests.support.cli import staticmq

pytestmark = pytest.mark.spark
KEYS = ("staticmq-admin", "s3cret-key-123")


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRocketMQ]:
    cluster = LocalRocketMQ(tmp_path_factory.mktemp("rocketmq-acl"), brokers=1, acl=KEYS)
    try:
        cluster.start()
        cluster.update_static_topic("guarded", 2)
        yield cluster
    finally:
        cluster.close()


def test_the_cli_signs_with_keys_from_the_environment(acl_cluster: LocalRocketMQ) -> None:
    ns = acl_cluster.address
    env = {"ROCKETMQ_ACCESS_KEY": KEYS[0], "ROCKETMQ_SECRET_KEY": KEYS[1]}
    denied = staticmq("send", "-n", ns, "-t", "guarded", "--key", "k", "no-keys")
    assert denied.returncode != 0 and "NO_PERMISSION" in denied.stdout + denied.stderr
    wrong = staticmq("send", "-n", ns, "-t", "guarded", "x", env={**env, "ROCKETMQ_SECRET_KEY": "wrong"})
    assert wrong.returncode != 0 and "check signature failed" in wrong.stdout + wrong.stderr
    sent = staticmq("send", "-n", ns, "-t", "guarded", "--key", "k", "signed", env=env)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    pulled = staticmq("pull", "-n", ns, "-t", "guarded", "--from", "earliest", env=env)
    assert "signed" in [json.loads(line)["body"] for line in pulled.stdout.splitlines()]


def test_the_python_client_takes_credentials(acl_cluster: LocalRocketMQ) -> None:
    assert "ROCKETMQ_ACCESS_KEY" not in os.environ
    with Producer(acl_cluster.address) as producer, pytest.raises(AccessDeniedError, match="accessKey/secretKey"):
        producer.send("guarded", b"x", queue=0)
    keys = Credentials(*KEYS)
    with Producer(acl_cluster.address, credentials=keys) as producer:
        assert producer.send("guarded", b"py", queue=1).queue_id == 1
    with PullConsumer(acl_cluster.address, credentials=keys) as consumer:
        assert consumer.max_offset("guarded", 1) >= 1


def test_spark_reads_and_writes_with_the_key_options(spark: SparkSession, acl_cluster: LocalRocketMQ) -> None:
    ns = acl_cluster.address
    acl_cluster.update_static_topic("guarded-out", 2)
    with Producer(ns, credentials=Credentials(*KEYS)) as producer:
        producer.send_batch("guarded", [f"v{i}" for i in range(20)], keys=[f"u{i}" for i in range(20)])

    def read(topic: str, **keys: str):  # type: ignore[no-untyped-def]
        reader = spark.read.format("staticmq").option("namesrv", ns).option("topic", topic)
        for k, v in keys.items():
            reader = reader.option(k, v)
        return reader.load()

    with pytest.raises(PySparkException, match="NO_PERMISSION"):
        read("guarded").collect()
    rows = read("guarded", accessKey=KEYS[0], secretKey=KEYS[1])
    assert rows.count() >= 20
    (
        rows.selectExpr("key", "value")
        .write.format("staticmq")
        .option("namesrv", ns)
        .option("topic", "guarded-out")
        .option("accessKey", KEYS[0])
        .option("secretKey", KEYS[1])
        .mode("append")
        .save()
    )
    assert read("guarded-out", accessKey=KEYS[0], secretKey=KEYS[1]).count() == rows.count()
