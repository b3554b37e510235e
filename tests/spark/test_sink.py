"""The staticmq sink: fixed sharding by key hash, exactly once under restarts, killed drivers
and failed tasks, broker loss while writing, and clear errors for bad input.

The module's cluster commits every transaction write-once (store.sink_link_min_bytes = 0: the
staging files are adopted by the commit log and linked); the test with its own default cluster
commits its small transaction by copying."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pyspark.errors import PySparkException

from staticmq_spark import activate_in_thread
from staticmq_spark.client import Admin
from staticmq_spark.hashing import queue_for_key
from staticmq_spark.local_clusters import LocalCluster
from tests.support import waiting
from tests.support.spark import committed_batches, new_topic, produce, source, uncommitted_batches, wait_until

pytestmark = pytest.mark.spark
SCRIPTS = Path(__file__).parent / "scripts"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    path: Path = tmp_path_factory.mktemp("sink-cluster")
    with LocalCluster(
        brokers=3,
        data_dir=path / "cluster",
        heartbeat_ms=300,
        broker_timeout_ms=3000,
        store={"sink_link_min_bytes": 0},
    ) as c:
        yield c


def read_topic(spark, namesrv: str, topic: str) -> list:  # type: ignore[no-untyped-def,type-arg]
    return spark.read.format("staticmq").option("namesrv", namesrv).option("topic", topic).load().collect()


def assert_hash_sharded(rows: list, total: int) -> None:  # type: ignore[type-arg]
    wrong = [
        (r["key"], r["queueId"])
        for r in rows
        if r["key"] is not None and queue_for_key(r["key"], total) != r["queueId"]
    ]
    assert not wrong, f"keys outside their hash queue: {wrong[:5]}"


def write(df, namesrv: str, topic: str, **options: str) -> None:  # type: ignore[no-untyped-def]
    w = df.write.format("staticmq").option("namesrv", namesrv).option("topic", topic).mode("append")
    for k, v in options.items():
        w = w.option(k, v)
    w.save()


def test_keyed_rows_land_in_their_hash_queue_and_queue_id_overrides_the_key(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 5)
    df = spark.range(500).selectExpr("CONCAT('user-', CAST(id % 60 AS STRING)) AS key", "CAST(id AS STRING) AS value")
    write(df, cluster.namesrv, topic)
    pinned = spark.range(10).selectExpr("'pinned' AS key", "CAST(id AS STRING) AS value", "3 AS queueId")
    write(pinned, cluster.namesrv, topic)
    rows = read_topic(spark, cluster.namesrv, topic)
    assert len(rows) == 510
    assert_hash_sharded([r for r in rows if r["key"] != "pinned"], 5)
    assert {r["queueId"] for r in rows if r["key"] == "pinned"} == {3}
    per_key = {}
    for r in rows:
        per_key.setdefault(r["key"], set()).add(r["queueId"])
    assert all(len(qs) == 1 for qs in per_key.values()), "each key in exactly one logic queue"


def test_keyless_rows_tags_and_properties_are_written(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 3)
    df = spark.range(300).selectExpr("CAST(id AS STRING) AS value", "'T' AS tags", "map('src', 'spark') AS properties")
    write(df, cluster.namesrv, topic)
    rows = read_topic(spark, cluster.namesrv, topic)
    assert sorted(bytes(r["value"]).decode() for r in rows) == sorted(str(i) for i in range(300))
    assert all(r["tags"] == "T" and r["properties"] == {"src": "spark"} and r["key"] is None for r in rows)


def test_each_key_stays_in_its_hash_queue_across_remaps_while_the_query_writes(spark, cluster, tmp_path: Path) -> None:
    src, dst = new_topic(cluster.namesrv, 4), new_topic(cluster.namesrv, 6)
    sent = produce(cluster.namesrv, src, 3000, keys=97)
    df = source(spark, cluster.namesrv, src, startingOffsets="earliest", maxMessagesPerTrigger="200")
    q = (
        df.selectExpr("key", "value")
        .writeStream.format("staticmq")
        .option("namesrv", cluster.namesrv)
        .option("topic", dst)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    with Admin(cluster.namesrv) as admin:
        for targets in (["broker-2"], ["broker-0", "broker-1"], ["broker-0", "broker-1", "broker-2"]):
            wait_until(lambda: len(q.recentProgress) >= 2, 60, "batches", q)
            admin.remapping_static_topic(dst, brokers=targets)
            time.sleep(0.8)  # not a wait: the query keeps writing while the remap settles
    q.processAllAvailable()
    q.stop()
    rows = read_topic(spark, cluster.namesrv, dst)
    assert Counter(bytes(r["value"]) for r in rows) == Counter(b for bodies in sent.values() for b in bodies)
    assert_hash_sharded(rows, 6)


def staged_uncommitted(cluster: LocalCluster, ck: Path) -> list[int]:
    """Batches of the query checkpointed at `ck` that are under way and have rows staged on a
    broker (the sink stages under the query id; a commit removes the batch's staging)."""
    query_id = json.loads((ck / "metadata").read_text())["id"]
    return [b for b in uncommitted_batches(ck) if any(cluster.data_dir.glob(f"*/sink/staging/{query_id}/{b}/*"))]


def _pipe(namesrv: str, src: str, dst: str, ck: Path, mode: str, *extra: str) -> list[str]:
    return [sys.executable, str(SCRIPTS / "pipe_topics.py"), namesrv, src, dst, str(ck), mode, *extra]


def test_exactly_once_when_the_writing_driver_is_killed_and_restarted(spark, cluster, tmp_path: Path) -> None:
    src, dst = new_topic(cluster.namesrv, 3), new_topic(cluster.namesrv, 4)
    sent = produce(cluster.namesrv, src, 300)
    ck = tmp_path / "ck"
    log = (tmp_path / "driver.log").open("wb")
    driver = subprocess.Popen(
        _pipe(cluster.namesrv, src, dst, ck, "run"), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        # The rest once the query runs: without admission control (pyspark < 4.2) a run's first
        # micro-batch reads everything there, the next ones 300 messages each.
        wait_until(lambda: committed_batches(ck) >= 1, 180, "the first committed batch")
        for queue, bodies in produce(cluster.namesrv, src, 3700, start=300).items():
            sent.setdefault(queue, []).extend(bodies)
        wait_until(lambda: committed_batches(ck) >= 3, 180, "three committed batches")
        # the kill lands while a batch is written: brokers hold its staged rows, it is not committed
        waiting.wait_until(
            lambda: staged_uncommitted(cluster, ck),
            60,
            interval_s=0.01,  # a batch's rows stay staged for a fraction of a second
            message="a batch with staged rows after the third commit",
        )
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    done = subprocess.run(_pipe(cluster.namesrv, src, dst, ck, "finish"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_topic(spark, cluster.namesrv, dst)
    assert Counter(bytes(r["value"]) for r in rows) == Counter(b for bodies in sent.values() for b in bodies)
    assert_hash_sharded(rows, 4)


def test_exactly_once_under_injected_task_failures(spark, cluster, tmp_path: Path) -> None:
    src, dst = new_topic(cluster.namesrv, 3), new_topic(cluster.namesrv, 3)
    sent = produce(cluster.namesrv, src, 1500)
    done = subprocess.run(
        _pipe(cluster.namesrv, src, dst, tmp_path / "ck", "finish", "--fail-first-attempts"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_topic(spark, cluster.namesrv, dst)
    assert Counter(bytes(r["value"]) for r in rows) == Counter(b for bodies in sent.values() for b in bodies)


def test_broker_killed_while_writing_loses_nothing_and_strict_keys_wait(spark, cluster, tmp_path: Path) -> None:
    src, dst = new_topic(cluster.namesrv, 3), new_topic(cluster.namesrv, 3)
    sent = produce(cluster.namesrv, src, 2000)
    df = source(spark, cluster.namesrv, src, startingOffsets="earliest", maxMessagesPerTrigger="100")
    q = (
        df.selectExpr("key", "value")
        .writeStream.format("staticmq")
        .option("namesrv", cluster.namesrv)
        .option("topic", dst)
        .option("orderStrategy", "strict")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    wait_until(lambda: len([p for p in q.recentProgress if p["numInputRows"]]) >= 2, 60, "batches", q)
    cluster.kill_broker("broker-2")
    time.sleep(2.0)  # not a wait: the query keeps writing while broker-2 is down
    cluster.start_broker("broker-2")
    q.processAllAvailable()
    q.stop()
    rows = read_topic(spark, cluster.namesrv, dst)
    assert Counter(bytes(r["value"]) for r in rows) == Counter(b for bodies in sent.values() for b in bodies)
    assert_hash_sharded(rows, 3)


def test_large_commits_write_rows_once_by_adopting_the_staging_files(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 4)
    before = set(cluster.data_dir.glob("*/sink/txn/*/*.adopt"))
    df = spark.range(3000, numPartitions=2).selectExpr("CAST(id AS STRING) AS key", "repeat('v', 50) AS value")
    write(df, cluster.namesrv, topic)
    adopted = set(cluster.data_dir.glob("*/sink/txn/*/*.adopt")) - before
    assert adopted, "the commit copied the rows instead of adopting the staging files"
    assert not list(cluster.data_dir.glob("*/sink/staging/*/*/*")), "staging files left behind"
    rows = read_topic(spark, cluster.namesrv, topic)
    assert sorted(int(r["key"]) for r in rows) == list(range(3000))
    assert_hash_sharded(rows, 4)


def test_keyless_rows_land_round_robin_from_their_partition_and_wait_for_a_broker_that_is_down(
    spark, tmp_path: Path
) -> None:
    """docs/sink.md "Where rows land": keyless row i of Spark partition p goes to logic queue
    (p + i) mod totalQueues and never moves: with its broker down, it waits (strict order, up to
    sendTimeoutMs) and lands there once the broker is back."""
    with LocalCluster(brokers=2, data_dir=tmp_path / "c", heartbeat_ms=200, broker_timeout_ms=3000) as c:
        topic = new_topic(c.namesrv, 4)
        c.kill_broker("broker-1")
        df = spark.range(0, 400, 1, 2).selectExpr("CAST(id AS STRING) AS value")  # partition p: 200p..200p+199
        with ThreadPoolExecutor(max_workers=1) as pool:

            def write_from_this_thread() -> None:
                activate_in_thread(spark)
                write(df, c.namesrv, topic, orderStrategy="strict", sendTimeoutMs="60000")

            writing = pool.submit(write_from_this_thread)
            time.sleep(3)
            assert not writing.done(), writing.exception()  # the rows of broker-1's queues wait for it
            c.start_broker("broker-1")
            writing.result(timeout=90)
        rows = read_topic(spark, c.namesrv, topic)
    landed = {int(r["value"]): r["queueId"] for r in rows}
    assert len(rows) == 400
    assert landed == {v: (v // 200 + v % 200) % 4 for v in range(400)}


@pytest.mark.parametrize(
    ("select", "message"),
    [
        (["CAST(id AS STRING) AS key"], "needs a 'value' column"),
        (["CAST(id AS STRING) AS value", "id AS key"], "column 'key' must be string"),
        (["CAST(id AS STRING) AS value", "'x' AS vaule"], "does not know column"),
        (["CAST(id AS STRING) AS value", "map('a', 1) AS properties"], "map<string,string>"),
    ],
)
def test_bad_input_columns_fail_before_anything_is_written(spark, cluster, select: list[str], message: str) -> None:
    topic = new_topic(cluster.namesrv, 2)
    with pytest.raises(PySparkException, match=message):
        write(spark.range(3).selectExpr(*select), cluster.namesrv, topic)


def test_overwrite_is_refused(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 2)
    df = spark.range(3).selectExpr("CAST(id AS STRING) AS value")
    with pytest.raises(PySparkException, match="only appends"):
        df.write.format("staticmq").option("namesrv", cluster.namesrv).option("topic", topic).mode("overwrite").save()
