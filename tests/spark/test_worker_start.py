"""A streaming query's source runner, the Python process Spark starts per query, imports the
installed pyspark (its compiled modules) when the source was registered through `worker_site`,
as `configure_spark` registers `staticmq`; and pyspark.zip when registered plainly."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from staticmq_spark import configure_spark
from staticmq_spark.data_source import StaticMQDataSource
from staticmq_spark.worker_site import WORKER_SITE, register


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
