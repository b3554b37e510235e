"""The staged exactly-once sink on RocketMQ phase by phase, against the at-least-once sink, without Spark.

    python -m bench.staged_sink_phases [--size 1024] [--rows 200000] [--repeat 3] [--profile DIR]

One RocketMQ 5.5.0 broker (`LocalRocketMQ`, SYNC_FLUSH), a static topic of 2 logic queues per run,
--rows rows of --size bytes with keys `user-<i % 100000>` in two "tasks" of Arrow batches of 10,000
rows, written through the RocketMQ backend's sink as Spark's tasks (`write_task`) and driver
(`commit`) call it, at least once and exactly once alternately (the first round warms up). Per
round and mode: wall time, this process's CPU and the broker JVM's CPU for the tasks and for the
commit, and rows/s; at the end the median ratio exactly once / at least once of the rounds after
the first. --profile DIR: cProfile files of the last round's exactly-once tasks and commit there.
"""

from __future__ import annotations

import argparse
import cProfile
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from bench.common.cpu import cpu_of
from bench.common.report import log
from staticmq_spark.backends.api import AT_LEAST_ONCE, EXACTLY_ONCE
from staticmq_spark.backends.registry import open_backend
from staticmq_spark.backends.types import WriteSettings
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from staticmq_spark.sink.placement import placed_rows


def task_batches(task: int, rows: int, size: int) -> list[pa.RecordBatch]:
    out = []
    for start in range(task * rows, (task + 1) * rows, 10_000):
        ids = range(start, min(start + 10_000, (task + 1) * rows))
        keys = pa.array([f"user-{i % 100000}" for i in ids])
        values = pa.array([i.to_bytes(8, "big") + b"x" * (size - 8) for i in ids], pa.binary())
        out.append(pa.RecordBatch.from_pydict({"key": keys, "value": values}))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1024, help="bytes per value (at least 8)")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3, help="measured rounds after the warm-up round")
    parser.add_argument("--profile", help="a directory for the last round's cProfile files")
    args = parser.parse_args(argv)
    if args.size < 8 or args.rows < 2 or args.repeat < 1:
        parser.error("--size must be >= 8, --rows >= 2, --repeat >= 1")
    data = [task_batches(t, args.rows // 2, args.size) for t in range(2)]
    rows = 2 * (args.rows // 2)
    ratios = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-staged-") as tmp,
        LocalRocketMQ(Path(tmp) / "rocketmq", brokers=1, flush="sync") as cluster,
    ):
        broker = cluster.procs[cluster.broker_names[0]].pid
        backend = open_backend(cluster.address)
        try:
            for run in range(args.repeat + 1):
                rate = {}
                for mode in (AT_LEAST_ONCE, EXACTLY_ONCE):
                    topic = f"phases-{run}-{mode}"
                    cluster.update_static_topic(topic, 2)
                    settings = WriteSettings(
                        namesrv=cluster.address, topic=topic, delivery=mode, send_timeout_ms=120_000
                    )
                    sink = backend.sink(mode)
                    profile = args.profile and run == args.repeat and mode == EXACTLY_ONCE
                    t0, p0, b0 = time.monotonic(), time.process_time(), cpu_of([broker])
                    prof = cProfile.Profile() if profile else None
                    if prof:
                        prof.enable()
                    tasks = [
                        sink.write_task(
                            settings, "bench", 0, t, placed_rows(topic, sink.total_queues, t, iter(data[t]))
                        )
                        for t in range(2)
                    ]
                    if prof:
                        prof.disable()
                        prof.dump_stats(Path(args.profile) / "tasks.prof")
                    t1, p1, b1 = time.monotonic(), time.process_time(), cpu_of([broker])
                    if prof:
                        prof = cProfile.Profile()
                        prof.enable()
                    sink.commit(settings, "bench", 0, tasks)
                    if prof:
                        prof.disable()
                        prof.dump_stats(Path(args.profile) / "commit.prof")
                    t2, p2, b2 = time.monotonic(), time.process_time(), cpu_of([broker])
                    rate[mode] = rows / (t2 - t0)
                    log(
                        f"{mode:15s} run {run}: tasks {t1 - t0:5.2f} s (python {p1 - p0:5.2f}, broker {b1 - b0:5.2f} "
                        f"CPU-s), commit {t2 - t1:5.2f} s (python {p2 - p1:5.2f}, broker {b2 - b1:5.2f}), "
                        f"{rate[mode]:,.0f} rows/s" + (" (warm-up)" if run == 0 else "")
                    )
                if run:
                    ratios.append(rate[EXACTLY_ONCE] / rate[AT_LEAST_ONCE])
        finally:
            backend.close()
    print(f"exactly once / at least once, {args.size} B: median {statistics.median(ratios):.2f}x "
          f"({', '.join(f'{r:.2f}x' for r in ratios)})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
