"""The Spark source and sink on a real Apache RocketMQ cluster: static topics created and remapped
by RocketMQ's own mqadmin, exactly once across remaps and restarts, committed group offsets that
mqadmin shows, keyed placement, and the sink's guarantees: exactly once (staged rows forwarded after
a recorded decision, the default; or transactional half messages) through a driver killed mid-batch
and failing task attempts, and at least once (deliveryGuarantee=at-least-once) with its dedup key."""

from __future__ import annotations

import itertools
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, spark_partition_id

from staticmq_spark.backends.registry import open_backend
from staticmq_spark.backends.rocketmq.sinks.direct_sink import ROW_ID
from staticmq_spark.backends.rocketmq.sinks.staged_sink import RocketMQStagedSink
from staticmq_spark.backends.types import WriteSettings
from staticmq_spark.client import PullConsumer
from staticmq_spark.hashing import queue_for_key
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from tests.spark.test_sink import assert_hash_sharded, read_topic, write
from tests.support.sink_tasks import write_task
from tests.support.spark import (
    by_queue,
    committed_batches,
    merge,
    produce,
    source,
    uncommitted_batches,
    wait_until,
)

pytestmark = pytest.mark.spark
SCRIPTS = Path(__file__).parent / "scripts"
_ids = itertools.count()


def rmq_topic(cluster: LocalRocketMQ, queues: int, brokers: list[str] | None = None) -> str:
    topic = f"rmq-spark-{next(_ids)}-{int(time.time() * 1000) % 100000}"
    cluster.update_static_topic(topic, queues, brokers)
    return topic


