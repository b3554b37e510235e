"""Shared code of the benchmarks: timed runs, waiting for routes, progress lines, the Spark session."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from staticmq_spark.errors import TopicNotFoundError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.python.worker.reuse": "true",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC",
}

Runner = Callable[[int], Callable[[], None]]  # setup(run index) -> the timed part


def measure(label: str, setup: Runner, messages: int, repeat: int, width: int = 44) -> list[float]:
    """`repeat` runs of `setup(i)()`, only the returned closure timed; msgs/s of each run."""
    rates = []
    for i in range(repeat):
        run = setup(i)
        t0 = time.perf_counter()
        run()
        rates.append(messages / (time.perf_counter() - t0))
        print(f"  {label:<{width}} run {i + 1}/{repeat}: {rates[-1]:>11,.0f} msgs/s", file=sys.stderr, flush=True)
    return rates


def wait_route(client: Any, topic: str) -> None:
    """Wait until the name server routes a new topic (`client`: a Producer)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            client.topic_is_static(topic)
            return
        except TopicNotFoundError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def log(text: str) -> None:
    """A progress line, on stderr (stdout is kept for --json)."""
    print(text, file=sys.stderr, flush=True)


def spark_session(app: str, conf: dict[str, str] | None = None) -> SparkSession:
    """The benchmarks' local[2] session (SPARK_CONF, then `conf`), the staticmq data source registered."""
    from pyspark.sql import SparkSession

    from staticmq_spark.data_source import StaticMQDataSource
    from staticmq_spark.worker_site import register

    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    builder = SparkSession.builder.master("local[2]").appName(app)
    for key, value in {**SPARK_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark, StaticMQDataSource)
    return spark
