"""Apache Kafka 4.x, single node in KRaft mode, on 127.0.0.1: fetched from Maven Central, formatted, started, stopped.

    with KafkaServer(data_dir, flush_messages=1) as kafka:
        kafka.bootstrap  # "127.0.0.1:PORT"

The jars (`org.apache.kafka:kafka_2.13` and a log4j2 backend) come through
`staticmq_spark.local_clusters.jvm_artifacts.fetch_artifacts` (cached in ~/.cache/staticmq/jars/kafka-<version>).
One JVM (`kafka.Kafka`, broker and controller roles, -Xmx384m, serial GC) is started after
`kafka.tools.StorageTool format`; it is ready when its client port answers a metadata request. It
is killed when the `with` block ends, on error, and at interpreter exit.
"""

from __future__ import annotations

import atexit
import base64
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from types import TracebackType

from staticmq_spark.local_clusters.jvm_artifacts import fetch_artifacts
from staticmq_spark.local_clusters.ports import free_port

KAFKA_VERSION = "4.1.0"
LOG4J_VERSION = "2.24.3"
KAFKA_COORDINATES = [
    f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
    f"org.apache.logging.log4j:log4j-slf4j2-impl:{LOG4J_VERSION}",
    f"org.apache.logging.log4j:log4j-core:{LOG4J_VERSION}",
]
HEAP = "-Xmx384m"
LOG4J2 = """Configuration:
  Appenders:
    Console: {name: out, target: SYSTEM_OUT, PatternLayout: {pattern: "[%d] %p %m (%c)%n"}}
  Loggers:
    Root: {level: WARN, AppenderRef: [{ref: out}]}
"""


def kafka_jars() -> list[Path]:
    return fetch_artifacts(f"kafka-{KAFKA_VERSION}", KAFKA_COORDINATES)


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found:
        raise RuntimeError("Kafka needs Java 17 (`java` on PATH or JAVA_HOME)")
    return found


def server_properties(data_dir: Path, port: int, controller_port: int, flush_messages: int | None) -> str:
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir / "log"),
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
    }
    if flush_messages is not None:  # fsync every N messages appended (1: before every acknowledgement)
        props["log.flush.interval.messages"] = str(flush_messages)
    return "".join(f"{k}={v}\n" for k, v in props.items())


class KafkaServer:
    """One Kafka broker+controller JVM on free ports of 127.0.0.1, its data in `data_dir`."""

    def __init__(
        self, data_dir: str | Path, *, flush_messages: int | None = 1, startup_timeout_s: float = 90.0
    ) -> None:
        self.data_dir = Path(data_dir)
        self.flush_messages = flush_messages
        self.startup_timeout_s = startup_timeout_s
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.version = KAFKA_VERSION
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid if self.popen is not None else -1

    def _command(self, main: str, *args: str) -> list[str]:
        classpath = os.pathsep.join(str(jar) for jar in kafka_jars())
        log4j = self.data_dir / "log4j2.yaml"
        opts = [HEAP, "-Xms128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1" if "StorageTool" in main else "-server"]
        return [java(), *opts, f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath, main, *args]

    def start(self) -> KafkaServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "log4j2.yaml").write_text(LOG4J2)
        config = self.data_dir / "server.properties"
        config.write_text(server_properties(self.data_dir, self.port, free_port(), self.flush_messages))
        cluster_id = "-"
        while cluster_id.startswith("-"):  # as Kafka's Uuid.randomUuid: a leading '-' reads as an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        fmt = self._command("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config))
        done = subprocess.run(fmt, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{done.stdout}{done.stderr}")
        log = open(self.data_dir / "kafka.out", "wb")  # noqa: SIM115 - owned by the process
        self.popen = subprocess.Popen(self._command("kafka.Kafka", str(config)), stdout=log, stderr=subprocess.STDOUT)
        atexit.register(self.stop)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + self.startup_timeout_s
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        while True:
            if self.popen is not None and self.popen.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.popen.returncode}: {self.tail()}")
            try:
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:  # not up yet
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Kafka not ready on {self.bootstrap} after {self.startup_timeout_s:.0f} s: {self.tail()}"
                )
            time.sleep(0.2)

    def tail(self) -> str:
        try:
            return "\n".join((self.data_dir / "kafka.out").read_text(errors="replace").splitlines()[-20:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        self.popen.kill()
        self.popen.wait(timeout=30)

    def __enter__(self) -> KafkaServer:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
