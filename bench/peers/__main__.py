"""staticmq vs Spark's Kafka connector on Apache Kafka, and on Apache RocketMQ, in one run (issue 18).

    python -m bench.peers [--quick] [--repeat N] [--rows N] [--json FILE]

One process tree, one machine, the same rows for every system (string keys 'user-<i % 100000>',
values of 100 B and 1 KiB), one figure after another:
- produce / consume (broker alone): staticmq `Producer.send_batch_async` (1000 rows per request,
  a queue's requests in order, one at a time, the two queues' at once) and a
  `PullConsumer.pull` loop (10000 per pull) vs confluent-kafka (acks=all, idempotent, linger.ms=5;
  `Consumer.consume(10000)`), into a topic of 2 logic queues / 2 partitions;
- source: `readStream.format("staticmq"|"kafka")` from earliest over those topics into `noop`,
  availableNow, once with maxOffsetsPerTrigger = rows/4 (4 micro-batches) and once without a limit;
  and a running query's steady state: maxOffsetsPerTrigger 100,000 (rows/4 below 400,000 rows), rows
  over the summed triggerExecution of the micro-batches after the first (start-up left out, both sides);
- sink: the same cached DataFrame (2 partitions) `df.write.format("staticmq"|"kafka")` into a fresh
  topic of 2 queues / partitions (staticmq keyed and exactly once; Kafka keyed, acks=all, idempotent, linger.ms=5,
  batch.size=1 MiB as for confluent-kafka: Spark's defaults, 16 KiB batches, run ~10x slower here);
- latency: one 100-byte probe every 20 ms, its send time in the value, to a query with a 0-second
  trigger; p50/p99 of (driver holds the row in foreachBatch) - (send time); staticmq twice, with its
  defaults and with driverReadMaxMessages=10000 (micro-batches this small read by the query's
  driver-side process: no Python read task), each against the same Kafka run.
Apache RocketMQ 5.5 (one name server and broker, SYNC_FLUSH) runs the same figures two ways:
`rocketmq` is the broker alone through staticmq's remoting client (`Producer`/`PullConsumer` with a
rocketmq:// address), `staticmq-on-rocketmq` the Spark source and sink on it (the sink twice:
exactly once, the default: rows staged on a staging topic and forwarded by the driver's commit, and
deliveryGuarantee=at-least-once).
Durability is the same for all: staticmq's broker runs flush=sync (fsync before every ack, group
commit), Kafka runs log.flush.interval.messages=1 (fsync after every append, before the ack),
RocketMQ runs flushDiskType=SYNC_FLUSH (fsync before the ack).
Rows/s is rows / wall clock of the timed part; CPU-s/M rows is the CPU time of every process of the
tree (servers of that system, this driver, Spark's JVM and Python workers, with the processes that
ended meanwhile, such as a query's runner, and staticmq's warm runner; the other system's servers
excluded) per million rows. `--repeat N` runs every figure N times, the systems interleaved
(A B C A B C ..., each round starting one system later: B C A in the second), each round on fresh
topics; the table shows each system's median and each ratio's median with its min-max, the ratios
paired run by run; the JSON keeps every run (`runs`, `cpu_runs`), and a bar chart of the ratios is
drawn next to it (`bench/peers/chart.py`, matplotlib: `dev` extra).
Exit 0 whatever the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from bench.common import clients
from bench.common.cpu import CpuMeter, descendants
from bench.common.kafka_server import KAFKA_VERSION, KafkaServer
from bench.common.report import Figures, log, summary
from bench.common.spark import spark_session
from bench.common.spark_kafka import spark_kafka_jars
from bench.peers import chart, spark_figures
from bench.peers.report import table
from bench.peers.spark_figures import Endpoint
from staticmq_spark.local_clusters import LocalCluster
from staticmq_spark.local_clusters.rocketmq import ROCKETMQ_VERSION, LocalRocketMQ

STATICMQ_VERSION = "0.1.0"
VERSIONS = {"staticmq": STATICMQ_VERSION, "kafka": KAFKA_VERSION, "rocketmq": ROCKETMQ_VERSION}
QUEUES = 2
DRIVER_READ, DRIVER_READ_MAX = "driverReadMaxMessages", "10000"  # the latency figure's second staticmq case
RUNNING_PER_TRIGGER = 100_000  # rows per micro-batch of the running-query figure (rows // 4 below 400,000)


def rotated(items: list[Any], run: int) -> list[Any]:
    """The systems' order of round `run`: each round starts with the next one, so that no system
    always runs right after the same other."""
    k = run % len(items)
    return items[k:] + items[:k]


def timed(meter: CpuMeter, rows: int, run: Callable[[], object]) -> dict[str, float]:
    meter.start()
    t0 = time.perf_counter()
    run()
    seconds = time.perf_counter() - t0
    return {"rate": rows / seconds, "cpu_s_per_m_rows": round(meter.stop() / rows * 1e6, 2)}


def run_all(args: argparse.Namespace, tmp: str, figures: Figures) -> None:
    jars = spark_kafka_jars()
    rmq = LocalRocketMQ(Path(tmp) / "rocketmq", brokers=1, flush="sync")
    with LocalCluster(brokers=1, data_dir=f"{tmp}/staticmq", flush="sync") as cluster, rmq:
        staticmq_pids = {p for p in descendants() if p not in {proc.pid for proc in rmq.procs.values()}}
        rmq_pids = {proc.pid for proc in rmq.procs.values()}
        with KafkaServer(f"{tmp}/kafka", flush_messages=1) as kafka:
            meters = {
                "staticmq": CpuMeter(exclude=[kafka.pid, *rmq_pids]),
                "kafka": CpuMeter(exclude=[*staticmq_pids, *rmq_pids]),
                "rocketmq": CpuMeter(exclude=[kafka.pid, *staticmq_pids]),
            }
            meters["staticmq-on-rocketmq"] = meters["rocketmq"]
            ends = {
                "staticmq": Endpoint("staticmq", "staticmq", {"namesrv": cluster.namesrv}),
                "staticmq-on-rocketmq": Endpoint("staticmq-on-rocketmq", "staticmq", {"namesrv": rmq.address}),
                "kafka": Endpoint("kafka", "kafka", {"kafka.bootstrap.servers": kafka.bootstrap}),
            }
            topics.update(staticmq=cluster.namesrv, rocketmq=rmq, kafka=kafka.bootstrap)
            conf = {"spark.jars": ",".join(str(j) for j in jars), "spark.driver.memory": "1g"}
            spark = spark_session("staticmq-bench-peers", conf)
            try:
                warm_up(spark, tmp, ends)
                for size in args.sizes:
                    rows = clients.Rows(args.rows, size)
                    run_size(spark, rows, args.repeat, tmp, ends, meters, figures, args.figures)
                if "latency" in args.figures:
                    run_latency(spark, args, tmp, ends, figures)
            finally:
                spark.stop()


FIGURES = ("produce", "consume", "source", "sink", "latency")
topics: dict[str, Any] = {}  # system -> its name server address, LocalRocketMQ or bootstrap servers


def make_topic(system: str, topic: str) -> None:
    """A topic of QUEUES logic queues / partitions, made by each system's own admin tool."""
    if system == "kafka":
        clients.kafka_topic(topics["kafka"], topic, QUEUES)
    elif system in ("rocketmq", "staticmq-on-rocketmq"):
        topics["rocketmq"].update_static_topic(topic, QUEUES)
    else:
        clients.staticmq_topic(topics["staticmq"], topic, QUEUES)


