"""Behaviours of Spark's Kafka source that staticmq keeps too: offsets that went back, a batch read
that would start at latest, and errors that name the option they came from."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from staticmq_spark.client import Admin, Producer
from tests.support.spark import new_topic, produce, wait_until

pytestmark = pytest.mark.spark


def _batch(spark: SparkSession, namesrv: str, topic: str, **options: str):  # type: ignore[no-untyped-def]
    reader = spark.read.format("staticmq").option("namesrv", namesrv).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@pytest.mark.parametrize("start", ["latest", "LATEST", '{"TOPIC": {"0": -1, "1": 0}}'])
def test_batch_read_starting_at_latest_is_refused(spark: SparkSession, cluster, start: str) -> None:
    topic = new_topic(cluster.namesrv, 2)
    with pytest.raises(PySparkException, match="startingOffsets': a batch query cannot start at latest"):
        _batch(spark, cluster.namesrv, topic, startingOffsets=start.replace("TOPIC", topic)).collect()


@pytest.mark.parametrize("option", ["startingOffsets", "endingOffsets"])
def test_json_offsets_missing_a_queue_name_the_option(spark: SparkSession, cluster, option: str) -> None:
    topic = new_topic(cluster.namesrv, 2)
    value = f'{{"{topic}": {{"0": 0}}}}'
    with pytest.raises(PySparkException, match=rf"option '{option}': offsets for topic .*missing \[1\]"):
        _batch(spark, cluster.namesrv, topic, **{option: value}).collect()


def _recreate_with_new_messages(namesrv: str, topic: str, count: int) -> None:
    with Admin(namesrv) as admin:
        admin.delete_topic(topic)
        admin.update_static_topic(topic, 1, cluster="DefaultCluster")
    with Producer(namesrv, active_detection=False) as producer:
        wait_until(lambda: producer.topic_is_static(topic), 30, "the re-created topic's route")
        producer.send_batch(topic, [f"new{i}".encode() for i in range(count)], queue=0)


def _run_available_now(spark: SparkSession, namesrv: str, topic: str, checkpoint: Path, name: str, fail: str):  # type: ignore[no-untyped-def]
    return (
        spark.readStream.format("staticmq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", fail)
        .load()
        .select("queueOffset", "value")
        .writeStream.format("parquet")
        .queryName(name)
        .option("path", str(checkpoint.parent / "out"))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def _restart_after_recreation(spark: SparkSession, cluster, tmp_path: Path, fail_on_data_loss: str):  # type: ignore[no-untyped-def]
    """Read 30 messages to the end, delete and re-create the topic with 5 new messages, then start
    the query again from its checkpoint; returns the restarted query."""
    topic = new_topic(cluster.namesrv, 1)
    produce(cluster.namesrv, topic, 30)
    name = f"went_back_{fail_on_data_loss}"
    checkpoint = tmp_path / "ck"
    _run_available_now(spark, cluster.namesrv, topic, checkpoint, f"{name}_1", fail_on_data_loss).awaitTermination(120)
    _recreate_with_new_messages(cluster.namesrv, topic, 5)
    return _run_available_now(spark, cluster.namesrv, topic, checkpoint, f"{name}_2", fail_on_data_loss)


def test_offsets_that_went_back_fail_the_query_naming_queue_and_both_offsets(
    spark: SparkSession, cluster, tmp_path: Path
) -> None:
    query = _restart_after_recreation(spark, cluster, tmp_path, "true")
    with pytest.raises(
        PySparkException, match=r"logic queue 0: the query is at logic offset 30 but .* max offset is now 5"
    ):
        query.awaitTermination(120)


def test_offsets_that_went_back_restart_from_earliest_without_failOnDataLoss(
    spark: SparkSession, cluster, tmp_path: Path
) -> None:
    query = _restart_after_recreation(spark, cluster, tmp_path, "false")
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    new = sorted(bytes(r["value"]) for r in rows if bytes(r["value"]).startswith(b"new"))
    assert new == [f"new{i}".encode() for i in range(5)], "the re-created queue is read from its earliest offset"
    assert len(rows) == 35
