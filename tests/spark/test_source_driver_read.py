"""driverReadMaxMessages on a real cluster: small micro-batches read by the query's driver-side
process reach Spark as one partition, larger ones keep one partition per logic queue; every message
once, in order per logic queue, through a restart from the checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql.functions import spark_partition_id

from staticmq_spark.session.features import AVAILABLE_NOW_SPLITS
from tests.support.spark import by_queue, new_topic, produce, source

pytestmark = pytest.mark.spark


def _run(df, name: str) -> tuple[list, object]:  # type: ignore[no-untyped-def,type-arg]
    q = (
        df.select("queueId", "queueOffset", "value", spark_partition_id().alias("partition"))
        .writeStream.format("memory")
        .queryName(name)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(180)
    assert q.exception() is None, q.exception()
    return df.sparkSession.table(name).collect(), q


def test_driver_read_small_micro_batches_are_one_partition_with_every_message_once(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 4)
    sent = produce(cluster.namesrv, topic, 300)
    assert len(sent) == 4
    # Where pyspark splits Trigger.AvailableNow by the source's limits (4.2 and later), three
    # micro-batches of 100; elsewhere one of 300 (pyspark_features).
    most = "100" if AVAILABLE_NOW_SPLITS else "300"
    opts = {"startingOffsets": "earliest", "maxMessagesPerTrigger": "100", "driverReadMaxMessages": most}
    rows, q = _run(source(spark, cluster.namesrv, topic, **opts), "driver_read_small")
    assert len(rows) == 300 and by_queue(rows) == sent
    assert len([p for p in q.recentProgress if p["numInputRows"]]) >= (3 if AVAILABLE_NOW_SPLITS else 1)
    assert {r["partition"] for r in rows} == {0}, "every micro-batch was one partition"


def test_driver_read_larger_micro_batches_keep_one_partition_per_logic_queue(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 4)
    sent = produce(cluster.namesrv, topic, 400)
    opts = {"startingOffsets": "earliest", "maxMessagesPerTrigger": "200", "driverReadMaxMessages": "50"}
    rows, _ = _run(source(spark, cluster.namesrv, topic, **opts), "driver_read_large")
    assert len(rows) == 400 and by_queue(rows) == sent
    assert all(r["queueId"] == r["partition"] for r in rows)


def test_driver_read_restarted_from_its_checkpoint_reads_every_message_once(spark, cluster, tmp_path: Path) -> None:
    topic = new_topic(cluster.namesrv, 4)
    sent = produce(cluster.namesrv, topic, 120)
    opts = {"startingOffsets": "earliest", "maxMessagesPerTrigger": "50", "driverReadMaxMessages": "1000"}
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    for round_ in range(2):
        q = (
            source(spark, cluster.namesrv, topic, **opts)
            .select("queueId", "queueOffset", "value")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(180)
        assert q.exception() is None, q.exception()
        if round_ == 0:
            more = produce(cluster.namesrv, topic, 80, start=120)
            for queue, bodies in more.items():
                sent.setdefault(queue, []).extend(bodies)
    rows = spark.read.parquet(str(out)).collect()
    assert len(rows) == 200 and by_queue(rows) == sent
