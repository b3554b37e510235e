"""Test helpers: a Spark standalone cluster (a master and workers) and pyspark's Spark Connect server,
from pyspark's own distribution on 127.0.0.1, each JVM in a process group of its own (killed with
its children at the end), and the environment every Spark process here runs with.

    cluster = StandaloneCluster(tmp / "spark", workers=2).start()
    cluster.master_url  # spark://127.0.0.1:PORT, for spark-submit --master
    cluster.stop()

Each worker offers 1 core and a little memory; its executors (`CoarseGrainedExecutorBackend`
JVMs, children of the worker) start their Python workers with this interpreter (PYSPARK_PYTHON):
the package reaches the executors by being installed in the workers' Python."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pyspark

from staticmq_spark.local_clusters.ports import free_port
from tests.support.waiting import wait_until

SPARK_HOME = Path(pyspark.__file__).parent
CONNECT_MAIN = "org.apache.spark.sql.connect.service.SparkConnectServer"
MASTER_MAIN = "org.apache.spark.deploy.master.Master"
WORKER_MAIN = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_MAIN = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


# The master's and workers' own JVMs: small heaps, one GC thread.
DAEMON_ENV = {"SPARK_DAEMON_MEMORY": "256m", "SPARK_DAEMON_JAVA_OPTS": "-XX:+UseSerialGC"}


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


def _parent(pid: int) -> int | None:
    """The parent of process `pid`, None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _descendants(roots: set[int]) -> list[int]:
    """Every live process under `roots` (children, grandchildren, ...)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parent = _parent(int(entry.name))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class StandaloneCluster:
    """A Spark standalone master and `workers` workers on 127.0.0.1 (`cores` cores and `memory`
    each), started with `spark-class` from pyspark's distribution; `start` returns once every
    worker registered with the master (or raises with the log of the JVM that died)."""

    def __init__(self, root: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.root = root
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.webui_port = free_port()
        self.master: _Daemon | None = None
        self.worker_daemons: list[_Daemon] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def work_dir(self, index: int) -> Path:
        """Worker `index`'s work directory: `<app id>/<executor id>/` holds each executor's
        stdout, stderr and the cwd of its Python workers."""
        return self.root / f"worker-{index}"

    def start(self) -> StandaloneCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        spark_class = str(SPARK_HOME / "bin" / "spark-class")
        args = [spark_class, MASTER_MAIN, "--host", "127.0.0.1", "--port", str(self.port)]
        args += ["--webui-port", str(self.webui_port)]
        self.master = _Daemon("master", args, self.root / "master.log", DAEMON_ENV)
        try:
            wait_until(self._master_up, 120, message=lambda: f"the Spark master at {self.master_url}")
            for i in range(self.workers):
                self.work_dir(i).mkdir(exist_ok=True)
                args = [spark_class, WORKER_MAIN, self.master_url, "--host", "127.0.0.1"]
                args += ["--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(free_port())]
                args += ["--work-dir", str(self.work_dir(i))]
                self.worker_daemons.append(_Daemon(f"worker-{i}", args, self.root / f"worker-{i}.log", DAEMON_ENV))
            wait_until(
                lambda: len(self.alive_workers()) == self.workers,
                120,
                message=lambda: f"{self.workers} workers registered with the master",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _check_alive(self) -> None:
        for daemon in [self.master, *self.worker_daemons]:
            if daemon is not None and not daemon.alive():
                raise RuntimeError(f"Spark {daemon.name} exited with {daemon.proc.returncode}:\n{daemon.tail()}")

    def _master_up(self) -> bool:
        try:
            self.state()
        except OSError:
            return False
        return True

    def state(self) -> dict[str, Any]:
        """The master's JSON view: workers, active and completed applications."""
        self._check_alive()
        with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=10) as answer:
            data: dict[str, Any] = json.load(answer)
        return data

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]

    def executor_pids(self) -> dict[int, int]:
        """Live executor JVMs (`CoarseGrainedExecutorBackend`, children of these workers, never
        another cluster's): pid -> index of the worker that started it."""
        out = {}
        for index, daemon in enumerate(self.worker_daemons):
            for pid in _descendants({daemon.proc.pid}):
                if EXECUTOR_MAIN in _cmdline(pid):
                    out[pid] = index
        return out

    def executor_of(self, pid: int) -> int | None:
        """The executor JVM that process `pid` (a Python worker, say) runs under, None if none."""
        executors = self.executor_pids()
        current: int | None = pid
        while current is not None and current > 1:
            if current in executors:
                return current
            current = _parent(current)
        return None

    def stop(self) -> None:
        """The workers (with their executors), then the master; Python workers that outlived
        their executor JVM (pyspark's daemon puts them in a process group of their own) too."""
        leftovers = {pid: _cmdline(pid) for pid in _descendants({d.proc.pid for d in self.worker_daemons})}
        for daemon in [*self.worker_daemons, self.master]:
            if daemon is not None:
                daemon.stop()
        for pid, cmdline in leftovers.items():
            if cmdline and _cmdline(pid) == cmdline:  # still that process, not a reused pid
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
