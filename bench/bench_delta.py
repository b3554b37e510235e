"""staticmq -> Delta bronze vs Spark's file source -> Delta, on the same rows, in one run.

    python -m bench.bench_delta [--messages 400000] [--repeat 3] [--json]

Both sides are a streaming query with Trigger.AvailableNow writing the bronze columns (topic,
queueId, queueOffset, key, tags, value, properties, bornTimestamp, storeTimestamp) into a fresh
Delta table. The staticmq side reads a static topic from a local cluster; the reference reads
parquet files that hold exactly the same rows (written once from the topic before timing), with
Spark's own file source. Target: staticmq >= 0.8x the reference's rows/s (median of the runs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from bench.harness import log, spark_session
from staticmq_spark.client import Admin, Producer
from staticmq_spark.lakehouse import BRONZE_COLUMNS, start_bronze
from staticmq_spark.spark_session import delta_conf
from staticmq_spark.testing import LocalCluster

TOPIC = "bench-delta"
BODY_BYTES = 100
PRODUCE_BATCH = 1000
TARGET = 0.8


def produce(namesrv: str, messages: int, queues: int) -> None:
    blob = os.urandom(messages * BODY_BYTES)
    bodies = [blob[i : i + BODY_BYTES] for i in range(0, len(blob), BODY_BYTES)]
    with Admin(namesrv) as admin, Producer(namesrv, active_detection=False) as producer:
        admin.update_static_topic(TOPIC, queues, cluster="DefaultCluster")
        deadline = time.monotonic() + 30
        while not producer.routes.get(TOPIC, refresh=True).is_static:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no route for {TOPIC}")
            time.sleep(0.05)
        for n, i in enumerate(range(0, messages, PRODUCE_BATCH)):
            chunk = bodies[i : i + PRODUCE_BATCH]
            producer.send_batch(TOPIC, chunk, keys=[f"k{(i + j) % 997}" for j in range(len(chunk))], queue=n % queues)


def timed(query: Any, table: str, spark: Any) -> dict[str, float]:
    t0 = time.perf_counter()
    query.awaitTermination()
    elapsed = time.perf_counter() - t0
    if query.exception() is not None:
        raise RuntimeError(f"query failed: {query.exception()}")
    rows = spark.read.format("delta").load(table).count()
    return {"rows": rows, "seconds": elapsed, "rows_per_s": rows / elapsed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=400_000, help="messages in the topic")
    parser.add_argument("--queues", type=int, default=8, help="logic queues (and reference files)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side")
    parser.add_argument("--json", action="store_true", help="print the results as JSON (the table goes to stderr)")
    args = parser.parse_args(argv)
    messages = max(PRODUCE_BATCH * args.queues, args.messages // PRODUCE_BATCH * PRODUCE_BATCH)
    results: dict[str, list[dict[str, float]]] = {"staticmq": [], "files": []}
    with tempfile.TemporaryDirectory(prefix="bench-delta-") as tmp:
        store = {"flush_interval_ms": 1000}
        with LocalCluster(brokers=1, data_dir=f"{tmp}/cluster", flush="async", store=store) as cluster:
            produce(cluster.namesrv, messages, args.queues)
            spark = spark_session("staticmq-bench-delta", delta_conf())
            try:
                reader = spark.read.format("staticmq").option("namesrv", cluster.namesrv).option("topic", TOPIC)
                rows = reader.load().select(*BRONZE_COLUMNS)
                rows.repartition(args.queues).write.parquet(f"{tmp}/files")
                schema = spark.read.parquet(f"{tmp}/files").schema
                log(f"{messages:,} messages of {BODY_BYTES} B in {args.queues} logic queues / parquet files")
                for n in range(args.repeat + 1):  # run 0 warms both up
                    out = f"{tmp}/run{n}"
                    q = start_bronze(spark, cluster.namesrv, TOPIC, f"{out}/sm", f"{out}/sm-ck", available_now=True)
                    sm = timed(q, f"{out}/sm", spark)
                    q = (
                        spark.readStream.schema(schema)
                        .parquet(f"{tmp}/files")
                        .writeStream.format("delta")
                        .option("checkpointLocation", f"{out}/files-ck")
                        .trigger(availableNow=True)
                        .start(f"{out}/files")
                    )
                    ref = timed(q, f"{out}/files", spark)
                    for side, r in (("staticmq", sm), ("files", ref)):
                        if r["rows"] != messages:
                            raise RuntimeError(f"{side} landed {r['rows']:,} rows, expected {messages:,}")
                        if n:
                            results[side].append(r)
                    label = f"run {n}/{args.repeat}" if n else "warm-up"
                    log(f"  {label:<8} staticmq {sm['rows_per_s']:>10,.0f} rows/s, files {ref['rows_per_s']:>10,.0f}")
            finally:
                spark.stop()
    sm_rate = statistics.median(r["rows_per_s"] for r in results["staticmq"])
    ref_rate = statistics.median(r["rows_per_s"] for r in results["files"])
    ratio = sm_rate / ref_rate
    table = [
        f"{'side (median of ' + str(args.repeat) + ')':<40} {'rows/s':>10}",
        f"{'staticmq -> Delta bronze':<40} {sm_rate:>10,.0f}",
        f"{'parquet files -> Delta (file source)':<40} {ref_rate:>10,.0f}",
        f"ratio staticmq / file source: {ratio:.2f}x; target >= {TARGET}x: {'PASS' if ratio >= TARGET else 'FAIL'}",
    ]
    print("\n".join(table), file=sys.stderr if args.json else sys.stdout)
    if args.json:
        summary = {"messages": messages, "staticmq_rows_per_s": round(sm_rate), "files_rows_per_s": round(ref_rate)}
        print(json.dumps({**summary, "ratio": round(ratio, 3), "target": TARGET, "passed": ratio >= TARGET}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
