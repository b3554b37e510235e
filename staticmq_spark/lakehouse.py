"""Landing static-topic messages in Delta Lake exactly once: bronze, and idempotent MERGEs.

**Bronze** is the raw stream as it came: every message once, with its place in the topic.

    query = start_bronze(spark, namesrv, "orders", "/lake/bronze/orders", "/lake/_checkpoints/bronze")

`readStream.format("staticmq")` replays exactly the offsets of an unfinished micro-batch from the
checkpoint, and Delta's streaming sink commits a micro-batch once (it records the query id and
batch id in the table's log), so the table holds each message once through driver crashes and
restarts; `(topic, queueId, queueOffset)` identifies a message.

**Silver / gold** tables are kept with `foreachBatch` and MERGE. A replayed micro-batch must not be
merged twice: `IdempotentMerge` tags each MERGE with Delta's transaction identifiers (`txnAppId` =
a stable name of the writer, `txnVersion` = the micro-batch id), and Delta skips a write whose
version is not above the last one it recorded for that app id. Each target table gets its own
app id, so one micro-batch may MERGE into several tables and a crash between them is repaired by
the replay.

    silver = IdempotentMerge("/lake/silver/events", on=["eventId"], app_id="orders-silver")
    bronze_stream.writeStream.foreachBatch(lambda df, batch: silver(df, batch)).start()

`IdempotentAppend` is the same guard on a plain append, for a table fed from an exactly-once
input (bronze): no MERGE, no join with what the table holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from staticmq_spark.errors import missing_extra

if TYPE_CHECKING:
    from delta.tables import DeltaTable

BRONZE_COLUMNS = (
    "topic",
    "queueId",
    "queueOffset",
    "key",
    "tags",
    "value",
    "properties",
    "bornTimestamp",
    "storeTimestamp",
)
BRONZE_STATS_COLUMNS = ("queueId", "queueOffset", "storeTimestamp")  # what bronze is filtered on
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


def bronze_stream(spark: SparkSession, namesrv: str, topic: str, **source_options: str) -> DataFrame:
    """The staticmq stream of `topic` with the bronze columns (see `BRONZE_COLUMNS`)."""
    reader = spark.readStream.format("staticmq").option("namesrv", namesrv).option("topic", topic)
    for name, value in source_options.items():
        reader = reader.option(name, value)
    return reader.load().select(*BRONZE_COLUMNS)


def start_bronze(
    spark: SparkSession,
    namesrv: str,
    topic: str,
    table: str,
    checkpoint: str,
    *,
    trigger_interval: str = "1 second",
    available_now: bool = False,
    query_name: str | None = None,
    files_per_batch: int | None = None,
    **source_options: str,
) -> StreamingQuery:
    """Stream `topic` into the Delta table at path `table` (created on the first batch, or before
    with `create_bronze_table`). Each micro-batch writes one file per logic queue it read, or at
    most `files_per_batch` files (fewer, larger files and less work per commit; the rows and the
    exactly-once guarantee are the same)."""
    if files_per_batch is not None and files_per_batch < 1:
        raise ValueError(f"files_per_batch must be at least 1, not {files_per_batch}")
    source_options.setdefault("startingOffsets", "earliest")
    stream = bronze_stream(spark, namesrv, topic, **source_options)
    if files_per_batch is not None:
        stream = stream.coalesce(files_per_batch)
    writer = stream.writeStream.format("delta").outputMode("append").option("checkpointLocation", checkpoint)
    if query_name:
        writer = writer.queryName(query_name)
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=trigger_interval)
    return writer.start(table)


def create_bronze_table(spark: SparkSession, namesrv: str, topic: str, table: str, **source_options: str) -> None:
    """The bronze table at path `table`, empty, unless it exists. Delta keeps file statistics only
    for BRONZE_STATS_COLUMNS (by default it keeps them for the first 32 columns: the key, tags and
    property maps too, which nobody filters bronze on and which cost a write time per file)."""
    schema = bronze_stream(spark, namesrv, topic, **source_options).schema
    columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields)
    stats = ",".join(BRONZE_STATS_COLUMNS)
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS delta.`{table}` ({columns}) USING delta "
        f"TBLPROPERTIES ('delta.dataSkippingStatsColumns' = '{stats}')"
    )


def _delta_table() -> type[DeltaTable]:
    """delta-spark's Python API (the [delta] extra), imported on first use: bronze, a plain
    `writeStream.format("delta")`, needs only Delta's jars, and on Databricks the runtime has it."""
    try:
        from delta.tables import DeltaTable
    except ModuleNotFoundError as exc:
        raise (missing_extra(exc, "a Delta Lake MERGE or table lookup") or exc) from None
    return DeltaTable


