"""Test helper: pyspark's Spark Connect server on 127.0.0.1, its JVM in a process group of its own
(killed with its children at the end), and the environment every Spark process here runs with."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pyspark

from tests.support.waiting import wait_until

SPARK_HOME = Path(pyspark.__file__).parent
CONNECT_MAIN = "org.apache.spark.sql.connect.service.SparkConnectServer"


# The master's and workers' own JVMs: small heaps, one GC thread.
DAEMON_ENV = {"SPARK_DAEMON_MEMORY": "256m", "SPARK_DAEMON_JAVA_OPTS": "-XX:+UseSerialGC"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_env() -> dict[str, str]:
    """The environment of every Spark process here: loopback only, this Python on every side."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYARROW_IGNORE_TIMEZONE="1",
    )
    return env


def _pdeathsig() -> list[str]:
    """Dies with this process where `setpriv` is there (a hard-killed pytest leaves no JVM)."""
    return ["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else []


class _Daemon:
    """One JVM started in a new session (so its process group holds its children too)."""

    def __init__(self, name: str, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.log_path = log
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            [*_pdeathsig(), *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**spark_env(), **(env or {})},
            start_new_session=True,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout_s: float = 20) -> None:
        """SIGTERM to the group (the worker's shutdown hook kills its executors), then SIGKILL."""
        for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                continue
            if sig == signal.SIGTERM:  # the leader is gone; its children must go too
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            break
        self._log.close()


class ConnectServer:
    """pyspark's Spark Connect server (its jar is in pyspark's jars/) on a free loopback port,
    running `master` (local[2] by default: a server on the standalone cluster would hold its cores
    for the whole session)."""

    def __init__(self, root: Path, master: str = "local[2]", conf: dict[str, str] | None = None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        settings = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.python.worker.reuse": "true",
            "spark.driver.extraJavaOptions": "-XX:+UseSerialGC",
            **(conf or {}),
        }
        args = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master, "--class", CONNECT_MAIN]
        args += ["--driver-memory", "1g"]
        for key, value in settings.items():
            args += ["--conf", f"{key}={value}"]
        self.daemon = _Daemon("connect-server", [*args, "spark-internal"], root / "connect-server.log")
        try:
            wait_until(self._listening, 180, message=lambda: f"Spark Connect on port {self.port}")
        except BaseException:
            self.daemon.stop()
            raise

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def _listening(self) -> bool:
        if not self.daemon.alive():
            raise RuntimeError(f"the Spark Connect server exited:\n{self.daemon.tail()}")
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self) -> None:
        self.daemon.stop()
