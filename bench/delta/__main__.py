"""staticmq -> Delta bronze vs Kafka -> Delta bronze vs Spark's file source -> Delta, on the same
rows, in one run.

    python -m bench.delta [--messages 400000] [--batches 4] [--repeat 3] [--json]

Every side writes the bronze columns (topic, queueId, queueOffset, key, tags, value, properties,
bornTimestamp, storeTimestamp) into a fresh Delta table. The staticmq side reads a static topic
from a local cluster (one broker); the Kafka side reads a topic of as many partitions holding the
same keys and values from one local Kafka node with Spark's Kafka connector (partition ->
queueId, offset -> queueOffset, the record timestamp -> both timestamps, no tags or properties):
what a user would pick instead; the files side reads parquet files that hold exactly the
staticmq rows (written once from the topic before timing) with Spark's own file source: the
ceiling of any source. The sides run interleaved (staticmq, kafka, files, staticmq, ...). Two
measures, each side's median of `--repeat` runs, with the targets staticmq >= 1.0x Kafka and
>= 0.8x the files' rows/s:

- **one query per run**: a Trigger.AvailableNow query that reads everything in one micro-batch,
  timed from start() to the end of awaitTermination() (query start-up and Delta commit included);
- **running query**: one query per run reading the same rows in `--batches` micro-batches
  (staticmq maxMessagesPerTrigger, files maxFilesPerTrigger); rows / summed triggerExecution of
  micro-batches 2.. (the first one pays the query's start-up and code generation).

The CPU seconds each group of processes spent per one-query run (JVM task threads, JIT, the
processes the JVM started, pyspark's Python workers, the staticmq brokers) are printed too
(Linux /proc; see bench/common/cpu.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench.common.clients import kafka_produce, kafka_topic, random_bodies, staticmq_topic
from bench.common.cluster import staticmq_cluster
from bench.common.cpu import STREAMING_SOURCE_PROCESS, cpu_sample, cpu_spent, wait_reaped
from bench.common.kafka_server import KafkaServer
from bench.common.report import emit, interleaved, log
from bench.common.spark import spark_session
from bench.common.spark_kafka import spark_kafka_jars
from staticmq_spark.client import Producer
from staticmq_spark.lakehouse import BRONZE_COLUMNS, bronze_stream
from staticmq_spark.session.configure import delta_conf

TOPIC = "bench-delta"
BODY_BYTES = 100
PRODUCE_BATCH = 1000
TARGETS = {"kafka": 1.0, "files": 0.8}  # staticmq's rows/s over each reference's
SIDES = ("staticmq", "kafka", "files")
# Delta rebuilds a table's state after each commit with this many tasks (default 50): on a 2-core
# local session that alone took ~2.5 s of every micro-batch after the first, on both sides alike.
DELTA_LOCAL = {"spark.databricks.delta.snapshotPartitions": "2"}


def produce(namesrv: str, bootstrap: str, messages: int, queues: int) -> None:
    """The same keys and values into the static topic and the Kafka topic (`queues` partitions)."""
    bodies = random_bodies(messages, BODY_BYTES)
    keys = [f"k{i % 997}" for i in range(messages)]
    kafka_topic(bootstrap, TOPIC, queues)
    chunks = range(0, messages, PRODUCE_BATCH)
    kafka_produce(bootstrap, TOPIC, [(keys[i : i + PRODUCE_BATCH], bodies[i : i + PRODUCE_BATCH]) for i in chunks])
    staticmq_topic(namesrv, TOPIC, queues)
    with Producer(namesrv, active_detection=False) as producer:
        for n, i in enumerate(chunks):
            producer.send_batch(
                TOPIC, bodies[i : i + PRODUCE_BATCH], keys=keys[i : i + PRODUCE_BATCH], queue=n % queues
            )


class Bench:
    """The two sides' streaming queries over one cluster, one Spark session and one temp dir."""

    def __init__(
        self, spark: Any, namesrv: str, bootstrap: str, tmp: str, messages: int, queues: int, batches: int
    ) -> None:
        self.spark, self.namesrv, self.bootstrap, self.tmp, self.messages = spark, namesrv, bootstrap, tmp, messages
        self.queues, self.batches, self.runs = queues, batches, 0
        rows = spark.read.format("staticmq").option("namesrv", namesrv).option("topic", TOPIC).load()
        rows = rows.select(*BRONZE_COLUMNS)
        rows.repartition(queues).write.parquet(f"{tmp}/files")  # one micro-batch: one file per queue
        rows.repartition(queues * batches).write.parquet(f"{tmp}/files-split")
        self.schema = spark.read.parquet(f"{tmp}/files").schema

    def writer(self, side: str, split: bool) -> tuple[Any, str]:
        self.runs += 1
        out = f"{self.tmp}/run{self.runs}-{side}"
        if side == "staticmq":
            options = {"startingOffsets": "earliest"}
            if split:
                options["maxMessagesPerTrigger"] = str(self.messages // self.batches)
            df = bronze_stream(self.spark, self.namesrv, TOPIC, **options)
        elif side == "kafka":
            df = self.kafka_bronze(split)
        else:
            reader = self.spark.readStream.schema(self.schema)
            if split:
                reader = reader.option("maxFilesPerTrigger", self.queues)
            df = reader.parquet(f"{self.tmp}/files-split" if split else f"{self.tmp}/files")
        writer = df.writeStream.format("delta").option("checkpointLocation", f"{out}-ck").trigger(availableNow=True)
        return writer, out

    def kafka_bronze(self, split: bool) -> Any:
        """Spark's Kafka source, its columns as the bronze table's."""
        from pyspark.sql import functions as F

        reader = self.spark.readStream.format("kafka").option("kafka.bootstrap.servers", self.bootstrap)
        reader = reader.option("subscribe", TOPIC).option("startingOffsets", "earliest")
        if split:
            reader = reader.option("maxOffsetsPerTrigger", str(self.messages // self.batches))
        return reader.load().select(
            "topic",
            F.col("partition").alias("queueId"),
            F.col("offset").alias("queueOffset"),
            F.col("key").cast("string").alias("key"),
            F.lit(None).cast("string").alias("tags"),
            "value",
            F.lit(None).cast("map<string,string>").alias("properties"),
            F.col("timestamp").alias("bornTimestamp"),
            F.col("timestamp").alias("storeTimestamp"),
        )

    def landed(self, query: Any, table: str) -> None:
        if query.exception() is not None:
            raise RuntimeError(f"query failed: {query.exception()}")
        rows = self.spark.read.format("delta").load(table).count()
        if rows != self.messages:
            raise RuntimeError(f"{table} holds {rows:,} rows, expected {self.messages:,}")

    def one_query(self, side: str) -> dict[str, Any]:
        writer, out = self.writer(side, split=False)
        before = cpu_sample()
        t0 = time.perf_counter()
        query = writer.start(out)
        query.awaitTermination()
        elapsed = time.perf_counter() - t0
        wait_reaped(STREAMING_SOURCE_PROCESS)
        cpu = cpu_spent(before, cpu_sample())
        self.landed(query, out)
        return {"seconds": elapsed, "rows_per_s": self.messages / elapsed, "cpu_s": cpu}

    def running_query(self, side: str) -> dict[str, Any]:
        writer, out = self.writer(side, split=True)
        query = writer.start(out)
        query.awaitTermination()
        self.landed(query, out)
        batches = [p for p in query.recentProgress if p["numInputRows"]]
        if len(batches) < 2:
            raise RuntimeError(f"{side}: {len(batches)} micro-batch(es), expected {self.batches}")
        steady = batches[1:]
        rows = sum(p["numInputRows"] for p in steady)
        seconds = sum(p["durationMs"]["triggerExecution"] for p in steady) / 1000
        return {"batches": len(batches), "rows": rows, "seconds": seconds, "rows_per_s": rows / seconds}


def timed_runs(label: str, repeat: int, run: Callable[[str], dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:

    def show(tag: str, got: dict[str, dict[str, Any]]) -> None:
        rates = ", ".join(f"{side} {got[side]['rows_per_s']:>10,.0f}" for side in SIDES)
        log(f"  {label:<14} {tag:<8} rows/s: {rates}")

    # one warm-up round (every side), then `repeat` rounds, the sides interleaved
    return interleaved(SIDES, 1, repeat, lambda side, n: run(side), after_round=show)


def median_rate(runs: list[dict[str, Any]]) -> float:
    return float(statistics.median(r["rows_per_s"] for r in runs))


def median_cpu(runs: list[dict[str, Any]]) -> dict[str, float]:
    groups = sorted({g for r in runs for g in r["cpu_s"]})
    return {g: round(statistics.median(r["cpu_s"].get(g, 0.0) for r in runs), 2) for g in groups}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=400_000, help="messages in the topic")
    parser.add_argument("--queues", type=int, default=8, help="logic queues (and reference files per batch)")
    parser.add_argument("--batches", type=int, default=4, help="micro-batches of the running-query measure")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side and measure")
    parser.add_argument("--json", action="store_true", help="print the results as JSON (the table goes to stderr)")
    args = parser.parse_args(argv)
    unit = PRODUCE_BATCH * args.queues
    messages = max(unit, args.messages // unit * unit)
    with tempfile.TemporaryDirectory(prefix="bench-delta-") as tmp:
        cluster = staticmq_cluster(f"{tmp}/cluster", brokers=1, flush="async")
        with cluster, KafkaServer(f"{tmp}/kafka", flush_messages=None) as kafka:  # both flush asynchronously
            produce(cluster.namesrv, kafka.bootstrap, messages, args.queues)
            conf = delta_conf()
            conf["spark.jars"] += "," + ",".join(str(jar) for jar in spark_kafka_jars())
            spark = spark_session("staticmq-bench-delta", {**conf, **DELTA_LOCAL})
            try:
                bench = Bench(spark, cluster.namesrv, kafka.bootstrap, tmp, messages, args.queues, args.batches)
                log(f"{messages:,} messages of {BODY_BYTES} B in {args.queues} logic queues / partitions / files")
                one = timed_runs("one query", args.repeat, bench.one_query)
                running = timed_runs("running query", args.repeat, bench.running_query)
            finally:
                spark.stop()
    rates = {
        "one query per run": {side: median_rate(one[side]) for side in SIDES},
        f"running query, batches 2..{args.batches}": {side: median_rate(running[side]) for side in SIDES},
    }
    cpu = {side: median_cpu(one[side]) for side in SIDES}
    head = f"measure (median of {args.repeat})"
    table = [f"{head:<34} {'staticmq':>10} {'kafka':>10} {'files':>10}  vs kafka (target)  vs files (target)"]
    for measure, r in rates.items():
        verdicts = []
        for ref, target in TARGETS.items():
            ratio = r["staticmq"] / r[ref]
            verdicts.append(f"{ratio:>6.2f}x ({target}x {'PASS' if ratio >= target else 'FAIL'})")
        row = f"{measure:<34} {r['staticmq']:>10,.0f} {r['kafka']:>10,.0f} {r['files']:>10,.0f}"
        table.append(f"{row}  {verdicts[0]:<17}  {verdicts[1]}")
    table.append(f"\n{'CPU s per one-query run (median)':<34} {'staticmq':>10} {'kafka':>10} {'files':>10}")
    for group in sorted(set().union(*(cpu[side] for side in SIDES))):
        table.append(f"  {group:<32} " + " ".join(f"{cpu[side].get(group, 0.0):>10.2f}" for side in SIDES))
    emit(table, args.json)
    if args.json:
        summary = {
            measure: {
                **{s: round(v) for s, v in r.items()},
                **{f"ratio_vs_{ref}": round(r["staticmq"] / r[ref], 3) for ref in TARGETS},
            }
            for measure, r in rates.items()
        }
        print(json.dumps({"messages": messages, "targets": TARGETS, "rates": summary, "cpu_s": cpu, "one": one}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