def delta_table_exists(spark: SparkSession, path: str) -> bool:
    return bool(_delta_table().isDeltaTable(spark, path))


class IdempotentAppend:
    """An append of a micro-batch to the Delta table at `path`, done at most once per batch id
    (Delta's `txnAppId`/`txnVersion` on the write). For a `foreachBatch` whose input holds each
    row once already (a bronze stream), it does what an insert-only MERGE does at a fraction of
    the cost: no join with the table. Creates the table on the first batch."""

    def __init__(self, path: str, *, app_id: str) -> None:
        if not app_id:
            raise ValueError("IdempotentAppend needs a non-empty `app_id` (a stable name of this writer)")
        self.path = path
        self.app_id = app_id

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        writer = batch.write.format("delta").mode("append").option("txnAppId", self.app_id)
        writer.option("txnVersion", batch_id).save(self.path)


class IdempotentMerge:
    """A MERGE of a micro-batch into the Delta table at `path`, done at most once per batch id.

    `on`: the key columns. Matched rows are updated with `update` (column -> SQL expression over
    `t` (target) and `s` (source); default: every column from the source), unmatched ones are
    inserted; `insert_only=True` only inserts (deduplication). The source must have at most one
    row per key: Delta refuses a MERGE where two source rows match one target row.
    The table is created from the first batch's schema if it does not exist.
    """

    def __init__(
        self,
        path: str,
        *,
        on: Sequence[str],
        app_id: str,
        update: Mapping[str, str] | None = None,
        insert_only: bool = False,
    ) -> None:
        if not on:
            raise ValueError("IdempotentMerge needs at least one key column in `on`")
        if not app_id:
            raise ValueError("IdempotentMerge needs a non-empty `app_id` (a stable name of this writer)")
        self.path = path
        self.on = list(on)
        self.app_id = app_id
        self.update = dict(update) if update else None
        self.insert_only = insert_only

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        # The micro-batch's own session: a streaming query runs in a clone of the session, so the
        # transaction settings below never reach another query's writes.
        spark = batch.sparkSession
        if not delta_table_exists(spark, self.path):
            IdempotentAppend(self.path, app_id=self.app_id)(batch, batch_id)
            return
        condition = " AND ".join(f"t.`{c}` <=> s.`{c}`" for c in self.on)
        merge = _delta_table().forPath(spark, self.path).alias("t").merge(batch.alias("s"), condition)
        if not self.insert_only:
            merge = (
                merge.whenMatchedUpdate(set=dict[str, Any](self.update))
                if self.update
                else merge.whenMatchedUpdateAll()
            )
        merge = merge.whenNotMatchedInsertAll()
        with _transaction(spark, self.app_id, batch_id):
            merge.execute()


class _transaction:
    """Sets Delta's transaction identifiers on the session for the duration of one write."""

    def __init__(self, spark: SparkSession, app_id: str, version: int) -> None:
        self.conf = spark.conf
        self.values = {TXN_APP_ID: app_id, TXN_VERSION: str(version)}

    def __enter__(self) -> None:
        for key, value in self.values.items():
            self.conf.set(key, value)

    def __exit__(self, *exc: Any) -> None:
        for key in self.values:
            self.conf.unset(key)


def table_version(spark: SparkSession, path: str) -> int:
    """The Delta table's current version (-1 if there is no table)."""
    if not delta_table_exists(spark, path):
        return -1
    row = _delta_table().forPath(spark, path).history(1).select("version").first()
    return int(row[0]) if row is not None else -1
