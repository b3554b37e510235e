"""staticmq -> Delta bronze vs Spark's file source -> Delta, on the same rows, in one run.

    python -m bench.bench_delta [--messages 400000] [--batches 4] [--repeat 3] [--json]

Both sides write the bronze columns (topic, queueId, queueOffset, key, tags, value, properties,
bornTimestamp, storeTimestamp) into a fresh Delta table. The staticmq side reads a static topic
from a local cluster; the reference reads parquet files that hold exactly the same rows (written
once from the topic before timing) with Spark's own file source. Two measures, each side's median
of `--repeat` runs, both against the target (staticmq >= 0.8x the reference's rows/s):

- **one query per run**: a Trigger.AvailableNow query that reads everything in one micro-batch,
  timed from start() to the end of awaitTermination() (query start-up and Delta commit included);
- **running query**: one query per run reading the same rows in `--batches` micro-batches
  (staticmq maxMessagesPerTrigger, files maxFilesPerTrigger); rows / summed triggerExecution of
  micro-batches 2.. (the first one pays the query's start-up and code generation).

The CPU seconds each group of processes spent per one-query run (JVM task threads, JIT, the
processes the JVM started, pyspark's Python workers, the staticmq brokers) are printed too
(Linux /proc; see bench/cpu_accounting.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench.cpu_accounting import STREAMING_SOURCE_PROCESS, cpu_sample, cpu_spent, wait_reaped
from bench.harness import log, spark_session
from staticmq_spark.client import Admin, Producer
from staticmq_spark.lakehouse import BRONZE_COLUMNS, bronze_stream
from staticmq_spark.spark_session import delta_conf
from staticmq_spark.testing import LocalCluster

TOPIC = "bench-delta"
BODY_BYTES = 100
PRODUCE_BATCH = 1000
TARGET = 0.8
SIDES = ("staticmq", "files")
# Delta rebuilds a table's state after each commit with this many tasks (default 50): on a 2-core
# local session that alone took ~2.5 s of every micro-batch after the first, on both sides alike.
DELTA_LOCAL = {"spark.databricks.delta.snapshotPartitions": "2"}


def produce(namesrv: str, messages: int, queues: int) -> None:
    blob = os.urandom(messages * BODY_BYTES)
    bodies = [blob[i : i + BODY_BYTES] for i in range(0, len(blob), BODY_BYTES)]
    with Admin(namesrv) as admin, Producer(namesrv, active_detection=False) as producer:
        admin.update_static_topic(TOPIC, queues, cluster="DefaultCluster")
        deadline = time.monotonic() + 30
        while not producer.topic_is_static(TOPIC):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no route for {TOPIC}")
            time.sleep(0.05)
        for n, i in enumerate(range(0, messages, PRODUCE_BATCH)):
            chunk = bodies[i : i + PRODUCE_BATCH]
            producer.send_batch(TOPIC, chunk, keys=[f"k{(i + j) % 997}" for j in range(len(chunk))], queue=n % queues)


class Bench:
    """The two sides' streaming queries over one cluster, one Spark session and one temp dir."""

    def __init__(self, spark: Any, namesrv: str, tmp: str, messages: int, queues: int, batches: int) -> None:
        self.spark, self.namesrv, self.tmp, self.messages = spark, namesrv, tmp, messages
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
        else:
            reader = self.spark.readStream.schema(self.schema)
            if split:
                reader = reader.option("maxFilesPerTrigger", self.queues)
            df = reader.parquet(f"{self.tmp}/files-split" if split else f"{self.tmp}/files")
        writer = df.writeStream.format("delta").option("checkpointLocation", f"{out}-ck").trigger(availableNow=True)
        return writer, out

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
    results: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    for n in range(repeat + 1):  # run 0 warms both sides up
        got = {side: run(side) for side in SIDES}
        if n:
            for side in SIDES:
                results[side].append(got[side])
        tag = f"run {n}/{repeat}" if n else "warm-up"
        rates = ", ".join(f"{side} {got[side]['rows_per_s']:>10,.0f}" for side in SIDES)
        log(f"  {label:<14} {tag:<8} rows/s: {rates}")
    return results


def median_rate(runs: list[dict[str, Any]]) -> float:
    return statistics.median(r["rows_per_s"] for r in runs)


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
        store = {"flush_interval_ms": 1000}
        with LocalCluster(brokers=1, data_dir=f"{tmp}/cluster", flush="async", store=store) as cluster:
            produce(cluster.namesrv, messages, args.queues)
            spark = spark_session("staticmq-bench-delta", {**delta_conf(), **DELTA_LOCAL})
            try:
                bench = Bench(spark, cluster.namesrv, tmp, messages, args.queues, args.batches)
                log(f"{messages:,} messages of {BODY_BYTES} B in {args.queues} logic queues / parquet files")
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
    table = [f"{head:<34} {'staticmq':>10} {'files':>10} {'ratio':>7}  target"]
    for measure, r in rates.items():
        ratio = r["staticmq"] / r["files"]
        verdict = "PASS" if ratio >= TARGET else "FAIL"
        table.append(f"{measure:<34} {r['staticmq']:>10,.0f} {r['files']:>10,.0f} {ratio:>6.2f}x  {TARGET}x {verdict}")
    table.append(f"\n{'CPU s per one-query run (median)':<34} {'staticmq':>10} {'files':>10}")
    for group in sorted(set(cpu["staticmq"]) | set(cpu["files"])):
        table.append(f"  {group:<32} {cpu['staticmq'].get(group, 0.0):>10.2f} {cpu['files'].get(group, 0.0):>10.2f}")
    print("\n".join(table), file=sys.stderr if args.json else sys.stdout)
    if args.json:
        summary = {
            measure: {**{s: round(v) for s, v in r.items()}, "ratio": round(r["staticmq"] / r["files"], 3)}
            for measure, r in rates.items()
        }
        print(json.dumps({"messages": messages, "target": TARGET, "rates": summary, "cpu_s": cpu, "one": one}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
