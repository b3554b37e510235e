"""The benchmarks' Spark session, and one timed AvailableNow query into the `noop` sink."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

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


def compile_package() -> None:
    """Write staticmq's bytecode next to its sources, as `pip install` does for an installed package:
    run from a checkout with PYTHONDONTWRITEBYTECODE set, every query's driver-side Python process
    and every new Python worker would otherwise compile the modules it imports again (~0.1 s of each
    query's start on 2 cores)."""
    import compileall

    import staticmq_spark

    compileall.compile_dir(os.path.dirname(os.path.abspath(staticmq_spark.__file__)), quiet=1)


def spark_session(app: str, conf: dict[str, str] | None = None) -> SparkSession:
    """The benchmarks' local[2] session (SPARK_CONF, then `conf`) as `configure_spark` builds it for a
    user: the staticmq data source registered, Unix domain sockets to the Python workers."""
    from pyspark.sql import SparkSession

    from staticmq_spark import configure_spark

    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    compile_package()
    builder = SparkSession.builder.master("local[2]").appName(app)
    for key, value in {**SPARK_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark: SparkSession = configure_spark(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_query(spark: SparkSession, fmt: str, options: dict[str, str], checkpoint: str) -> dict[str, Any]:
    """One `readStream.format(fmt)` query, trigger AvailableNow, into `noop`: rows / wall clock from
    start() to the end of awaitTermination(), and Spark's processedRowsPerSecond (rows over the summed
    triggerExecution of the micro-batches: without query start-up)."""
    reader = spark.readStream.format(fmt)
    for key, value in options.items():
        reader = reader.option(key, value)
    df = reader.load()
    t0 = time.perf_counter()
    query = df.writeStream.format("noop").trigger(availableNow=True).option("checkpointLocation", checkpoint).start()
    query.awaitTermination()
    elapsed = time.perf_counter() - t0
    if query.exception() is not None:
        raise RuntimeError(f"{fmt} query failed: {query.exception()}")
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    busy = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    return {
        "rows": rows,
        "seconds": round(elapsed, 3),
        "rows_per_s": rows / elapsed,
        "spark_rows_per_s": rows / busy if busy else 0.0,
        "batches": len(progress),
        "outside_batches_s": round(elapsed - busy, 3),  # query start-up, planning of no batch, stop
    }
