"""The clusters the demo runs on: an embedded broker_stub cluster (default), a local Apache RocketMQ
started by the project's own script (`--rocketmq`), or an existing RocketMQ cluster (`--namesrv rocketmq://…`).
All create and remap static topics through the same `Admin`."""

from __future__ import annotations

import secrets
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from staticmq_spark.backends.address import parse_address
from staticmq_spark.backends.registry import scheme_of
from staticmq_spark.client.admin import Admin
from staticmq_spark.errors import InvalidOptionError
from staticmq_spark.local_clusters import LocalCluster, LocalRocketMQ
from staticmq_spark.local_clusters.tls_files import write_tls_files

INPUT_TOPIC = "pageviews"
OUTPUT_TOPIC = "user-stats"


class DemoCluster(ABC):
    """A cluster the demo runs on: it creates and remaps static topics through `Admin`, the same on
    both backends."""

    namesrv: str
    broker_names: list[str]
    description: str
    input_topic: str = INPUT_TOPIC
    output_topic: str = OUTPUT_TOPIC
    client_options: dict[str, Any]  # credentials= / tls_ca= of the pipeline's producers and consumers
    spark_options: dict[str, str]  # accessKey / secretKey / tlsCaFile of its Spark queries
    admin_options: dict[str, Any]  # credentials= / tls_ca= of topic administration

    def create_static_topic(self, topic: str, queues: int, brokers: list[str] | None) -> None:
        """`brokers`: where its logic queues go (None: every broker)."""
        with Admin(self.namesrv, **self.admin_options) as admin:
            admin.update_static_topic(topic, queues, brokers=brokers or list(self.broker_names))

    def remap(self, topic: str, brokers: list[str]) -> tuple[dict[int, str], bool]:
        """(logic queue -> "old -> new" for every queue that moved, mapping consistent afterwards)."""
        with Admin(self.namesrv, **self.admin_options) as admin:
            result = admin.remapping_static_topic(topic, brokers=brokers)
            consistent = admin.static_topic_status(topic)[0].ok
        return {q: f"{a} -> {b}" for q, (a, b) in sorted(result.moved.items())}, consistent

    @abstractmethod
    def close(self) -> None: ...


class StaticMQDemoCluster(DemoCluster):
    """The embedded cluster. `secure`: every call authenticated (an ACL with an admin account for
    topic commands and a `pipeline` account that may only produce and consume the demo's two
    topics) and TLS with a CA made for this run."""

    def __init__(self, brokers: int, root: Path, secure: bool = False) -> None:
        self.input_topic, self.output_topic = INPUT_TOPIC, OUTPUT_TOPIC
        self.client_options: dict[str, Any] = {}
        self.spark_options: dict[str, str] = {}
        security: dict[str, Any] = {}
        if secure:
            security = self._secure_files(root / "security")
        self.cluster = LocalCluster(
            brokers, root / "cluster", heartbeat_ms=500, broker_timeout_ms=5000, **security
        ).start()
        self.namesrv = self.cluster.namesrv
        self.broker_names = self.cluster.broker_names
        self.admin_options = dict(self.cluster.client_options)
        self.description = f"a local staticmq cluster: a name server and {brokers} brokers in {root}" + (
            " (ACL and TLS on: the pipeline signs as account 'pipeline')" if secure else ""
        )

    def _secure_files(self, directory: Path) -> dict[str, Any]:
        tls = write_tls_files(directory)
        admin_secret, pipeline_secret = secrets.token_hex(16), secrets.token_hex(16)
        acl = directory / "acl.yml"
        topics = ", ".join(f'"{t}=PUB|SUB"' for t in (self.input_topic, self.output_topic))
        acl.write_text(
            "accounts:\n"
            f"  - accessKey: admin\n    secretKey: {admin_secret}\n    admin: true\n"
            f"  - accessKey: pipeline\n    secretKey: {pipeline_secret}\n"
            f"    defaultTopicPerm: DENY\n    defaultGroupPerm: DENY\n    topicPerms: [{topics}]\n"
        )
        acl.chmod(0o600)
        self.client_options = {"credentials": ("pipeline", pipeline_secret), "tls_ca": str(tls.ca)}
        self.spark_options = {"accessKey": "pipeline", "secretKey": pipeline_secret, "tlsCaFile": str(tls.ca)}
        return {"acl": acl, "tls_cert": tls.cert, "tls_key": tls.key, "tls_ca": tls.ca}

    def close(self) -> None:
        self.cluster.stop()


class RocketMQDemoCluster(DemoCluster):
    """A RocketMQ cluster: a local one started by the project's script, or someone else's."""

    def __init__(self, root: Path, address: str | None = None, brokers: int = 2) -> None:
        self.local: LocalRocketMQ | None = None
        self.client_options: dict[str, Any] = {}  # RocketMQ's ACL keys come from ROCKETMQ_ACCESS_KEY/SECRET_KEY
        self.spark_options: dict[str, str] = {}
        self.admin_options: dict[str, Any] = {}
        if address is None:
            self.local = LocalRocketMQ(root / "rocketmq", brokers=brokers).start()
            address = self.local.address
            self.description = f"a local Apache RocketMQ 5.5 cluster: a name server and {brokers} brokers in {root}"
        else:  # a cluster of someone else's: fresh topic names, never ones in use
            self.description = f"the Apache RocketMQ cluster at {address}"
            run = time.strftime("%Y%m%d%H%M%S")
            self.input_topic, self.output_topic = f"{INPUT_TOPIC}-{run}", f"{OUTPUT_TOPIC}-{run}"
        self.namesrv = str(parse_address(address))
        with Admin(self.namesrv) as admin:
            self.broker_names = sorted(b.name for b in admin.cluster_info())
        if len(self.broker_names) < 2:
            self.close()
            raise InvalidOptionError(f"the demo remaps between brokers: {address} has {len(self.broker_names)}")

    def close(self) -> None:
        if self.local is not None:
            self.local.close()


def open_demo_cluster(
    root: Path, brokers: int, rocketmq: bool, namesrv: str | None, secure: bool = False
) -> DemoCluster:
    if secure and (rocketmq or namesrv is not None):
        raise InvalidOptionError("--secure applies to the embedded staticmq cluster, not to Apache RocketMQ")
    if namesrv is not None:
        if scheme_of(namesrv) != "rocketmq":
            raise InvalidOptionError(
                "--namesrv takes a rocketmq://host:port address (the demo starts its own staticmq)"
            )
        return RocketMQDemoCluster(root, namesrv)
    if rocketmq:
        return RocketMQDemoCluster(root, brokers=brokers)
    return StaticMQDemoCluster(brokers, root, secure)