def _stream_once(spark: SparkSession, namesrv: str, topic: str, out: str, checkpoint: str, group: str) -> None:
    df = source(spark, namesrv, topic, startingOffsets="earliest", maxMessagesPerTrigger="120", group=group)
    q = (
        df.select("queueId", "queueOffset", "value", "brokerName")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(300)
    assert q.exception() is None, q.exception()


def test_stream_reads_exactly_once_across_mqadmin_remaps_and_restarts(
    spark: SparkSession, rocketmq_cluster: LocalRocketMQ, tmp_path: Path
) -> None:
    c = rocketmq_cluster
    topic = rmq_topic(c, 4, ["broker-a"])
    out, checkpoint, group = str(tmp_path / "out"), str(tmp_path / "ck"), f"spark-group-{next(_ids)}"
    first = produce(c.address, topic, 400)
    _stream_once(spark, c.address, topic, out, checkpoint, group)
    c.remap_static_topic(topic, ["broker-b"])
    second = produce(c.address, topic, 300, start=10_000)
    _stream_once(spark, c.address, topic, out, checkpoint, group)
    c.remap_static_topic(topic, ["broker-a", "broker-b"])
    third = produce(c.address, topic, 300, start=20_000)
    _stream_once(spark, c.address, topic, out, checkpoint, group)

    rows = spark.read.parquet(out).collect()
    assert len(rows) == 1000, "every message exactly once"
    assert by_queue(rows) == merge(merge(first, second), third)
    offsets = Counter((r["queueId"], r["queueOffset"]) for r in rows)
    assert max(offsets.values()) == 1
    assert {r["brokerName"] for r in rows} == {"broker-a", "broker-b"}
    # the jump after each remap: the first message of the new segment has a multiple of 10000
    assert all(any(o == 10000 for (q2, o) in offsets if q2 == q) for q in range(4))
    # Spark commits a micro-batch's end to the source when the next one starts: the group's
    # offsets are those of the last-but-one batch, inside the newest segments
    with PullConsumer(c.address, group=group) as consumer:
        committed = {q: consumer.committed(topic, q) for q in range(4)}
        ends = {q: consumer.max_offset(topic, q) for q in range(4)}
    assert all(committed[q] is not None and 10000 < committed[q] <= ends[q] for q in range(4)), (committed, ends)
    # mqadmin consumerProgress lists the group per logic queue; RocketMQ's own conversion
    # (MQAdminUtils.convertPhysicalConsumeStats) shows the broker offset in logic space but the
    # consumer offset as stored, physical in its segment (here every segment starts at physical 0)
    progress = c.mqadmin("consumerProgress", "-g", group)
    rows = {
        int(f[2]): (int(f[3]), int(f[4])) for f in (line.split() for line in progress.splitlines()) if f[:1] == [topic]
    }
    assert rows == {q: (ends[q], committed[q] % 10000) for q in range(4)}, progress


def test_trigger_available_now_and_failondataloss_options_work_on_rocketmq(
    spark: SparkSession, rocketmq_cluster: LocalRocketMQ
) -> None:
    topic = rmq_topic(rocketmq_cluster, 2)
    sent = produce(rocketmq_cluster.address, topic, 200)
    df = source(spark, rocketmq_cluster.address, topic, startingOffsets="earliest", maxMessagesPerTrigger="50")
    q = df.writeStream.format("memory").queryName("rmq_available_now").trigger(availableNow=True).start()
    q.awaitTermination(300)
    batches = [p for p in q.recentProgress if p["numInputRows"]]
    assert len(batches) >= 4 and all(p["numInputRows"] <= 50 for p in batches), "admission control"
    assert by_queue(spark.table("rmq_available_now").collect()) == sent


def test_driver_read_small_micro_batches_on_rocketmq_are_one_partition_with_every_message_once(
    spark: SparkSession, rocketmq_cluster: LocalRocketMQ
) -> None:
    topic = rmq_topic(rocketmq_cluster, 2)
    sent = produce(rocketmq_cluster.address, topic, 150)
    opts = {"startingOffsets": "earliest", "maxMessagesPerTrigger": "50", "driverReadMaxMessages": "50"}
    df = source(spark, rocketmq_cluster.address, topic, **opts).withColumn("partition", spark_partition_id())
    q = df.writeStream.format("memory").queryName("rmq_driver_read").trigger(availableNow=True).start()
    q.awaitTermination(300)
    assert q.exception() is None, q.exception()
    rows = spark.table("rmq_driver_read").collect()
    assert len(rows) == 150 and by_queue(rows) == sent
    assert {r["partition"] for r in rows} == {0}, "every micro-batch read on the driver, one partition"


def test_batch_read_with_offsets_and_properties(spark: SparkSession, rocketmq_cluster: LocalRocketMQ) -> None:
    topic = rmq_topic(rocketmq_cluster, 2)
    sent = produce(rocketmq_cluster.address, topic, 100)
    df = (
        spark.read.format("staticmq")
        .option("namesrv", rocketmq_cluster.address)
        .option("topic", topic)
        .option("startingOffsets", json.dumps({topic: {"0": 10, "1": -2}}))
        .load()
    )
    rows = df.collect()
    assert len(rows) == len(sent.get(0, [])) - 10 + len(sent.get(1, []))
    assert all(r["key"].startswith("k") and r["properties"] == {} for r in rows)


def test_sink_writes_keyed_rows_to_their_murmur3_queue_with_only_the_rows_own_properties(
    spark: SparkSession, rocketmq_cluster: LocalRocketMQ
) -> None:
    """The exactly-once (staged) sink adds no property of its own: a reader sees the row's map."""
    topic = rmq_topic(rocketmq_cluster, 4)
    df = spark.range(0, 500).selectExpr(
        "concat('user-', cast(id % 37 as string)) as key",
        "concat('v', cast(id as string)) as value",
        "map('n', cast(id % 5 as string)) as properties",
    )
    write(df, rocketmq_cluster.address, topic)
    rows = read_topic(spark, rocketmq_cluster.address, topic)
    assert sorted(bytes(r["value"]).decode() for r in rows) == sorted(f"v{i}" for i in range(500))
    assert_hash_sharded(rows, 4)
    assert all(r["properties"] == {"n": str(int(bytes(r["value"])[1:]) % 5)} for r in rows)


def test_at_least_once_sink_rows_carry_a_row_id(spark: SparkSession, rocketmq_cluster: LocalRocketMQ) -> None:
    topic = rmq_topic(rocketmq_cluster, 4)
    df = spark.range(0, 300).selectExpr(
        "concat('user-', cast(id % 37 as string)) as key", "cast(id as string) as value"
    )
    write(df, rocketmq_cluster.address, topic, deliveryGuarantee="at-least-once")
    rows = read_topic(spark, rocketmq_cluster.address, topic)
    assert_hash_sharded(rows, 4)
    assert len({r["properties"][ROW_ID] for r in rows}) == 300


def _pipe_killing_the_driver(c: LocalRocketMQ, tmp_path: Path, *flags: str) -> tuple[str, dict[int, list[bytes]]]:
    """pipe_topics.py from a fresh 3-queue topic into a fresh 4-queue one: killed with kill -9
    while a micro-batch is written (planned in the offset log, not committed) after three
    committed ones, then finished with AvailableNow. (output topic, what was sent per queue)"""
    src, dst = rmq_topic(c, 3), rmq_topic(c, 4)
    sent = produce(c.address, src, 3000)
    ck = tmp_path / "ck"

    def pipe(mode: str) -> list[str]:
        return [sys.executable, str(SCRIPTS / "pipe_topics.py"), c.address, src, dst, str(ck), mode, *flags]

    log = (tmp_path / "driver.log").open("wb")
    driver = subprocess.Popen(pipe("run"), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: committed_batches(ck) >= 3, 240, "three committed batches")
        wait_until(lambda: uncommitted_batches(ck), 60, "a batch under way after the third commit")
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    done = subprocess.run(pipe("finish"), capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    return dst, sent


def test_sink_is_at_least_once_and_the_row_id_removes_duplicates_after_a_driver_kill(
    spark: SparkSession, rocketmq_cluster: LocalRocketMQ, tmp_path: Path
) -> None:
    c = rocketmq_cluster
    dst, sent = _pipe_killing_the_driver(c, tmp_path, "--at-least-once")
    df = spark.read.format("staticmq").option("namesrv", c.address).option("topic", dst).load()
    rows = df.collect()
    want = Counter(b for bodies in sent.values() for b in bodies)
    got = Counter(bytes(r["value"]) for r in rows)
    assert set(got) == set(want), "nothing lost"
    deduped = df.withColumn("rid", col("properties")[ROW_ID]).dropDuplicates(["rid"]).collect()
    assert Counter(bytes(r["value"]) for r in deduped) == want, "exactly once after dropping duplicate row ids"
    assert_hash_sharded(rows, 4)


def test_sink_is_exactly_once_on_rocketmq_through_a_driver_kill_and_failing_task_attempts(
    spark: SparkSession, rocketmq_cluster: LocalRocketMQ, tmp_path: Path
) -> None:
    c = rocketmq_cluster
    dst, sent = _pipe_killing_the_driver(c, tmp_path, "--fail-first-attempts")
    rows = read_topic(spark, c.address, dst)
    want = Counter(b for bodies in sent.values() for b in bodies)
    assert Counter(bytes(r["value"]) for r in rows) == want, "every row exactly once, no dedup needed"
    assert_hash_sharded(rows, 4)
    assert all(r["properties"] == {} for r in rows), "the staged sink adds no property to the rows"


def test_transactional_sink_is_exactly_once_on_rocketmq_through_a_driver_kill(
    spark: SparkSession, rocketmq_cluster: LocalRocketMQ, tmp_path: Path
) -> None:
    """deliveryGuarantee=exactly-once-transactional: RocketMQ's half messages instead of staging."""
    c = rocketmq_cluster
    dst, sent = _pipe_killing_the_driver(c, tmp_path, "--transactional")
    rows = read_topic(spark, c.address, dst)
    want = Counter(b for bodies in sent.values() for b in bodies)
    assert Counter(bytes(r["value"]) for r in rows) == want, "every row exactly once"
    assert_hash_sharded(rows, 4)


def _once_in_hash_queues(spark: SparkSession, namesrv: str, topic: str, want: Counter[str], queues: int) -> None:
    """Every wanted value exactly once in murmur3(key) mod totalQueues, read back with staticmq's
    source once the brokers dispatched what they stored (and once more a moment later)."""
    wait_until(lambda: len(read_topic(spark, namesrv, topic)) >= want.total(), 30, f"{want.total()} rows readable")
    time.sleep(1.0)
    rows = read_topic(spark, namesrv, topic)
    assert Counter(bytes(r["value"]).decode() for r in rows) == want, "every row id exactly once"
    assert all(queue_for_key(r["key"], queues) == r["queueId"] for r in rows), "rows in murmur3(key) mod totalQueues"


def test_sink_is_exactly_once_on_rocketmq_after_a_sigkill_of_a_task_worker_after_it_staged_a_chunk(
    spark: SparkSession, rocketmq_cluster: LocalRocketMQ, tmp_path: Path
) -> None:
    """A batch write (local[2,4], tests/spark/scripts/write_killing_a_worker.py) whose first attempt
    of partition 0 loses its UDF's Python worker to SIGKILL once the sink has staged a chunk of that
    attempt (the UDF waits for it on a fresh staging topic): Spark's retry succeeds and every row id
    is visible once - the killed attempt's staged chunks never are."""
    c = rocketmq_cluster
    topic = rmq_topic(c, 4)
    staging = f"staging-kill-{next(_ids)}-{os.getpid()}"
    marker = tmp_path / "killed"
    rows = 4000
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "write_killing_a_worker.py"), c.address, topic, staging, str(rows), str(marker)],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0 and "WRITTEN" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]
    staged = marker.read_text().split()
    assert staged[0] == "staged" and int(staged[1]) >= 1, (
        f"the worker was killed after a staged chunk: {marker.read_text()}"
    )
    _once_in_hash_queues(spark, c.address, topic, Counter(f"{i}{'.' * 1024}" for i in range(rows)), 4)


