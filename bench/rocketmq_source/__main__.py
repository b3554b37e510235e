"""Spark source on a real Apache RocketMQ vs on broker_stub, in one run (issue 14).

    python -m bench.rocketmq_source [--messages 300000] [--queues 4] [--repeat 3] [--warmup 1] [--json]

One run, one Spark session (local[2]), one machine, the same messages on both sides:
- rocketmq: `LocalRocketMQ` (name server + 2 brokers, RocketMQ 5.5.0, per-pull cap raised to 1024
  messages / 4 MiB: RocketMQ's default is 32 messages / 256 KiB per pull answer) with a static
  topic of --queues logic queues created by RocketMQ's `mqadmin updateStaticTopic`, filled with
  --messages 100-byte messages (`Producer("rocketmq://…").send_batch`, batches of 1000, one queue
  per batch, round-robin).
- broker_stub: `LocalCluster(brokers=2)` (flush async), a static topic of the same queues and the
  same messages, sent the same way.
Query on each side: `readStream.format("staticmq")`, `startingOffsets=earliest`, trigger
AvailableNow, `format("noop")`; rows / wall-clock second from start() to the end of
awaitTermination(); warm-up runs first, then the sides alternate. Median reported.
Target: rocketmq >= 0.7x broker_stub (wall-clock rows/s, medians).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.clients import random_bodies
from bench.common.cluster import staticmq_cluster
from bench.common.report import emit, interleaved, log, run_summary
from bench.common.spark import run_query, spark_session
from staticmq_spark.client import Admin, Producer
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ

BODY_BYTES = 100
BATCH = 1000
TOPIC = "bench-rocketmq"


def fill(namesrv: str, bodies: list[bytes], queues: int) -> None:
    t0 = time.perf_counter()
    with Producer(namesrv, active_detection=False) as producer:
        for n, i in enumerate(range(0, len(bodies), BATCH)):
            producer.send_batch(TOPIC, bodies[i : i + BATCH], queue=n % queues)
    log(f"  {namesrv}: produced {len(bodies):,} messages in {time.perf_counter() - t0:.1f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    messages = max(BATCH * args.queues, args.messages // BATCH * BATCH)
    bodies = random_bodies(messages, BODY_BYTES)
    tmp = tempfile.mkdtemp(prefix="bench-rocketmq-")
    rmq_cluster = LocalRocketMQ(Path(tmp) / "rmq")
    stub_cluster = staticmq_cluster(f"{tmp}/stub", brokers=2, flush="async")
    try:
        with rmq_cluster as rmq, stub_cluster as stub:
            rmq.update_static_topic(TOPIC, args.queues)
            with Admin(stub.namesrv) as admin:
                admin.update_static_topic(TOPIC, args.queues, cluster="DefaultCluster")
            time.sleep(1)
            fill(rmq.address, bodies, args.queues)
            fill(stub.namesrv, bodies, args.queues)
            spark = spark_session("staticmq-bench-rocketmq")
            sides = {"rocketmq": rmq.address, "broker_stub": stub.namesrv}

            def run(side: str, n: int) -> dict[str, Any]:
                options = {"namesrv": sides[side], "topic": TOPIC, "startingOffsets": "earliest"}
                r = run_query(spark, "staticmq", options, f"{tmp}/ck/{side}-{n}")
                if r["rows"] != messages:
                    raise RuntimeError(f"{side} read {r['rows']:,} rows, expected {messages:,}")
                return r

            def show(side: str, label: str, r: dict[str, Any]) -> None:
                log(
                    f"  {side:<11} {label:<8} {r['rows_per_s']:>11,.0f} rows/s ({r['seconds']:.2f} s), "
                    f"{r['batches']} batch(es), {r['outside_batches_s']:.2f} s outside batches"
                )

            try:
                results = interleaved(sides, args.warmup, args.repeat, run, show)
            finally:
                spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rmq_s, stub_s = run_summary(results["rocketmq"]), run_summary(results["broker_stub"])
    ratio = rmq_s["rows_per_s_median"] / stub_s["rows_per_s_median"]
    lines = [
        f"{'side (median of ' + str(args.repeat) + ')':<28} {'rows/s':>11} {'best':>11}",
        f"{'Apache RocketMQ 5.5.0':<28} {rmq_s['rows_per_s_median']:>11,} {rmq_s['rows_per_s_best']:>11,}",
        f"{'broker_stub':<28} {stub_s['rows_per_s_median']:>11,} {stub_s['rows_per_s_best']:>11,}",
        f"ratio rocketmq / broker_stub: {ratio:.2f}x; target >= 0.7x: {'PASS' if ratio >= 0.7 else 'FAIL'}",
    ]
    emit(lines, args.json)
    if args.json:
        out = {"messages": messages, "queues": args.queues, "rocketmq": rmq_s, "broker_stub": stub_s}
        out.update(ratio=round(ratio, 3), target=0.7, passed=ratio >= 0.7)
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
