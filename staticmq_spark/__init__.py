from staticmq_spark.spark_session import configure_spark

__all__ = ["configure_spark"]
