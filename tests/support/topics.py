"""Plain (dynamic) topics for the tests that need one."""

from __future__ import annotations

from staticmq_spark.client import Admin


def create_topic(namesrv: str, topic: str, queues: int = 4) -> None:
    with Admin(namesrv) as admin:
        admin.update_topic(topic, cluster="DefaultCluster", read_queues=queues, write_queues=queues)
