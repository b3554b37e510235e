"""What staticmq's Spark Python processes import before their first piece of work, imported ahead of
time by a process that forks them: Spark's worker daemon for staticmq's tasks (`preload_task_path`,
called by `workers/site`'s sitecustomize) and the warm runner of streaming queries
(`staticmq_warm_runner`, which adds pyspark's runner module).

Why the daemon: pyspark's daemon forks a worker per task connection and that worker imports
pyspark's worker module, pyarrow, numpy, grpc and the connector (~0.35 CPU-s on 2 cores) before
its first task. Spark stops a worker idle for one minute, so a query that starts after a minute of
quiet (a scheduled AvailableNow job, the next micro-batch of a slow trigger) pays that again in
every new worker: 200,000 rows of 1 KiB in 4 micro-batches took 2.4-2.9 s after 70 s idle against
1.35-1.85 s right after another query, 2.2-2.4 s after 70 s idle with this preload
(docs/investigations/2026-12-06-worker-preload.md). Imported once in the daemon, every worker it
forks starts with them (~95 MB resident in the daemon, shared by its workers).
"""

from __future__ import annotations

import gc
import importlib

from staticmq_spark.backends.registry import ENTRY_POINTS

# what pyspark's task worker (`pyspark.worker`) imports for a data-source read beyond its own module:
# the module whose functions a read task's pickled plan refers to (pyspark 4.0-4.3)
PYSPARK_READ_MODULE = "pyspark.sql.worker.plan_data_source_read"
# staticmq's side: the data source and its reader (unpickled per task), a read's and a write's code
STATICMQ_TASK_MODULES = (
    "staticmq_spark.data_source",
    "staticmq_spark.source.stream_reader",
    "staticmq_spark.source.executor",
    "staticmq_spark.sink.writer",
)


def import_backends() -> None:
    """Every network backend's implementation (each is otherwise imported at its first address)."""
    for scheme, entry in ENTRY_POINTS.items():
        if scheme != "memory":
            importlib.import_module(entry.partition(":")[0])


def preload_task_path(worker_module: str) -> None:
    """Import what the workers of a daemon serving `worker_module` import for staticmq: that module
    (pyspark has a daemon per worker module: `pyspark.worker` runs tasks, others create a data
    source or plan its reads), the module a read task's plan refers to, and staticmq's data source,
    reader and writer with their backends. Then move it all out of the cyclic collector's sight
    (`gc.freeze`): the children forked after this start with it imported and frozen, and the
    collection pyspark's daemon runs after each task of theirs does not walk it. A pyspark
    without `PYSPARK_READ_MODULE` leaves that to the workers."""
    importlib.import_module(worker_module)
    try:
        importlib.import_module(PYSPARK_READ_MODULE)
    except ImportError:
        pass  # another pyspark's layout: its workers import what they use
    for name in STATICMQ_TASK_MODULES:
        importlib.import_module(name)
    import_backends()
    gc.collect()
    gc.freeze()
