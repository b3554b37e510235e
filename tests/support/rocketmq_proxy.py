"""Apache RocketMQ's proxy (what its gRPC clients, such as the Java `SimpleConsumer`, talk to) in
cluster mode in front of a `LocalRocketMQ`, and that Java client compiled against its own jars.

The proxy's jars and RocketMQ's gRPC Java client are bundles of their own (the proxy brings gRPC
and its own copies of the broker's jars; the client is one shaded jar), fetched once like the
broker's."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from staticmq_spark.local_clusters.jvm_artifacts import bundle_dir, fetch_artifacts
from staticmq_spark.local_clusters.ports import free_port
from staticmq_spark.local_clusters.rocketmq import ROCKETMQ_VERSION, LocalRocketMQ, RocketMQClusterError, jvm_command
from tests.support.rocketmq_tools import compile_client
from tests.support.waiting import wait_until

PROXY_BUNDLE = f"rocketmq-proxy-{ROCKETMQ_VERSION}"
CLIENT_JAVA_VERSION = "5.0.8"  # rocketmq-clients' Java client, the newest on Maven Central here
CLIENT_JAVA_BUNDLE = f"rocketmq-client-java-{CLIENT_JAVA_VERSION}"
READY = "rocketmq-proxy startup successfully"


class LocalRocketMQProxy:
    """One proxy process in cluster mode (it finds the brokers through `cluster`'s name server),
    serving gRPC on `endpoint` and remoting on another port, both on 127.0.0.1."""

    def __init__(self, cluster: LocalRocketMQ, root: Path) -> None:
        self.cluster = cluster
        self.root = Path(root)
        self.grpc_port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def start(self) -> LocalRocketMQProxy:
        fetch_artifacts(PROXY_BUNDLE, [f"org.apache.rocketmq:rocketmq-proxy:{ROCKETMQ_VERSION}"])
        self.root.mkdir(parents=True, exist_ok=True)
        self.grpc_port = free_port()
        config = {
            "rocketMQClusterName": "DefaultCluster",
            "namesrvAddr": self.cluster.namesrv,
            "grpcServerPort": self.grpc_port,
            "remotingListenPort": free_port(),
            # a client's receive waits at least 10 s by default; the tests use shorter invisible times
            "minInvisibleTimeMillsForRecv": 1000,
        }
        conf = self.root / "rmq-proxy.json"
        conf.write_text(json.dumps(config))
        cmd = jvm_command(
            bundle_dir(PROXY_BUNDLE),
            self.root,
            "proxy",
            "-Xms128m -Xmx384m -XX:MaxDirectMemorySize=256m",
            "org.apache.rocketmq.proxy.ProxyStartup",
            ["-pc", str(conf), "-pm", "cluster"],
            self.root / "home",
            self.cluster.java,
        )
        log = self.root / "proxy.out"
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=self.root)
        proc = self.proc

        def up() -> bool:
            if proc.poll() is not None:
                tail = log.read_bytes()[-3000:].decode(errors="replace")
                raise RocketMQClusterError(f"RocketMQ's proxy exited ({proc.returncode}); log {log}:\n{tail}")
            return READY.encode() in log.read_bytes()

        wait_until(up, 120, interval_s=0.2, message=f"RocketMQ's proxy to start (log {log})")
        return self

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def compile_simple_client(source: Path, classes: Path) -> str:
    """`source` (a program using rocketmq-client-java's gRPC client) compiled into `classes`: the
    classpath to run it with."""
    fetch_artifacts(CLIENT_JAVA_BUNDLE, [f"org.apache.rocketmq:rocketmq-client-java:{CLIENT_JAVA_VERSION}"])
    return compile_client(source, classes, bundle_dir(CLIENT_JAVA_BUNDLE))
