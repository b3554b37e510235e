"""The demo's Spark side: a medallion pipeline from a static topic through Delta Lake and back.

    page views (static topic) --bronze--> Delta `bronze`   every message once, as it came
                              --silver--> Delta `silver`   parsed page views, one row per message
                              --gold----> Delta `gold`     running totals per user (MERGE upserts)
    gold's change feed        --results-> static topic     each user's new totals, keyed by user

Three streaming queries, each exactly once: bronze through staticmq's replayable offsets and
Delta's streaming sink; silver through `IdempotentAppend` and gold through `IdempotentMerge` (a
replayed micro-batch is neither appended nor merged twice); results through the staticmq sink's
two-phase commit. Each user's rows land in logic queue `murmur3(user) mod totalQueues` of the
results topic, whatever the brokers do.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from staticmq_spark.lakehouse import (
    BRONZE_COLUMNS,
    IdempotentAppend,
    IdempotentMerge,
    create_bronze_table,
    start_bronze,
)

EVENT_SCHEMA = "user STRING, page STRING, ms BIGINT, dwell INT"
GOLD_COLUMNS = "user STRING, views BIGINT, dwell BIGINT, last_ms BIGINT"
# C1 only, with the code cache a tiered JIT gets: without tiers the JVM reserves 48 MB for compiled
# code, which Spark and Delta fill about 40 s into the demo ("CodeCache is full. Compiler has been
# disabled."), and everything compiled after that runs interpreted.
DRIVER_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
# silver/gold runs its micro-batches back to back: each takes 3-6 s on 2 cores (Delta's two idempotent
# commits cost about 2.3 s of it, whatever the rows) and takes all that bronze committed meanwhile.
# 100 ms rather than 0: with nothing new, a 0-second trigger would look at bronze's log every 10 ms.
# results polls gold's change feed twice a second (docs/investigations/2026-11-27-demo-pipeline-delta-floor.md).
SILVER_GOLD_TRIGGER = "100 milliseconds"
RESULTS_TRIGGER = "500 milliseconds"
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


@dataclass(frozen=True, slots=True)
class Lake:
    """Where the demo's tables and checkpoints live."""

    root: Path

    def table(self, name: str) -> str:
        return str(self.root / "lake" / name)

    def checkpoint(self, name: str) -> str:
        return str(self.root / "checkpoints" / name)


def demo_session(app_name: str = "staticmq-demo") -> SparkSession:
    from staticmq_spark.session.configure import configure_spark

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.databricks.delta.snapshotPartitions", "2")
    )
    # The demo's JVM lives about a minute: C2's compile threads would take most of a core of two for
    # all of it (bronze caught up 8-10 s after the last event with them, 4-6 s without; see
    # docs/investigations/2026-11-27-demo-pipeline-delta-floor.md). A long-running job keeps
    # Java's default (tiered, with C2).
    java_options = [DRIVER_JIT]
    log4j = CONF_DIR / "log4j2.properties"
    if log4j.exists():
        java_options.append(f"-Dlog4j2.configurationFile=file:{log4j}")
    builder = builder.config("spark.driver.extraJavaOptions", " ".join(java_options))
    spark: SparkSession = configure_spark(builder, delta=True).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def create_tables(spark: SparkSession, lake: Lake, namesrv: str, topic: str, secured: dict[str, str]) -> None:
    """Empty bronze and gold tables (the queries downstream of them need them to exist); gold keeps
    a change data feed, which the results query reads. `secured`: accessKey/secretKey/tlsCaFile."""
    create_bronze_table(spark, namesrv, topic, lake.table("bronze"), **secured)
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS delta.`{lake.table('gold')}` ({GOLD_COLUMNS}) USING delta "
        "TBLPROPERTIES (delta.enableChangeDataFeed = true)"
    )


