"""Makes `format("staticmq")` work in any Spark session once staticmq is installed: pyspark looks
up installed top-level modules named pyspark_* and registers their DefaultSource."""

from staticmq_spark.data_source import StaticMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
