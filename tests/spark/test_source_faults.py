"""The source under remaps, broker crashes, query restarts, a killed driver, retention and a
changed queue count: every message exactly once, in order per logic queue, or a clear error."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyspark.errors import PySparkException

from staticmq_spark.client import Admin, Producer
from staticmq_spark.local_clusters import LocalCluster
from tests.support.spark import (
    BackgroundProducer,
    by_queue,
    committed_batches,
    merge,
    new_topic,
    produce,
    source,
    wait_until,
)

pytestmark = pytest.mark.spark
SCRIPTS = Path(__file__).parent / "scripts"


def _more_acked(producer: BackgroundProducer, n: int, when: str) -> None:
    """Wait until the background producer has `n` more sends acknowledged."""
    before = sum(len(v) for v in producer.acked.values())
    wait_until(lambda: sum(len(v) for v in producer.acked.values()) >= before + n, 60, f"{n} acknowledged sends {when}")


def test_messages_written_before_during_and_after_remaps_are_read_exactly_once(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 4)
    before = produce(cluster.namesrv, topic, 300)
    q = (
        source(spark, cluster.namesrv, topic, startingOffsets="earliest", maxMessagesPerTrigger="200")
        .writeStream.format("memory")
        .queryName("through_remaps")
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    with BackgroundProducer(cluster.namesrv, topic, "during") as during, Admin(cluster.namesrv) as admin:
        for targets in (["broker-1", "broker-2"], ["broker-0"], ["broker-0", "broker-1", "broker-2"]):
            _more_acked(during, 30, "before a remap")
            admin.remapping_static_topic(topic, brokers=targets)
        _more_acked(during, 30, "after the last remap")
    after = produce(cluster.namesrv, topic, 200, start=5000)
    expected = merge(merge(before, during.acked), after)
    total = sum(len(v) for v in expected.values())
    wait_until(lambda: spark.table("through_remaps").count() >= total, 120, "every message")
    q.processAllAvailable()
    q.stop()
    rows = spark.table("through_remaps").collect()
    assert len(rows) == total, "exactly once"
    assert by_queue(rows) == expected, "in order within each logic queue"
    assert max(r["queueOffset"] for r in rows) >= 10_000, "remapped queues continue past the jump"


def test_broker_killed_and_restarted_during_the_stream_loses_and_duplicates_nothing(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 3)
    q = (
        source(spark, cluster.namesrv, topic, startingOffsets="earliest")
        .writeStream.format("memory")
        .queryName("broker_crash")
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    with BackgroundProducer(cluster.namesrv, topic, "c") as producer:
        _more_acked(producer, 50, "before the kill")
        cluster.kill_broker("broker-1")
        time.sleep(1.0)  # not a wait: the broker stays down this long while the producer keeps sending
        cluster.start_broker("broker-1")
        _more_acked(producer, 50, "after the restart")
    acked_total = sum(len(v) for v in producer.acked.values())
    wait_until(lambda: spark.table("broker_crash").count() >= acked_total, 120, "every acknowledged message")
    q.processAllAvailable()
    q.stop()
    rows = spark.table("broker_crash").collect()
    bodies = [bytes(r["value"]) for r in rows]
    assert len(bodies) == len(set(bodies)), "no duplicates"
    assert set(bodies) <= producer.attempted
    got = by_queue(rows)
    for queue, acked in producer.acked.items():
        positions = [got[queue].index(b) for b in acked]
        assert positions == sorted(positions), "acknowledged messages in send order"


def test_query_stopped_and_restarted_from_its_checkpoint_reads_exactly_once(spark, cluster, tmp_path: Path) -> None:
    topic = new_topic(cluster.namesrv, 3)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def start():  # type: ignore[no-untyped-def]
        df = source(spark, cluster.namesrv, topic, startingOffsets="earliest", maxMessagesPerTrigger="150")
        return (
            df.select("queueId", "queueOffset", "value")
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    first = produce(cluster.namesrv, topic, 600)
    q = start()
    wait_until(lambda: len([p for p in q.recentProgress if p["numInputRows"]]) >= 2, 60, "two batches")
    q.stop()
    second = produce(cluster.namesrv, topic, 400, start=10_000)
    q = start()
    q.processAllAvailable()
    q.stop()
    rows = spark.read.parquet(out).collect()
    assert len(rows) == 1000
    assert by_queue(rows) == merge(first, second)


def test_driver_killed_and_restarted_from_its_checkpoint_reads_exactly_once(spark, cluster, tmp_path: Path) -> None:
    topic = new_topic(cluster.namesrv, 3)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    sent = produce(cluster.namesrv, topic, 3000)
    args = [sys.executable, str(SCRIPTS / "stream_to_parquet.py"), cluster.namesrv, topic, out, checkpoint]
    log = (tmp_path / "driver.log").open("wb")
    driver = subprocess.Popen([*args, "run"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: committed_batches(Path(checkpoint)) >= 3, 180, "three committed batches")
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    finish = subprocess.run([*args, "finish"], capture_output=True, text=True, timeout=300)
    assert finish.returncode == 0, finish.stderr[-3000:]
    rows = spark.read.parquet(out).collect()
    assert len(rows) == 3000, "exactly once across the kill"
    assert by_queue(rows) == sent


def test_retention_of_unread_messages_fails_the_query_naming_queue_and_offsets(spark, tmp_path: Path) -> None:
    store = {
        "segment_bytes": 256 * 1024,
        "max_batch_bytes": 128 * 1024,
        "retention_bytes": 512 * 1024,
        "retention_check_interval_ms": 100,
    }
    with LocalCluster(brokers=1, data_dir=tmp_path / "c", store=store) as c:
        topic = new_topic(c.namesrv, 1)
        with Producer(c.namesrv) as producer:
            producer.send_batch(topic, [b"x" * 1000] * 100, queue=0)
            df = source(spark, c.namesrv, topic, startingOffsets="earliest", maxMessagesPerTrigger="10")
            q = df.writeStream.format("noop").trigger(processingTime="1 second").start()
            wait_until(lambda: len([p for p in q.recentProgress if p["numInputRows"]]) >= 1, 60, "a first batch")
            for _ in range(20):
                producer.send_batch(topic, [b"y" * 1000] * 100, queue=0)
        with pytest.raises(PySparkException, match=r"logic queue 0: messages at logic offsets \[\d+, \d+\).* removed"):
            q.awaitTermination(60)
        lenient = (
            spark.read.format("staticmq")
            .option("namesrv", c.namesrv)
            .option("topic", topic)
            .option("startingOffsets", f'{{"{topic}": {{"0": 0}}}}')
            .option("failOnDataLoss", "false")
            .load()
        )
        with Admin(c.namesrv) as admin:
            low = admin.static_topic_status(topic)[1]["broker-0"].physical[0].min_offset
        assert lenient.count() == 2100 - low


def test_a_changed_number_of_logic_queues_fails_the_query_clearly(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 2)
    produce(cluster.namesrv, topic, 50)
    q = (
        source(spark, cluster.namesrv, topic, startingOffsets="earliest")
        .writeStream.format("noop")
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    wait_until(lambda: any(p["numInputRows"] for p in q.recentProgress), 60, "a first batch", q)
    with Admin(cluster.namesrv) as admin:
        admin.update_static_topic(topic, 3, cluster="DefaultCluster")
    produce(cluster.namesrv, topic, 50, start=100)
    with pytest.raises(PySparkException, match="number of logic queues changed"):
        q.awaitTermination(60)
