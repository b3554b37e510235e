"""The cluster under test: 3 brokers of staticmq's broker_stub or of Apache RocketMQ 5.5.

Both backends create and remap the static topic through staticmq's `Admin` (over RocketMQ it
settles every broker's copy of the mapping, which RocketMQ 5.5.0's `mqadmin remappingStaticTopic`
does not: docs/soak.md, defect 2); `LocalCluster` / `LocalRocketMQ` start, kill and restart the
brokers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

TOTAL_QUEUES = 16


class Backend:
    """The cluster under test: start, create the topic, remap, kill and restart a broker."""

    name = ""
    address = ""
    cluster_name = ""
    brokers: list[str] = []
    last_targets: list[str] = []

    def start(self) -> None: ...
    def kill_broker(self, name: str) -> None: ...
    def start_broker(self, name: str) -> None: ...
    def close(self) -> None: ...

    def create_topic(self, topic: str) -> None:
        from staticmq_spark.client import Admin

        with Admin(self.address) as admin:
            admin.update_static_topic(topic, TOTAL_QUEUES, cluster=self.cluster_name)

    def remap(self, topic: str, brokers: list[str]) -> None:
        from staticmq_spark.client import Admin

        with Admin(self.address) as admin:
            admin.remapping_static_topic(topic, brokers=brokers)

    def producer(self) -> Any:
        from staticmq_spark.client import Producer

        return Producer(self.address)


class StaticMQBackend(Backend):
    name = "staticmq"

    def __init__(self, root: Path) -> None:
        from staticmq_spark.local_clusters import LocalCluster

        self.cluster = LocalCluster(brokers=3, data_dir=root / "cluster", flush="sync")

    def start(self) -> None:
        self.cluster.start()
        self.address = self.cluster.namesrv
        self.cluster_name = self.cluster.cluster_name
        self.brokers = self.cluster.broker_names

    def kill_broker(self, name: str) -> None:
        self.cluster.kill_broker(name)

    def start_broker(self, name: str) -> None:
        self.cluster.start_broker(name)

    def close(self) -> None:
        self.cluster.stop()

    def producer(self) -> Any:
        from staticmq_spark.client import Producer

        return Producer(self.address, send_timeout_s=15, active_detection=False)


class RocketMQBackend(Backend):
    name = "rocketmq"
    cluster_name = "DefaultCluster"  # LocalRocketMQ's brokerClusterName

    def __init__(self, root: Path) -> None:
        from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ

        self.cluster = LocalRocketMQ(root / "rocketmq", brokers=3)

    def start(self) -> None:
        self.cluster.start()
        self.address = self.cluster.address
        self.brokers = list(self.cluster.broker_names)

    def kill_broker(self, name: str) -> None:
        self.cluster.kill(name)

    def start_broker(self, name: str) -> None:
        self.cluster.start_broker(name)  # same port (kept in broker_ports), same store
        self.cluster.wait_registered()

    def close(self) -> None:
        self.cluster.close()
