"""How fast can any sink on Apache RocketMQ 5.5 go on this machine? RocketMQ's own Java producers next to
Spark's Kafka sink and staticmq's sink, in one run (issue 25).

    python -m bench.rocketmq_ceiling [--rows N] [--txn-rows N] [--repeat N] [--sizes 100,1024] [--json FILE]
                                     [--plain 1x1000,2x4000] [--txn-threads 16,32] [--static-txn-rows N]

Issue 25 asks staticmq's exactly-once sink on RocketMQ to reach 1.0x Spark's Kafka sink in `bench.peers`
(Kafka 4.1.0, acks=all, idempotent, fsync per append). The sink sends one transactional half message
per row and ends each with END_TRANSACTION, because RocketMQ has no other transactional model: its
broker refuses a transactional batch (the run asks it once and prints the answer, see below). If the
broker is what limits, no client can do better, RocketMQ's own included. This benchmark measures that
ceiling with RocketMQ's Java client (bench/rocketmq_ceiling/java/RocketMQProducerBench.java, compiled with javac at
run time against the RocketMQ jars the project caches), side by side with the sinks, in one run:

- kafka-sink: Spark's Kafka sink exactly as `bench.peers` runs it (`df.write.format("kafka")`, keyed,
  acks=all, idempotent, linger.ms=5, batch.size=1 MiB) into a topic of 2 partitions, Kafka fsyncing
  every append (log.flush.interval.messages=1);
- java-plain-TxB: RocketMQ's `DefaultMQProducer`, `send(Collection<Message>, MessageQueue)` of B rows
  (keys set; at most 3 MiB: 4000 rows of 1 KiB go as 2,570) per call, each row to logic queue
  murmur3(key) mod 2 (staticmq's rule), T threads sharing one producer, into a static topic: what any
  sink can write into RocketMQ here (the at-least-once ceiling). More threads or larger batches than
  2x4000 make the broker refuse sends (SYSTEM_BUSY, flow control); a refused batch is sent again;
- java-txn-Nt: RocketMQ's `TransactionMQProducer`, one `sendMessageInTransaction` per row (its listener
  commits; the END_TRANSACTION is one-way), N threads (each call waits for its half to be stored; there
  is no async or batch form), queues picked by the producer (round-robin), into a plain (not static)
  topic of 2 queues on the same broker: the ceiling of an exactly-once sink built on RocketMQ's
  transactions. Not a static topic because RocketMQ 5.5.0's Java client sends the END_TRANSACTION of a
  static topic's half to no broker (the broker address it looks up is null, so the one-way request
  goes to the name server); its commits then land only through the broker's transaction check, 30 s
  apart. The run shows this once (`--static-txn-rows`, 8 threads) and prints when the rows appeared;
- staticmq-EO / staticmq-ALO: staticmq's Spark sink on the same broker (`bench.peers`' sink_run),
  deliveryGuarantee exactly-once (the default: staged chunks forwarded by the driver) and
  at-least-once (batches).

RocketMQ 5.5.0 runs as in `bench.peers`: one name server and one broker (`LocalRocketMQ`,
flushDiskType=SYNC_FLUSH), topics of 2 logic queues made by mqadmin. Every system writes the
same rows (key 'user-<i % 100000>', a value of 100 B or 1 KiB); the transactional modes (java-txn-*,
staticmq-EO) write `--txn-rows` rows (40,000 by default: at ~2k rows/s 200,000 would take 100 s a run),
the others `--rows` (200,000). Each round makes fresh topics and runs every system one after the other
(the systems interleaved round by round); the table shows each system's median of `--repeat` rounds
and the ratios paired round by round, median (min-max). `java-plain` and `java-transactional` in the
ratios are the best of their configurations in each round (the ceiling, taken generously).
The Java producer is timed, after an untimed warm-up in the same JVM, like the sinks: to the last
acknowledged send for java-plain; for java-txn, whose END_TRANSACTION is one-way (never acknowledged),
until the topic's max offsets add up to the rows. After every run the topic is counted once the count
stops changing (staticmq's PullConsumer or the brokers' queue offsets, Kafka's high watermarks): fewer
rows than written stops the run, and so do more, except for java-txn, where a duplicate is RocketMQ's
own behaviour (a transaction check committing a half whose one-way commit is still queued): reported.
CPU-s/M rows: CPU-seconds per million rows, of all processes of the system (server(s), Spark's JVM and
Python workers for the sinks; the broker, name server and the Java producer's timed part for Java);
`server` the RocketMQ broker + name server (or Kafka's JVM) alone. Exit 0 whatever the ratios.
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
from pathlib import Path
from typing import Any

from bench.common import clients
from bench.common.cpu import CpuMeter, cpu_of
from bench.common.kafka_server import KAFKA_VERSION, KafkaServer
from bench.common.report import Figures, log, summary
from bench.common.spark import spark_session
from bench.common.spark_kafka import spark_kafka_jars
from bench.peers.spark_figures import Endpoint, sink_frame, sink_run
from bench.rocketmq_ceiling.java_producer import JavaProducer
from bench.rocketmq_ceiling.report import FIGURE, MAX_BATCH_BYTES, add_best, table
from staticmq_spark.backends.rocketmq.wire.remoting import RemotingClient
from staticmq_spark.client import PullConsumer
from staticmq_spark.local_clusters.rocketmq import (
    ROCKETMQ_VERSION,
    TRANSACTION_TIMEOUT_MS,
    LocalRocketMQ,
)
from tests.support.rocketmq_tools import update_broker_config

QUEUES = 2


def wait_quiet(max_load: float, wait_s: float) -> float:
    """Until the 1-minute load average is below `max_load` (the machine is shared), at most `wait_s`."""
    deadline = time.monotonic() + wait_s
    while (load := os.getloadavg()[0]) >= max_load and time.monotonic() < deadline:
        log(f"load average {load:.2f} >= {max_load}: waiting (at most {deadline - time.monotonic():.0f} s more)")
        time.sleep(30)
    log(f"load average {load:.2f}" + ("" if load < max_load else f", still >= {max_load}: measuring anyway"))
    return load


def rocketmq_rows(rmq: LocalRocketMQ, topic: str) -> int:
    """Messages in a topic: its logic queues' offsets (staticmq's PullConsumer) for a static topic,
    its queues' offsets on each broker for a plain one."""
    client = RemotingClient((rmq.namesrv,))
    try:
        route = client.fetch_route(topic)
        if route.is_static:
            with PullConsumer(rmq.address) as consumer:
                return sum(q.max_offset - q.min_offset for q in consumer.offsets(topic))
        return sum(
            client.max_offset(addr, topic, q, logic=False) - client.min_offset(addr, topic, q, logic=False)
            for addr in route.masters.values()
            for q in range(QUEUES)
        )
    finally:
        client.close()


