"""Static topics: pull throughput after remaps, and client-side segment resolution (issue 3).

    python bench/bench_static_topics.py [--messages 400000] [--repeat 5] [--json]
    python bench/bench_static_topics.py --skip-pull --queues 128,256,512,1024,2048

a. Pull after three remaps vs never remapped, in one run. A `LocalCluster(brokers=3)` (broker
   flush=async) holds two static topics of one logic queue each, with --messages 100-byte
   messages each, sent in batches of 1000 with `Producer.send_batch(topic, bodies, queue=0)`:
   - A: on broker-0, never remapped (one segment);
   - B: created on broker-0 and remapped broker-0 -> broker-1 -> broker-2 -> broker-0 with a
     quarter of the messages written in each generation: 4 segments on 3 brokers. Pulls go to
     the leader (broker-0), which reads gens 1 and 2 from broker-1 / broker-2 (remote reads:
     half the messages make an extra broker-to-broker gRPC hop).
   Both are read back completely with `PullConsumer.pull(topic, 0, offset, max_messages=10000)`
   following `next_offset` (across the remap jumps); each answer stays its Arrow batch (only
   `num_rows` is read). After one untimed warm-up read of each, A and B are read alternately
   --repeat times; best and median msgs/s are reported. Target: B >= 0.8x A (judged on the
   median ratio; the best ratio is printed too).
b. Resolving segments on the client. For each size in --queues, chains of --gens mapping items
   per logic queue are built in memory (`MappingItem`, brokers in rotation, a new physical queue
   per gen, 1k-100k messages per gen, logic offsets settled past each remap's end with
   `settle_logic_offset`, like the admin does). Timed separately: `SegmentTable(chains)` (build),
   `table.resolve(queues, starts, ends)` for one range per queue that starts in the middle of
   the 4th-newest segment and ends inside the open leader (4 segments each), and
   `ResolvedRanges.by_range(n)` (one Python `Segment` per segment). Best of --repeat is reported.
   Target: resolve + by_range <= 50 ms for 1024 queues, growing linearly.

Exit status is 0 whatever the results. --json prints JSON on stdout (the table goes to stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runnable from a plain checkout

from harness import log

from staticmq_spark.client import Admin, Producer, PullConsumer, PullStatus
from staticmq_spark.errors import StaticMQError
from staticmq_spark.local_clusters import LocalCluster
from staticmq_spark.mapping import MappingItem, SegmentTable, settle_logic_offset

BODY_BYTES = 100
PRODUCE_BATCH = 1000
PULL_BATCH = 10_000
REMAPS = ["broker-1", "broker-2", "broker-0"]
BROKERS_IN_MEMORY = 8
SPAN = 4  # segments per resolved range in test b


# ------------------------------------------------------------------------------------ a. pull


def wait_leader(admin: Admin, producer: Producer, topic: str, bname: str) -> None:
    """The name server learns a remap with the brokers' next heartbeat: wait until it routes there."""
    deadline = time.monotonic() + 30
    while admin.route_view(topic).write_queues[0].broker != bname:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the route of {topic} never moved to {bname}")
        time.sleep(0.05)
    producer.topic_is_static(topic)


def send(producer: Producer, topic: str, bodies: list[bytes]) -> None:
    for i in range(0, len(bodies), PRODUCE_BATCH):
        producer.send_batch(topic, bodies[i : i + PRODUCE_BATCH], queue=0)


def read_all(consumer: PullConsumer, topic: str, expected: int, laps: dict[bool, list[float]]) -> tuple[float, int]:
    """Seconds to read the logic queue from 0 to the end, and the number of pulls; each full
    pull's latency goes to laps[remote] (remote: the segment is not on the leader, broker-0)."""
    offset, seen, pulls = 0, 0, 0
    t0 = last = time.perf_counter()
    while seen < expected:
        result = consumer.pull(topic, 0, offset, max_messages=PULL_BATCH)
        pulls += 1
        if result.status is not PullStatus.FOUND:
            raise RuntimeError(f"{topic}: {result.status} at offset {offset} after {seen} messages")
        now = time.perf_counter()
        if result.batch.num_rows == PULL_BATCH:
            laps[result.broker != "broker-0"].append(now - last)
        last = now
        seen += result.batch.num_rows
        offset = result.next_offset
    elapsed = time.perf_counter() - t0
    if seen != expected:
        raise RuntimeError(f"{topic}: read {seen} messages, expected {expected}")
    return elapsed, pulls