def produce(system: str, topic: str, batches: list[tuple[list[str], list[bytes]]]) -> None:
    if system == "kafka":
        clients.kafka_produce(topics["kafka"], topic, batches)
    else:
        clients.staticmq_produce(address(system), topic, batches, QUEUES)


def address(system: str) -> str:
    return str(topics["rocketmq"].address) if system in ("rocketmq", "staticmq-on-rocketmq") else topics["staticmq"]


def warm_up(spark: Any, tmp: str, ends: dict[str, Endpoint]) -> None:
    """Untimed: the first produce (Kafka's idempotent producer id) and the first query of each system
    (class loading, JIT, Python workers) would otherwise be charged to the first figure."""
    batches = clients.Rows(10 * clients.BATCH, 100).batches()
    for system in ("staticmq", "kafka", "rocketmq"):
        make_topic(system, "peers-warmup")
        produce(system, "peers-warmup", batches)
    for system, end in ends.items():
        for limit in (2 * clients.BATCH, None):
            spark_figures.source_run(spark, end, "peers-warmup", f"{tmp}/ck/warmup-{system}-{limit}", limit)


def source_into(got: list[int], *args: Any) -> None:
    got.append(spark_figures.source_run(*args)[0])


def run_size(spark: Any, rows: clients.Rows, repeat: int, tmp: str, ends: dict[str, Endpoint],
             meters: dict[str, CpuMeter], figures: Figures, wanted: frozenset[str]) -> None:  # fmt: skip
    """`repeat` rounds of every figure of one value size; in each round the systems run one after
    the other (A B A B ...), each round on topics of its own."""
    df = spark_figures.sink_frame(spark, rows.count, rows.size, QUEUES)
    try:
        for run in range(repeat):
            one_round(spark, rows, run, tmp, ends, meters, figures, df, wanted)
    finally:
        df.unpersist()


