"""A small real Apache RocketMQ cluster on loopback (name server + brokers), and `mqadmin`.

For `staticmq demo --rocketmq`, the notebooks, tests and benchmarks; never for production. The jars come
from Maven Central through `jvm_artifacts` (cached); each JVM gets a small heap, logs under the
cluster's directory, and dies with this process (`setpriv --pdeathsig`, where available).

    python -m staticmq_spark.local_clusters.rocketmq --dir /tmp/rmq --ready-file /tmp/rmq/ready.json

prints the name-server address (`rocketmq://127.0.0.1:PORT`) and runs until Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from staticmq_spark.errors import StaticMQError
from staticmq_spark.local_clusters.jvm_artifacts import bundle_dir, fetch_artifacts
from staticmq_spark.local_clusters.ports import free_port

if TYPE_CHECKING:
    from staticmq_spark.local_clusters.tls_files import TlsFiles

ROCKETMQ_VERSION = "5.5.0"  # 5.5.1's namesrv and tools are not on Maven Central (only its broker)
COORDINATES = [f"org.apache.rocketmq:rocketmq-{m}:{ROCKETMQ_VERSION}" for m in ("namesrv", "broker", "tools")]
JDK17_OPENS = [
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
]
# Per pull answer (maxTransfer*OnMessageIn{Memory,Disk}); RocketMQ's default is 32 messages / 256 KiB
# (docs/rocketmq.md).
MAX_PULL_MESSAGES = 4096
MAX_PULL_BYTES = 8 << 20


# RocketMQ 5.5.0's TransactionalOpBatchService pins a core once a broker has ended transactional
# messages and then goes idle (apache/rocketmq#10966): a long batching interval keeps its wake-up in
# the future, and a small batch size still writes the op messages (which mark halves as ended) at once.
TRANSACTION_OP_WORKAROUND = ("transactionOpBatchInterval=3600000", "transactionOpMsgMaxSize=64")

# RocketMQ's transaction check copies every half older than transactionTimeOut (6 s by default) that
# has no op message yet back into the half queue, and then each copy again at every check until
# transactionCheckMax (15): the exactly-once sink's halves wait for the driver's commit, a micro-batch
# longer than 6 s had each row written up to 16 times (a 22 GB commit log after 1.1M rows of
# bench.peers). Halves committed within this timeout are never checked (docs/rocketmq.md).
TRANSACTION_TIMEOUT_MS = 600_000


class RocketMQClusterError(StaticMQError):
    """The local RocketMQ cluster did not start, or an mqadmin command failed."""

    code = "ROCKETMQ_CLUSTER"


def fetch_jars() -> Path:
    fetch_artifacts(f"rocketmq-{ROCKETMQ_VERSION}", COORDINATES)
    return bundle_dir(f"rocketmq-{ROCKETMQ_VERSION}")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _broker_port() -> int:
    """A port P with P-2 (fast channel) and P+1 (HA) free too."""
    for _ in range(200):
        port = free_port()
        if port > 1026 and port < 65000 and all(_free(p) for p in (port - 2, port, port + 1)):
            return port
    raise RocketMQClusterError("found no free port triple for a RocketMQ broker")


def jvm_command(
    lib: Path,
    root: Path,
    name: str,
    heap: str,
    main: str,
    args: list[str],
    home: Path,
    java: str = "java",
    props: tuple[str, ...] = (),
) -> list[str]:
    """A RocketMQ JVM (namesrv, broker or mqadmin's client) with small heaps, logs under `home`,
    dying with this process where `setpriv` is available."""
    home.mkdir(parents=True, exist_ok=True)
    wrap = ["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else []
    return [
        *wrap,
        java,
        *heap.split(),
        "-XX:+UseSerialGC",
        "-Djava.net.preferIPv4Stack=true",
        *JDK17_OPENS,
        f"-Drocketmq.home.dir={root}",
        f"-Duser.home={home}",
        f"-Djava.io.tmpdir={home}",
        f"-Drmq.logback.configurationFile=rmq.{name}.logback.xml",
        *props,
        "-cp",
        f"{lib}/*",
        main,
        *args,
    ]


class MQAdmin:
    """RocketMQ's own `mqadmin` (from the fetched tools jar) against any name server."""

    def __init__(self, namesrv: str, workdir: Path) -> None:
        self.namesrv = namesrv
        self.workdir = Path(workdir)

    def run(self, *args: str, timeout_s: float = 120.0) -> str:
        """Run one command; mqadmin exits 0 even on failure, so its output is checked."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        cmd = jvm_command(
            fetch_jars(),
            self.workdir,
            "client",
            # C1 only: a command's JVM lives a few seconds, C2 would compile for nothing (a third
            # less CPU per command here: 0.9 against 1.3-1.5 s)
            "-Xmx256m -XX:TieredStopAtLevel=1",
            "org.apache.rocketmq.tools.command.MQAdminStartup",
            [args[0], "-n", self.namesrv, *args[1:]],
            self.workdir / "mqadmin",
        )
        done = subprocess.run(cmd, check=False, capture_output=True, timeout=timeout_s, cwd=self.workdir)
        out = (done.stdout + done.stderr).decode(errors="replace")
        lines = [ln for ln in out.splitlines() if " |-INFO in " not in ln and " |-WARN in " not in ln]
        text = "\n".join(lines)
        if done.returncode != 0 or "command failed" in text or "Exception" in text:
            raise RocketMQClusterError(f"mqadmin {' '.join(args)} failed:\n{text[-3000:]}")
        return text

    def update_static_topic(self, topic: str, total_queues: int, brokers: list[str] | None = None) -> str:
        target = ["-b", ",".join(brokers)] if brokers else ["-c", "DefaultCluster"]
        return self.run("updateStaticTopic", "-t", topic, "-qn", str(total_queues), *target)

    def remap_static_topic(self, topic: str, brokers: list[str]) -> str:
        return self.run("remappingStaticTopic", "-t", topic, "-b", ",".join(brokers))


class LocalRocketMQ:
    def __init__(
        self,
        root: Path,
        brokers: int = 2,
        java: str = "java",
        namesrv_port: int = 0,
        acl: tuple[str, str] | None = None,
        flush: str = "async",
        tls: TlsFiles | None = None,
        broker_settings: dict[str, str] | None = None,
        timer_wheel: bool = True,
    ) -> None:
        """`acl=(access key, secret key)`: brokers authenticate every request (RocketMQ's ACL 2.0,
        one admin user); mqadmin signs with the same keys. `tls`: every remoting port (name server,
        brokers, their fast ports) serves TLS only (tls.server.mode=enforcing) with `tls.cert`, and
        the brokers verify the name server against `tls.ca`; clients give `tls_ca=tls.ca`.
        `timer_wheel`: the brokers' timerWheelEnable (RocketMQ's default, true): POP consumption
        and delayed messages need it; false skips the timer wheel and log files."""
        self.root = Path(root)
        self.broker_names = [f"broker-{chr(ord('a') + i)}" for i in range(brokers)]
        self.java = java
        self.lib: Path | None = None
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.namesrv_port = namesrv_port  # 0: any free port
        self.broker_ports: dict[str, int] = {}
        self.acl = acl
        self.flush = flush  # "sync": SYNC_FLUSH, a send is acknowledged once it is on disk
        self.tls = tls
        self.broker_settings = dict(broker_settings or {})  # extra broker.conf lines (BrokerConfig keys)
        self.timer_wheel = timer_wheel

    # ---------------------------------------------------------------- addresses

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def address(self) -> str:
        return f"rocketmq://{self.namesrv}"

    def broker_addr(self, name: str) -> str:
        return f"127.0.0.1:{self.broker_ports[name]}"

    # ---------------------------------------------------------------- processes

    def _jvm(self, name: str, heap: str, main: str, args: list[str], home: Path) -> list[str]:
        assert self.lib is not None
        return jvm_command(self.lib, self.root, name, heap, main, args, home, self.java, self._tls_props())

    def _tls_props(self) -> tuple[str, ...]:
        """TlsSystemConfig's properties: servers in enforcing mode with real certificates
        (tls.test.mode.enable defaults to a self-signed one), and the JVM's own client connections
        (broker -> name server) verifying the server against the CA; a tls.config.file of our own
        so that a machine's /etc/rocketmq/tls.properties cannot change them."""
        if self.tls is None:
            return ()
        own = self.root / "tls.properties"
        own.write_text("")
        return (
            "-Dtls.server.mode=enforcing",
            "-Dtls.test.mode.enable=false",
            f"-Dtls.server.certPath={self.tls.cert}",
            f"-Dtls.server.keyPath={self.tls.key}",
            "-Dtls.server.need.client.auth=none",
            "-Dtls.enable=true",
            f"-Dtls.client.trustCertPath={self.tls.ca}",
            "-Dtls.client.authServer=true",
            f"-Dtls.config.file={own}",
        )

    def _spawn(self, key: str, cmd: list[str], ready: str, timeout_s: float = 90.0) -> None:
        log = self.root / f"{key}.out"
        out = open(log, "wb")  # noqa: SIM115 - the child owns it
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=self.root, start_new_session=False)
        out.close()
        self.procs[key] = proc
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready.encode() in log.read_bytes():
                return
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        tail = log.read_bytes()[-3000:].decode(errors="replace")
        raise RocketMQClusterError(f"RocketMQ {key} did not start (log {log}):\n{tail}")

    def start(self) -> LocalRocketMQ:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.acl is not None:  # mqadmin reads its keys from ${rocketmq.home}/conf/tools.yml
            (self.root / "conf").mkdir(exist_ok=True)
            (self.root / "conf" / "tools.yml").write_text(f"accessKey: {self.acl[0]}\nsecretKey: {self.acl[1]}\n")
        self.lib = fetch_jars()
        if not self.namesrv_port:
            self.namesrv_port = _broker_port()
        elif not _free(self.namesrv_port):
            raise RocketMQClusterError(f"port {self.namesrv_port} for the name server is in use")
        conf = self.root / "namesrv.conf"
        conf.write_text(f"listenPort={self.namesrv_port}\nbindAddress=127.0.0.1\n")
        cmd = self._jvm(
            "namesrv",
            "-Xms64m -Xmx256m",
            "org.apache.rocketmq.namesrv.NamesrvStartup",
            ["-c", str(conf)],
            self.root / "namesrv",
        )
        self._spawn("namesrv", cmd, "The Name Server boot success")
        for name in self.broker_names:
            self.broker_ports[name] = _broker_port()
            self.start_broker(name)
        self.wait_registered()
        return self

    def wait_registered(self, timeout_s: float = 60.0) -> None:
        """Until the name server lists every running broker at its address (mqadmin needs it)."""
        from staticmq_spark.backends.rocketmq.wire.remoting import RemotingClient
        from staticmq_spark.backends.rocketmq.wire.routes import masters_of

        client = RemotingClient((self.namesrv,), tls_ca=str(self.tls.ca) if self.tls else None)
        want = {n: self.broker_addr(n) for n in self.broker_names if n in self.procs}
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    if masters_of(client.fetch_brokers()) == want:
                        return
                except StaticMQError:
                    pass
                if time.monotonic() > deadline:
                    raise RocketMQClusterError(f"brokers {sorted(want)} did not register with {self.namesrv}")
                time.sleep(0.2)
        finally:
            client.close()

    def broker_conf(self, name: str) -> Path:
        d = self.root / name
        d.mkdir(parents=True, exist_ok=True)
        conf = d / "broker.conf"
        conf.write_text(
            "\n".join(
                [
                    "brokerClusterName=DefaultCluster",
                    f"brokerName={name}",
                    "brokerId=0",
                    "brokerRole=ASYNC_MASTER",
                    f"flushDiskType={'SYNC_FLUSH' if self.flush == 'sync' else 'ASYNC_FLUSH'}",
                    f"namesrvAddr={self.namesrv}",
                    f"listenPort={self.broker_ports[name]}",
                    "bindAddress=127.0.0.1",
                    "brokerIP1=127.0.0.1",
                    "brokerIP2=127.0.0.1",
                    f"storePathRootDir={d / 'store'}",
                    f"storePathCommitLog={d / 'store' / 'commitlog'}",
                    "mappedFileSizeCommitLog=67108864",
                    "mappedFileSizeConsumeQueue=600000",
                    "maxHashSlotNum=100000",
                    "maxIndexNum=400000",
                    f"timerWheelEnable={'true' if self.timer_wheel else 'false'}",
                    *TRANSACTION_OP_WORKAROUND,
                    f"transactionTimeOut={TRANSACTION_TIMEOUT_MS}",
                    "autoCreateTopicEnable=false",
                    "autoCreateSubscriptionGroup=true",
                    f"maxTransferCountOnMessageInMemory={MAX_PULL_MESSAGES}",
                    f"maxTransferBytesOnMessageInMemory={MAX_PULL_BYTES}",
                    f"maxTransferCountOnMessageInDisk={MAX_PULL_MESSAGES}",
                    f"maxTransferBytesOnMessageInDisk={MAX_PULL_BYTES}",
                    "diskMaxUsedSpaceRatio=95",
                    *self._acl_lines(),
                    *(f"{k}={v}" for k, v in self.broker_settings.items()),
                    "",
                ]
            )
        )
        return conf

    def _acl_lines(self) -> list[str]:
        if self.acl is None:
            return []
        user = json.dumps({"username": self.acl[0], "password": self.acl[1]})
        inner = json.dumps({"accessKey": self.acl[0], "secretKey": self.acl[1]})
        return [
            "authenticationEnabled=true",
            "authenticationProvider=org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
            "authenticationMetadataProvider="
            "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider",
            f"initAuthenticationUser={user}",
            f"innerClientAuthenticationCredentials={inner}",
        ]

    def start_broker(self, name: str) -> None:
        conf = self.broker_conf(name)
        cmd = self._jvm(
            "broker",
            "-Xms128m -Xmx512m -XX:MaxDirectMemorySize=512m",
            "org.apache.rocketmq.broker.BrokerStartup",
            ["-c", str(conf)],
            self.root / name / "home",
        )
        self._spawn(name, cmd, f"The broker[{name},")

    def kill(self, key: str) -> None:
        """SIGKILL one process (`namesrv` or a broker name)."""
        proc = self.procs.pop(key, None)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)

    def close(self) -> None:
        for key in list(self.procs):
            self.kill(key)

    def __enter__(self) -> LocalRocketMQ:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- mqadmin

    @property
    def admin(self) -> MQAdmin:
        return MQAdmin(self.namesrv, self.root)

    def mqadmin(self, *args: str, timeout_s: float = 120.0) -> str:
        return self.admin.run(*args, timeout_s=timeout_s)

    def update_static_topic(self, topic: str, total_queues: int, brokers: list[str] | None = None) -> str:
        return self.admin.update_static_topic(topic, total_queues, brokers)

    def remap_static_topic(self, topic: str, brokers: list[str]) -> str:
        return self.admin.remap_static_topic(topic, brokers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", help="where logs and stores go (default: a temp dir, removed at exit)")
    parser.add_argument("--brokers", type=int, default=2)
    parser.add_argument("--namesrv-port", type=int, default=0, help="the name server's port (default: any free one)")
    parser.add_argument("--ready-file", help="write {namesrv, brokers} as JSON here once every process is up")
    args = parser.parse_args(argv)
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="staticmq-rocketmq-"))
    cluster = LocalRocketMQ(root, brokers=args.brokers, namesrv_port=args.namesrv_port)
    try:
        cluster.start()
        info = {"namesrv": cluster.address, "brokers": {n: cluster.broker_addr(n) for n in cluster.broker_names}}
        if args.ready_file:
            tmp = Path(args.ready_file + ".tmp")
            tmp.write_text(json.dumps(info))
            os.replace(tmp, args.ready_file)
        print(f"RocketMQ {ROCKETMQ_VERSION} is up: namesrv {cluster.address}, logs in {root}", flush=True)
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    except KeyboardInterrupt:
        pass
    finally:
        cluster.close()
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
