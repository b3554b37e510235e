"""Spark source: end-to-end rows/s of a streaming query over a static topic vs an in-memory source (issue 4).

    python -m bench.source [--messages 1000000] [--queues 8] [--brokers 1] [--repeat 5] [--warmup 2] [--json]

One run, one Spark session (local[2], UI off, Python worker reuse on), one machine:
- staticmq: a `LocalCluster(brokers=--brokers)` (broker flush=async) with a static topic of
  --queues logic queues, filled beforehand with --messages 100-byte messages (batches of 1000
  bodies, `Producer.send_batch(..., queue=q)` round-robin, so every logic queue holds the same
  number). Query: `readStream.format("staticmq")` with `startingOffsets=earliest` (default options:
  properties included, 10000 messages per pull), `trigger(availableNow=True)`, `format("noop")`.
- reference: a Python DataSource defined here (`bench_memory`), a `DataSourceStreamReader` +
  `SupportsTriggerAvailableNow` with one partition per logic queue, whose read() yields prebuilt
  pyarrow RecordBatches from a memory-mapped Arrow IPC file (one file per partition, in the
  page cache: no copy, no decoding, no network). The batches are THE SAME ones the staticmq source
  yields: built before timing by planning the topic with the source's own driver code
  (`take_snapshot` + `plan_partitions`) and reading each partition with its executor code
  (`read_partition`), so schema (`arrow_schema(True)`), row counts per batch, column contents and
  partitioning are identical. Same query shape (availableNow, noop sink).
Spark is warmed up first (--warmup untimed runs of each side), then the sides run alternately
--repeat times, each into a fresh checkpoint. For each run: rows / wall-clock seconds from
`start()` to the end of `awaitTermination()`, and Spark's processedRowsPerSecond (the sum of
numInputRows over the sum of triggerExecution durations of the query's progress reports: the
micro-batches only, without query start-up). The median run is reported (best in --json too).
Target: staticmq >= 0.7x the reference (wall-clock rows/s, medians).

Exit status is 0 whatever the results. --json prints JSON on stdout (the table goes to stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from bench.common.clients import random_bodies, staticmq_topic
from bench.common.cluster import staticmq_cluster
from bench.common.report import emit, interleaved, log, run_summary
from bench.common.spark import run_query
from bench.common.spark import spark_session as bench_session
from staticmq_spark.backends import open_backend
from staticmq_spark.client import Producer
from staticmq_spark.source.executor import read_partition
from staticmq_spark.source.options import parse_source_options
from staticmq_spark.source.planner import plan_partitions, settings_of
from staticmq_spark.source.schema import arrow_schema, spark_schema
from staticmq_spark.source.snapshot import take_snapshot
from staticmq_spark.workers.site import register

BODY_BYTES = 100
PRODUCE_BATCH = 1000
TOPIC = "bench-source"
# ------------------------------------------------------------------ the in-memory reference source


class MemoryStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Everything in one micro-batch: offset 0 -> 1, one partition per prebuilt file."""

    def __init__(self, path: str, partitions: int) -> None:
        self.path = path
        self.count = partitions

    def initialOffset(self) -> dict[str, int]:
        return {"batch": 0}

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
        return {"batch": 1}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.count)] if start["batch"] < end["batch"] else []

    def read(self, partition: InputPartition) -> Any:  # type: ignore[override]
        source = pa.ipc.open_file(pa.memory_map(f"{self.path}/part-{partition.value}.arrow"))
        for i in range(source.num_record_batches):
            yield source.get_batch(i)

    def commit(self, end: dict[str, int]) -> None:
        pass


class MemorySource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench_memory"

    def schema(self) -> StructType:
        return spark_schema(True)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return MemoryStreamReader(self.options["path"], int(self.options["partitions"]))


# ----------------------------------------------------------------------------------- setting up


def produce(namesrv: str, messages: int, queues: int) -> None:
    bodies = random_bodies(messages, BODY_BYTES)
    staticmq_topic(namesrv, TOPIC, queues)  # and wait for the name server
    with Producer(namesrv, active_detection=False) as producer:
        t0 = time.perf_counter()
        for n, i in enumerate(range(0, messages, PRODUCE_BATCH)):
            producer.send_batch(TOPIC, bodies[i : i + PRODUCE_BATCH], queue=n % queues)
        log(f"  produced {messages:,} messages in {time.perf_counter() - t0:.1f} s")


