"""The demo's Spark side: a quiet local session, and the streaming job - page views in, per-user
running statistics out, keyed by user so every user's row lands in its hash logic queue.

Python sinks take Append mode only, so the running totals come from applyInPandasWithState in
append mode: each micro-batch emits the updated totals of the users it saw (what Update mode
would write), and the state lives in the query's checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, from_json, struct, to_json
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.state import GroupStateTimeout

EVENT_SCHEMA = "user STRING, page STRING, ms BIGINT, dwell INT"
STATS_SCHEMA = "user STRING, views LONG, dwell LONG, last_ms LONG"
STATE_SCHEMA = "views LONG, dwell LONG, last_ms LONG"


def running_totals(key: tuple[Any, ...], batches: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
    """Add this micro-batch's views of one user to the user's totals; emit the new totals."""
    views, dwell, last_ms = state.get if state.exists else (0, 0, 0)
    for pdf in batches:
        views += len(pdf)
        dwell += int(pdf["dwell"].sum())
        last_ms = max(last_ms, int(pdf["ms"].max()))
    state.update((views, dwell, last_ms))
    yield pd.DataFrame({"user": [key[0]], "views": [views], "dwell": [dwell], "last_ms": [last_ms]})


CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def demo_session(app_name: str = "staticmq-demo") -> SparkSession:
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.streaming.stopTimeout", "30s")
    )
    log4j = CONF_DIR / "log4j2.properties"
    if log4j.exists():
        builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def start_user_stats(
    spark: SparkSession, namesrv: str, source_topic: str, sink_topic: str, checkpoint: Path
) -> StreamingQuery:
    """Read page views, keep running views and dwell time per user, write each update back
    keyed by user (so a user's statistics always land in the same logic queue)."""
    views = (
        spark.readStream.format("staticmq")
        .option("namesrv", namesrv)
        .option("topic", source_topic)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "20000")
        .load()
        .select(from_json(col("value").cast("string"), EVENT_SCHEMA).alias("e"))
        .select("e.*")
        .where(col("user").isNotNull())
    )
    stats = views.groupBy("user").applyInPandasWithState(
        running_totals, STATS_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
    )
    out = stats.select(col("user").alias("key"), to_json(struct("user", "views", "dwell", "last_ms")).alias("value"))
    return (
        out.writeStream.format("staticmq")
        .option("namesrv", namesrv)
        .option("topic", sink_topic)
        .option("checkpointLocation", str(checkpoint))
        .outputMode("append")
        .trigger(processingTime="1 second")
        .queryName("user_stats")
        .start()
    )
