"""Admission control, Trigger.AvailableNow, deterministic starts, lag and group progress."""

from __future__ import annotations

import json
import threading
import time

import pytest

from staticmq_spark.client import Admin, Producer
from staticmq_spark.session.features import AVAILABLE_NOW_SPLITS
from tests.support.spark import new_topic, produce, source, wait_until

pytestmark = pytest.mark.spark


def batch_sizes(q) -> list[int]:  # type: ignore[no-untyped-def]
    return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"] > 0]


def test_max_messages_per_trigger_caps_every_micro_batch(spark, cluster) -> None:
    """Under Trigger.AvailableNow where pyspark splits it by the source's limits (4.2 and later).
    Elsewhere under a processing-time trigger, from the run's second micro-batch on (the first
    reads everything there: it may be AvailableNow's only one, pyspark_features)."""
    topic = new_topic(cluster.namesrv, 4)
    df = source(spark, cluster.namesrv, topic, startingOffsets="earliest", maxMessagesPerTrigger="130")
    if AVAILABLE_NOW_SPLITS:
        produce(cluster.namesrv, topic, 1000)
        q = df.writeStream.format("noop").trigger(availableNow=True).start()
        q.awaitTermination(120)
        sizes = batch_sizes(q)
    else:
        produce(cluster.namesrv, topic, 1)
        q = df.writeStream.format("noop").trigger(processingTime="100 milliseconds").start()
        try:
            wait_until(lambda: sum(batch_sizes(q)) == 1, 60, "the run's first micro-batch")
            produce(cluster.namesrv, topic, 1000, start=1)
            wait_until(lambda: sum(batch_sizes(q)) >= 1001, 120, "1001 messages in micro-batches")
        finally:
            q.stop()
        assert batch_sizes(q)[0] == 1
        sizes = batch_sizes(q)[1:]
    assert sum(sizes) == 1000 and max(sizes) <= 130 and len(sizes) >= 8


def test_a_limited_stream_restarted_from_its_checkpoint_reads_every_message_once(spark, cluster, tmp_path) -> None:
    topic = new_topic(cluster.namesrv, 4)
    sent = produce(cluster.namesrv, topic, 600)
    out, ck = tmp_path / "out", tmp_path / "ck"

    def run(until_rows: int) -> list[int]:
        q = (
            source(spark, cluster.namesrv, topic, startingOffsets="earliest", maxMessagesPerTrigger="100")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ck))
            .trigger(processingTime="100 milliseconds")
            .start()
        )
        try:
            wait_until(lambda: sum(batch_sizes(q)) >= until_rows, 120, f"{until_rows} rows")
        finally:
            q.stop()
        return batch_sizes(q)

    first = run(200)
    produce(cluster.namesrv, topic, 300, start=1000)
    second = run(900 - sum(first))
    # Without admission control (pyspark < 4.2) a run's first micro-batch reads everything there.
    limited = first + second if AVAILABLE_NOW_SPLITS else first[1:] + second[1:]
    assert max(limited, default=0) <= 100, "every micro-batch, before and after the restart, within the limit"
    rows = spark.read.parquet(str(out)).collect()
    expected = [b for bodies in sent.values() for b in bodies] + [f"m{i}".encode() for i in range(1000, 1300)]
    assert sorted(bytes(r["value"]) for r in rows) == sorted(expected), "every message once across the restart"


