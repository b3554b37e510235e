"""Where a trigger's time goes, staticmq vs Spark's Kafka source: the phases of StreamingQueryProgress.

    python -m bench.peers.trigger_phases [--seconds 20] [--repeat 2] [--queues 2] [--json FILE]
                                         [--systems staticmq,kafka,python-floor,...]

One broker_stub broker (flush=sync) and one Kafka node (fsync per append), topics of `--queues`
logic queues / partitions (2 by default, as in `bench.peers`), one local[2] session. Per run and
system (interleaved, A B A B ...): a 100-byte probe every 20 ms into a 0-second-trigger query whose
foreachBatch collects the rows on the driver (the latency figure of `bench.peers`).
`staticmq-with-messages` is staticmq with queuePartitions=with-messages (a micro-batch plans only
the logic queues with new messages). `python-floor` is the same query over `floor_source`, a Python
data source that reads a local file of fixed-size records: the floor of pyspark's Python source
machinery, with 2 partitions (one empty, as staticmq's for these one-key probes), or N
(`python-floor-N`, the records in the first: `python-floor-1` plans as Kafka's source, which leaves
out partitions without records). `staticmq-driver-read` is staticmq with driverReadMaxMessages=10000
and `python-floor-driver` the floor as a simple reader (`python-floor-driver-wide`: its records in
staticmq's 11 columns): both read a micro-batch in the query's driver-side runner, which hands the
rows to Spark with the plan (no Python read task). `python-floor-driver-wide-sending-staticmq` and
`-sending-kafka` are that floor with each probe also sent through staticmq's or Kafka's producer
(to a topic nobody reads): what a system's sends cost the machine beside the query, apart from its
source. Printed per system: the median of each `durationMs` phase over the micro-batches that held
rows (the first left out), rows per batch, and the latency p50 / p99. The driver's pid is printed
first, so that `py-spy record --subprocesses -p PID` can watch a run.
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

from bench.common import clients
from bench.common.kafka_server import KafkaServer
from bench.common.report import log
from bench.common.spark import spark_session
from bench.common.spark_kafka import spark_kafka_jars
from bench.peers import floor_source
from bench.peers.spark_figures import Endpoint, latency_run
from staticmq_spark.local_clusters import LocalCluster
from staticmq_spark.workers.site import register

PHASES = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets", "triggerExecution")
TOPIC = "phases"
SENDS_TOPIC = "phases-sends"  # the floor's probes sent through a system's producer as well


def phase_medians(progress: list[dict[str, Any]]) -> dict[str, float]:
    """Median ms of each phase over the micro-batches with rows after the first one."""
    batches = sorted((p for p in progress if p["numInputRows"]), key=lambda p: p["batchId"])[1:]
    if not batches:
        return {}
    out = {ph: statistics.median(p["durationMs"].get(ph, 0) for p in batches) for ph in PHASES}
    out["rows"] = statistics.median(p["numInputRows"] for p in batches)
    out["batches"] = len(batches)
    return out


def senders(
    namesrv: str, bootstrap: str, floor_path: str
) -> tuple[dict[str, Callable[[bytes], object]], Callable[[], None]]:
    from confluent_kafka import Producer as KafkaProducer

    from staticmq_spark.client import Producer

    producer = Producer(namesrv, active_detection=False)
    kproducer = KafkaProducer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                               "linger.ms": 0})  # fmt: skip

    def kafka_send(value: bytes, topic: str = TOPIC) -> None:
        kproducer.produce(topic, value, "user-1")
        kproducer.flush(10)

    send = {
        "staticmq": lambda v: producer.send(TOPIC, v, key="user-1"),
        "staticmq-with-messages": lambda v: producer.send(TOPIC, v, key="user-1"),
        "staticmq-driver-read": lambda v: producer.send(TOPIC, v, key="user-1"),
        "kafka": kafka_send,
    }

    def floor_append(value: bytes) -> None:
        floor_source.append(floor_path, value)

    def floor_sending_staticmq(value: bytes) -> None:
        producer.send(SENDS_TOPIC, value, key="user-1")
        floor_append(value)

    def floor_sending_kafka(value: bytes) -> None:
        kafka_send(value, SENDS_TOPIC)
        floor_append(value)

    send["python-floor-driver-wide-sending-staticmq"] = floor_sending_staticmq
    send["python-floor-driver-wide-sending-kafka"] = floor_sending_kafka
    for system in (
        "python-floor",
        "python-floor-driver",
        "python-floor-driver-wide",
        "python-floor-1-wide",
        *(f"python-floor-{n}" for n in range(1, 9)),
    ):
        send[system] = floor_append
    return send, producer.close


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of probes per run and system")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--systems", default="staticmq,staticmq-with-messages,kafka,python-floor,python-floor-1")
    parser.add_argument("--queues", type=int, default=2, help="logic queues / partitions of both topics")
    parser.add_argument("--json", help="also write {queues, results: {system: [run medians]}} here")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    args = parser.parse_args(argv)
    if args.queues < 1:
        parser.error(f"--queues must be at least 1, got {args.queues}")
    for setting in args.conf:
        if "=" not in setting:
            parser.error(f"--conf takes KEY=VALUE, got {setting!r}")
    systems = args.systems.split(",")
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    log(f"driver pid {os.getpid()}")
    with tempfile.TemporaryDirectory(prefix="bench-phases-") as tmp:
        results = measure(args, systems, tmp)
    print(report(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"queues": args.queues, "seconds": args.seconds, "results": results}, f, indent=1)
    return 0


def measure(args: argparse.Namespace, systems: list[str], tmp: str) -> dict[str, list[dict[str, float]]]:
    results: dict[str, list[dict[str, float]]] = {s: [] for s in systems}
    cluster = LocalCluster(brokers=1, data_dir=f"{tmp}/staticmq", flush="sync")
    with cluster, KafkaServer(f"{tmp}/kafka", flush_messages=1) as kafka:
        clients.staticmq_topic(cluster.namesrv, TOPIC, args.queues)
        clients.kafka_topic(kafka.bootstrap, TOPIC, args.queues)
        clients.staticmq_topic(cluster.namesrv, SENDS_TOPIC, args.queues)
        clients.kafka_topic(kafka.bootstrap, SENDS_TOPIC, args.queues)
        ends = {
            "staticmq": Endpoint("staticmq", "staticmq", {"namesrv": cluster.namesrv}),
            "kafka": Endpoint("kafka", "kafka", {"kafka.bootstrap.servers": kafka.bootstrap}),
        }
        with_messages = {"namesrv": cluster.namesrv, "queuePartitions": "with-messages"}
        ends["staticmq-with-messages"] = Endpoint("staticmq-with-messages", "staticmq", with_messages)
        driver_read = {"namesrv": cluster.namesrv, "driverReadMaxMessages": "10000"}
        ends["staticmq-driver-read"] = Endpoint("staticmq-driver-read", "staticmq", driver_read)
        for n in range(1, 9):  # python-floor-N: N partitions, the new records in the first
            floor = {"path": f"{tmp}/floor.queue", "partitions": str(n)}
            ends[f"python-floor-{n}"] = Endpoint(f"python-floor-{n}", "bench_floor", floor)
        ends["python-floor"] = ends["python-floor-2"]
        wide = {"path": f"{tmp}/floor.queue", "partitions": "1", "schema": "staticmq"}
        ends["python-floor-1-wide"] = Endpoint("python-floor-1-wide", "bench_floor", wide)
        driver = {"path": f"{tmp}/floor.queue", "partitions": "driver"}
        ends["python-floor-driver"] = Endpoint("python-floor-driver", "bench_floor", driver)
        wide_driver = {**driver, "schema": "staticmq"}
        ends["python-floor-driver-wide"] = Endpoint("python-floor-driver-wide", "bench_floor", wide_driver)
        for peer in ("staticmq", "kafka"):
            name = f"python-floor-driver-wide-sending-{peer}"
            ends[name] = Endpoint(name, "bench_floor", wide_driver)
        conf = {"spark.jars": ",".join(str(j) for j in spark_kafka_jars()), "spark.driver.memory": "1g"}
        conf["spark.sql.streaming.numRecentProgressUpdates"] = "10000"
        conf.update(setting.split("=", 1) for setting in args.conf)
        spark = spark_session("staticmq-bench-phases", conf)
        send, close = senders(cluster.namesrv, kafka.bootstrap, f"{tmp}/floor.queue")
        register(spark, floor_source.FloorSource)  # the same worker start as staticmq's
        try:
            for run in range(args.repeat + 1):  # run 0 warms both systems up
                for system in systems:
                    progress: list[dict[str, Any]] = []
                    log(f"run {run} {system} from {time.strftime('%H:%M:%S')}")
                    p50, p99, _ = latency_run(
                        spark, ends[system], TOPIC, f"{tmp}/ck/{system}-{run}", send[system], args.seconds, 0.02,
                        progress,
                    )  # fmt: skip
                    if run:
                        results[system].append({**phase_medians(progress), "p50": p50, "p99": p99})
                        log(f"  {system}: {results[system][-1]}")
        finally:
            close()
            spark.stop()
    return results


def report(results: dict[str, list[dict[str, float]]]) -> str:
    """One line per phase, one column per system: each run's median, separated by '/'."""
    systems = list(results)
    width = max([28, *(len(s) + 2 for s in systems)])  # a column as wide as the longest name
    lines = [f"{'phase (ms, median per run)':<28}" + "".join(f"{s:>{width}}" for s in systems)]
    for key in (*PHASES, "rows", "batches", "p50", "p99"):
        cells = [" / ".join(f"{r.get(key, 0):.0f}" for r in results[s]) for s in systems]
        lines.append(f"{key:<28}" + "".join(f"{c:>{width}}" for c in cells))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
