"""The streaming query: its child process (`python -m bench.soak driver ...`, `driver_main`) and the
`Driver` handle that starts it, kills it with its whole process group and reads its checkpoint."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
WORKER_TIMEOUT = "Python worker failed to connect back"
RESTART_MARK = "SOAK-QUERY-RESTART"


def driver_main(args: argparse.Namespace) -> int:
    """The streaming query: staticmq -> Delta bronze until `control/finish` appears; then catch up,
    stop and export the table's (key, value, queueId, queueOffset) to `control/result.parquet`."""
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    from pyspark.sql import SparkSession

    from bench.common.spark import SPARK_CONF
    from staticmq_spark.lakehouse import start_bronze
    from staticmq_spark.session.configure import configure_spark

    control = Path(args.control)
    builder = SparkSession.builder.master("local[2]").appName("soak")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    spark = configure_spark(builder, delta=True).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    def start() -> Any:
        return start_bronze(
            spark,
            args.namesrv,
            args.topic,
            args.table,
            args.checkpoint,
            trigger_interval="2 seconds",
            maxMessagesPerTrigger=str(args.max_per_trigger),
        )

    query = start()
    (control / f"driver-{os.getpid()}.started").write_text("")
    finish = control / "finish"
    restarts = 0
    while True:
        try:
            while not finish.exists():
                if query.awaitTermination(1):
                    print(f"query ended: {query.exception()}", flush=True)
                    return 3
            t0 = time.monotonic()
            query.processAllAvailable()
            query.stop()
            break
        except Exception as e:
            # Spark gives a Python worker 10 s to start (not configurable); on an overloaded
            # machine that fails the query. A restart on the checkpoint, counted by the soak.
            if WORKER_TIMEOUT not in str(e) or restarts >= 20:
                print(f"query failed: {e}", flush=True)
                return 3
            restarts += 1
            print(f"{RESTART_MARK} {restarts}: {WORKER_TIMEOUT}", flush=True)
            time.sleep(5)  # pacing: give the overloaded machine a moment before the next start
            try:
                query.stop()
            except Exception:
                pass
            query = start()
    print(f"caught up in {time.monotonic() - t0:.1f} s", flush=True)
    import pyarrow.parquet as pq

    table = spark.read.format("delta").load(args.table).select("key", "value", "queueId", "queueOffset").toArrow()
    tmp = control / "result.parquet.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, control / "result.parquet")
    spark.stop()
    return 0


class Driver:
    """The query's process: start, kill -9 (its whole process group: python and Spark's JVM), wait."""

    def __init__(self, root: Path, namesrv: str, topic: str, max_per_trigger: int) -> None:
        self.root = root
        self.control = root / "control"
        self.control.mkdir(parents=True, exist_ok=True)
        self.checkpoint = root / "checkpoint"
        self.args = [
            sys.executable,
            "-m",
            "bench.soak",
            "driver",
            "--namesrv",
            namesrv,
            "--topic",
            topic,
            "--table",
            str(root / "bronze"),
            "--checkpoint",
            str(self.checkpoint),
            "--control",
            str(self.control),
            "--max-per-trigger",
            str(max_per_trigger),
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        out = (self.root / f"driver-{self.starts}.log").open("wb")
        self.proc = subprocess.Popen(
            self.args, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True, env=dict(os.environ)
        )
        out.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(60)

    def committed(self) -> set[int]:
        return _batch_ids(self.checkpoint / "commits")

    def planned(self) -> set[int]:
        return _batch_ids(self.checkpoint / "offsets")

    def query_restarts(self) -> int:
        """In-process restarts of the query after Spark's Python worker timeout, over all drivers."""
        logs = (self.root / f"driver-{i}.log" for i in range(1, self.starts + 1))
        return sum(p.read_text(errors="replace").count(RESTART_MARK) for p in logs if p.exists())

    def log_tail(self, lines: int = 40) -> str:
        path = self.root / f"driver-{self.starts}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


def _batch_ids(folder: Path) -> set[int]:
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.exists() else set()