def start_bronze_query(
    spark: SparkSession, lake: Lake, namesrv: str, topic: str, secured: dict[str, str]
) -> StreamingQuery:
    return start_bronze(
        spark,
        namesrv,
        topic,
        lake.table("bronze"),
        lake.checkpoint("bronze"),
        query_name="bronze",
        files_per_batch=2,  # one per core
        maxMessagesPerTrigger="20000",
        **secured,  # type: ignore[arg-type]  # only accessKey, secretKey, tlsCaFile
    )


class SilverAndGold:
    """foreachBatch of the bronze stream: parse, append to silver (once per batch) and MERGE into gold
    (add the batch's views and dwell time to each user's totals)."""

    def __init__(self, lake: Lake) -> None:
        self.silver = IdempotentAppend(lake.table("silver"), app_id="demo-silver")  # bronze is exactly once
        self.gold = IdempotentMerge(
            lake.table("gold"),
            on=["user"],
            app_id="demo-gold",
            update={
                "views": "t.views + s.views",
                "dwell": "t.dwell + s.dwell",
                "last_ms": "greatest(t.last_ms, s.last_ms)",
            },
        )

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if batch.isEmpty():  # a bronze commit without rows (its first, empty trigger): no MERGE
            return
        events = parse_page_views(batch).persist()
        try:
            self.silver(events, batch_id)
            self.gold(per_user_totals(events), batch_id)
        finally:
            events.unpersist()


def parse_page_views(bronze: DataFrame) -> DataFrame:
    """Bronze rows -> page views with their place in the topic; malformed bodies are dropped."""
    parsed = bronze.select(
        "queueId", "queueOffset", "storeTimestamp", F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e")
    )
    return parsed.select("queueId", "queueOffset", "storeTimestamp", "e.*").where(F.col("user").isNotNull())


def per_user_totals(events: DataFrame) -> DataFrame:
    return events.groupBy("user").agg(
        F.count(F.lit(1)).alias("views"),
        F.sum("dwell").cast("bigint").alias("dwell"),
        F.max("ms").alias("last_ms"),
    )


def start_silver_gold_query(spark: SparkSession, lake: Lake) -> StreamingQuery:
    return (
        spark.readStream.format("delta")
        .load(lake.table("bronze"))
        .writeStream.foreachBatch(SilverAndGold(lake))
        .option("checkpointLocation", lake.checkpoint("silver_gold"))
        .queryName("silver_gold")
        .trigger(processingTime=SILVER_GOLD_TRIGGER)
        .start()
    )


def start_results_query(
    spark: SparkSession, lake: Lake, namesrv: str, topic: str, secured: dict[str, str]
) -> StreamingQuery:
    """Gold's new totals (inserts and update post-images) -> the results topic, keyed by user."""
    changes = (
        spark.readStream.format("delta")
        .option("readChangeFeed", "true")
        .load(lake.table("gold"))
        .where(F.col("_change_type").isin("insert", "update_postimage"))
    )
    out = changes.select(
        F.col("user").alias("key"), F.to_json(F.struct("user", "views", "dwell", "last_ms")).alias("value")
    )
    return (
        out.writeStream.format("staticmq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .options(**secured)
        .option("checkpointLocation", lake.checkpoint("results"))
        .queryName("results")
        .trigger(processingTime=RESULTS_TRIGGER)
        .start()
    )


def wait_first_triggers(queries: list[StreamingQuery], timeout_s: float = 300.0) -> None:
    """Until every query has run its first trigger: each query's first one pays for Spark's and
    Delta's start (code generation, the JIT, the Python runner: 10-20 s of 2 busy cores when the
    three start together), which is no part of keeping up with the events sent after."""
    deadline = time.monotonic() + timeout_s
    for query in queries:
        while query.lastProgress is None:
            failed = query.exception()
            if failed is not None:
                raise failed
            if time.monotonic() > deadline:
                raise TimeoutError(f"streaming query {query.name} ran no trigger within {timeout_s:g} s")
            time.sleep(0.1)


__all__ = ["BRONZE_COLUMNS", "Lake", "SilverAndGold", "create_tables", "demo_session"]