def bench_pull(messages: int, repeat: int) -> dict[str, Any]:
    blob = os.urandom(messages * BODY_BYTES)
    bodies = [blob[i : i + BODY_BYTES] for i in range(0, len(blob), BODY_BYTES)]
    quarter = messages // 4
    with tempfile.TemporaryDirectory(prefix="bench-static-") as tmp:
        store = {"flush_interval_ms": 1000}
        with LocalCluster(brokers=3, data_dir=tmp, flush="async", store=store) as cluster:
            with Admin(cluster.namesrv) as admin, Producer(cluster.namesrv) as producer:
                admin.update_static_topic("plain", 1, brokers=["broker-0"])
                admin.update_static_topic("remapped", 1, brokers=["broker-0"])
                wait_leader(admin, producer, "plain", "broker-0")
                wait_leader(admin, producer, "remapped", "broker-0")
                t0 = time.perf_counter()
                send(producer, "plain", bodies)
                cuts = [0, quarter, 2 * quarter, 3 * quarter, messages]
                for gen in range(4):
                    send(producer, "remapped", bodies[cuts[gen] : cuts[gen + 1]])
                    if gen < 3:
                        admin.remapping_static_topic("remapped", brokers=[REMAPS[gen]])
                        wait_leader(admin, producer, "remapped", REMAPS[gen])
                log(f"  produced 2 x {messages:,} messages (and 3 remaps) in {time.perf_counter() - t0:.1f} s")
                chain = admin.static_topic_status("remapped")[0].chains[0]
                segments = [f"gen{i.gen}@{i.bname} from {i.logic_offset}" for i in chain]
                log("  remapped topic: " + ", ".join(segments))
            rates: dict[str, list[float]] = {"plain": [], "remapped": []}
            pulls: dict[str, int] = {}
            laps = {topic: {False: [], True: []} for topic in rates}  # pull latencies: local, remote
            with PullConsumer(cluster.namesrv) as consumer:
                for topic in rates:  # warm-up: route lookups, channels, page cache
                    read_all(consumer, topic, messages, {False: [], True: []})
                for i in range(repeat):
                    for topic, runs in rates.items():
                        elapsed, pulls[topic] = read_all(consumer, topic, messages, laps[topic])
                        runs.append(messages / elapsed)
                        log(f"  pull {topic:<8} run {i + 1}/{repeat}: {runs[-1]:>11,.0f} msgs/s")
    plain, remapped = rates["plain"], rates["remapped"]
    ratio_median = statistics.median(remapped) / statistics.median(plain)
    return {
        "messages": messages,
        "segments": segments,
        "pulls": pulls,
        "pull_ms_plain": round(statistics.median(laps["plain"][False]) * 1000, 2),
        "pull_ms_remapped_local": round(statistics.median(laps["remapped"][False]) * 1000, 2),
        "pull_ms_remapped_remote": round(statistics.median(laps["remapped"][True]) * 1000, 2),
        "plain_best": round(max(plain)),
        "plain_median": round(statistics.median(plain)),
        "remapped_best": round(max(remapped)),
        "remapped_median": round(statistics.median(remapped)),
        "ratio_best": round(max(remapped) / max(plain), 3),
        "ratio_median": round(ratio_median, 3),
        "target": 0.8,
        "pass": ratio_median >= 0.8,
        "plain_runs": [round(r) for r in plain],
        "remapped_runs": [round(r) for r in remapped],
    }


# ------------------------------------------------------------------------------- b. resolving


