"""Starting the clusters the benchmarks measure: a staticmq `LocalCluster` in a directory of the run."""

from __future__ import annotations

from pathlib import Path

from staticmq_spark.local_clusters import LocalCluster

ASYNC_INTERVAL_MS = 1000  # flush=async: every second, like Redis' appendfsync everysec


def staticmq_cluster(
    data_dir: str | Path, brokers: int = 1, flush: str = "async", interval_ms: int | None = ASYNC_INTERVAL_MS
) -> LocalCluster:
    """A `LocalCluster` of `brokers` brokers with this flush policy (`interval_ms`: the async flush's
    interval, None for the broker's default); use it as a context manager (`with ... as cluster`)."""
    store = None if interval_ms is None else {"flush_interval_ms": interval_ms}
    return LocalCluster(brokers=brokers, data_dir=data_dir, flush=flush, store=store)
