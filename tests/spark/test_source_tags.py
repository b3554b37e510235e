"""The source's `subscription` option (a tag filter applied by the brokers) on both backends: only
matching messages reach Spark, at their own logic offsets, exactly once over several micro-batches
and a remap, in streaming and batch reads."""

from __future__ import annotations

import itertools

import pytest
from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from staticmq_spark.client import Producer
from tests.support.clusters_under_test import ClusterUnderTest
from tests.support.spark import source

pytestmark = pytest.mark.spark
_n = itertools.count()
TAGS = ["TagA", "TagB", None, "TagC", "TagB", "TagB", "TagA", None, "TagB", "TagB"]


def _send(backend: ClusterUnderTest, topic: str, label: str, n: int) -> None:
    keys = [f"user-{i % 41}" for i in range(n)]
    with Producer(backend.address) as producer:
        producer.send_batch(
            topic, [f"{label}-{i}" for i in range(n)], keys=keys, tags=[TAGS[i % len(TAGS)] for i in range(n)]
        )


def test_subscription_streams_only_matching_tags_exactly_once_across_micro_batches_and_a_remap(
    spark: SparkSession, backend: ClusterUnderTest
) -> None:
    topic = f"tags-{backend.name}-{next(_n)}"
    backend.create(topic, 3, backend.brokers[:1])
    _send(backend, topic, "first", 500)
    backend.remap(topic, backend.brokers[1:2])
    _send(backend, topic, "second", 300)
    everything = spark.read.format("staticmq").option("namesrv", backend.address).option("topic", topic).load()
    expected = everything.where("tags IN ('TagA', 'TagC')").select("queueId", "queueOffset", "value", "tags")
    name = f"tags_{backend.name}_{next(_n)}"
    q = (
        source(
            spark,
            backend.address,
            topic,
            startingOffsets="earliest",
            subscription="TagA || TagC",
            maxMessagesPerTrigger="150",
        )
        .writeStream.format("memory")
        .queryName(name)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(300)
    assert q.exception() is None, q.exception()
    assert len([p for p in q.recentProgress if p["numInputRows"]]) > 1, "several micro-batches"
    got = spark.table(name).select("queueId", "queueOffset", "value", "tags")
    assertDataFrameEqual(got, expected)
    assert expected.count() == 240
    batch = (
        spark.read.format("staticmq")
        .option("namesrv", backend.address)
        .option("topic", topic)
        .option("subscription", "TagC")
        .load()
        .select("queueId", "queueOffset", "value", "tags")
    )
    assertDataFrameEqual(batch, everything.where("tags = 'TagC'").select("queueId", "queueOffset", "value", "tags"))


def test_a_subscription_naming_no_tag_is_refused_naming_the_option(
    spark: SparkSession, backend: ClusterUnderTest
) -> None:
    reader = spark.read.format("staticmq").option("namesrv", backend.address).option("topic", "any")
    with pytest.raises(Exception, match=r"subscription.*names no tag"):
        reader.option("subscription", " || ").load().collect()