def kafka_rows(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ceiling-count-{topic}"})
    try:
        marks = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(QUEUES)]
    finally:
        consumer.close()
    return sum(high - low for low, high in marks)


class Ceiling:
    """The servers, the Spark session and the Java producer of one run, and one measure per system."""

    def __init__(self, args: argparse.Namespace, tmp: Path, rmq: LocalRocketMQ, kafka: KafkaServer,
                 spark: Any, java: JavaProducer) -> None:  # fmt: skip
        self.args, self.tmp, self.rmq, self.kafka, self.spark, self.java = args, tmp, rmq, kafka, spark, java
        self.rmq_pids = [proc.pid for proc in rmq.procs.values()]
        self.kafka_meter = CpuMeter(exclude=self.rmq_pids)  # this driver's tree: Kafka, Spark, Python workers
        self.rmq_meter = CpuMeter(exclude=[kafka.pid])  # RocketMQ's JVMs, Spark, Python workers
        self.kafka_end = Endpoint("kafka", "kafka", {"kafka.bootstrap.servers": kafka.bootstrap})
        self.staticmq_end = Endpoint("staticmq-on-rocketmq", "staticmq", {"namesrv": rmq.address})
        versions = {"kafka-sink": KAFKA_VERSION, "staticmq": "0.1.0"}
        self.figures = Figures(versions | {s: ROCKETMQ_VERSION for s in self.systems()})
        self.warnings: list[str] = []

    def systems(self) -> list[str]:
        """Every system in table order (java-plain and java-transactional: the best of the lines above)."""
        plain = [f"java-plain-{t}x{b}" for t, b in self.args.plain]
        txn = [f"java-txn-{t}t" for t in self.args.txn_threads]
        return ["kafka-sink", *plain, "java-plain", *txn, "java-transactional", "staticmq-EO", "staticmq-ALO"]

    def record(self, system: str, size: int, run: int, rows: int, seconds: float, cpu_s: float, server_s: float,
               **extra: Any) -> None:  # fmt: skip
        self.figures.add(FIGURE, system, rows / seconds, run, case=f"{size} B", value_bytes=size, rows=rows,
                         seconds=round(seconds, 3), cpu_s_per_m_rows=round(cpu_s / rows * 1e6, 1),
                         server_cpu_s_per_m_rows=round(server_s / rows * 1e6, 1), **extra)  # fmt: skip

    def check(self, system: str, topic: str, rows: int, count: Callable[[], int], duplicates_ok: bool = False) -> int:
        """The topic's messages once their count stops changing (RocketMQ updates a queue's max offset a
        moment after it acknowledges the send, and a transaction check may still add a duplicate)."""
        found, since, deadline = count(), time.monotonic(), time.monotonic() + 60
        while time.monotonic() < deadline and time.monotonic() - since < (1.0 if found == rows else 3.0):
            time.sleep(0.1)
            if (now := count()) != found:
                found, since = now, time.monotonic()
        if found < rows or (found > rows and not duplicates_ok):
            raise RuntimeError(f"{system}: topic {topic} holds {found:,} messages, {rows:,} rows were written")
        if found > rows:
            self.warnings.append(f"{system} ({topic}): {found:,} messages for {rows:,} rows")
            log(f"  {system}: {found - rows:,} duplicate(s) in {topic}")
        return found

    def kafka_sink(self, df: Any, rows: int, size: int, run: int, attempt: str = "timed") -> None:
        topic = f"ceil-kafka-{size}-{attempt}-{run}"
        clients.kafka_topic(self.kafka.bootstrap, topic, QUEUES)
        server0 = cpu_of([self.kafka.pid])
        self.kafka_meter.start()
        seconds = sink_run(df, self.kafka_end, topic)
        cpu, server = self.kafka_meter.stop(), cpu_of([self.kafka.pid]) - server0
        self.check("kafka-sink", topic, rows, lambda: kafka_rows(self.kafka.bootstrap, topic))
        if attempt == "timed":
            self.record("kafka-sink", size, run, rows, seconds, cpu, server)

    def staticmq_sink(self, df: Any, rows: int, size: int, run: int, delivery: str, attempt: str = "timed") -> None:
        system = "staticmq-EO" if delivery == "exactly-once" else "staticmq-ALO"
        topic = f"ceil-{system}-{size}-{attempt}-{run}"
        self.rmq.update_static_topic(topic, QUEUES)
        server0 = cpu_of(self.rmq_pids)
        self.rmq_meter.start()
        seconds = sink_run(df, self.staticmq_end, topic, {"deliveryGuarantee": delivery})
        cpu, server = self.rmq_meter.stop(), cpu_of(self.rmq_pids) - server0
        self.check(system, topic, rows, lambda: rocketmq_rows(self.rmq, topic))
        if attempt == "timed":
            self.record(system, size, run, rows, seconds, cpu, server)

    def make_topic(self, topic: str, static: bool) -> None:
        if static:
            self.rmq.update_static_topic(topic, QUEUES)
        else:  # a topic of QUEUES queues on the broker, not static (see java_run)
            self.rmq.mqadmin("updateTopic", "-c", "DefaultCluster", "-t", topic, "-w", str(QUEUES), "-r", str(QUEUES))

    def java_run(self, mode: str, threads: int, batch: int, rows: int, size: int, run: int) -> None:
        """java-plain on a static topic; java-txn on a plain topic of the same broker, because RocketMQ's
        Java client cannot end a transaction on a static topic (`static_topic_transactions`)."""
        system = f"java-plain-{threads}x{batch}" if mode == "plain" else f"java-txn-{threads}t"
        topic = f"ceil-{system}-{size}-{run}"
        self.make_topic(topic, static=mode == "plain")
        batch = max(1, min(batch, MAX_BATCH_BYTES // (size + 200)))  # RocketMQ takes 4 MiB per message
        warm = "ceil-warm-java" if mode == "plain" else "ceil-warm-java-txn"
        r = self.java.run(self.rmq.namesrv, topic, rows, size, mode, threads, batch, warm, self.rmq_pids)
        found = self.check(system, topic, rows, lambda: rocketmq_rows(self.rmq, topic), mode == "transactional")
        # timed as the sinks are, to the last acknowledgement: a plain send's; a transaction's commit is
        # one-way, unacknowledged, so until the topic's max offsets add up to the rows
        seconds = r["send_seconds"] if mode == "plain" else r["seconds"]
        self.record(system, size, run, rows, seconds, r["client_cpu_s"] + r["server_cpu_s"], r["server_cpu_s"],
                    visible_seconds=r["seconds"], send_seconds=r["send_seconds"], messages=found, threads=threads,
                    batch=batch, busy_retries=r.get("busy_retries", 0))  # fmt: skip

    def static_topic_transactions(self, rows: int, threads: int) -> dict[str, Any]:
        """RocketMQ's TransactionMQProducer on a static topic, once: its END_TRANSACTION goes to no broker
        (the send result's queue names the real broker, the client's static-topic table knows only the
        __syslo__ mock names, so the broker address is null and the one-way request goes to the name
        server), and each commit lands only when the broker's transaction check asks the producer (halves
        older than transactionTimeOut, 6 s, checked every transactionCheckInterval, 30 s)."""
        topic = "ceil-java-txn-static-diagnostic"
        self.make_topic(topic, static=True)
        # RocketMQ's default, for this diagnostic only (LocalRocketMQ's is 10 min); read at every check
        update_broker_config(self.rmq, "transactionTimeOut", 6000)
        try:
            r = self.java.run(self.rmq.namesrv, topic, rows, 100, "transactional", threads, 1, "-", self.rmq_pids)
        finally:
            update_broker_config(self.rmq, "transactionTimeOut", TRANSACTION_TIMEOUT_MS)
        time.sleep(2)
        r["messages"] = rocketmq_rows(self.rmq, topic)
        log(f"java-txn-{threads}t on a static topic, {rows:,} rows of 100 B: sent in {r['send_seconds']:.1f} s,"
            f" all visible after {r['seconds']:.1f} s ({r['messages']:,} messages)")  # fmt: skip
        return r

    def one_size(self, size: int) -> None:
        full = sink_frame(self.spark, self.args.rows, size, QUEUES)
        txn = sink_frame(self.spark, self.args.txn_rows, size, QUEUES)
        try:
            # untimed: the first query of each sink (class loading, JIT, Python workers)
            self.kafka_sink(full, self.args.rows, size, 0, attempt="warm-up")
            self.staticmq_sink(txn, self.args.txn_rows, size, 0, "exactly-once", attempt="warm-up")
            self.staticmq_sink(full, self.args.rows, size, 0, "at-least-once", attempt="warm-up")
            for run in range(self.args.repeat):
                log(f"{size} B, round {run + 1}/{self.args.repeat} (load average {os.getloadavg()[0]:.2f})")
                self.kafka_sink(full, self.args.rows, size, run)
                for t, b in self.args.plain:
                    self.java_run("plain", t, b, self.args.rows, size, run)
                for t in self.args.txn_threads:
                    self.java_run("transactional", t, 1, self.args.txn_rows, size, run)
                self.staticmq_sink(txn, self.args.txn_rows, size, run, "exactly-once")
                self.staticmq_sink(full, self.args.rows, size, run, "at-least-once")
                add_best(self.figures.records, size, run)
        finally:
            full.unpersist()
            txn.unpersist()


def run_all(args: argparse.Namespace, tmp: Path) -> tuple[Figures, dict[str, Any]]:
    jars = spark_kafka_jars()
    java = JavaProducer(tmp / "java")
    with (
        LocalRocketMQ(tmp / "rocketmq", brokers=1, flush="sync") as rmq,
        KafkaServer(str(tmp / "kafka"), flush_messages=1) as kafka,
    ):
        conf = {"spark.jars": ",".join(str(j) for j in jars), "spark.driver.memory": "1g"}
        spark = spark_session("staticmq-bench-rocketmq-ceiling", conf)
        try:
            bench = Ceiling(args, tmp, rmq, kafka, spark, java)
            bench.make_topic("ceil-probe", static=True)
            bench.make_topic("ceil-warm-java", static=True)
            bench.make_topic("ceil-warm-java-txn", static=False)
            probe = java.probe(rmq.namesrv, "ceil-probe")
            log(f"a transactional batch of 16 rows, RocketMQ {ROCKETMQ_VERSION}'s answer: {probe}")
            args.load = wait_quiet(args.max_load, args.wait_s)
            static = bench.static_topic_transactions(args.static_txn_rows, 8) if args.static_txn_rows else None
            for size in args.sizes:
                bench.one_size(size)
        finally:
            spark.stop()
    meta = {"probe_transactional_batch": probe, "static_topic_transactions": static, "warnings": bench.warnings,
            "systems": bench.systems()}  # fmt: skip
    return bench.figures, meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000, help="rows per run of kafka-sink, java-plain, ALO")
    parser.add_argument("--txn-rows", type=int, default=40_000, help="rows per run of java-txn and staticmq-EO")
    parser.add_argument("--repeat", type=int, default=3, help="rounds, the systems interleaved in each (3)")
    parser.add_argument("--sizes", default="100,1024", help="value sizes in bytes, comma-separated")
    parser.add_argument(
        "--plain",
        default="1x1000,2x4000",
        help="java-plain's THREADSxBATCH configurations (1x1000,2x4000; batches cut at 3 MiB)",
    )
    parser.add_argument("--txn-threads", default="16,32", help="thread counts of java-txn (16,32)")
    parser.add_argument("--static-txn-rows", type=int, default=2000,
                        help="rows of the one java-txn run on a static topic (2,000; 0: skip it)")  # fmt: skip
    parser.add_argument("--max-load", type=float, default=1.5, help="wait for a load average below this (1.5)")
    parser.add_argument("--wait-s", type=float, default=600, help="... at most this long, then measure (600)")
    parser.add_argument("--json", metavar="FILE", help="write the medians, every run and the probe's answer")
    args = parser.parse_args(argv)
    args.sizes = [int(v) for v in args.sizes.split(",") if v.strip()]
    args.plain = [tuple(int(n) for n in v.split("x")) for v in args.plain.split(",") if v.strip()]
    args.txn_threads = [int(v) for v in args.txn_threads.split(",") if v.strip()]
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    started = datetime.now(UTC)
    log(f"{platform.node()}, {os.cpu_count()} cores, {started:%Y-%m-%d %H:%M} UTC; {args.repeat} round(s);"
        f" {args.rows:,} rows per run, {args.txn_rows:,} for the transactional modes")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-ceiling-") as tmp:
        figures, meta = run_all(args, Path(tmp))
    where = f"RocketMQ {ROCKETMQ_VERSION} (1 broker, SYNC_FLUSH, static topics of {QUEUES} queues)"
    when = f"{started:%Y-%m-%d %H:%M} UTC, load average {args.load:.2f} at the start, {args.repeat} round(s)"
    print(f"{where} and Spark's Kafka sink on Kafka {KAFKA_VERSION}; {when}; {args.rows:,} rows per run"
          f" ({args.txn_rows:,} for java-txn-* and staticmq-EO)")  # fmt: skip
    print(table(figures.records, args.sizes, meta["systems"]))
    print(f"a transactional batch (MessageBatch through sendMessageInTransaction): {meta['probe_transactional_batch']}")
    if (st := meta["static_topic_transactions"]) is not None:
        print(f"java-txn-8t on a static topic instead (once, {st['rows']:,} rows of 100 B): sent in"
              f" {st['send_seconds']:.1f} s, all {st['messages']:,} visible after {st['seconds']:.1f} s: its commits"
              " go to no broker and land through the broker's transaction check")  # fmt: skip
    for warning in meta["warnings"]:
        print(f"duplicates: {warning}")
    if args.json:
        out = {**meta, "started": f"{started:%Y-%m-%dT%H:%M}Z", "args": {k: v for k, v in vars(args).items()},
               "figures": summary(figures.records), "runs": figures.records}  # fmt: skip
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
