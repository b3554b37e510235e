"""Spark figures: source (readStream -> noop), sink (df.write) and end-to-end latency, staticmq vs Kafka."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession


@dataclass
class Endpoint:
    """How Spark reaches one system: format and connection options (`topic` added per query)."""

    system: str
    fmt: str
    options: dict[str, str]

    def source_options(self, topic: str) -> dict[str, str]:
        if self.fmt == "kafka":
            return {**self.options, "subscribe": topic, "startingOffsets": "earliest"}
        return {**self.options, "topic": topic, "startingOffsets": "earliest"}

    def sink_options(self, topic: str) -> dict[str, str]:
        if self.fmt == "kafka":  # keyed, acks=all, idempotent, batched like the confluent-kafka producer
            tuning = {"kafka.acks": "all", "kafka.enable.idempotence": "true"}
            tuning.update({"kafka.linger.ms": "5", "kafka.batch.size": str(1 << 20)})
            return {**self.options, "topic": topic, **tuning}
        return {**self.options, "topic": topic}  # keyed (murmur3(key) mod queues), exactly once by default


def source_run(
    spark: SparkSession, end: Endpoint, topic: str, ck: str, max_per_trigger: int | None
) -> tuple[int, float]:
    """(rows, seconds) of one availableNow query into the noop sink."""
    reader = spark.readStream.format(end.fmt)
    options = end.source_options(topic)
    if max_per_trigger:
        options["maxOffsetsPerTrigger"] = str(max_per_trigger)
    for key, value in options.items():
        reader = reader.option(key, value)
    t0 = time.perf_counter()
    query = reader.load().writeStream.format("noop").trigger(availableNow=True).option("checkpointLocation", ck).start()
    query.awaitTermination()
    elapsed = time.perf_counter() - t0
    if query.exception() is not None:
        raise RuntimeError(f"{end.system} source failed: {query.exception()}")
    return sum(p["numInputRows"] for p in query.recentProgress), elapsed


def running_run(spark: SparkSession, end: Endpoint, topic: str, ck: str, per_trigger: int) -> tuple[int, float, int]:
    """(rows, seconds, micro-batches) of a running query's steady state: one availableNow query of
    `per_trigger` rows per micro-batch into noop; rows and summed triggerExecution of the micro-batches
    after the first (the query's start-up, in the first, left out)."""
    reader = spark.readStream.format(end.fmt)
    for key, value in {**end.source_options(topic), "maxOffsetsPerTrigger": str(per_trigger)}.items():
        reader = reader.option(key, value)
    query = reader.load().writeStream.format("noop").trigger(availableNow=True).option("checkpointLocation", ck).start()
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"{end.system} source failed: {query.exception()}")
    batches = sorted((p for p in query.recentProgress if p["numInputRows"]), key=lambda p: p["batchId"])
    if len(batches) < 2:
        raise RuntimeError(f"{end.system}: {len(batches)} micro-batch(es) of rows, expected at least 2")
    steady = batches[1:]
    seconds = sum(p["durationMs"]["triggerExecution"] for p in steady) / 1000
    return sum(p["numInputRows"] for p in steady), seconds, len(batches)


def sink_frame(spark: SparkSession, rows: int, size: int, partitions: int) -> DataFrame:
    """`rows` cached rows: key 'user-<id % 100000>', value a string of `size` characters."""
    repeat = size // 64 + 1
    df = (
        spark.range(rows, numPartitions=partitions)
        .selectExpr(
            "CONCAT('user-', CAST(id % 100000 AS STRING)) AS key",
            f"substr(repeat(sha2(CAST(id AS STRING), 256), {repeat}), 1, {size}) AS value",
        )
        .cache()
    )
    if df.count() != rows:
        raise RuntimeError("the cached sink input lost rows")
    return df


def sink_run(df: DataFrame, end: Endpoint, topic: str, extra: dict[str, str] | None = None) -> float:
    writer = df.write.format(end.fmt).mode("append")
    for key, value in {**end.sink_options(topic), **(extra or {})}.items():
        writer = writer.option(key, value)
    t0 = time.perf_counter()
    writer.save()
    return time.perf_counter() - t0


def latency_run(
    spark: SparkSession,
    end: Endpoint,
    topic: str,
    ck: str,
    send: Callable[[bytes], object],
    seconds: float,
    every_s: float,
    progress: list[dict[str, Any]] | None = None,
) -> tuple[float, float, int]:
    """(p50 ms, p99 ms, samples): one message every `every_s` for `seconds`, its send time in the value;
    arrival = when the driver holds the row of a 0-second-trigger micro-batch (foreachBatch + collect).
    `progress` receives the query's StreamingQueryProgress of every micro-batch (as dicts)."""
    arrivals: list[float] = []
    lock = threading.Lock()

    def on_batch(batch: DataFrame, batch_id: int) -> None:
        values = [r.value for r in batch.select("value").collect()]
        now = time.time()
        with lock:
            arrivals.extend(now - float(bytes(v[:20]).decode()) for v in values)

    reader = spark.readStream.format(end.fmt)
    for key, value in {**end.source_options(topic), "startingOffsets": "latest"}.items():
        reader = reader.option(key, value)
    query = reader.load().writeStream.foreachBatch(on_batch).trigger(processingTime="0 seconds")
    started = query.option("checkpointLocation", ck).start()
    try:
        wait_first_batch(started)
        sent, stop_at = 0, time.monotonic() + seconds
        while time.monotonic() < stop_at:
            send(f"{time.time():020.6f}".encode() + b"x" * 80)
            sent += 1
            time.sleep(every_s)
        deadline = time.monotonic() + 60
        while len(arrivals) < sent and time.monotonic() < deadline:
            time.sleep(0.05)
        if progress is not None:
            progress.extend(started.recentProgress)
    finally:
        started.stop()
    if len(arrivals) != sent:
        raise RuntimeError(f"{end.system}: {len(arrivals)} of {sent} latency probes arrived")
    ms = sorted(a * 1000 for a in arrivals)
    return statistics.median(ms), ms[min(len(ms) - 1, int(len(ms) * 0.99))], len(ms)


def wait_first_batch(query: Any) -> None:
    deadline = time.monotonic() + 60
    while query.lastProgress is None and query.status["message"] != "Waiting for data to arrive":
        if query.exception() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"latency query did not start: {query.exception()}")
        time.sleep(0.05)
