"""Helpers for Spark tests: static topics with known content, and reading the results back."""

from __future__ import annotations

import itertools
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from staticmq_spark.client import Admin, Producer
from staticmq_spark.errors import StaticMQError
from tests.support import waiting

T = TypeVar("T")

_ids = itertools.count()


def new_topic(namesrv: str, queues: int = 4, brokers: list[str] | None = None, prefix: str = "spark") -> str:
    topic = f"{prefix}-{next(_ids)}-{int(time.time() * 1000) % 100000}"
    with Admin(namesrv) as admin:
        if brokers:
            admin.update_static_topic(topic, queues, brokers=brokers)
        else:
            admin.update_static_topic(topic, queues, cluster="DefaultCluster")
    return topic


def produce(namesrv: str, topic: str, n: int, start: int = 0, keys: int = 50) -> dict[int, list[bytes]]:
    """Send n keyed messages "m<i>"; returns the bodies per logic queue in send order."""
    per_queue: dict[int, list[bytes]] = defaultdict(list)
    bodies = [f"m{i}".encode() for i in range(start, start + n)]
    keyset = [f"k{i % keys}" for i in range(start, start + n)]
    with Producer(namesrv, active_detection=False) as producer:
        for chunk in range(0, n, 500):
            results = producer.send_batch(topic, bodies[chunk : chunk + 500], keys=keyset[chunk : chunk + 500])
            for r in results:
                rows = r.rows if r.rows is not None else tuple(range(r.count))
                per_queue[r.queue_id].extend(bodies[chunk + row] for row in rows)
    return dict(per_queue)


def source(spark: SparkSession, namesrv: str, topic: str, **options: str) -> DataFrame:
    reader = spark.readStream.format("staticmq").option("namesrv", namesrv).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def available_now_rows(df: DataFrame, name: str, timeout_s: float = 240) -> list:  # type: ignore[type-arg]
    """Every row of the stream `df`, read by one Trigger.AvailableNow query into the memory table
    `name`; a query that failed fails the test with its error."""
    query = df.writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    query.awaitTermination(timeout_s)
    assert query.exception() is None, query.exception()
    return df.sparkSession.table(name).collect()


def to_memory(df: DataFrame, name: str, checkpoint: Path, every: str) -> StreamingQuery:
    """`df` streamed into the memory table `name` (query name too), a micro-batch `every` interval."""
    writer = df.writeStream.format("memory").queryName(name).option("checkpointLocation", str(checkpoint))
    return writer.trigger(processingTime=every).start()


def by_queue(rows: list) -> dict[int, list[bytes]]:  # type: ignore[type-arg]
    """Bodies per logic queue ordered by logic offset."""
    out: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for r in rows:
        out[r["queueId"]].append((r["queueOffset"], bytes(r["value"])))
    return {q: [b for _, b in sorted(v)] for q, v in out.items()}


def wait_until(
    predicate: Callable[[], T], timeout_s: float = 60, what: str = "condition", query: StreamingQuery | None = None
) -> T:
    """tests.support.waiting.wait_until for Spark tests: polls every 0.2 s, and a streaming query that died
    meanwhile is reported with its error at once (its status too if time runs out)."""

    def check() -> T:
        value = predicate()
        if not value and query is not None and not query.isActive:
            raise AssertionError(f"the query stopped while waiting for {what}: {query.exception()}")
        return value

    def describe() -> str:
        return f"{what}; query status {query.status}" if query is not None else what

    return waiting.wait_until(check, timeout_s, interval_s=0.2, message=describe)


def uncommitted_batches(checkpoint: Path) -> list[int]:
    """Micro-batches of a streaming query under way: planned in its offset log, not yet in its
    commit log (sorted; empty when none is)."""

    def ids(log: str) -> set[int]:
        folder = checkpoint / log
        return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.exists() else set()

    return sorted(ids("offsets") - ids("commits"))


def committed_batches(checkpoint: Path) -> int:
    """How many micro-batches the query checkpointed at `checkpoint` has committed."""
    folder = checkpoint / "commits"
    return sum(1 for p in folder.iterdir() if p.name.isdigit()) if folder.exists() else 0


class BackgroundProducer:
    """Sends keyed messages one by one until stopped; remembers what was acknowledged."""

    def __init__(self, namesrv: str, topic: str, prefix: str) -> None:
        self.acked: dict[int, list[bytes]] = defaultdict(list)
        self.attempted: set[bytes] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(namesrv, topic, prefix))

    def _run(self, namesrv: str, topic: str, prefix: str) -> None:
        i = 0
        with Producer(namesrv, send_timeout_s=5, retries=2, active_detection=False) as producer:
            while not self._stop.is_set():
                body = f"{prefix}{i}".encode()
                self.attempted.add(body)
                try:
                    r = producer.send(topic, body, key=f"key{i % 40}")
                except StaticMQError:
                    time.sleep(0.05)  # pacing: no tight retry loop while a broker is down (not a wait)
                else:
                    self.acked[r.queue_id].append(body)
                i += 1
                time.sleep(0.003)  # pacing: a steady trickle of sends (not a wait)

    def __enter__(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def merge(a: dict[int, list[bytes]], b: dict[int, list[bytes]]) -> dict[int, list[bytes]]:
    out = defaultdict(list, {q: list(v) for q, v in a.items()})
    for q, v in b.items():
        out[q].extend(v)
    return dict(out)
