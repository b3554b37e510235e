"""Spark sink: rows/s of `format("staticmq")` writes vs Spark's parquet sink, same DataFrame (issue 5).

    python -m bench.sink [--rows 1000000] [--partitions 2] [--repeat 3] [--warmup 1] [--no-stream] [--json]

One run, one Spark session (local[2], UI off, Python worker reuse on), one machine:
- input: --rows rows `key` = 'user-<id % 100000>' (string), `value` = 100 hex characters (two
  sha2 digests of the id, string), built from `spark.range(rows, numPartitions=--partitions)`,
  cached and counted before anything is timed; written once as --partitions parquet files for the
  streaming lines. Both sinks write exactly the same rows, with the same number of partitions.
- staticmq: two `LocalCluster(brokers=2)`s, one with broker flush=sync (the default) and one
  with flush=async (staged rows and the commit decision are fsynced at prepare in both; a commit
  of >= 4 MiB per broker then links the staged rows without writing them again, a smaller one
  copies them, fsynced at commit with flush=sync); each run writes into a fresh static topic of
  8 logic queues (spread over both brokers), default sink options. The row count in the topic is
  checked after each run.
- lines: batch `df.write.format(...).save()` of the cached DataFrame (staticmq sync, staticmq
  async, parquet into a fresh directory, snappy), and streaming `readStream.parquet(input)` ->
  `writeStream.format(...)` with `trigger(availableNow=True)` and a fresh checkpoint (staticmq
  sync vs parquet; wall clock from `start()` to the end of `awaitTermination()`).
Spark is warmed up first (--warmup untimed runs of every line), then the lines run in turn
--repeat times. Reported: median rows/s (rows / wall clock) and best; ratio = staticmq median /
parquet median of the same kind. Target: batch staticmq (flush=sync) >= 1.0x parquet.

Exit status is 0 whatever the results. --json prints JSON on stdout (the table goes to stderr).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from bench.common.clients import staticmq_topic
from bench.common.cluster import staticmq_cluster
from bench.common.report import emit, interleaved, log
from bench.common.spark import spark_session
from staticmq_spark.client import PullConsumer
from staticmq_spark.local_clusters import LocalCluster

QUEUES = 8
BROKERS = 2
TARGET = 1.0


def input_frame(spark: SparkSession, rows: int, partitions: int) -> DataFrame:
    df = (
        spark.range(rows, numPartitions=partitions)
        .selectExpr(
            "CONCAT('user-', CAST(id % 100000 AS STRING)) AS key",
            "CONCAT(sha2(CAST(id AS STRING), 256), substr(sha2(CAST(id * 7 AS STRING), 256), 1, 36)) AS value",
        )
        .cache()
    )
    if df.count() != rows:
        raise RuntimeError("the cached input lost rows")
    return df


class Topics:
    """A fresh static topic per run; rows in a topic counted from its logic offsets."""

    def __init__(self, cluster: LocalCluster, label: str) -> None:
        self.namesrv = cluster.namesrv
        self.label = label
        self.n = 0

    def fresh(self) -> str:
        self.n += 1
        topic = f"bench-sink-{self.label}-{self.n}"
        staticmq_topic(self.namesrv, topic, QUEUES)  # and wait for the name server
        return topic

    def rows(self, topic: str) -> int:
        with PullConsumer(self.namesrv) as consumer:
            return sum(q.max_offset - q.min_offset for q in consumer.offsets(topic))


def timed(run: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def batch_staticmq(df: DataFrame, topics: Topics, rows: int) -> float:
    topic = topics.fresh()
    w = df.write.format("staticmq").mode("append").option("namesrv", topics.namesrv).option("topic", topic)
    elapsed = timed(w.save)
    if topics.rows(topic) != rows:
        raise RuntimeError(f"{topic} holds {topics.rows(topic):,} rows, expected {rows:,}")
    return elapsed


def batch_parquet(df: DataFrame, out: str) -> float:
    shutil.rmtree(out, ignore_errors=True)
    return timed(lambda: df.write.mode("overwrite").parquet(out))


def stream(spark: SparkSession, src: str, fmt: str, options: dict[str, str], checkpoint: str) -> float:
    schema = spark.read.parquet(src).schema
    writer = spark.readStream.schema(schema).parquet(src).writeStream.format(fmt)
    for key, value in {**options, "checkpointLocation": checkpoint}.items():
        writer = writer.option(key, value)

    def run() -> None:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"{fmt} streaming query failed: {query.exception()}")

    return timed(run)


def stream_staticmq(spark: SparkSession, src: str, topics: Topics, rows: int, ck: str) -> float:
    topic = topics.fresh()
    elapsed = stream(spark, src, "staticmq", {"namesrv": topics.namesrv, "topic": topic}, ck)
    if topics.rows(topic) != rows:
        raise RuntimeError(f"{topic} holds {topics.rows(topic):,} rows, expected {rows:,}")
    return elapsed


def stream_parquet(spark: SparkSession, src: str, out: str, ck: str) -> float:
    shutil.rmtree(out, ignore_errors=True)
    return stream(spark, src, "parquet", {"path": out}, ck)


def summary(rows: int, seconds: list[float]) -> dict[str, Any]:
    return {
        "rows_per_s_median": round(rows / statistics.median(seconds)),
        "rows_per_s_best": round(rows / min(seconds)),
        "seconds": [round(s, 3) for s in seconds],
    }


LINES = {  # line -> (label, reference line or None)
    "batch_sync": ("batch: staticmq, flush=sync", "batch_parquet"),
    "batch_async": ("batch: staticmq, flush=async", "batch_parquet"),
    "batch_parquet": ("batch: parquet", None),
    "stream_sync": ("stream: staticmq, flush=sync", "stream_parquet"),
    "stream_parquet": ("stream: parquet", None),
}


def measure(args: argparse.Namespace, lines: list[str], tmp: str, sync: Topics, asyn: Topics) -> dict[str, list[float]]:
    """Warm-up runs, then --repeat timed runs of each line in turn; seconds per timed run."""
    spark = spark_session("staticmq-bench-sink", {"spark.driver.memory": "4g"})
    try:
        df = input_frame(spark, args.rows, args.partitions)
        src = f"{tmp}/input"
        df.write.parquet(src)
        runs: dict[str, Callable[[int], float]] = {
            "batch_parquet": lambda n: batch_parquet(df, f"{tmp}/out/batch"),
            "batch_sync": lambda n: batch_staticmq(df, sync, args.rows),
            "batch_async": lambda n: batch_staticmq(df, asyn, args.rows),
            "stream_parquet": lambda n: stream_parquet(spark, src, f"{tmp}/out/stream", f"{tmp}/ck/p{n}"),
            "stream_sync": lambda n: stream_staticmq(spark, src, sync, args.rows, f"{tmp}/ck/s{n}"),
        }

        def show(line: str, label: str, seconds: float) -> None:
            log(f"  {LINES[line][0]:<30} {label:<8} {args.rows / seconds:>11,.0f} rows/s ({seconds:.2f} s)")

        times = interleaved(lines, args.warmup, args.repeat, lambda line, n: runs[line](n), show)
    finally:
        spark.stop()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows written per run")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of the input DataFrame (write tasks)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each line")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs of each line first")
    parser.add_argument("--no-stream", action="store_true", help="skip the streaming lines")
    parser.add_argument("--json", action="store_true", help="print the results as JSON (the table goes to stderr)")
    args = parser.parse_args(argv)
    args.repeat = max(1, args.repeat)
    log(f"{args.rows:,} keyed rows (100-byte values) in {args.partitions} partitions; {QUEUES} logic queues")

    lines = [line for line in LINES if not (args.no_stream and "stream" in line)]
    with (
        tempfile.TemporaryDirectory(prefix="bench-sink-") as tmp,
        staticmq_cluster(f"{tmp}/sync", brokers=BROKERS, flush="sync", interval_ms=None) as sync_cluster,
        staticmq_cluster(f"{tmp}/async", brokers=BROKERS, flush="async", interval_ms=None) as async_cluster,
    ):
        times = measure(args, lines, tmp, Topics(sync_cluster, "sync"), Topics(async_cluster, "async"))

    results = {line: summary(args.rows, seconds) for line, seconds in times.items()}
    table = [f"{'line (median of ' + str(args.repeat) + ')':<32} {'rows/s':>11} {'best':>11} {'vs parquet':>11}"]
    for line, r in results.items():
        ref = LINES[line][1]
        if ref is not None:
            r["ratio"] = round(r["rows_per_s_median"] / results[ref]["rows_per_s_median"], 3)
        ratio = f"{r['ratio']:.2f}x" if ref is not None else ""
        table.append(f"{LINES[line][0]:<32} {r['rows_per_s_median']:>11,} {r['rows_per_s_best']:>11,} {ratio:>11}")
    passed = results["batch_sync"]["ratio"] >= TARGET
    table.append(
        f"target: batch staticmq (flush=sync) >= {TARGET}x parquet: {'PASS' if passed else 'FAIL'} "
        f"({results['batch_sync']['ratio']:.2f}x)"
    )
    emit(table, args.json)
    if args.json:
        config = {k: getattr(args, k) for k in ("rows", "partitions", "repeat", "warmup")}
        config.update(queues=QUEUES, brokers=BROKERS, value_bytes=100, statistic="median")
        print(json.dumps({"config": config, **results, "target": TARGET, "passed": passed}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
