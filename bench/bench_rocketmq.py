"""Spark source on a real Apache RocketMQ vs on broker_stub, in one run (issue 14).

    python bench/bench_rocketmq.py [--messages 300000] [--queues 4] [--repeat 3] [--warmup 1] [--json]

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
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runnable from a plain checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_source import run_query, summary
from harness import log
from harness import spark_session as harness_session

from staticmq_spark.client import Admin, Producer
from staticmq_spark.local_clusters import LocalCluster
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
    blob = os.urandom(messages * BODY_BYTES)
    bodies = [blob[i : i + BODY_BYTES] for i in range(0, len(blob), BODY_BYTES)]
    results: dict[str, list[dict[str, Any]]] = {"rocketmq": [], "broker_stub": []}
    tmp = tempfile.mkdtemp(prefix="bench-rocketmq-")
    stub_store = {"flush_interval_ms": 1000}
    rmq_cluster = LocalRocketMQ(Path(tmp) / "rmq")
    stub_cluster = LocalCluster(brokers=2, data_dir=f"{tmp}/stub", flush="async", store=stub_store)
    try:
        with rmq_cluster as rmq, stub_cluster as stub:
            rmq.update_static_topic(TOPIC, args.queues)
            with Admin(stub.namesrv) as admin:
                admin.update_static_topic(TOPIC, args.queues, cluster="DefaultCluster")
            time.sleep(1)
            fill(rmq.address, bodies, args.queues)
            fill(stub.namesrv, bodies, args.queues)
            spark = harness_session("staticmq-bench-rocketmq")
            sides = {"rocketmq": rmq.address, "broker_stub": stub.namesrv}
            try:
                for n in range(args.warmup + args.repeat):
                    for side, namesrv in sides.items():
                        options = {"namesrv": namesrv, "topic": TOPIC, "startingOffsets": "earliest"}
                        r = run_query(spark, "staticmq", options, f"{tmp}/ck/{side}-{n}")
                        if r["rows"] != messages:
                            raise RuntimeError(f"{side} read {r['rows']:,} rows, expected {messages:,}")
                        timed = n >= args.warmup
                        if timed:
                            results[side].append(r)
                        label = f"run {n - args.warmup + 1}/{args.repeat}" if timed else "warm-up"
                        log(
                            f"  {side:<11} {label:<8} {r['rows_per_s']:>11,.0f} rows/s ({r['seconds']:.2f} s), "
                            f"{r['batches']} batch(es), {r['outside_batches_s']:.2f} s outside batches"
                        )
            finally:
                spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rmq_s, stub_s = summary(results["rocketmq"]), summary(results["broker_stub"])
    ratio = rmq_s["rows_per_s_median"] / stub_s["rows_per_s_median"]
    lines = [
        f"{'side (median of ' + str(args.repeat) + ')':<28} {'rows/s':>11} {'best':>11}",
        f"{'Apache RocketMQ 5.5.0':<28} {rmq_s['rows_per_s_median']:>11,} {rmq_s['rows_per_s_best']:>11,}",
        f"{'broker_stub':<28} {stub_s['rows_per_s_median']:>11,} {stub_s['rows_per_s_best']:>11,}",
        f"ratio rocketmq / broker_stub: {ratio:.2f}x; target >= 0.7x: {'PASS' if ratio >= 0.7 else 'FAIL'}",
    ]
    print("\n".join(lines), file=sys.stderr if args.json else sys.stdout)
    if args.json:
        out = {"messages": messages, "queues": args.queues, "rocketmq": rmq_s, "broker_stub": stub_s}
        out.update(ratio=round(ratio, 3), target=0.7, passed=ratio >= 0.7)
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
