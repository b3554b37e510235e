"""Delta Lake: configure_spark, bronze exactly once through a driver kill -9 and a remap, and
foreachBatch MERGEs that a replayed micro-batch does not apply twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import deltalake
import pytest
from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from staticmq_spark import configure_spark
from staticmq_spark.client import Admin
from staticmq_spark.lakehouse import (
    BRONZE_COLUMNS,
    BRONZE_STATS_COLUMNS,
    IdempotentAppend,
    IdempotentMerge,
    create_bronze_table,
    start_bronze,
    table_version,
)
from staticmq_spark.session.configure import DELTA_CATALOG, DELTA_EXTENSION, SNAPSHOT_PARTITIONS, delta_jars
from tests.support.spark import (
    BackgroundProducer,
    by_queue,
    committed_batches,
    merge,
    new_topic,
    produce,
    wait_until,
)

pytestmark = pytest.mark.spark
SCRIPTS = Path(__file__).parent / "scripts"


def test_configure_spark_turns_delta_on_with_cached_jars_and_registers_staticmq(spark: SparkSession, cluster) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.sql.extensions") == DELTA_EXTENSION
    assert conf.get("spark.sql.catalog.spark_catalog") == DELTA_CATALOG
    jars = delta_jars()
    assert sorted(j.name.split("-")[1] for j in jars) == ["spark_4.2_2.13", "storage"]
    assert all(str(j) in conf.get("spark.jars", "") for j in jars)
    topic = new_topic(cluster.namesrv, 1)
    reader = spark.read.format("staticmq").option("namesrv", cluster.namesrv).option("topic", topic)
    assert reader.load().columns[:3] == ["topic", "queueId", "queueOffset"]


def test_configure_spark_keeps_jars_the_caller_set() -> None:
    builder = SparkSession.builder.config("spark.jars", "/opt/extra.jar")
    configured = configure_spark(builder, delta=True)
    assert configured._options["spark.jars"].startswith("/opt/extra.jar,")


@pytest.mark.parametrize(
    ("master", "expected"),
    [("local[2]", "2"), ("local", "1"), ("local[3,2]", "3"), ("local[*]", str(os.cpu_count() or 1))],
)
def test_configure_spark_sizes_delta_snapshot_partitions_to_local_cores(master: str, expected: str) -> None:
    configured = configure_spark(SparkSession.builder.master(master), delta=True)
    assert configured._options[SNAPSHOT_PARTITIONS] == expected


@pytest.mark.parametrize("master", ["spark://host:7077", "yarn", "local-cluster[2,1,1024]"])
def test_configure_spark_leaves_delta_snapshot_partitions_alone_on_clusters(master: str) -> None:
    assert SNAPSHOT_PARTITIONS not in configure_spark(SparkSession.builder.master(master), delta=True)._options


def test_configure_spark_keeps_the_snapshot_partitions_the_caller_set() -> None:
    builder = SparkSession.builder.master("local[2]").config(SNAPSHOT_PARTITIONS, "7")
    assert configure_spark(builder, delta=True)._options[SNAPSHOT_PARTITIONS] == "7"


def test_bronze_keeps_every_message_exactly_once_through_a_driver_kill_and_a_remap(
    spark: SparkSession, cluster, tmp_path: Path
) -> None:
    topic = new_topic(cluster.namesrv, 3, brokers=["broker-0", "broker-1"])
    table, checkpoint = str(tmp_path / "bronze"), str(tmp_path / "checkpoint")
    first = produce(cluster.namesrv, topic, 1500)
    args = [sys.executable, str(SCRIPTS / "stream_to_delta.py"), cluster.namesrv, topic, table, checkpoint]
    log = (tmp_path / "driver.log").open("wb")
    driver = subprocess.Popen([*args, "run"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: committed_batches(Path(checkpoint)) >= 2, 240, "two committed batches")
        with BackgroundProducer(cluster.namesrv, topic, "during") as during, Admin(cluster.namesrv) as admin:
            admin.remapping_static_topic(topic, brokers=["broker-2"])
            done = committed_batches(Path(checkpoint))
            wait_until(lambda: committed_batches(Path(checkpoint)) >= done + 2, 240, "two batches after the remap")
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    finish = subprocess.run([*args, "finish"], capture_output=True, text=True, timeout=600)
    assert finish.returncode == 0, finish.stdout[-3000:] + finish.stderr[-3000:]

    sent = merge(first, during.acked)
    bronze = spark.read.format("delta").load(table)
    assert bronze.columns == list(BRONZE_COLUMNS)
    rows = bronze.collect()
    assert len(rows) == sum(len(v) for v in sent.values()), "every acknowledged message once"
    assert by_queue(rows) == sent
    assert {r["topic"] for r in rows} == {topic}
    assert all(r["storeTimestamp"] is not None and r["key"] for r in rows)
    assert any(r["queueOffset"] >= 10_000 for r in rows), "rows from after the remap's offset jump"

    # The deltalake package (delta-rs, no Spark) reads the same table, row for row.
    arrow = deltalake.DeltaTable(table).to_pyarrow_table(columns=["topic", "queueId", "queueOffset", "key", "value"])
    other = spark.createDataFrame(arrow.to_pandas(), schema=bronze.select(*arrow.column_names).schema)
    assertDataFrameEqual(other, bronze.select(*arrow.column_names))
    assert deltalake.DeltaTable(table).version() == table_version(spark, table)


def test_bronze_keeps_statistics_only_for_its_place_columns_and_writes_at_most_files_per_batch_files(
    spark: SparkSession, cluster, tmp_path: Path
) -> None:
    topic = new_topic(cluster.namesrv, 4)
    sent = produce(cluster.namesrv, topic, 2000)
    table = str(tmp_path / "bronze")
    create_bronze_table(spark, cluster.namesrv, topic, table)
    create_bronze_table(spark, cluster.namesrv, topic, table)  # exists: left alone
    query = start_bronze(
        spark, cluster.namesrv, topic, table, str(tmp_path / "ck"), available_now=True, files_per_batch=2
    )
    query.awaitTermination(300)
    assert query.exception() is None

    bronze = spark.read.format("delta").load(table)
    assert bronze.columns == list(BRONZE_COLUMNS)
    assert by_queue(bronze.collect()) == sent, "every message once, in its queue and order"
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{table}`").collect()[0]
    assert detail["properties"]["delta.dataSkippingStatsColumns"] == ",".join(BRONZE_STATS_COLUMNS)
    adds = [
        json.loads(line)["add"]
        for log in sorted((tmp_path / "bronze" / "_delta_log").glob("*.json"))
        for line in log.read_text().splitlines()
        if '"add"' in line
    ]
    assert 1 <= len(adds) <= 2, "one micro-batch of 4 logic queues in at most files_per_batch=2 files"
    for add in adds:
        stats = json.loads(add["stats"])
        assert stats["numRecords"] > 0
        assert set(stats["minValues"]) <= set(BRONZE_STATS_COLUMNS), stats["minValues"]
    with pytest.raises(ValueError, match="files_per_batch must be at least 1, not 0"):
        start_bronze(spark, cluster.namesrv, topic, table, str(tmp_path / "ck2"), files_per_batch=0)


def test_idempotent_merge_applies_a_replayed_micro_batch_once(spark: SparkSession, tmp_path: Path) -> None:
    totals = IdempotentMerge(
        str(tmp_path / "gold"),
        on=["user"],
        app_id="gold-test",
        update={"views": "t.views + s.views"},
    )
    batch = spark.createDataFrame([("a", 1), ("b", 2)], "user string, views bigint")
    totals(batch, 0)
    totals(batch, 0)  # the replay of batch 0 after a crash
    totals(spark.createDataFrame([("a", 5), ("c", 1)], "user string, views bigint"), 1)
    totals(spark.createDataFrame([("a", 5), ("c", 1)], "user string, views bigint"), 1)
    expected = spark.createDataFrame([("a", 6), ("b", 2), ("c", 1)], "user string, views bigint")
    assertDataFrameEqual(spark.read.format("delta").load(str(tmp_path / "gold")), expected)
    assert table_version(spark, str(tmp_path / "gold")) == 1, "two writes, the replays skipped"


def test_insert_only_merge_deduplicates_on_its_keys(spark: SparkSession, tmp_path: Path) -> None:
    events = IdempotentMerge(str(tmp_path / "silver"), on=["id"], app_id="silver-test", insert_only=True)
    events(spark.createDataFrame([(1, "x"), (2, "y")], "id int, v string"), 0)
    events(spark.createDataFrame([(2, "changed"), (3, "z")], "id int, v string"), 1)
    expected = spark.createDataFrame([(1, "x"), (2, "y"), (3, "z")], "id int, v string")
    assertDataFrameEqual(spark.read.format("delta").load(str(tmp_path / "silver")), expected)


def test_idempotent_append_writes_a_replayed_micro_batch_once(spark: SparkSession, tmp_path: Path) -> None:
    events = IdempotentAppend(str(tmp_path / "silver"), app_id="append-test")
    first = spark.createDataFrame([(1, "x"), (2, "y")], "id int, v string")
    events(first, 0)
    events(first, 0)  # the replay of batch 0 after a crash
    events(spark.createDataFrame([(3, "z")], "id int, v string"), 1)
    events(spark.createDataFrame([(3, "z")], "id int, v string"), 1)
    expected = spark.createDataFrame([(1, "x"), (2, "y"), (3, "z")], "id int, v string")
    assertDataFrameEqual(spark.read.format("delta").load(str(tmp_path / "silver")), expected)
    assert table_version(spark, str(tmp_path / "silver")) == 1, "two writes, the replays skipped"
    with pytest.raises(ValueError, match="app_id"):
        IdempotentAppend(str(tmp_path), app_id="")


def test_idempotent_merge_refuses_to_be_built_without_keys_or_app_id(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="key column"):
        IdempotentMerge(str(tmp_path), on=[], app_id="x")
    with pytest.raises(ValueError, match="app_id"):
        IdempotentMerge(str(tmp_path), on=["k"], app_id="")
