"""A streaming query's source runner, the Python process Spark starts per query, imports the
installed pyspark (its compiled modules) when the source was registered through `workers/site`,
as `configure_spark` registers `staticmq`; and pyspark.zip when registered plainly. The read tasks
of such a source run in workers that acknowledge the JVM's task pieces at once, forked by a
daemon that imported staticmq's task code first. After a session's
first query, each query's runner is forked from the session's warm runner process."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

from staticmq_spark import configure_spark
from staticmq_spark.data_source import StaticMQDataSource
from staticmq_spark.workers.site import WORKER_SITE, register
from staticmq_spark.workers.site.staticmq_warm_runner import RUNNER_MODULE
from tests.support.spark import available_now_rows, new_topic, produce, source


class RunnerPathReader(DataSourceStreamReader):
    """Its one offset is where the runner imported pyspark from."""

    def initialOffset(self) -> dict[str, str]:
        return {"pyspark": ""}

    def latestOffset(self) -> dict[str, str]:
        import pyspark

        return {"pyspark": pyspark.__file__ or ""}

    def partitions(self, start: dict[str, str], end: dict[str, str]) -> list[InputPartition]:
        return []

    def read(self, partition: InputPartition) -> Any:
        return iter([])


class RunnerPathSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "runner_path_probe"

    def schema(self) -> str:
        return "value string"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return RunnerPathReader()


class PlainRunnerPathSource(RunnerPathSource):
    @classmethod
    def name(cls) -> str:
        return "runner_path_probe_plain"


def runner_pyspark(spark: SparkSession, source: str, checkpoint: str) -> str:
    query = (
        spark.readStream.format(source)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .start()
    )
    try:
        query.processAllAvailable()
        return str(json.loads(query.lastProgress["sources"][0]["endOffset"])["pyspark"])
    finally:
        query.stop()


def test_a_query_runner_imports_the_installed_pyspark_when_registered_through_worker_site(spark, tmp_path) -> None:
    register(spark, RunnerPathSource)
    spark.dataSource.register(PlainRunnerPathSource)
    assert ".zip" not in runner_pyspark(spark, "runner_path_probe", str(tmp_path / "fast"))
    assert "pyspark.zip" in runner_pyspark(spark, "runner_path_probe_plain", str(tmp_path / "plain"))


def test_configure_spark_registers_staticmq_with_the_worker_site_on_its_workers_path(spark) -> None:
    spark.dataSource.register(StaticMQDataSource)  # plainly, as another test or a user may have
    assert configure_spark(SparkSession.builder).getOrCreate() is spark  # registers it again
    source = spark._jsparkSession.sessionState().dataSourceManager().lookupDataSource("staticmq")
    assert str(source.dataSourceCls().envVars().get("PYTHONPATH")).split(":")[0] == WORKER_SITE


TASK_PROBE_SCHEMA = pa.schema(
    [("pid", pa.int32()), ("wrapped", pa.bool_()), ("daemon", pa.string()), ("daemon_has_grpc", pa.bool_())]
)


class TaskProbeReader(DataSourceReader):
    """One row per task: its worker's pid; whether the daemon's `worker`, which served the task, is
    the one that first takes the socket out of delayed-acknowledgement mode; the command line of
    the daemon that forked the worker, and whether that daemon has grpc's library loaded (a task of
    this probe imports nothing of staticmq)."""

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(8)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        wrapped = bool(getattr(getattr(sys.modules["__main__"], "worker", None), "acks_at_once", False))
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            daemon = f.read().replace(b"\0", b" ").decode()
        with open(f"/proc/{os.getppid()}/maps") as maps:
            has_grpc = any(os.path.basename(line.split()[-1]).startswith("cygrpc.") for line in maps)
        row = {"pid": [os.getpid()], "wrapped": [wrapped], "daemon": [daemon], "daemon_has_grpc": [has_grpc]}
        yield pa.RecordBatch.from_pydict(row, schema=TASK_PROBE_SCHEMA)


class TaskProbeSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "task_probe"

    def schema(self) -> str:
        return "pid int, wrapped boolean, daemon string, daemon_has_grpc boolean"

    def reader(self, schema: Any) -> DataSourceReader:
        return TaskProbeReader()


def test_a_read_task_starts_on_a_socket_that_acknowledges_the_jvm_at_once(spark) -> None:
    register(spark, TaskProbeSource)
    rows = spark.read.format("task_probe").load().collect()
    assert len(rows) == 8
    assert len({r.pid for r in rows}) < 8  # reused workers too, whose sockets answered a task before
    # what acks_at_once does to a socket: tests/unit/workers/site/test_worker_site.py
    assert all(r.wrapped for r in rows), rows


def test_the_worker_daemon_of_staticmq_tasks_imports_their_code_before_it_forks_a_worker(spark) -> None:
    register(spark, TaskProbeSource)
    rows = spark.read.format("task_probe").load().collect()
    assert all("-m pyspark.daemon pyspark.worker" in r.daemon for r in rows), rows
    assert all(r.daemon_has_grpc for r in rows), rows  # only staticmq's backends import grpc


class RunnerProcessReader(RunnerPathReader):
    """Its one offset says which process ran it: its module, and its parent's command line."""

    def latestOffset(self) -> dict[str, str]:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = f.read().replace(b"\0", b" ").decode()
        return {"main": sys.modules["__main__"].__spec__.name, "parent": parent, "argv": " ".join(sys.argv)}


class RunnerProcessSource(RunnerPathSource):
    @classmethod
    def name(cls) -> str:
        return "runner_process_probe"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return RunnerProcessReader()


def runner_process(spark: SparkSession, checkpoint: str) -> dict[str, str]:
    query = spark.readStream.format("runner_process_probe").load().writeStream.format("noop")
    started = query.option("checkpointLocation", checkpoint).start()
    try:
        started.processAllAvailable()
        return dict(json.loads(started.lastProgress["sources"][0]["endOffset"]))
    finally:
        started.stop()


def test_a_later_querys_source_runner_is_forked_from_the_sessions_warm_runner(spark, cluster, tmp_path) -> None:
    register(spark, RunnerProcessSource)
    runner_process(spark, str(tmp_path / "first"))  # a session's first runner starts the warm process
    later = runner_process(spark, str(tmp_path / "later"))
    assert later["main"] == RUNNER_MODULE  # the runner module runs as __main__, as Spark starts it
    assert later["argv"].endswith("/python_streaming_source_runner.py") and " " not in later["argv"]
    assert "-m staticmq_warm_runner serve" in later["parent"]
    # A staticmq query's runner forked so reads every message.
    topic = new_topic(cluster.namesrv, 2)
    sent = produce(cluster.namesrv, topic, 500)
    rows = available_now_rows(source(spark, cluster.namesrv, topic, startingOffsets="earliest"), "warm_runner_rows")
    got = sorted((r.queueId, r.queueOffset, bytes(r.value)) for r in rows)
    assert got == sorted((q, i, body) for q, bodies in sent.items() for i, body in enumerate(bodies))
