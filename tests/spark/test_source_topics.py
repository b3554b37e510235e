"""Several topics in one query (`topic` as a comma list, `topicPattern`) and lag in the query
progress: the options users know from Spark's Kafka source (`subscribe`, `subscribePattern`,
offsets behind latest)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from staticmq_spark.client import Admin
from staticmq_spark.local_clusters import LocalCluster
from tests.support.spark import by_queue, new_topic, produce, source, to_memory, wait_until

pytestmark = pytest.mark.spark
_runs = itertools.count()


def _batch(spark: SparkSession, namesrv: str, **options: str) -> list:  # type: ignore[type-arg]
    reader = spark.read.format("staticmq").option("namesrv", namesrv)
    return reader.options(**options).load().select("topic", "queueId", "queueOffset", "value").collect()


def test_a_topic_list_reads_every_topic_with_its_own_queues(spark: SparkSession, cluster: LocalCluster) -> None:
    a, b = new_topic(cluster.namesrv, 4), new_topic(cluster.namesrv, 2)
    sent_a, sent_b = produce(cluster.namesrv, a, 300), produce(cluster.namesrv, b, 120, start=1000)
    rows = _batch(spark, cluster.namesrv, topic=f"{a},{b}")
    assert by_queue([r for r in rows if r["topic"] == a]) == sent_a
    assert by_queue([r for r in rows if r["topic"] == b]) == sent_b
    reader = spark.read.format("staticmq").option("namesrv", cluster.namesrv).option("topic", f"{a},{b}")
    assert reader.load().rdd.getNumPartitions() == 6, "one partition per topic and logic queue"


def test_json_offsets_name_each_topic_of_the_list(spark: SparkSession, cluster: LocalCluster) -> None:
    a, b = new_topic(cluster.namesrv, 1), new_topic(cluster.namesrv, 1)
    produce(cluster.namesrv, a, 10)
    produce(cluster.namesrv, b, 10)
    starting = json.dumps({a: {"0": 7}, b: {"0": 2}})
    ending = json.dumps({a: {"0": 9}, b: {"0": -1}})
    rows = _batch(spark, cluster.namesrv, topic=f"{a},{b}", startingOffsets=starting, endingOffsets=ending)
    assert sorted((r["topic"], r["queueOffset"]) for r in rows) == [(a, 7), (a, 8)] + [(b, o) for o in range(2, 10)]


def test_a_topic_pattern_picks_up_a_topic_created_while_the_query_runs(
    spark: SparkSession, cluster: LocalCluster, tmp_path: Path
) -> None:
    prefix = f"pat{next(_runs)}x"
    first = new_topic(cluster.namesrv, 2, prefix=prefix)
    new_topic(cluster.namesrv, 2, prefix=f"other{prefix}")  # does not match: never read
    produce(cluster.namesrv, first, 50)
    df = source(spark, cluster.namesrv, "", topicPattern=f"{prefix}-.*", startingOffsets="earliest")
    query = to_memory(df, prefix, tmp_path / "ck", "500 milliseconds")
    try:
        wait_until(lambda: spark.table(prefix).count() == 50, 120, "the first topic's 50 rows", query)
        second = new_topic(cluster.namesrv, 3, prefix=prefix)
        sent = produce(cluster.namesrv, second, 40, start=500)
        wait_until(lambda: spark.table(prefix).count() == 90, 120, "the new topic's rows, from its earliest", query)
        rows = spark.table(prefix).collect()
        assert {r["topic"] for r in rows} == {first, second}
        assert by_queue([r for r in rows if r["topic"] == second]) == sent
    finally:
        query.stop()


def test_the_query_progress_shows_lag_per_logic_queue(
    spark: SparkSession, cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = new_topic(cluster.namesrv, 2)
    produce(cluster.namesrv, topic, 400)
    name = f"lag{next(_runs)}"
    df = source(spark, cluster.namesrv, topic, startingOffsets="earliest", maxMessagesPerTrigger="100")
    query = to_memory(df, name, tmp_path / "ck", "1 second")
    try:
        progress = wait_until(
            lambda: next((p for p in query.recentProgress if p["numInputRows"] == 100), None),
            120,
            "a first batch of 100 rows",
            query,
        )
        latest = progress["sources"][0]["latestOffset"]
        latest = json.loads(latest) if isinstance(latest, str) else latest
        lag = latest["staticmq.lag"][topic]
        assert sorted(lag) == ["0", "1"] and latest["staticmq.lagTotal"] == sum(lag.values()) == 300
        done = wait_until(lambda: spark.table(name).count() == 400, 120, "all 400 rows", query)
        assert done
    finally:
        query.stop()


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_a_topic_that_vanishes_from_a_pattern_fails_the_query_or_is_dropped(
    spark: SparkSession, cluster: LocalCluster, tmp_path: Path, fail_on_data_loss: str
) -> None:
    prefix = f"gone{next(_runs)}x"
    kept, doomed = new_topic(cluster.namesrv, 2, prefix=prefix), new_topic(cluster.namesrv, 2, prefix=prefix)
    produce(cluster.namesrv, kept, 20)
    produce(cluster.namesrv, doomed, 20, start=100)
    options = {"topicPattern": f"{prefix}-.*", "startingOffsets": "earliest", "failOnDataLoss": fail_on_data_loss}
    query = to_memory(source(spark, cluster.namesrv, "", **options), prefix, tmp_path / "ck", "500 milliseconds")
    try:
        wait_until(lambda: spark.table(prefix).count() == 40, 120, "both topics' rows", query)
        with Admin(cluster.namesrv) as admin:
            admin.delete_topic(doomed)
        if fail_on_data_loss == "true":
            wait_until(lambda: not query.isActive, 120, "the query to fail")
            assert f"topic {doomed!r}" in str(query.exception()) and "is gone" in str(query.exception())
        else:
            produce(cluster.namesrv, kept, 10, start=1000)
            wait_until(lambda: spark.table(prefix).count() == 50, 120, "the kept topic's new rows", query)
            assert query.isActive
    finally:
        query.stop()