def prebuild(namesrv: str, path: str) -> list[int]:
    """Plan and read the whole topic with the source's own code; one Arrow IPC file per partition."""
    opts = parse_source_options({"namesrv": namesrv, "topic": TOPIC, "startingOffsets": "earliest"}, streaming=True)
    access = open_backend(namesrv).reader()
    try:
        snap = take_snapshot(access, TOPIC)
    finally:
        access.close()
    parts = plan_partitions(snap, snap.earliest(), snap.latest(), settings_of(opts))
    schema, rows = arrow_schema(True), []
    for p in parts:
        rows.append(0)
        with pa.ipc.new_file(f"{path}/part-{p.queue}.arrow", schema) as sink:
            for batch in read_partition(p):
                if not batch.schema.equals(schema):
                    raise RuntimeError(f"unexpected schema {batch.schema}")
                sink.write_batch(batch)
                rows[-1] += batch.num_rows
    return rows


def spark_session() -> SparkSession:
    spark = bench_session("staticmq-bench-source")
    register(spark, MemorySource)  # the same worker start as staticmq's (staticmq_spark.workers.site)
    return spark


# ------------------------------------------------------------------------------------- measuring


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages in the topic (multiple of 1000)")
    parser.add_argument("--queues", type=int, default=8, help="logic queues of the static topic")
    parser.add_argument("--brokers", type=int, default=1, help="brokers of the LocalCluster")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each side")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs of each side first")
    parser.add_argument("--json", action="store_true", help="print the results as JSON (the table goes to stderr)")
    args = parser.parse_args(argv)
    args.repeat = max(1, args.repeat)
    messages = max(PRODUCE_BATCH * args.queues, args.messages // PRODUCE_BATCH * PRODUCE_BATCH)
    log(f"{messages:,} messages of {BODY_BYTES} B in {args.queues} logic queues on {args.brokers} broker(s)")

    with (
        tempfile.TemporaryDirectory(prefix="bench-source-") as tmp,
        staticmq_cluster(f"{tmp}/cluster", brokers=args.brokers, flush="async") as cluster,
    ):
        produce(cluster.namesrv, messages, args.queues)
        os.makedirs(f"{tmp}/ref")
        per_part = prebuild(cluster.namesrv, f"{tmp}/ref")
        log(f"  reference batches: {sum(per_part):,} rows in {args.queues} files")
        spark = spark_session()
        sides = {
            "staticmq": ("staticmq", {"namesrv": cluster.namesrv, "topic": TOPIC, "startingOffsets": "earliest"}),
            "reference": ("bench_memory", {"path": f"{tmp}/ref", "partitions": str(args.queues)}),
        }

        def run(side: str, n: int) -> dict[str, Any]:
            fmt, options = sides[side]
            r = run_query(spark, fmt, options, f"{tmp}/checkpoints/{side}-{n}")
            if r["rows"] != messages:
                raise RuntimeError(f"{side} read {r['rows']:,} rows, expected {messages:,}")
            return r

        def show(side: str, label: str, r: dict[str, Any]) -> None:
            log(
                f"  {side:<9} {label:<8} {r['rows_per_s']:>11,.0f} rows/s ({r['seconds']:.2f} s), "
                f"Spark {r['spark_rows_per_s']:>11,.0f} rows/s, {r['batches']} batch(es), "
                f"{r['outside_batches_s']:.2f} s outside batches"
            )

        try:
            results = interleaved(sides, args.warmup, args.repeat, run, show)
        finally:
            spark.stop()

    sm, ref = run_summary(results["staticmq"]), run_summary(results["reference"])
    ratio = sm["rows_per_s_median"] / ref["rows_per_s_median"]
    spark_ratio = sm["spark_rows_per_s_median"] / ref["spark_rows_per_s_median"]

    def row(label: str, d: dict[str, Any]) -> str:
        return (
            f"{label:<34} {d['rows_per_s_median']:>11,} {d['rows_per_s_best']:>11,} "
            f"{d['spark_rows_per_s_median']:>13,} {d['outside_batches_s_median']:>14.2f} s"
        )

    lines = [
        f"{'side (median of ' + str(args.repeat) + ')':<34} {'rows/s':>11} {'best':>11} {'Spark rows/s':>13}"
        f" {'outside batches':>16}",
        row(f"staticmq ({args.brokers} broker(s))", sm),
        row("in-memory Arrow reference", ref),
        f"ratio staticmq / reference: {ratio:.2f}x wall clock, {spark_ratio:.2f}x Spark processedRowsPerSecond; "
        f"target >= 0.7x: {'PASS' if ratio >= 0.7 else 'FAIL'}",
    ]
    emit(lines, args.json)
    if args.json:
        config = {k: getattr(args, k) for k in ("queues", "brokers", "repeat", "warmup")}
        config.update(messages=messages, body_bytes=BODY_BYTES, statistic="median")
        out = {"config": config, "staticmq": sm, "reference": ref, "ratio": round(ratio, 3)}
        out.update(spark_ratio=round(spark_ratio, 3), target=0.7, passed=ratio >= 0.7)
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
