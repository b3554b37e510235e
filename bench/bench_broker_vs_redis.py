"""staticmq vs Redis streams: produce and pull throughput, like for like, in one run.

    python bench/bench_broker_vs_redis.py [--messages 500000] [--repeat 3] [--json]

Both servers run on this machine; each side has one client, one connection, one request in flight.
- staticmq: `LocalCluster(brokers=1)` in a temp dir (a name server and one broker process) and a
  topic with one queue on broker-0. Produce: `Producer.send_batch(topic, bodies, queue=0)`, 1000
  bodies per call. Pull: a `PullConsumer.pull` offset loop of 10000 messages per pull; each answer
  stays the Arrow RecordBatch it arrives as (only `result.batch.num_rows` is read).
- Redis: Debian's `redis-server`, started here on 127.0.0.1 (a free port) with `--appendonly yes
  --appendfsync everysec --save ""` and its dir in a temp dir; redis-py with hiredis. Produce: XADD
  (one field) queued in `pipeline(transaction=False)`, executed every 1000 entries (queued with
  `execute_command`, the cheapest client path: this favours Redis by ~10% over `pipe.xadd`).
  Pull: XRANGE COUNT 10000 from the exclusive last id (`(id`) until the stream is read.

Tests: (a) produce, broker flush=async every 1000 ms (like appendfsync everysec) vs XADD;
(b) produce, flush=sync (every acknowledged batch fsynced, group commit) vs the same XADD;
(c) pull the messages of test a vs XRANGE over the stream of the Redis produce.
The 100-byte bodies are prebuilt (one list of bytes per batch, shared by both sides) outside the
timed sections. Each side first warms up with 100 batches (a fresh broker and client run
markedly slower for their first few hundred batches), then each test runs --repeat times, each
into a fresh topic / stream (pulls re-read the same data); the BEST run is reported, as the one
least disturbed by other load on the machine (--json also lists every run). Exit status is 0
whatever the ratios (2 only when redis-server or redis-py is missing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runnable from a plain checkout

from harness import Runner, measure, wait_route
from redis_server import RedisServer, redis_available

from staticmq_spark.client import Admin, Producer, PullConsumer
from staticmq_spark.local_clusters import LocalCluster

BODY_BYTES = 100
PRODUCE_BATCH = 1000
PULL_BATCH = 10_000
WARMUP_BATCHES = 100

Batches = list[list[bytes]]


# ------------------------------------------------------------------------------------------ Redis


def redis_produce(client: Any, stream: str, batches: Batches) -> Callable[[], None]:
    client.delete(stream)

    def run() -> None:
        pipe = client.pipeline(transaction=False)
        for batch in batches:
            for body in batch:
                pipe.execute_command("XADD", stream, "*", "b", body)
            pipe.execute()

    return run


def redis_pull(client: Any, stream: str, expected: int) -> Callable[[], None]:
    def run() -> None:
        seen, start = 0, b"-"
        while entries := client.xrange(stream, start, "+", count=PULL_BATCH):
            seen += len(entries)
            start = b"(" + entries[-1][0]
        assert seen == expected, f"read {seen} entries from Redis, expected {expected}"

    return run


# --------------------------------------------------------------------------------------- staticmq


def staticmq_produce(producer: Producer, admin: Admin, topic: str, batches: Batches) -> Callable[[], None]:
    admin.update_topic(topic, brokers=["broker-0"], read_queues=1, write_queues=1)
    wait_route(producer, topic)  # the route lookup happens once per topic, before timing

    def run() -> None:
        for batch in batches:
            producer.send_batch(topic, batch, queue=0)

    return run


def staticmq_pull(consumer: PullConsumer, topic: str, expected: int) -> Callable[[], None]:
    wait_route(consumer, topic)

    def run() -> None:
        offset, seen = 0, 0
        while offset < expected:
            result = consumer.pull(topic, 0, offset, max_messages=PULL_BATCH)
            seen += result.batch.num_rows
            offset = result.next_offset
        assert seen == expected, f"read {seen} messages from staticmq, expected {expected}"

    return run


def staticmq_side(flush: str, batches: Batches, repeat: int, with_pull: bool) -> dict[str, list[float]]:
    """Produce (and pull) runs against a fresh one-broker cluster with the given flush policy."""
    messages, warm = len(batches) * PRODUCE_BATCH, batches[:WARMUP_BATCHES]
    out: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-staticmq-") as tmp:
        store = {"flush_interval_ms": 1000}
        with LocalCluster(brokers=1, data_dir=tmp, flush=flush, store=store) as cluster:
            with Admin(cluster.namesrv) as admin, Producer(cluster.namesrv) as producer:
                staticmq_produce(producer, admin, "warmup", warm)()
                setup: Runner = lambda i: staticmq_produce(producer, admin, f"bench-{i}", batches)  # noqa: E731
                out["produce"] = measure(f"staticmq produce flush={flush}", setup, messages, repeat, width=34)
            if with_pull:
                with PullConsumer(cluster.namesrv) as consumer:
                    staticmq_pull(consumer, "warmup", len(warm) * PRODUCE_BATCH)()
                    setup = lambda i: staticmq_pull(consumer, f"bench-{repeat - 1}", messages)  # noqa: E731
                    out["pull"] = measure("staticmq pull", setup, messages, repeat, width=34)
    return out


# -------------------------------------------------------------------------------------- measuring


def make_batches(messages: int) -> Batches:
    blob = os.urandom(messages * BODY_BYTES)
    bodies = [blob[i : i + BODY_BYTES] for i in range(0, len(blob), BODY_BYTES)]
    return [bodies[i : i + PRODUCE_BATCH] for i in range(0, messages, PRODUCE_BATCH)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=500_000, help="messages per run (multiple of 1000)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per test; the best is reported")
    parser.add_argument("--json", action="store_true", help="print the results as JSON (the table goes to stderr)")
    args = parser.parse_args(argv)
    if not redis_available():
        return 2
    messages = max(PRODUCE_BATCH, args.messages // PRODUCE_BATCH * PRODUCE_BATCH)
    batches = make_batches(messages)
    warm = batches[:WARMUP_BATCHES]

    print(f"{messages:,} messages of {BODY_BYTES} bytes per run, best of {args.repeat}", file=sys.stderr)
    sm_async = staticmq_side("async", batches, args.repeat, with_pull=True)
    sm_sync = staticmq_side("sync", batches, args.repeat, with_pull=False)
    with RedisServer() as client:
        redis_produce(client, "warmup", warm)()
        redis_pull(client, "warmup", len(warm) * PRODUCE_BATCH)()
        produce: Runner = lambda i: redis_produce(client, f"bench-{i}", batches)  # noqa: E731
        rd_produce_a = measure("redis XADD (vs flush=async)", produce, messages, args.repeat, width=34)
        pull: Runner = lambda i: redis_pull(client, f"bench-{args.repeat - 1}", messages)  # noqa: E731
        rd_pull = measure("redis XRANGE", pull, messages, args.repeat, width=34)
        rd_produce_b = measure("redis XADD (vs flush=sync)", produce, messages, args.repeat, width=34)

    rows = [
        ("a. produce, flush=async 1s vs XADD everysec", sm_async["produce"], rd_produce_a, 2.0),
        ("b. produce, flush=sync vs XADD everysec", sm_sync["produce"], rd_produce_b, 1.0),
        ("c. pull (Arrow batches) vs XRANGE", sm_async["pull"], rd_pull, 2.0),
    ]
    results = []
    for test, sm, rd, target in rows:
        ratio = max(sm) / max(rd)
        results.append(
            {
                "test": test,
                "staticmq_msgs_per_s": round(max(sm)),
                "redis_msgs_per_s": round(max(rd)),
                "ratio": round(ratio, 2),
                "target": target,
                "pass": ratio >= target,
                "staticmq_runs": [round(r) for r in sm],
                "redis_runs": [round(r) for r in rd],
            }
        )
    table = [f"{'test':<46} {'staticmq msgs/s':>15} {'redis msgs/s':>13} {'ratio':>6} {'target':>7}  result"]
    for r in results:
        table.append(
            f"{r['test']:<46} {r['staticmq_msgs_per_s']:>15,} {r['redis_msgs_per_s']:>13,} "
            f"{r['ratio']:>5.2f}x {r['target']:>6.1f}x  {'PASS' if r['pass'] else 'FAIL'}"
        )
    print("\n".join(table), file=sys.stderr if args.json else sys.stdout)
    if args.json:
        config = {"messages": messages, "body_bytes": BODY_BYTES, "repeat": args.repeat, "statistic": "best"}
        print(json.dumps({"config": config, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
