"""What pyspark's worker daemon's `gc.collect()` costs per source read task: py-spy on the workers.

    python -m bench.peers.worker_gc [--queues 2] [--seconds 20] [--every 0.02]

One broker_stub broker (flush=sync), a static topic of `--queues` logic queues, one local[2] session.
A warm-up latency query, then one profiled: a 100-byte probe every `--every` seconds (one key, so
one logic queue gets it) into a 0-second-trigger query whose foreachBatch collects the rows on the
driver (the latency figure of `bench.peers`). `py-spy record --subprocesses --idle=false` samples
the tree at 200/s meanwhile. A reused pyspark worker runs `gc.collect()` in `pyspark/daemon.py`
after each task it finished (the loop of `manager`): the samples whose innermost frame is that line
are the daemon's collections. Read tasks = micro-batches run x partitions per micro-batch (one per
logic queue, the default). Printed: micro-batches, read tasks, the workers' samples, the
collection's samples, their share of the workers' samples, ms of collection and of the rest of the
worker per read task (samples / 200 x 1000 / tasks: wall-clock ms on-CPU or runnable, so on a busy
machine compare runs by the share or against the rest, not by absolute ms), the trigger phases'
medians and the probes' p50. Needs py-spy and ptrace rights.
"""

from __future__ import annotations

import argparse
import collections
import inspect
import json
import os
import shutil
import sys
import tempfile
from typing import Any

from bench.common import clients
from bench.common.report import log
from bench.common.spark import spark_session
from bench.peers.profile import frames_of, profiled
from bench.peers.spark_figures import Endpoint, latency_run
from bench.peers.trigger_phases import phase_medians
from staticmq_spark.client import Producer
from staticmq_spark.local_clusters import LocalCluster

TOPIC = "worker-gc"
RATE = 200


def daemon_collect_lines() -> set[int]:
    """The lines of pyspark's daemon.py that call gc.collect()."""
    from pyspark import daemon

    with open(inspect.getfile(daemon)) as f:
        return {n for n, line in enumerate(f, start=1) if "gc.collect()" in line}


def worker_samples(path: str) -> dict[str, int]:
    """Samples of Spark's Python workers in py-spy's collapsed stacks: all of them, those at the
    daemon's gc.collect(), those inside a staticmq read (read_partition)."""
    at = {f"manager (daemon.py:{n})" for n in daemon_collect_lines()}
    out: collections.Counter[str] = collections.Counter()
    with open(path) as f:
        for line in f.read().splitlines():
            stack, _, count = line.rpartition(" ")
            process, names = frames_of(stack)
            if process != "Spark Python worker" or not names:
                continue
            n = int(count)
            out["worker"] += n
            if names[-1] in at:
                out["collect"] += n
            if any(name.startswith("read_partition (") for name in names):
                out["read"] += n
    return dict(out)


def batches_run(progress: list[dict[str, Any]]) -> int:
    """Micro-batches that ran a job (each executed micro-batch reports addBatch)."""
    return len({p["batchId"] for p in progress if "addBatch" in p["durationMs"]})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queues", type=int, default=2, help="logic queues of the topic (read tasks per trigger)")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of probes in the profiled query")
    parser.add_argument("--every", type=float, default=0.02, help="seconds between probes")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--stacks", help="copy py-spy's collapsed stacks to this file")
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="bench-worker-gc-") as tmp,
        LocalCluster(brokers=1, data_dir=f"{tmp}/staticmq", flush="sync") as cluster,
    ):
        clients.staticmq_topic(cluster.namesrv, TOPIC, args.queues)
        end = Endpoint("staticmq", "staticmq", {"namesrv": cluster.namesrv})
        conf = {"spark.driver.memory": "1g", "spark.sql.streaming.numRecentProgressUpdates": "10000"}
        spark = spark_session("staticmq-bench-worker-gc", conf)
        producer = Producer(cluster.namesrv, active_detection=False)

        def send(value: bytes) -> None:
            producer.send(TOPIC, value, key="user-1")

        try:
            log("warm-up")
            latency_run(spark, end, TOPIC, f"{tmp}/ck-warm", send, 5.0, args.every)
            progress: list[dict[str, Any]] = []
            got: dict[str, float] = {}

            def run() -> None:
                got["p50"], got["p99"], _ = latency_run(
                    spark, end, TOPIC, f"{tmp}/ck", send, args.seconds, args.every, progress
                )

            log("profiling")
            profiled(f"{tmp}/stacks.txt", run)
            samples = worker_samples(f"{tmp}/stacks.txt")
            if args.stacks:
                shutil.copy(f"{tmp}/stacks.txt", args.stacks)
        finally:
            producer.close()
            spark.stop()
    batches = batches_run(progress)
    tasks = batches * args.queues
    collect, worker = samples.get("collect", 0), samples.get("worker", 0)
    figures = {
        "queues": args.queues,
        "batches": batches,
        "tasks": tasks,
        "worker_samples": worker,
        "collect_samples": collect,
        "read_samples": samples.get("read", 0),
        "collect_share": collect / max(worker, 1),
        "collect_ms_per_task": collect / RATE * 1000 / max(tasks, 1),
        "rest_ms_per_task": (worker - collect) / RATE * 1000 / max(tasks, 1),
        **{f"phase_{k}": v for k, v in phase_medians(progress).items()},
        "p50": got.get("p50", 0.0),
        "p99": got.get("p99", 0.0),
    }
    for key, value in figures.items():
        print(f"{key:<28} {value:.3f}" if isinstance(value, float) else f"{key:<28} {value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    sys.exit(main())
