"""Where staticmq's time goes in the Spark source and sink: py-spy over every Python process of the tree.

    python -m bench.peers.profile [--rows 300000] [--top 12] [--size 100]

One broker (flush=sync), a static topic of 2 logic queues filled with keyed rows (100-byte bodies
unless `--size` says otherwise), one local[2] session. After a warm-up of each, `py-spy record
--subprocesses --idle=false` samples this driver, Spark's Python workers and the broker processes
during (a) one availableNow source query into noop and (b) one keyed `df.write.format("staticmq")`
of the same number of rows. Printed per phase: samples per process kind, and the functions with the
most samples (self and inclusive).
Needs `pip install py-spy` and ptrace rights (root, or kernel.yama.ptrace_scope=0).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable

from bench.common import clients
from bench.common.report import log
from bench.common.spark import spark_session
from bench.peers import spark_figures
from bench.peers.spark_figures import Endpoint
from staticmq_spark.local_clusters import LocalCluster

WAITS = ("Condition.wait", "Event.wait", "_worker (thread.py", "_serve (_server.py", "manager (daemon.py")


def kind(process: str) -> str:
    """The role of a sampled process, from its command line."""
    for marker, name in (
        ("cli broker", "broker"),
        ("cli namesrv", "name server"),
        ("python_streaming_source_runner", "pyspark source runner (driver side)"),
        ("pyspark.daemon", "Spark Python worker"),
        ("pyspark.worker", "Spark Python worker"),
    ):
        if marker in process:
            return name
    return "bench driver"


def frames_of(stack: str) -> tuple[str, list[str]]:
    """(process kind, function names root first) of one collapsed py-spy stack."""
    frames = stack.split(";")
    where = max((i for i, f in enumerate(frames) if f.startswith("process ")), default=-1)  # the innermost
    process = frames[where] if where >= 0 else ""
    names = [f for f in frames[where + 1 :] if not f.startswith("thread ")]
    return kind(process), [short(f) for f in names]


def short(frame: str) -> str:
    """`func (path/to/file.py:12)` -> `func (file.py:12)`."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.rsplit('/', 1)[-1]}" if where else name


def profiled(out: str, run: Callable[[], object]) -> None:
    spy = shutil.which("py-spy")
    if spy is None:
        raise RuntimeError("profiling needs py-spy: pip install py-spy")
    cmd = [spy, "record", "--subprocesses", "--format", "raw", "--rate", "200", "-o", out, "--pid", str(os.getpid())]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        run()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)


def report(title: str, path: str, top: int) -> str:
    kinds: collections.Counter[str] = collections.Counter()
    selfs: collections.Counter[tuple[str, str]] = collections.Counter()
    incl: collections.Counter[tuple[str, str]] = collections.Counter()
    total = 0
    with open(path) as f:
        collapsed = f.read().splitlines()
    for line in collapsed:
        stack, _, count = line.rpartition(" ")
        k, names = frames_of(stack)
        if not names or any(names[-1].startswith(w) for w in WAITS):
            continue  # a thread blocked in a wait py-spy did not see as idle
        n = int(count)
        total += n
        kinds[k] += n
        selfs[(k, names[-1])] += n
        for name in set(names):
            incl[(k, name)] += n
    total = max(total, 1)
    lines = [
        f"### {title}: {total} samples (200/s; idle and blocked-in-wait samples excluded)",
        "",
        "| process | share |",
        "| --- | --- |",
    ]
    lines += [f"| {k} | {n / total:.0%} |" for k, n in kinds.most_common()]
    lines += ["", "| process | function (self) | share |", "| --- | --- | --- |"]
    lines += [f"| {k} | `{f}` | {n / total:.1%} |" for (k, f), n in selfs.most_common(top)]
    lines += ["", "| process | function (inclusive) | share |", "| --- | --- | --- |"]
    lines += [f"| {k} | `{f}` | {n / total:.1%} |" for (k, f), n in incl.most_common(top)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--size", type=int, default=100, help="body bytes per row (default 100)")
    parser.add_argument("--stacks", help="a directory to copy py-spy's collapsed stacks to (source.txt, sink.txt)")
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="bench-peers-profile-") as tmp,
        LocalCluster(brokers=1, data_dir=f"{tmp}/staticmq", flush="sync") as cluster,
    ):
        ns = cluster.namesrv
        clients.staticmq_topic(ns, "profile", 2)
        clients.staticmq_produce(ns, "profile", clients.Rows(args.rows, args.size).batches(), 2)
        end = Endpoint("staticmq", "staticmq", {"namesrv": ns})
        spark = spark_session("staticmq-bench-peers-profile", {"spark.driver.memory": "1g"})
        try:
            df = spark_figures.sink_frame(spark, args.rows, args.size, 2)
            for phase in ("warmup", "profile"):
                source = f"{tmp}/source-{phase}.txt"
                sink_topic = f"profile-sink-{phase}"
                clients.staticmq_topic(ns, sink_topic, 2)
                ck = f"{tmp}/ck-{phase}"

                def read(ck: str = ck) -> object:
                    return spark_figures.source_run(spark, end, "profile", ck, None)

                def write(topic: str = sink_topic) -> object:
                    return spark_figures.sink_run(df, end, topic)

                if phase == "warmup":
                    read(), write()
                    continue
                log("profiling the source")
                profiled(source, read)
                log("profiling the sink")
                profiled(f"{tmp}/sink.txt", write)
                print(report(f"Source, {args.rows:,} rows", source, args.top) + "\n")
                print(report(f"Sink, {args.rows:,} rows", f"{tmp}/sink.txt", args.top))
                if args.stacks:
                    os.makedirs(args.stacks, exist_ok=True)
                    shutil.copy(source, os.path.join(args.stacks, "source.txt"))
                    shutil.copy(f"{tmp}/sink.txt", os.path.join(args.stacks, "sink.txt"))
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
