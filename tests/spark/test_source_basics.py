"""The staticmq source: what a user reads, how it is partitioned, and how bad options fail."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import Row
from pyspark.sql.functions import spark_partition_id
from pyspark.testing import assertDataFrameEqual

from staticmq_spark.client import Admin, Producer
from staticmq_spark.data_source import StaticMQDataSource
from staticmq_spark.workers.site import register
from tests.support.spark import by_queue, new_topic, produce, source

pytestmark = pytest.mark.spark


def test_batch_read_returns_every_message_with_its_logic_offset(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 4)
    sent = produce(cluster.namesrv, topic, 600)
    df = spark.read.format("staticmq").option("namesrv", cluster.namesrv).option("topic", topic).load()
    rows = df.collect()
    assert by_queue(rows) == sent
    expected = spark.createDataFrame(
        [Row(queueId=q, queueOffset=i, value=b) for q, bodies in sent.items() for i, b in enumerate(bodies)],
        schema="queueId INT NOT NULL, queueOffset BIGINT NOT NULL, value BINARY",
    )
    assertDataFrameEqual(df.select("queueId", "queueOffset", "value"), expected)
    assert {r["topic"] for r in rows} == {topic}
    assert all(r["key"].startswith("k") and r["storeTimestamp"] is not None for r in rows)


def test_stream_reads_every_message_exactly_once_in_order_per_logic_queue(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 4)
    sent = produce(cluster.namesrv, topic, 800)
    q = (
        source(spark, cluster.namesrv, topic, startingOffsets="earliest", maxMessagesPerTrigger="150")
        .writeStream.format("memory")
        .queryName("exactly_once")
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    rows = spark.table("exactly_once").collect()
    assert len(rows) == 800
    assert by_queue(rows) == sent


def test_each_logic_queue_is_one_spark_partition_with_the_same_index_every_batch(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 6)
    produce(cluster.namesrv, topic, 600)
    df = source(spark, cluster.namesrv, topic, startingOffsets="earliest", maxMessagesPerTrigger="100")
    q = (
        df.select("queueId", spark_partition_id().alias("partition"))
        .writeStream.format("memory")
        .queryName("partition_ids")
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    rows = spark.table("partition_ids").collect()
    assert len(rows) == 600 and len(q.recentProgress) >= 6
    assert all(r["queueId"] == r["partition"] for r in rows)


def test_queue_partitions_with_messages_reads_every_message_once_with_idle_queues(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 6)
    sent = produce(cluster.namesrv, topic, 300, keys=2)  # keys k0 and k1: both in logic queue 4 of 6
    assert set(sent) == {4}
    df = source(
        spark,
        cluster.namesrv,
        topic,
        startingOffsets="earliest",
        maxMessagesPerTrigger="40",
        queuePartitions="with-messages",
    )
    q = (
        df.select("queueId", "queueOffset", "value", spark_partition_id().alias("partition"))
        .writeStream.format("memory")
        .queryName("with_messages")
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    rows = spark.table("with_messages").collect()
    assert by_queue(rows) == sent and len(rows) == 300
    assert len(q.recentProgress) >= 5
    assert {r["partition"] for r in rows} == {0}, "only the queue with messages became a partition"


def test_staticmq_format_works_in_a_fresh_session_without_registration(cluster) -> None:
    topic = new_topic(cluster.namesrv, 2)
    produce(cluster.namesrv, topic, 50)
    script = (
        "from pyspark.sql import SparkSession\n"
        "s = SparkSession.builder.master('local[1]').config('spark.ui.enabled','false').getOrCreate()\n"
        f"r = s.read.format('staticmq').option('namesrv', '{cluster.namesrv}').option('topic', '{topic}')\n"
        "print('COUNT', r.load().count())\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert "COUNT 50" in out.stdout, out.stderr[-3000:]


def test_explicit_registration_also_works(spark, cluster) -> None:
    spark.dataSource.register(StaticMQDataSource)
    try:
        topic = new_topic(cluster.namesrv, 2)
        produce(cluster.namesrv, topic, 20)
        reader = spark.read.format("staticmq").option("namesrv", cluster.namesrv).option("topic", topic)
        assert reader.load().count() == 20
    finally:
        register(spark, StaticMQDataSource)  # as the shared session's configure_spark registered it


def test_properties_tags_and_diagnostic_columns_are_read(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 1)
    with Producer(cluster.namesrv) as producer:
        producer.send(topic, b"x", key="k", tags="TagA", properties={"trace": "t1"})
    row = spark.read.format("staticmq").option("namesrv", cluster.namesrv).option("topic", topic).load().first()
    assert (row["tags"], row["properties"], row["physicalOffset"]) == ("TagA", {"trace": "t1"}, 0)
    assert row["brokerName"].startswith("broker-")
    slim = spark.read.format("staticmq").option("namesrv", cluster.namesrv).option("topic", topic)
    assert "properties" not in slim.option("includeProperties", "false").load().columns


def test_starting_and_ending_offsets_as_json_select_a_range(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 2)
    produce(cluster.namesrv, topic, 100)
    df = (
        spark.read.format("staticmq")
        .option("namesrv", cluster.namesrv)
        .option("topic", topic)
        .option("startingOffsets", json.dumps({topic: {"0": 5, "1": -2}}))
        .option("endingOffsets", json.dumps({topic: {"0": 10, "1": 3}}))
        .load()
    )
    got = sorted((r["queueId"], r["queueOffset"]) for r in df.collect())
    assert got == [(0, o) for o in range(5, 10)] + [(1, o) for o in range(3)]


def test_starting_timestamp_starts_at_the_first_message_stored_after_it(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 2)
    produce(cluster.namesrv, topic, 40)
    time.sleep(0.05)  # not a wait: the store times before and after the cut must differ
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    produce(cluster.namesrv, topic, 30, start=1000)
    df = (
        spark.read.format("staticmq")
        .option("namesrv", cluster.namesrv)
        .option("topic", topic)
        .option("startingTimestamp", str(cut))
        .load()
    )
    assert sorted(bytes(r["value"]) for r in df.collect()) == sorted(f"m{i}".encode() for i in range(1000, 1030))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "t"}, "namesrv"),
        ({"namesrv": "x:1", "topic": "t", "maxMessagesPerTriger": "5"}, "maxmessagespertriger"),
        ({"namesrv": "x:1", "topic": "t", "maxMessagesPerTrigger": "zero"}, "maxMessagesPerTrigger"),
        ({"namesrv": "x:1", "topic": "t", "startingOffsets": "{bad"}, "startingOffsets"),
        ({"namesrv": "x:1", "topic": "t", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
        ({"namesrv": "x:1", "topic": "t", "maxTriggerDelay": "soon"}, "maxTriggerDelay"),
    ],
)
def test_unknown_or_invalid_options_fail_at_once_naming_the_option(spark, options: dict, message: str) -> None:
    reader = spark.readStream.format("staticmq")
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(PySparkException, match=message):
        reader.load().writeStream.format("noop").start().awaitTermination(30)


def test_a_dynamic_topic_is_refused_with_a_clear_error(spark, cluster) -> None:
    with Admin(cluster.namesrv) as admin:
        admin.update_topic("plain-topic", cluster="DefaultCluster")
    with pytest.raises(PySparkException, match="not a static topic"):
        spark.read.format("staticmq").option("namesrv", cluster.namesrv).option("topic", "plain-topic").load().count()
