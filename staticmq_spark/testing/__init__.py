"""Local clusters (broker_stub, Apache RocketMQ) that notebooks, the demo and the tests start."""

from staticmq_spark.testing.local_cluster import *  # noqa: F403