def test_sink_is_exactly_once_on_rocketmq_and_late_chunks_of_a_stopped_attempt_never_become_visible(
    spark: SparkSession, rocketmq_cluster: LocalRocketMQ, tmp_path: Path
) -> None:
    """Written at the sink layer, not through Spark: a task attempt in a process of its own
    (tests/support/stopped_attempt_child.py) stages its first batch and is stopped with SIGSTOP;
    its retry (same partition, same rows) stages everything and the driver-side commit makes it
    visible; then SIGCONT lets the stopped attempt stage the rest of its chunks. None of them ever
    becomes visible - not even when its late TaskWrite reaches a commit of the same batch - and every
    row is there exactly once."""
    c = rocketmq_cluster
    topic = rmq_topic(c, 4)
    settings = WriteSettings(namesrv=c.address, topic=topic, request_bytes=1500, send_timeout_ms=30_000)
    writer = f"q-stopped-{next(_ids)}"
    batches = [
        pa.RecordBatch.from_pydict(
            {
                "key": [f"user-{i % 23}" for i in range(lo, lo + 200)],
                "value": [f"p0-{i}".encode() for i in range(lo, lo + 200)],
            }
        )
        for lo in range(0, 1000, 200)
    ]
    path, out = tmp_path / "task.pkl", tmp_path / "late.pkl"
    path.write_bytes(pickle.dumps((settings, writer, 0, 0, batches)))
    root = Path(__file__).parents[2]
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.support.stopped_attempt_child", c.address, str(path), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "STAGED", child.stderr
        _, status = os.waitpid(child.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status) and os.WSTOPSIG(status) == signal.SIGSTOP, "the attempt is stopped"
        backend = open_backend(c.address)
        try:
            sink = backend.sink()
            assert isinstance(sink, RocketMQStagedSink)
            retry = write_task(sink, settings, writer, 0, 0, batches)
            assert sink.commit(settings, writer, 0, [retry]) == 1000
            _once_in_hash_queues(spark, c.address, topic, Counter(f"p0-{i}" for i in range(1000)), 4)
            os.kill(child.pid, signal.SIGCONT)
            _, rest = child.communicate(timeout=120)
            assert child.returncode == 0, rest[-3000:]
            late = pickle.loads(out.read_bytes())
            assert late.rows == 1000 and len(late.detail) > 1, "the attempt staged late chunks after SIGCONT"
            assert {ch.token for ch in late.detail}.isdisjoint({ch.token for ch in retry.detail})
            assert sink.commit(settings, writer, 0, [late]) == 0, "a commit naming the late chunks sends nothing"
        finally:
            backend.close()
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
            child.wait(30)
    time.sleep(2.0)
    _once_in_hash_queues(spark, c.address, topic, Counter(f"p0-{i}" for i in range(1000)), 4)
