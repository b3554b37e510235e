"""Server-side tag filter vs reading everything, on broker_stub and on Apache RocketMQ, in one run.

    python -m bench.tag_filter [--messages 300000] [--repeat 3] [--json]

One machine, one run, each backend with its own cluster (broker_stub: `LocalCluster(brokers=1)`,
flush async; RocketMQ 5.5.0: `LocalRocketMQ(brokers=1)`), a static topic of one logic queue filled
with --messages 100-byte messages of which 1 in 10 has the tag `hit` and the others `miss0`..`miss8`.
A read is a `PullConsumer.pull` loop (10,000 messages asked per pull, the Spark source's default
pullBatchSize; RocketMQ answers at most maxTransferCountOnMessageInMemory; the consumer connected before the
clock starts) over the whole queue, either taking
every message (`*`) and keeping the `hit` rows on the client, as a consumer without a broker-side
filter must, or with `tags="hit"` (the broker skips the others). Both kinds alternate, --repeat
times each; the figure is the median of the wall-clock ratio unfiltered / filtered per backend.
Target (issue 25): the filtered read is at least 5x faster.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from bench.common.cluster import staticmq_cluster
from staticmq_spark.client import Admin, Producer, PullConsumer, PullStatus
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ

TOPIC = "bench-tags"
BATCH = 1000
PULL = 10_000  # messages asked per pull: the Spark source's default pullBatchSize


def fill(namesrv: str, n: int) -> int:
    hits = 0
    with Producer(namesrv) as producer:
        for start in range(0, n, BATCH):
            rows = range(start, min(n, start + BATCH))
            tags = ["hit" if i % 10 == 0 else f"miss{i % 10 - 1}" for i in rows]
            hits += tags.count("hit")
            producer.send_batch(TOPIC, [b"x" * 100] * len(tags), tags=tags, queue=0)
    return hits


def read(consumer: PullConsumer, tags: str) -> tuple[int, float]:
    """(hit rows seen, seconds) of one read of the whole queue (the consumer connected before)."""
    offset, end = consumer.min_offset(TOPIC, 0), consumer.max_offset(TOPIC, 0)
    t0 = time.perf_counter()
    seen = 0
    while offset < end:
        got = consumer.pull(TOPIC, 0, offset, max_messages=PULL, tags=tags)
        if got.status is PullStatus.FOUND:
            seen += int(pc.sum(pc.equal(got.batch.column("tags"), "hit")).as_py() or 0)
        elif got.status is not PullStatus.RETRY_AT_NEXT:
            raise RuntimeError(f"pull at {offset} answered {got.status}")
        if got.next_offset <= offset:
            raise RuntimeError(f"pull at {offset} did not move on")
        offset = got.next_offset
    return seen, time.perf_counter() - t0


def measure(name: str, namesrv: str, n: int, repeat: int) -> dict[str, Any]:
    with Admin(namesrv) as admin:
        admin.update_static_topic(TOPIC, 1, brokers=None, cluster="DefaultCluster")
    hits = fill(namesrv, n)
    consumer = PullConsumer(namesrv)
    read(consumer, "*")  # warm-up
    ratios, plain, filtered = [], [], []
    for _ in range(repeat):
        got_all, t_all = read(consumer, "*")
        got_hit, t_hit = read(consumer, "hit")
        if got_all != hits or got_hit != hits:
            raise RuntimeError(f"{name}: {got_all} / {got_hit} hit rows read, {hits} sent")
        plain.append(t_all)
        filtered.append(t_hit)
        ratios.append(t_all / t_hit)
        print(f"  {name}: everything {n / t_all:,.0f} msgs/s, filtered {n / t_hit:,.0f} msgs/s ({t_all / t_hit:.1f}x)")
    consumer.close()
    return {
        "backend": name,
        "messages": n,
        "hits": hits,
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "seconds_everything": plain,
        "seconds_filtered": filtered,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-tags-") as tmp:
        with staticmq_cluster(Path(tmp) / "staticmq", brokers=1, flush="async", interval_ms=None) as cluster:
            results.append(measure("broker_stub", cluster.namesrv, args.messages, args.repeat))
        with LocalRocketMQ(Path(tmp) / "rocketmq", brokers=1) as rmq:
            results.append(measure("rocketmq", rmq.address, args.messages, args.repeat))
    print()
    print(f"{'backend':<12} {'filtered / everything (1 in 10 match)':>40}")
    for r in results:
        span = f"{r['ratio_median']:.1f}x faster (min {r['ratio_min']:.1f}x, max {r['ratio_max']:.1f}x)"
        print(f"{r['backend']:<12} {span:>40}")
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
