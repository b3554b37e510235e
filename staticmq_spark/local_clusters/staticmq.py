"""LocalCluster: a name server and N brokers as real processes, for tests, notebooks and the
`staticmq cluster` / `staticmq demo` commands (which use this very class).

    with LocalCluster(brokers=3) as cluster:
        producer = Producer(cluster.namesrv)
        cluster.kill_broker("broker-1")        # SIGKILL, like a crash
        cluster.start_broker("broker-1")       # same port, same data directory: recovers

Layout of `data_dir`: cluster.json (ports, so a restart keeps addresses), broker-<i>/ (each
broker's data directory), logs/<process>.log, run/<process>.ready.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from staticmq_spark.errors import BrokerUnavailableError, InvalidOptionError
from staticmq_spark.local_clusters.child_process import child_env

DEFAULT_CLUSTER = "DefaultCluster"


@dataclass
class ProcessHandle:
    name: str
    port: int
    popen: subprocess.Popen[bytes] | None = None
    addr: str = ""
    metrics: str | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid if self.popen is not None else -1

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None


class LocalCluster:
    def __init__(
        self,
        brokers: int = 2,
        data_dir: str | Path | None = None,
        *,
        namesrv_port: int = 0,
        host: str = "127.0.0.1",
        cluster: str = DEFAULT_CLUSTER,
        flush: str = "sync",
        store: dict[str, Any] | None = None,
        heartbeat_ms: int = 500,
        broker_timeout_ms: int = 3000,
        config_file: str | Path | None = None,
        startup_timeout_s: float = 60.0,
        insecure: bool = False,
        metrics_port: int | None = None,
        acl: str | Path | None = None,
        tls_cert: str | Path | None = None,
        tls_key: str | Path | None = None,
        tls_ca: str | Path | None = None,
    ) -> None:
        if brokers < 1:
            raise InvalidOptionError(f"a cluster needs at least one broker, got {brokers}")
        self._temp = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="staticmq-")) if data_dir is None else Path(data_dir)
        self.host = host
        self.cluster_name = cluster
        self._broker_count = brokers
        self._flush = flush
        self._store = dict(store or {})
        self._heartbeat_ms = heartbeat_ms
        self._broker_timeout_ms = broker_timeout_ms
        self._config_file = Path(config_file) if config_file else None
        self._startup_timeout_s = startup_timeout_s
        self._insecure = ["--insecure"] if insecure else []  # a non-loopback host (see cli/exposure.py)
        self._metrics_port = metrics_port  # name server's; broker-i gets +1+i (0: any free ports)
        self._security_args = [
            *(["--acl", str(acl)] if acl else []),
            *(["--tls-cert", str(tls_cert), "--tls-key", str(tls_key)] if tls_cert and tls_key else []),
        ]
        self._broker_security_args = ["--tls-ca", str(tls_ca)] if tls_ca else []
        self.client_options = _client_options(acl, tls_ca or tls_cert)
        self._namesrv = ProcessHandle("namesrv", namesrv_port)
        self._brokers: dict[str, ProcessHandle] = {}

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> LocalCluster:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "logs").mkdir(exist_ok=True)
        (self.data_dir / "run").mkdir(exist_ok=True)
        saved = self._load_ports()
        if saved.get("namesrv") and self._namesrv.port == 0:
            self._namesrv.port = int(saved["namesrv"])
        names = sorted(saved.get("brokers", {}), key=_broker_index) or [
            f"broker-{i}" for i in range(self._broker_count)
        ]
        while len(names) < self._broker_count:
            names.append(f"broker-{len(names)}")
        for name in names:
            self._brokers[name] = ProcessHandle(name, int(saved.get("brokers", {}).get(name, 0)))
        try:
            self._spawn(self._namesrv, self._namesrv_args())
            self._wait_ready([self._namesrv])
            for handle in self._brokers.values():
                self._spawn(handle, self._broker_args(handle))
            self._wait_ready(list(self._brokers.values()))
            self._save_ports()
            self.wait_registered(list(self._brokers))
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """SIGTERM every process (brokers first), SIGKILL what does not exit in time."""
        for handle in [*self._brokers.values(), self._namesrv]:
            if handle.alive:
                assert handle.popen is not None
                handle.popen.send_signal(signal.SIGTERM)
        for handle in [*self._brokers.values(), self._namesrv]:
            _reap(handle, 15.0)
        if self._temp:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    # ------------------------------------------------------------------ addresses

    @property
    def namesrv(self) -> str:
        return self._namesrv.addr

    @property
    def broker_names(self) -> list[str]:
        return sorted(self._brokers, key=_broker_index)

    def broker_addr(self, name: str) -> str:
        return self._handle(name).addr

    def broker_pid(self, name: str) -> int:
        return self._handle(name).pid

    def ready_info(self) -> dict[str, Any]:
        """What `staticmq cluster --ready-file` writes."""
        return {
            "namesrv": self.namesrv,
            "namesrvPid": self._namesrv.pid,
            "cluster": self.cluster_name,
            "dataDir": str(self.data_dir),
            "brokers": {n: self._broker_info(self._brokers[n]) for n in self.broker_names},
            **({"namesrvMetrics": self._namesrv.metrics} if self._namesrv.metrics else {}),
        }

    @staticmethod
    def _broker_info(handle: ProcessHandle) -> dict[str, Any]:
        info: dict[str, Any] = {"addr": handle.addr, "pid": handle.pid}
        if handle.metrics:
            info["metrics"] = handle.metrics
        return info

    # ------------------------------------------------------------------ fault injection

    def kill_broker(self, name: str, sig: int = signal.SIGKILL) -> None:
        handle = self._handle(name)
        if handle.alive:
            assert handle.popen is not None
            handle.popen.send_signal(sig)
            _reap(handle, 30.0)

    def stop_broker(self, name: str) -> None:
        self.kill_broker(name, signal.SIGTERM)

    def start_broker(self, name: str, wait_registered: bool = True) -> None:
        """(Re)start a broker on its own port and data directory."""
        handle = self._handle(name)
        if handle.alive:
            raise InvalidOptionError(f"broker {name} is already running (pid {handle.pid})")
        self._spawn(handle, self._broker_args(handle))
        self._wait_ready([handle])
        if wait_registered:
            self.wait_registered([name])

    def restart_broker(self, name: str, *, kill: bool = True) -> None:
        self.kill_broker(name, signal.SIGKILL if kill else signal.SIGTERM)
        self.start_broker(name)

    def add_broker(self) -> str:
        """Start one more broker (broker-<n>) in this cluster; returns its name."""
        name = f"broker-{max((_broker_index(n) for n in self._brokers), default=-1) + 1}"
        handle = ProcessHandle(name, 0)
        self._brokers[name] = handle
        self._spawn(handle, self._broker_args(handle))
        self._wait_ready([handle])
        self._save_ports()
        self.wait_registered([name])
        return name

    def wait_registered(self, names: list[str], timeout_s: float = 30.0) -> None:
        """Block until the name server lists every broker of `names` as alive."""
        from staticmq_spark.client.admin import Admin

        deadline = time.monotonic() + timeout_s
        with Admin(self.namesrv, **self.client_options) as admin:
            while True:
                try:
                    live = {b.name: b.addr for b in admin.cluster_info()}
                except BrokerUnavailableError:
                    live = {}
                if all(live.get(n) == self._brokers[n].addr for n in names):
                    return
                if time.monotonic() > deadline:
                    raise BrokerUnavailableError(
                        f"brokers {names} did not register with the name server in {timeout_s}s"
                    )
                time.sleep(0.05)

    # ------------------------------------------------------------------ internals

    def _handle(self, name: str) -> ProcessHandle:
        try:
            return self._brokers[name]
        except KeyError:
            raise InvalidOptionError(f"no broker named {name!r} (brokers: {self.broker_names})") from None

    def _namesrv_args(self) -> list[str]:
        return [
            "namesrv",
            "--host",
            self.host,
            "--port",
            str(self._namesrv.port),
            "--broker-timeout-ms",
            str(self._broker_timeout_ms),
            *self._insecure,
            *self._security_args,
            *self._metrics_args(0),
        ]

    def _broker_args(self, handle: ProcessHandle) -> list[str]:
        args = [
            "broker",
            "--name",
            handle.name,
            "--namesrv",
            self.namesrv,
            "--data-dir",
            str(self.data_dir / handle.name),
            "--host",
            self.host,
            "--port",
            str(handle.port),
            "--cluster",
            self.cluster_name,
            "--flush",
            self._flush,
            "--heartbeat-ms",
            str(self._heartbeat_ms),
            *self._insecure,
            *self._security_args,
            *self._broker_security_args,
            *self._metrics_args(1 + _broker_index(handle.name)),
        ]
        if self._config_file is not None:
            args += ["--config", str(self._config_file)]
        for key, value in self._store.items():
            args += ["--set", f"{key}={value}"]
        return args

    def _metrics_args(self, offset: int) -> list[str]:
        if self._metrics_port is None:
            return []
        return ["--metrics-port", str(self._metrics_port + offset if self._metrics_port else 0)]

    def _ready_path(self, handle: ProcessHandle) -> Path:
        return self.data_dir / "run" / f"{handle.name}.ready"

    def _spawn(self, handle: ProcessHandle, args: list[str]) -> None:
        ready = self._ready_path(handle)
        ready.unlink(missing_ok=True)
        log_path = self.data_dir / "logs" / f"{handle.name}.log"
        with log_path.open("ab") as log_file:
            handle.popen = subprocess.Popen(
                [sys.executable, "-m", "staticmq_spark.cli", *args, "--ready-file", str(ready)],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=child_env(),
            )

    def _wait_ready(self, handles: list[ProcessHandle]) -> None:
        deadline = time.monotonic() + self._startup_timeout_s
        pending = list(handles)
        while pending:
            for handle in list(pending):
                ready = self._ready_path(handle)
                if ready.exists():
                    info = json.loads(ready.read_text())
                    handle.addr = info["addr"]
                    handle.metrics = info.get("metrics")
                    handle.port = int(handle.addr.rsplit(":", 1)[1])
                    pending.remove(handle)
                elif not handle.alive:
                    raise BrokerUnavailableError(
                        f"{handle.name} exited before serving; its log says:\n{self._log_tail(handle)}"
                    )
            if pending and time.monotonic() > deadline:
                raise BrokerUnavailableError(f"{[h.name for h in pending]} did not start in {self._startup_timeout_s}s")
            if pending:
                time.sleep(0.05)

    def _log_tail(self, handle: ProcessHandle, lines: int = 30) -> str:
        path = self.data_dir / "logs" / f"{handle.name}.log"
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def _load_ports(self) -> dict[str, Any]:
        path = self.data_dir / "cluster.json"
        if not path.exists():
            return {}
        data: dict[str, Any] = json.loads(path.read_text())
        return data

    def _save_ports(self) -> None:
        data = {"namesrv": self._namesrv.port, "brokers": {n: h.port for n, h in self._brokers.items()}}
        tmp = self.data_dir / ".cluster.json.tmp"
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, self.data_dir / "cluster.json")


def _client_options(acl: str | Path | None, tls_ca: str | Path | None) -> dict[str, Any]:
    """`credentials=` / `tls_ca=` for this cluster's own clients: its ACL's first admin account,
    and its CA (default: its certificate, when the cluster's servers share a self-signed one)."""
    options: dict[str, Any] = {}
    if acl:
        from staticmq_spark.protocol.security.acl import load_acl

        admin = load_acl(acl).first_admin()
        if admin is None:
            raise InvalidOptionError(f"ACL file {acl} has no admin account (the cluster's own calls need one)")
        options["credentials"] = (admin.access_key, admin.secret_key)
    if tls_ca:
        options["tls_ca"] = str(tls_ca)
    return options


def _broker_index(name: str) -> int:
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 1 << 30


def _reap(handle: ProcessHandle, timeout_s: float) -> None:
    if handle.popen is None:
        return
    try:
        handle.popen.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        handle.popen.kill()
        handle.popen.wait(timeout=10)