def build_chains(queues: int, gens: int, seed: int = 7) -> dict[int, tuple[MappingItem, ...]]:
    """`gens` items per logic queue, as a remap history would leave them (leader last, open)."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1_000, 100_000, size=(queues, gens)).tolist()
    next_queue = [0] * BROKERS_IN_MEMORY  # a physical queue is never reused
    now = 1_700_000_000_000
    chains = {}
    for q in range(queues):
        items, logic = [], 0
        for g in range(gens):
            b = (q + g) % BROKERS_IN_MEMORY
            n, leads = counts[q][g], g == gens - 1
            items.append(
                MappingItem(
                    queue=next_queue[b],
                    bname=f"broker-{b}",
                    gen=g,
                    logic_offset=logic,
                    start_offset=0,
                    end_offset=-1 if leads else n,
                    time_of_start=now + g * 60_000,
                    time_of_end=-1 if leads else now + g * 60_000 + 59_000,
                    update_time=now + g * 60_000,
                )
            )
            next_queue[b] += 1
            logic = settle_logic_offset(logic + n)
        chains[q] = tuple(items)
    return chains


def bench_resolve(sizes: list[int], gens: int, repeat: int) -> list[dict[str, Any]]:
    out = []
    for size in sizes:
        chains = build_chains(size, gens)
        queues = np.arange(size, dtype=np.int64)
        # start in the middle of the SPAN-th newest segment, end inside the (open) leader
        mid = [(c[-SPAN].logic_offset + c[-SPAN].logic_end()) // 2 for c in chains.values()]
        starts = np.array(mid, dtype=np.int64)
        ends = np.array([c[-1].logic_offset + 5_000 for c in chains.values()], dtype=np.int64)
        build, resolve, group = [], [], []
        for _ in range(repeat):
            t0 = time.perf_counter()
            table = SegmentTable(chains)
            t1 = time.perf_counter()
            resolved = table.resolve(queues, starts, ends)
            t2 = time.perf_counter()
            per_queue = resolved.by_range(size)
            t3 = time.perf_counter()
            build.append(t1 - t0)
            resolve.append(t2 - t1)
            group.append(t3 - t2)
        if any(len(s) != SPAN for s in per_queue) or per_queue[-1][-1].logic_end != ends[-1]:
            raise RuntimeError(f"{size} queues: unexpected segments {per_queue[-1]}")
        total = min(r + g for r, g in zip(resolve, group, strict=True))
        row = {
            "queues": size,
            "items": size * gens,
            "segments": len(resolved.owner),
            "build_ms": round(min(build) * 1000, 2),
            "resolve_ms": round(min(resolve) * 1000, 3),
            "by_range_ms": round(min(group) * 1000, 3),
            "resolve_plus_by_range_ms": round(total * 1000, 3),
            "us_per_queue": round(total * 1e6 / size, 2),
        }
        out.append(row)
        log(
            f"  {size:>5} queues: build {row['build_ms']:>8.1f} ms, resolve {row['resolve_ms']:>7.2f} ms, "
            f"by_range {row['by_range_ms']:>7.2f} ms"
        )
    return out


# ------------------------------------------------------------------------------------- report


def report(pull: dict[str, Any] | None, resolve: list[dict[str, Any]], gens: int, stream: Any) -> None:
    lines = []
    if pull is not None:
        lines += [
            f"a. pull, {pull['messages']:,} x {BODY_BYTES} B, max_messages={PULL_BATCH} (msgs/s)",
            f"   {'topic':<36} {'best':>11} {'median':>11}  pulls",
            f"   {'never remapped (1 segment)':<36} {pull['plain_best']:>11,} {pull['plain_median']:>11,}"
            f"  {pull['pulls']['plain']}",
            f"   {'3 remaps (4 segments, 3 brokers)':<36} {pull['remapped_best']:>11,} {pull['remapped_median']:>11,}"
            f"  {pull['pulls']['remapped']}",
            f"   ratio remapped / plain: median {pull['ratio_median']:.2f}x, best {pull['ratio_best']:.2f}x,"
            f" target >= 0.8x (median): {'PASS' if pull['pass'] else 'FAIL'}",
            f"   median ms per {PULL_BATCH}-message pull: never remapped {pull['pull_ms_plain']:.2f};"
            f" remapped, segments on the leader {pull['pull_ms_remapped_local']:.2f},"
            f" remote {pull['pull_ms_remapped_remote']:.2f}",
            "",
        ]
    if resolve:
        lines += [
            f"b. resolving {SPAN} segments per logic queue, {gens} gens per queue (ms, best)",
            f"   {'queues':>6} {'build':>9} {'resolve':>9} {'by_range':>9} {'resolve+by_range':>17}"
            f" {'us/queue':>9}  target",
        ]
        for r in resolve:
            verdict = ("PASS" if r["resolve_plus_by_range_ms"] <= 50 else "FAIL") if r["queues"] == 1024 else ""
            lines.append(
                f"   {r['queues']:>6} {r['build_ms']:>9.1f} {r['resolve_ms']:>9.2f} {r['by_range_ms']:>9.2f}"
                f" {r['resolve_plus_by_range_ms']:>17.2f} {r['us_per_queue']:>9.2f}  {verdict}"
            )
    print("\n".join(lines), file=stream)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=400_000, help="messages per topic (multiple of 4000)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each test")
    parser.add_argument("--queues", default="128,256,512,1024,2048", help="logic queue counts for test b")
    parser.add_argument("--gens", type=int, default=100, help="mapping items per logic queue for test b")
    parser.add_argument("--skip-pull", action="store_true", help="run test b only")
    parser.add_argument("--skip-resolve", action="store_true", help="run test a only")
    parser.add_argument("--json", action="store_true", help="print the results as JSON (the table goes to stderr)")
    args = parser.parse_args(argv)
    messages = max(4 * PRODUCE_BATCH, args.messages // (4 * PRODUCE_BATCH) * 4 * PRODUCE_BATCH)
    sizes = [int(s) for s in args.queues.split(",") if s.strip()]
    gens = max(args.gens, SPAN)

    pull = None
    if not args.skip_pull:
        log(f"a. pull: 2 static topics x {messages:,} messages of {BODY_BYTES} B, {args.repeat} runs each")
        try:
            pull = bench_pull(messages, args.repeat)
        except (StaticMQError, RuntimeError, TimeoutError) as exc:
            log(f"  test a failed: {exc}")
    resolve = []
    if not args.skip_resolve:
        log(f"b. resolve: {gens} gens per logic queue, best of {args.repeat}")
        resolve = bench_resolve(sizes, gens, args.repeat)

    report(pull, resolve, gens, sys.stderr if args.json else sys.stdout)
    if args.json:
        config = {"messages": messages, "body_bytes": BODY_BYTES, "repeat": args.repeat, "gens": gens}
        print(json.dumps({"config": config, "pull": pull, "resolve": resolve}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