def one_round(spark: Any, rows: clients.Rows, run: int, tmp: str, ends: dict[str, Endpoint],
              meters: dict[str, CpuMeter], figures: Figures, df: Any, wanted: frozenset[str]) -> None:  # fmt: skip
    """One round of the `wanted` figures (produce always runs: the other figures read its rows)."""
    n, size = rows.count, rows.size
    batches = rows.batches()
    topic = f"peers-{size}-{run}"
    brokers = rotated(["staticmq", "kafka", "rocketmq"], run)
    systems = rotated(list(ends.items()), run)
    for system in brokers:
        make_topic(system, topic)
    case = {"value_bytes": size, "case": f"{size} B, flush per ack"}
    for system in brokers:
        r = timed(meters[system], n, partial(produce, system, topic, batches))
        figures.add("produce", system, r.pop("rate"), run, **r, **case)
    case["case"] = f"{size} B"
    for system in brokers if "consume" in wanted else ():
        if system == "kafka":
            go = partial(clients.kafka_consume, topics["kafka"], topic, QUEUES, n)
        else:
            go = partial(clients.staticmq_consume, address(system), topic, n)
        r = timed(meters[system], n, go)
        figures.add("consume", system, r.pop("rate"), run, **r, **case)
    for limit in (n // 4, None) if "source" in wanted else ():
        mode = f"availableNow, maxOffsets {limit}" if limit else "availableNow, one batch"
        for system, end in systems:
            ck = f"{tmp}/ck/source-{system}-{size}-{limit}-{run}"
            got: list[int] = []
            r = timed(meters[system], n, partial(source_into, got, spark, end, topic, ck, limit))
            if got != [n]:
                raise RuntimeError(f"{system} source read {got} rows, expected {n:,}")
            figures.add(
                "source", system, r.pop("rate"), run, **r, value_bytes=size, case=f"{size} B, {mode}", mode=mode
            )
    per_trigger = RUNNING_PER_TRIGGER if n >= 4 * RUNNING_PER_TRIGGER else n // 4
    mode = f"running query, maxOffsets {per_trigger}"  # rows / time of micro-batches 2..N
    for system, end in systems if "source" in wanted else ():
        ck = f"{tmp}/ck/running-{system}-{size}-{run}"
        got_rows, seconds, micro = spark_figures.running_run(spark, end, topic, ck, per_trigger)
        figures.add("source", system, got_rows / seconds, run, value_bytes=size, case=f"{size} B, {mode}",
                    mode=mode, batches=micro)  # fmt: skip
    for system, end in systems if "sink" in wanted else ():
        # on RocketMQ both guarantees: exactly once (the default, transactional) and at least once
        deliveries = ("exactly-once", "at-least-once") if system == "staticmq-on-rocketmq" else ("exactly-once",)
        for delivery in deliveries:
            extra = {"deliveryGuarantee": delivery} if end.fmt == "staticmq" else {}
            for attempt in ("warm-up", "timed") if run == 0 else ("timed",):
                sink_topic = f"peers-sink-{system}-{size}-{delivery}-{attempt}-{run}"
                make_topic(system, sink_topic)
                r = timed(meters[system], n, partial(spark_figures.sink_run, df, end, sink_topic, extra))
            label = f"{size} B, keyed" + (", at-least-once" if delivery == "at-least-once" else "")
            figures.add("sink", system, r.pop("rate"), run, **r, value_bytes=size, case=label)


def run_latency(spark: Any, args: argparse.Namespace, tmp: str, ends: dict[str, Endpoint],
                figures: Figures) -> None:  # fmt: skip
    from confluent_kafka import Producer as KafkaProducer

    from staticmq_spark.client import Producer

    for system in ends:
        make_topic(system, "peers-latency")
    producer = Producer(topics["staticmq"], active_detection=False)
    rproducer = Producer(address("rocketmq"))
    kproducer = KafkaProducer(
        {"bootstrap.servers": topics["kafka"], "acks": "all", "enable.idempotence": True, "linger.ms": 0}
    )

    def kafka_send(value: bytes) -> None:
        kproducer.produce("peers-latency", value, "user-1")
        kproducer.flush(10)

    senders: dict[str, Callable[[bytes], object]] = {
        "staticmq": lambda v: producer.send("peers-latency", v, key="user-1"),
        "staticmq-on-rocketmq": lambda v: rproducer.send("peers-latency", v, key="user-1"),
        "kafka": kafka_send,
    }
    default, driver_read = "100 B probe every 20 ms, 0 s trigger", f"the same, {DRIVER_READ} {DRIVER_READ_MAX}"
    try:
        for run in range(args.repeat):
            for system, end in rotated(list(ends.items()), run):
                # Kafka's source has no such option: its one run stands in both cases' ratios.
                cases = [default, driver_read] if end.fmt == "kafka" else [default]
                p50, p99, n = spark_figures.latency_run(
                    spark, end, "peers-latency", f"{tmp}/ck/latency-{system}-{run}", senders[system],
                    args.latency_s, 0.02,
                )  # fmt: skip
                if end.fmt == "staticmq":
                    fast = Endpoint(system, "staticmq", {**end.options, DRIVER_READ: DRIVER_READ_MAX})
                    measured = spark_figures.latency_run(
                        spark, fast, "peers-latency", f"{tmp}/ck/latency-{system}-driver-{run}", senders[system],
                        args.latency_s, 0.02,
                    )  # fmt: skip
                    add_latency(figures, system, run, driver_read, *measured)
                for case in cases:
                    add_latency(figures, system, run, case, p50, p99, n)
    finally:
        producer.close()
        rproducer.close()


def add_latency(figures: Figures, system: str, run: int, case: str, p50: float, p99: float, n: int) -> None:
    figures.add("latency_p50", system, p50, run, case=case, samples=n, value_bytes=100)
    figures.add("latency_p99", system, p99, run, case=case, samples=n, value_bytes=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200,000 rows per figure and 10 s of latency probes")
    parser.add_argument("--rows", type=int, help="rows per figure (default 1,000,000; 200,000 with --quick)")
    parser.add_argument(
        "--latency-s", type=float, help="seconds of latency probes per system (default 30; 10 with --quick)"
    )
    parser.add_argument(
        "--sizes", default="100,1024", help="value sizes in bytes, comma-separated; empty: the latency figure only"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of every figure, the systems interleaved (1)")
    parser.add_argument(
        "--figures",
        default=",".join(FIGURES),
        help=f"the figures to run, comma-separated, of {', '.join(FIGURES)} (all; produce always runs: "
        "the others read its rows)",
    )
    parser.add_argument("--json", metavar="FILE", help="write every figure to FILE as a JSON list")
    args = parser.parse_args(argv)
    asked = {v.strip() for v in args.figures.split(",") if v.strip()}
    if not asked or asked - set(FIGURES):
        parser.error(
            f"--figures: {', '.join(sorted(asked - set(FIGURES))) or 'none given'}; known: {', '.join(FIGURES)}"
        )
    args.figures = frozenset(asked | {"produce"})
    args.rows = max(
        clients.BATCH, (args.rows or (200_000 if args.quick else 1_000_000)) // clients.BATCH * clients.BATCH
    )
    args.latency_s = args.latency_s or (10.0 if args.quick else 30.0)
    args.sizes = [int(v) for v in args.sizes.split(",") if v.strip()]
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    started = datetime.now(UTC)
    log(f"{args.rows:,} rows per figure; {platform.node()}, {os.cpu_count()} cores, {started:%Y-%m-%d %H:%M} UTC")
    log(f"{args.repeat} run(s) of every figure, the systems interleaved")
    figures = Figures(VERSIONS)
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        run_all(args, tmp, figures)
    print(table(figures.records))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary(figures.records), f, indent=1)
        chart.draw(summary(figures.records), Path(args.json).with_suffix(".png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
