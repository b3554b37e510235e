"""staticmq pop + ack vs Redis streams consumer groups (XREADGROUP + XACK), like for like, one run.

    python bench/bench_pop_vs_redis.py [--messages 300000] [--batch 1000] [--repeat 3] [--json]

Both servers run on this machine; each side has one client, one connection, one request in flight,
and consumes the same number of prebuilt 100-byte messages, stored before timing starts:
- staticmq: `LocalCluster(brokers=1)` in a temp dir (a name server and one broker process, broker
  `flush=async` every 1000 ms unless stated), a topic with one queue. Timed loop:
  `PopConsumer.receive(batch, invisible_time=60, wait_s=0)` - a list of PopMessage objects, one per
  message, each with its receipt handle - then `PopConsumer.ack_batch(messages)` (one request).
  Every pop writes a checkpoint and every ack an ACK record to the broker's commit log.
- Redis: Debian's `redis-server`, started here on 127.0.0.1 (a free port) with `--appendonly yes
  --appendfsync everysec --save ""`, redis-py with hiredis. Timed loop: `XREADGROUP GROUP g c COUNT
  batch STREAMS s >` then `XACK s g id...` of the ids read.
Each run consumes the whole topic / stream with a new consumer group; each side first warms up
with one group over the first 50 batches. The BEST of --repeat runs is reported (least disturbed by
other load on the machine); --json lists every run.

Rows: (a) batch 1000 (default), flush=async 1 s vs AOF everysec: the target row, >= 1.0x;
(b) the same with broker flush=sync (every checkpoint and ack fsynced before the answer, group
commit) vs the same Redis: informational, staticmq gives a stronger guarantee there;
(c) batches of 100 on both sides: informational (a fixed gRPC-Python round trip dominates).
Exit status is 0 whatever the ratios (2 only when redis-server or redis-py is missing).
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

from staticmq_spark.client import Admin, PopConsumer, Producer
from staticmq_spark.local_clusters import LocalCluster

BODY_BYTES = 100
PRODUCE_BATCH = 1000
WARMUP_BATCHES = 50
TOPIC = "pop-bench"


# ------------------------------------------------------------------------------------------ Redis


def redis_fill(client: Any, stream: str, bodies: list[bytes]) -> None:
    client.delete(stream)
    pipe = client.pipeline(transaction=False)
    for i, body in enumerate(bodies, 1):
        pipe.execute_command("XADD", stream, "*", "b", body)
        if i % PRODUCE_BATCH == 0:
            pipe.execute()
    pipe.execute()


def redis_consume(client: Any, stream: str, group: str, batch: int, expected: int) -> Callable[[], None]:
    client.xgroup_create(stream, group, id="0")

    def run() -> None:
        seen = 0
        while seen < expected:
            answer = client.xreadgroup(group, "c1", {stream: ">"}, count=min(batch, expected - seen))
            if not answer:
                break
            entries = answer[0][1]
            client.xack(stream, group, *[entry_id for entry_id, _ in entries])
            seen += len(entries)
        assert seen == expected, f"consumed {seen} entries from Redis, expected {expected}"

    return run


# --------------------------------------------------------------------------------------- staticmq


def staticmq_fill(namesrv: str, bodies: list[bytes]) -> None:
    with Admin(namesrv) as admin:
        admin.update_topic(TOPIC, brokers=["broker-0"], read_queues=1, write_queues=1)
    with Producer(namesrv) as producer:
        wait_route(producer, TOPIC)
        for i in range(0, len(bodies), PRODUCE_BATCH):
            producer.send_batch(TOPIC, bodies[i : i + PRODUCE_BATCH], queue=0)


def staticmq_consume(namesrv: str, group: str, batch: int, expected: int) -> Callable[[], None]:
    consumer = PopConsumer(namesrv, group, TOPIC)  # the topic is routed: staticmq_produce waited for it

    def run() -> None:
        seen = 0
        try:
            while seen < expected:
                messages = consumer.receive(min(batch, expected - seen), invisible_time=60.0, wait_s=0)
                if not messages:
                    break
                result = consumer.ack_batch(messages)
                assert result.acked == len(messages), result.refused[:1]
                seen += len(messages)
        finally:
            consumer.close()
        assert seen == expected, f"consumed {seen} messages from staticmq, expected {expected}"

    return run


def staticmq_side(flush: str, bodies: list[bytes], batches: list[int], repeat: int) -> dict[int, list[float]]:
    """Pop + ack runs (per batch size) against a fresh one-broker cluster with this flush policy."""
    out: dict[int, list[float]] = {}
    store = {"flush_interval_ms": 1000}
    with (
        tempfile.TemporaryDirectory(prefix="bench-pop-staticmq-") as tmp,
        LocalCluster(brokers=1, data_dir=tmp, flush=flush, store=store) as cluster,
    ):
        staticmq_fill(cluster.namesrv, bodies)
        staticmq_consume(cluster.namesrv, "warmup", PRODUCE_BATCH, WARMUP_BATCHES * PRODUCE_BATCH)()
        for batch in batches:
            setup: Runner = lambda i, b=batch: staticmq_consume(cluster.namesrv, f"g{b}-{i}", b, len(bodies))  # noqa: E731
            out[batch] = measure(f"staticmq pop+ack flush={flush} batch={batch}", setup, len(bodies), repeat)
    return out


def redis_side(bodies: list[bytes], batches: list[int], repeat: int) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    with RedisServer() as client:
        redis_fill(client, "s", bodies)
        redis_consume(client, "s", "warmup", PRODUCE_BATCH, WARMUP_BATCHES * PRODUCE_BATCH)()
        for batch in batches:
            setup: Runner = lambda i, b=batch: redis_consume(client, "s", f"g{b}-{i}", b, len(bodies))  # noqa: E731
            out[batch] = measure(f"redis XREADGROUP+XACK batch={batch}", setup, len(bodies), repeat)
    return out


# -------------------------------------------------------------------------------------- measuring


def make_bodies(messages: int) -> list[bytes]:
    blob = os.urandom(messages * BODY_BYTES)
    return [blob[i : i + BODY_BYTES] for i in range(0, len(blob), BODY_BYTES)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=300_000, help="messages consumed per run")
    parser.add_argument("--batch", type=int, default=1000, help="messages per pop / XREADGROUP (row a and b)")
    parser.add_argument("--small-batch", type=int, default=100, help="batch of the informational row c")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per test; the best is reported")
    parser.add_argument("--json", action="store_true", help="print the results as JSON (the table goes to stderr)")
    args = parser.parse_args(argv)
    if not redis_available():
        return 2
    messages = max(WARMUP_BATCHES * PRODUCE_BATCH, args.messages // PRODUCE_BATCH * PRODUCE_BATCH)
    bodies = make_bodies(messages)
    sizes = [args.batch, args.small_batch]
    print(f"{messages:,} messages of {BODY_BYTES} bytes per run, best of {args.repeat}", file=sys.stderr)
    sm_async = staticmq_side("async", bodies, sizes, args.repeat)
    sm_sync = staticmq_side("sync", bodies, [args.batch], args.repeat)
    rd = redis_side(bodies, sizes, args.repeat)

    rows = [
        (f"a. pop+ack batch {args.batch}, flush=async 1s vs AOF everysec", sm_async[args.batch], rd[args.batch], 1.0),
        (f"b. pop+ack batch {args.batch}, flush=sync vs AOF everysec", sm_sync[args.batch], rd[args.batch], None),
        (f"c. pop+ack batch {args.small_batch}, flush=async vs AOF everysec", sm_async[args.small_batch],
         rd[args.small_batch], None),
    ]  # fmt: skip
    results = []
    for test, sm, red, target in rows:
        ratio = max(sm) / max(red)
        results.append(
            {
                "test": test,
                "staticmq_msgs_per_s": round(max(sm)),
                "redis_msgs_per_s": round(max(red)),
                "ratio": round(ratio, 2),
                "target": target,
                "pass": None if target is None else ratio >= target,
                "staticmq_runs": [round(r) for r in sm],
                "redis_runs": [round(r) for r in red],
            }
        )
    table = [f"{'test':<58} {'staticmq msgs/s':>15} {'redis msgs/s':>13} {'ratio':>6} {'target':>7}  result"]
    for r in results:
        target_text = "-" if r["target"] is None else f"{r['target']:.1f}x"
        verdict = "info" if r["pass"] is None else ("PASS" if r["pass"] else "FAIL")
        table.append(
            f"{r['test']:<58} {r['staticmq_msgs_per_s']:>15,} {r['redis_msgs_per_s']:>13,} "
            f"{r['ratio']:>5.2f}x {target_text:>7}  {verdict}"
        )
    print("\n".join(table), file=sys.stderr if args.json else sys.stdout)
    if args.json:
        config = {"messages": messages, "body_bytes": BODY_BYTES, "repeat": args.repeat, "statistic": "best"}
        print(json.dumps({"config": config, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