def test_max_bytes_per_trigger_caps_every_micro_batch(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 2)
    with Producer(cluster.namesrv) as producer:
        producer.send_batch(topic, [b"x" * 1000] * 400, keys=[str(i) for i in range(400)])
    q = (
        source(spark, cluster.namesrv, topic, startingOffsets="earliest", maxBytesPerTrigger=str(60 * 1024))
        .writeStream.format("noop")
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    sizes = batch_sizes(q)
    assert sum(sizes) == 400 and max(sizes) <= 60 and len(sizes) >= 7


def test_min_messages_waits_for_enough_messages_or_the_max_trigger_delay(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 2)
    df = source(
        spark, cluster.namesrv, topic, startingOffsets="earliest", minMessagesPerTrigger="50", maxTriggerDelay="4s"
    )
    q = df.writeStream.format("noop").trigger(processingTime="200 milliseconds").start()
    try:
        produce(cluster.namesrv, topic, 10)
        time.sleep(1.5)  # not a wait: nothing may happen for this long (several triggers)
        assert sum(batch_sizes(q)) == 0, "10 < minMessagesPerTrigger: no batch yet"
        wait_until(lambda: sum(batch_sizes(q)) == 10, 20, "the max trigger delay to release the 10 messages")
        produce(cluster.namesrv, topic, 60, start=100)
        wait_until(lambda: sum(batch_sizes(q)) == 70, 20, "a batch once 50 messages are there")
    finally:
        q.stop()


def test_available_now_ends_after_reading_what_was_there_at_start(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 2)
    produce(cluster.namesrv, topic, 300)
    stop = threading.Event()

    def keep_producing() -> None:
        i = 10_000
        with Producer(cluster.namesrv) as producer:
            while not stop.is_set():
                producer.send(topic, f"late{i}".encode(), key=str(i))
                i += 1

    # Where pyspark splits AvailableNow by the source's limits (4.2 and later), in micro-batches of
    # at most 100; elsewhere Spark runs it as one micro-batch, which a limit would cut short.
    limit = {"maxMessagesPerTrigger": "100"} if AVAILABLE_NOW_SPLITS else {}
    worker = threading.Thread(target=keep_producing)
    worker.start()
    try:
        q = (
            source(spark, cluster.namesrv, topic, startingOffsets="earliest", **limit)
            .writeStream.format("memory")
            .queryName("available_now")
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(120), "an AvailableNow query must end by itself"
    finally:
        stop.set()
        worker.join(30)
    rows = spark.table("available_now").collect()
    assert 300 <= len(rows) < 300 + 2000
    assert AVAILABLE_NOW_SPLITS or len(batch_sizes(q)) == 1
    assert {bytes(r["value"]) for r in rows} >= {f"m{i}".encode() for i in range(300)}


def test_latest_start_is_resolved_once_so_the_first_batch_is_not_silently_empty(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 2)
    produce(cluster.namesrv, topic, 100)
    stop = threading.Event()
    sent: list[bytes] = []

    def keep_producing() -> None:
        i = 0
        with Producer(cluster.namesrv) as producer:
            while not stop.is_set():
                body = f"live{i}".encode()
                producer.send(topic, body, key=str(i))
                sent.append(body)
                i += 1
                time.sleep(0.002)

    worker = threading.Thread(target=keep_producing)
    worker.start()
    q = source(spark, cluster.namesrv, topic).writeStream.format("memory").queryName("from_latest").start()
    try:
        wait_until(lambda: len(q.recentProgress) >= 3, 60, "three micro-batches")
    finally:
        stop.set()
        worker.join(30)
    q.processAllAvailable()
    q.stop()
    got = [bytes(r["value"]) for r in spark.table("from_latest").collect()]
    assert got and not any(b.startswith(b"m") for b in got), "latest: nothing written before the start"
    first = q.recentProgress[0]
    start_offsets = json.loads(first["sources"][0]["startOffset"]) if first["sources"][0]["startOffset"] else None
    assert start_offsets is None or topic in start_offsets
    assert set(got) == set(sent[sent.index(min(got, key=sent.index)) :]), "no message after the start is skipped"


def test_lag_is_visible_through_the_latest_offset_in_query_progress(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 2)
    produce(cluster.namesrv, topic, 400)
    q = (
        source(spark, cluster.namesrv, topic, startingOffsets="earliest", maxMessagesPerTrigger="100")
        .writeStream.format("noop")
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    progress = next(p for p in q.recentProgress if p["numInputRows"] > 0)
    latest = json.loads(progress["sources"][0]["latestOffset"])
    end = json.loads(progress["sources"][0]["endOffset"])
    assert sum(latest[topic].values()) == 400
    assert sum(end[topic].values()) < sum(latest[topic].values())


def test_group_offsets_are_committed_and_visible_in_consumer_progress(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 2)
    produce(cluster.namesrv, topic, 200)
    q = (
        source(
            spark, cluster.namesrv, topic, startingOffsets="earliest", group="spark-readers", maxMessagesPerTrigger="50"
        )
        .writeStream.format("noop")
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    with Admin(cluster.namesrv) as admin:
        rows = [r for r in admin.consumer_progress("spark-readers", topic)]
    assert rows, "committed progress per logic queue"
    assert sum(r.consumer_offset or 0 for r in rows) >= 150  # commits arrive one batch late
