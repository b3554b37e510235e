"""Spark's Kafka connector for the project's Spark version, without the jars Spark already ships."""

from __future__ import annotations

from pathlib import Path

from staticmq_spark.local_clusters.jvm_artifacts import fetch_artifacts

SPARK_VERSION = "4.2.0"
COORDINATES = [f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_VERSION}"]
EXCLUDES = [  # in pyspark's jars/ already (other versions there win anyway)
    "org.apache.hadoop:hadoop-client-api",
    "org.apache.hadoop:hadoop-client-runtime",
    "com.google.code.findbugs:jsr305",
    "org.lz4:lz4-java",
    "org.scala-lang:scala-library",
    "org.scala-lang.modules:scala-parallel-collections_2.13",
    "org.slf4j:slf4j-api",
    "org.xerial.snappy:snappy-java",
    "org.apache.spark:spark-tags_2.13",
    "com.github.luben:zstd-jni",
]


def spark_kafka_jars() -> list[Path]:
    """spark-sql-kafka, spark-token-provider-kafka, kafka-clients and commons-pool2."""
    return fetch_artifacts(f"spark-sql-kafka-{SPARK_VERSION}", COORDINATES, excludes=EXCLUDES)
