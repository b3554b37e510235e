"""Local clusters on loopback, started by `staticmq cluster`, `staticmq demo`, the notebooks, the
tests and the benchmarks: a broker_stub cluster (`LocalCluster`, staticmq.py) and a real Apache
RocketMQ one (`LocalRocketMQ`, rocketmq.py), with RocketMQ's own `mqadmin` (`MQAdmin`; as a command:
`python -m staticmq_spark.local_clusters.mqadmin`). Never for production."""

from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ, MQAdmin
from staticmq_spark.local_clusters.staticmq import LocalCluster

__all__ = ["LocalCluster", "LocalRocketMQ", "MQAdmin"]
